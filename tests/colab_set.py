"""Which test files run under Colab's set (`COLABKIT_STACK=colab ./run.sh test -m colab_set`, .ci/run's second
step), each with why; every test file is in exactly one of the three tables (tests/test_colab_set.py checks).

Colab's set differs from today's in Python (3.13 against 3.11) and in the packages that do colabkit's numerical,
model, notebook and kernel work: TensorFlow, Keras, JAX, NumPy, pandas, SciPy, matplotlib, seaborn, ipykernel,
jupyter_client, nbclient, nbconvert (papermill, nbformat, PyYAML and tqdm are the same versions in both sets). A
file is in the Colab set when what it checks goes through one of those: every module's import, a notebook run
in a kernel, the sweep's kernel handling, a model built or trained, numbers computed by NumPy, pandas or SciPy,
the report's tables and figures, or code that runs inside a Colab runtime. It is left out when what it checks
is colabkit's own logic, with kernels or files only as the vehicle (grids, plans, resume, refusals, records'
schema, docs, stamps), or code that never runs under Colab's packages: the client side of `sweep --colab` (the
user's machine), the Dask cluster and the multi-worker launcher (hosts the user sets up), the device pack and
gpu-check (the lent GPU machine's image), run.sh. `./run.sh colab-check` also runs the sweep, its warm kernels
and the report in a venv of Colab's packages alone, from colabkit installed as the set-up cell installs it.
The whole suite still runs under Colab's set when asked: `COLABKIT_STACK=colab ./run.sh test` (docs/testing.md).
"""

from __future__ import annotations

COLAB_SET: dict[str, str] = {
    "test_timeseries_rnn_notebook.py": "the weather-GRU notebook in a kernel (Keras, pandas): colab-check cannot run "
                                       "it (its offline data needs pvlib, which Colab's image lacks)",
    # imports
    "test_package_structure.py": "every module imports, on Python 3.13 with Colab's versions",
    # notebooks
    "test_inference_over_runs.py": "inference figures over runs in the report and compare (pandas)",
    "test_memory.py": "Keras's parameter counts against the estimate; the notebook's refusal",
    "test_notebook_template.py": "the stamped set-up cell run by papermill in a kernel",
    "test_colab_sweep.py": "the colab_sweep notebook, which runs inside a Colab runtime",
    "test_colab.py": "the set-up cell's bootstrap, which runs on Colab's Python 3.13",
    # the sweep's kernels (jupyter_client, ipykernel, nbclient)
    "test_host_state.py": "the host monitor beside every run, in a Colab runtime too (psutil: 5.9.5 on Colab)",
    # models and training in this process
    "test_training_fit.py": "colabkit's fit over Keras (Keras 3.13 fetches batches differently: docs/colab.md)",
    "test_training_timer.py": "the Keras timing callback",
    "test_breakdown.py": "the bottleneck passes on Keras models",
    "test_sizing_estimate.py": "auto sizes and the first steps' estimate on Keras",
    "test_flops.py": "model FLOPs against XLA's cost analysis (Keras on JAX)",
    "test_transformer_flops.py": "the Transformer's FLOPs, the HLO dot counter (Keras)",
    "test_timing.py": "completion forced inside the clock (TensorFlow)",
    "test_timeseries.py": "the forecasting pieces (Keras, pandas)",
    "test_tpu_on_jax.py": "TPU facts from JAX's device objects",
    "test_achievable_peak.py": "the achievable peak's timed matmuls",
    "test_host_bandwidth.py": "the CPU bandwidth probe (NumPy copies)",
    # the report
    "test_report_inputs.py": "the report on bad inputs (pandas, matplotlib)",
    "test_report_opens_on_results.py": "the report's Summary, legends and CSVs (pandas, matplotlib's artists)",
    "test_report_repeats.py": "medians and intervals in the report's tables (pandas)",
    "test_report_bottlenecks.py": "the bottleneck tables (pandas)",
    "test_report_backends.py": "the TensorFlow / JAX section (pandas)",
    "test_report_limits.py": "the report's HTML and figures over 50bcef2's records (nbconvert, matplotlib, pandas)",
    "test_paradnn_report.py": "the ParaDnn roofline and tables (pandas, matplotlib)",
    "test_compare.py": "compare's ratios and intervals over loaded records (pandas)",
    "test_cost.py": "cost per unit of work in the report's tables and figures and compare (pandas, matplotlib)",
    "test_loading.py": "records read into the report's frames (pandas)",
    "test_identity.py": "run identities over the report's frames (pandas)",
    "test_family_knobs.py": "the loader's frames for records with family knobs (pandas)",
    # statistics and data
    "test_statistics.py": "intervals and verdicts (NumPy, SciPy)",
    "test_interval_coverage.py": "the intervals' coverage by simulation (NumPy)",
    "test_repeats.py": "seeds, summaries and bands over repeats (NumPy)",
    "test_metrics.py": "classification scores (NumPy)",
    "test_data.py": "the dataset loaders and offline substitutes (NumPy, pandas)",
    "test_weather.py": "the hourly resampling against pandas' pipeline",
    "test_io.py": "NumPy values through the atomic JSON write",
}

