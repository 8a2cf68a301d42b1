"""The runners of a plan's runs: the interface (base), this machine's (local), a Dask cluster's (dask) and
Colab sessions' (colab/); one run's execution (execute, notebook, kernels, multiworker) under them all."""
