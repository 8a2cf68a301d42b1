"""Sweeps, in the order a sweep's plan flows: grid files and the command line's `-p` read and checked (grids),
expanded into combinations that carry their run settings (expand), planned once (plan: a SweepPlan, its JSON where
it crosses to another process or machine) from the options' three parts (options: what runs, how, when to stop
repeating); decided against the records already there (decide, with fingerprints); run by `run_sweep` (driver)
on a runner chosen by name (runners/: this machine's, a Dask cluster's, Colab sessions'), each run by papermill
in a fresh or a warm kernel, on the devices at hand (devices), in an output folder under its lock (folder, which
`status` reads), shown to the user (console), its time estimated beforehand (estimate)."""
