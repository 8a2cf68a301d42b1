"""Real GPU numbers from one lent machine: the prepared run there, and its checks first.

The lent GPU machines (an H100 or H200) run an image with Python 3.12, PyTorch and JAX on CUDA, and no
TensorFlow, Keras, papermill or network. `./run.sh device-pack` writes, here, the wheels that image lacks
(tools/device_pack.py); `./run.sh on-device` checks and installs them there with no index (`python -m
colabkit.ondevice preflight`) and runs `python -m colabkit.ondevice run`: gpu-check, every experiment's `device`
preset through the sweep, the report, one zip and a ten-line summary, each stage in its own time budget (the stage
runner, colabkit.stages). tools/device_import.py brings the zip's records and tables into `results/<gpu>-<date>/`.
docs/device.md tells the whole story.

Modules: preflight (the checks before anything is installed or run), device_run (the run after the install),
stages (its table of stages and their budgets), bundle (the zip and the summary). They import nothing beyond what
the image and the pack hold.
"""
