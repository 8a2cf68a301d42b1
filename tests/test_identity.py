"""One run identity (colabkit.records.identity): what work a run did, by which merging, `status`,
`compare` and the report pair runs. The global batch, the sizes used and the backend that ran count;
how a run was measured or recorded does not."""

from __future__ import annotations

import report_fixtures as fx

from colabkit import report
from colabkit.records.identity import run_work, work_key
from colabkit.records.loading import load_records
from colabkit.sweep.folder import collect_status


def test_repeats_without_the_bottleneck_passes_are_runs_of_the_same_combination(tmp_path):
    """The sweep runs the bottleneck passes in a combination's first repeat only: the others, with
    breakdown=False in their parameters and the sweep's, are still runs of the same work."""
    for repeat in (1, 2, 3):
        record = fx.cnn("cpu", 256)
        measured = repeat == 1
        record["params"].update(breakdown=measured, profile_steps=0, results_path=f"/somewhere/{repeat}.json")
        record["fingerprint"] = {"params": {"device": "cpu", "batch_size": 256, **({} if measured else
                                                                                 {"breakdown": False})}}
        fx.write(tmp_path, record, "batch_size-256" + ("" if measured else f"_repeat-{repeat}"))
    (group,) = load_records(tmp_path).combinations()
    assert len(group.repeats) == 3 and group.description == "device=cpu" and "breakdown" not in group.params
    status = collect_status(tmp_path)
    assert status.total("ok") == 3 and [len(g.combinations) for g in status.groups.values()] == [1]
    assert report.load_report_data([tmp_path]).ok("cnn_mnist")["runs"].tolist() == [3]


def test_the_work_counts_the_global_batch_the_sizes_used_and_the_backend_that_ran():
    per_replica = fx.cnn("cpu:2", 128)
    per_replica["metrics"].pop("global_batch_size")  # an older record: batch x replicas
    one = fx.cnn("cpu", 256, backend="auto")
    one["device"]["backend"] = "tensorflow"  # "auto" resolved
    one["params"]["train_samples"] = "auto"
    one["sizes"] = {"used": {"train_samples": 0}}
    named = fx.cnn("cpu", 256, backend="tensorflow")
    work = {name: run_work(record) for name, record in (("two", per_replica), ("one", one), ("named", named))}
    assert work["two"]["global_batch"] == work["one"]["global_batch"] == 256
    assert work["one"]["backend"] == "tensorflow" and work["one"]["train_samples"] == 0
    assert work_key(work["one"]) == work_key(work["named"])  # asked "auto", ran what the other asked for
    assert work_key(work["two"]) != work_key(work["one"])  # another device ...
    assert work_key(work["two"], ("device",)) == work_key(work["one"], ("device",))  # ... the same work
    larger = fx.cnn("cpu:2", 256)
    larger["metrics"]["global_batch_size"] = 512  # 256 per replica on 2
    assert work_key(run_work(larger), ("device",)) != work_key(work["one"], ("device",))
    # another CPU model is another device for merging; `compare` leaves the model out and names it
    xeon = fx.cnn("cpu", 256, backend="tensorflow")
    xeon["device"]["name"] = xeon["device"]["model"] = "Intel Xeon"
    assert work_key(run_work(xeon)) != work_key(work["named"])
    assert work_key(run_work(xeon), ("device_model",)) == work_key(work["named"], ("device_model",))
