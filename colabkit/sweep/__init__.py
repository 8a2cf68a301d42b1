"""Sweeps, one job per module: grid files read and validated (gridfile, with the notebooks' parameters:
parameters), their values layered (layers) and overridden from the command line (overrides), expanded
into combinations that carry their run settings (expand, combination) and planned with resume
decisions (plan, fingerprint); run as the options say (options: checked once) in an output folder
and under its lock (outfolder) by an executor (executors; on a Dask cluster: cluster, cluster_task),
each combination by papermill in a fresh or a warm kernel (execution, kernels, through
colabkit.sweep.runners.notebook, which the report shares; TensorFlow multi-worker runs: multiworker_launch),
on the devices at hand (devices), or in Colab sessions (remote_colab/); shown to the user (console),
driven by run_sweep (runner), and summarised from the records on disk (status)."""