# Colab's versions can change what these check too, but each file costs a minute or more of kernels, TensorFlow's
# and JAX's imports and training: CI's Colab step leaves them to `./run.sh colab-check`, which runs every
# notebook's smoke, the sweep's warm kernels and the report under Colab's packages alone. Run them under Colab's
# set whenever its versions change (`python tools/colab_stack.py` refreshes the pins: docs/testing.md):
# `COLABKIT_STACK=colab ./run.sh test -n 2 -m "colab_set or colab_pins"`.
COLAB_PINS: dict[str, str] = {
    "test_matmul_notebook.py": "the matmul notebook in a kernel (TensorFlow, NumPy's BLAS baseline)",
    "test_cnn_mnist_notebook.py": "the CNN notebook in a kernel (Keras, TensorFlow)",
    "test_dblstm_har_notebook.py": "the dBLSTM notebook in a kernel, two logical CPU replicas (TensorFlow)",
    "test_paradnn_notebook.py": "the ParaDnn notebook in a warm kernel, the Transformer on JAX",
    "test_jax_path.py": "every notebook on JAX 0.7.2 over two host devices",
    "test_backends.py": "one notebook on each installed Keras backend",
    "test_inference.py": "inference mode in the notebooks; percentiles from NumPy",
    "test_sweep_kernels.py": "warm kernels cleared, reused and replaced through jupyter_client",
    "test_sweep.py": "a cell error, a dead kernel, a timeout and kernel start retries as nbclient reports them",
    "test_decode.py": "greedy decode on Keras layers under jax.jit and tf.function (Keras's and JAX's versions)",
    "test_decode_run.py": "the ParaDnn notebook's decode mode in a kernel (JAX), its report section (pandas, matplotlib)",
    "test_report.py": "the report's tables and figures (pandas, matplotlib, seaborn), its notebook in a kernel",
}

NOT_COLAB_SET: dict[str, str] = {
    # colabkit's own logic; kernels and files only carry it
    "test_import_order.py": "each module imports first: colabkit's own structure (whether it imports at all under "
                            "Colab's versions: test_package_structure.py)",
    "test_sweep_interrupt.py": "resume after kill -9 and Ctrl-C: colabkit's signals and files",
    "test_sweep_repeats.py": "rounds, repeats and --target-ci: colabkit's planning",
    "test_robustness.py": "bad input and broken folders through the command line: colabkit's refusals",
    "test_adding_an_experiment.py": "a new experiment needs no change to colabkit (the paths it runs are tested above)",
    "test_sweep_estimate.py": "the dry run's arithmetic",
    "test_plan_file.py": "a plan file's checks: colabkit's refusals (JSON, the grid's own checks)",
    "test_experiments.py": "declarations against the notebooks' parameters cells",
    "test_grid.py": "grid files, presets and overrides (PyYAML, nbformat: the same versions)",
    "test_notebooks_clean.py": "stored notebooks are clean (nbformat)",
    "test_notebook_story.py": "each notebook's cells and imports, read as text",
    "test_results.py": "the record's schema and round trip",
    "test_schema_doc.py": "docs/records.md rendered from the code",
    "test_docs.py": "README and docs: links, sources",
    "test_citation.py": "CITATION.cff and references.bib",
    "test_device.py": "device selection on a fake TensorFlow",
    "test_energy.py": "energy through a stand-in pynvml and powercap tree: colabkit's arithmetic, not Colab's packages",
    "test_peaks.py": "the peaks table",
    "test_download.py": "download, verify and cache over the standard library",
    "test_colab_stack.py": "the Colab set's files and refresh command (text)",
    "test_installed.py": "the wheel from pip; ./run.sh colab-check installs colabkit into Colab's packages itself",
    # code that never runs under Colab's packages
    "test_colab_sessions.py": "the client side of sweep --colab: the user's machine, today's set",
    "test_sweep_on_colab.py": "the client side of sweep --colab: the user's machine, today's set",
    "test_fake_colab.py": "the fake Colab client the sweep --colab tests use",
    "test_cluster.py": "Dask clusters run on hosts the user sets up, not in a Colab runtime",
    "test_distribute.py": "multi-worker training runs on hosts the user sets up, not in a Colab runtime",
    "test_ondevice.py": "the device pack and run: the lent GPU machine's image (Python 3.12)",
    "test_device_rehearsal.py": "the lent GPU machine's packages: .ci/run's own step",
    "test_gpu_check.py": "gpu-check with fake measurements: the lent GPU machine's image",
    "test_gpu_check_rules.py": "gpu-check's verdict rules",
    "test_run_sh_python.py": "run.sh's choice of Python",
    "test_colab_set.py": "this list itself",
}
