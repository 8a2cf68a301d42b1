"""Beyond one device: multi-worker set-up, the local launcher, and real 2-worker training."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import nbformat
import pytest
from helpers import REPO

from colabkit.device.multiworker import cluster_size, is_chief, read_tf_config
from colabkit.device.spec import parse_device
from colabkit.errors import ColabkitError, DeviceNotFoundError
from colabkit.records.record import read_record
from colabkit.run import start_run
from colabkit.sweep.runners.multiworker import free_ports, tf_configs
from colabkit.training.setup import batch_sizes, make_dataset, scaled_learning_rate

SMOKE = ["-p", "batch_size=64", "-p", "epochs=2", "-p", "train_samples=512", "-p", "test_samples=128",
         "-p", "data_source=offline"]


def test_multiworker_device_names():
    assert (parse_device("multiworker").kind, parse_device("multiworker:3").count) == ("multiworker", 3)


def test_tf_config_is_required_and_validated():
    with pytest.raises(DeviceNotFoundError, match="needs TF_CONFIG.*colabkit workers --count 2"):
        read_tf_config({})
    with pytest.raises(ColabkitError, match="not a cluster spec"):
        read_tf_config({"TF_CONFIG": '{"cluster": {}}'})


def test_chief_is_worker_zero_unless_the_cluster_names_a_chief():
    configs = [json.loads(text) for text in tf_configs(3, free_ports(3))]
    parsed = [read_tf_config({"TF_CONFIG": json.dumps(config)}) for config in configs]
    assert [is_chief(config) for config in parsed] == [True, False, False]
    assert cluster_size(parsed[0]) == 3 and len(set(configs[0]["cluster"]["worker"])) == 3  # distinct ports
    with_chief = read_tf_config({"TF_CONFIG": json.dumps(
        {"cluster": {"chief": ["h:1"], "worker": ["h:2"]}, "task": {"type": "worker", "index": 0}})})
    assert not is_chief(with_chief) and cluster_size(with_chief) == 2


def test_a_non_chief_worker_writes_no_record(tmp_path):
    worker = types.SimpleNamespace(multi_worker={"is_chief": False},  # a DeviceSetup of a non-chief worker
                                   as_record=lambda: {"kind": "cpu"})
    run = start_run("cnn_mnist", params={"device": "multiworker:2"}, results_path=tmp_path / "r.json")
    assert run.record(device=worker, metrics={}) is None
    assert not (tmp_path / "r.json").exists()


def test_learning_rate_scaling_rule():
    assert scaled_learning_rate(1e-3, 2048, 256, "none") == 1e-3
    assert scaled_learning_rate(1e-3, 2048, 256, "linear") == pytest.approx(8e-3)
    with pytest.raises(ValueError, match="lr_scaling must be one of none, linear"):
        scaled_learning_rate(1e-3, 1, 1, "sqrt")


def test_tpu_pipeline_asks_for_the_global_batch_with_fixed_shapes():
    """What the training notebooks do on a TPU v2-8 (8 replicas): a global batch of 8 x batch_size,
    every training batch the same static shape, evaluation padded instead of dropped."""
    import numpy as np

    per_replica, global_batch = batch_sizes(32, replicas=8)
    assert (per_replica, global_batch) == (32, 256)
    x, y = np.zeros((1000, 4), "float32"), np.zeros((1000, 2), "float32")
    train = make_dataset(x, y, batch_size=global_batch, shuffle=True, static_shapes=True)
    assert train.element_spec[0].shape.as_list() == [256, 4]  # fully defined: what XLA on TPU needs
    evaluation = make_dataset(x, y, batch_size=global_batch, static_shapes=True)
    assert evaluation.element_spec[0].shape.as_list() == [256, 4] and len(evaluation.element_spec) == 3
    from colabkit.device.spec import DeviceSetup
    from colabkit.training.trainer import Trainer

    tpu = DeviceSetup("tpu", "tpu", None, 8)
    assert tpu.static_shapes  # TensorFlow's TPUStrategy, or JAX on a TPU
    trainer = Trainer(None, tpu, 32)  # as the training notebooks make theirs: the device says static shapes
    assert (trainer.per_replica_batch, trainer.global_batch, trainer.static_shapes) == (32, 256, True)
    assert trainer.dataset(x, y, shuffle=True).element_spec[0].shape.as_list() == [256, 4]
    assert DeviceSetup("cpu:2", "cpu", None, 2, backend="jax").static_shapes  # DataParallel splits each batch
    assert not DeviceSetup("cpu:2", "cpu", None, 2).static_shapes  # MirroredStrategy splits a partial batch too


def _notebook_output_text(path: Path) -> str:
    notebook = nbformat.read(str(path), as_version=4)
    return "".join(output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []))


@pytest.mark.long("two TensorFlow workers start at once on 2 cores, join one collective and train the CNN")
@pytest.mark.notebook
def test_cnn_mnist_on_two_local_workers_agrees_and_writes_one_record(tmp_path):
    out = tmp_path / "out"
    start = time.monotonic()
    completed = subprocess.run([sys.executable, "-m", "colabkit", "workers", "--count", "2",
                                str(REPO / "notebooks" / "cnn_mnist.ipynb"), *SMOKE, "--out", str(out)],
                               capture_output=True, text=True, timeout=600, cwd=REPO)
    assert completed.returncode == 0, completed.stderr[-3000:]
    print(f"2-worker CNN-MNIST run: {time.monotonic() - start:.1f} s")
    assert "chief (worker 0) finished" in completed.stdout and "worker 1 finished" in completed.stdout
    records = sorted(path.name for path in out.rglob("*.json"))
    assert records == ["cnn_mnist.json"]  # exactly one record: the chief's
    record = read_record(out / "cnn_mnist.json")
    assert record["device"]["strategy"] == "MultiWorkerMirroredStrategy"
    assert record["device"]["multi_worker"]["workers"] == 2 and record["device"]["multi_worker"]["is_chief"]
    metrics = record["metrics"]
    assert metrics["replicas"] == 2 and metrics["global_batch_size"] == 128  # 64 per replica x 2
    assert metrics["samples_per_s_per_replica"] == pytest.approx(metrics["samples_per_s"] / 2)
    assert len(record["history"]["val_accuracy"]) == 2 and len(record["timings"]["epochs"]) == 2
    # synchronous all-reduce: both workers end with identical weights
    assert f"weights digest {metrics['weights_digest']}" in _notebook_output_text(out / ".workers" / "worker-1.ipynb")


def _pid_of(pattern: str) -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if pattern in command and "papermill" in command:
                return int(entry.name)
    return None


@pytest.mark.long("two TensorFlow workers start and train until epoch 2 before one is killed, then the grace")
@pytest.mark.notebook
def test_a_killed_worker_fails_the_run_in_bounded_time(tmp_path):
    out = tmp_path / "out"
    launcher = subprocess.Popen([sys.executable, "-m", "colabkit", "workers", "--count", "2",
                                 str(REPO / "notebooks" / "cnn_mnist.ipynb"),
                                 *[item.replace("epochs=2", "epochs=100000") for item in SMOKE],  # each key once
                                 "--out", str(out), "--grace", "3"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    chief_notebook = out / "cnn_mnist.ipynb"
    deadline = time.monotonic() + 300  # a guard against a hang only: training under way is the event waited for
    while "Epoch 2/" not in (chief_notebook.read_text() if chief_notebook.exists() else ""):
        assert time.monotonic() < deadline and launcher.poll() is None, "training never got under way"
        time.sleep(0.5)  # papermill saves the notebook as it goes
    pid = _pid_of("worker-1.ipynb")
    assert pid is not None, "worker 1 is not running"
    os.killpg(pid, signal.SIGKILL)
    # With 100,000 epochs to go, the run ends only if the chief fails by itself (TF's peer checks) or the launcher
    # stops it after the grace: that it ends at all is the bound (the wait's limit only guards against a hang).
    stdout, stderr = launcher.communicate(timeout=300)
    assert launcher.returncode == 1
    assert "worker 1 was killed by signal 9 (SIGKILL)" in stderr
    assert re.search(r"chief \(worker 0\) (was stopped after|failed with exit status|was killed by signal)", stderr)
    assert not list(out.glob("*.json"))  # no record, not even a pending one (pathlib's * matches dot-files)


TINY_WORKER = '''
device = "multiworker:2"
results_path = ""
'''
TINY_WORK = '''
import json, os, time
import colabkit
run = colabkit.start_run("tiny_workers", params=dict(device=device), results_path=results_path)
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
if index == 1:
    time.sleep(1)
    os._exit(3)  # a worker dies ...
time.sleep(600)  # ... and the chief waits for it, as a collective would
'''


def _write_worker_notebook(path: Path, work: str) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_markdown_cell(f"# {path.stem}"),
                      nbformat.v4.new_code_cell(TINY_WORKER, metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell(work)]
    nbformat.write(notebook, str(path))
    return path


CHIEF_RECORDS_THEN_A_WORKER_DIES = '''
import json, os, time
import colabkit
run = colabkit.start_run("tiny_workers", params=dict(device=device), results_path=results_path)
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
if index == 0:
    run.record(metrics={"done": 1})  # the chief is through ...
    time.sleep(4)
else:
    time.sleep(2)
    os._exit(3)  # ... but a worker dies before the run is over
'''


def test_the_workers_command_keeps_no_record_of_a_run_that_lost_a_worker(tmp_path):
    """The chief may write its record before a peer fails (in its last steps or its teardown): the
    run still failed, so the record must not appear under its final name."""
    notebook = _write_worker_notebook(tmp_path / "tiny_workers.ipynb", CHIEF_RECORDS_THEN_A_WORKER_DIES)
    out = tmp_path / "out"
    completed = subprocess.run([sys.executable, "-m", "colabkit", "workers", "--count", "2", str(notebook),
                                "--out", str(out), "--grace", "10"],
                               capture_output=True, text=True, timeout=300, cwd=REPO)
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert "worker 1 failed with exit status" in completed.stderr and "no record written" in completed.stderr
    assert not list(out.glob("*.json"))  # no record, not even a pending one (pathlib's * matches dot-files)

    # The same notebook with no worker dying: the chief's record appears under its final name.
    fine = _write_worker_notebook(tmp_path / "tiny_fine.ipynb",
                                  CHIEF_RECORDS_THEN_A_WORKER_DIES.replace("os._exit(3)", "pass"))
    completed = subprocess.run([sys.executable, "-m", "colabkit", "workers", "--count", "2", str(fine),
                                "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert [path.name for path in out.glob("*.json")] == ["tiny_fine.json"]  # pathlib's * matches dot-files
    assert read_record(out / "tiny_fine.json")["metrics"] == {"done": 1}


def test_sweep_records_a_multi_worker_run_whose_worker_died_as_failed(tmp_path):
    from colabkit.sweep.options import RunOptions
    from colabkit.sweep.plan import plan
    from colabkit.sweep.driver import run_sweep

    notebook = _write_worker_notebook(tmp_path / "tiny_workers.ipynb", TINY_WORK)
    grid = tmp_path / "grid.yaml"
    grid.write_text(textwrap.dedent(f"""
        notebook: {notebook}
        grid: {{device: ["multiworker:2"]}}
    """))
    outcomes = run_sweep(plan([grid], out=tmp_path / "out", html="none", options=RunOptions(worker_grace_s=3)),
                         available={"cpu": 1}, echo=lambda line: None)
    (outcome,) = outcomes
    assert outcome.status == "failed"
    record = read_record(outcome.record_path)
    assert record["error"]["kind"] == "multi_worker"
    assert "worker 1 failed" in record["error"]["message"] and "chief (worker 0) was stopped" in record["error"]["message"]
    log = outcome.record_path.with_name(outcome.record_path.name.replace(".json", ".log")).read_text()
    assert "worker 1" in log
