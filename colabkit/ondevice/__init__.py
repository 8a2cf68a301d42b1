"""Real GPU numbers from one lent machine: the device pack, the one prepared run, and bringing its records home.

The lent GPU machines (an H100 or H200) run an image with Python 3.12, PyTorch and JAX on CUDA, and no
TensorFlow, Keras, papermill or network. `python -m colabkit.ondevice pack` (`./run.sh device-pack`) writes,
here, the wheels that image lacks for colabkit (device/pack.txt, checked against device/image.txt), colabkit's
own wheel and a manifest into `.device/`; `./run.sh on-device` installs them there with no index and runs
`python -m colabkit.ondevice run`: gpu-check, every experiment's `device` preset through the sweep, the report,
one zip and a ten-line summary, each stage in its own time budget. `python -m colabkit.ondevice import ZIP`
brings the zip's records and tables into `results/<gpu>-<date>/`. docs/device.md tells the whole story.

Modules: lists (the image's and the pack's lists), pack (building the pack), preflight (the checks before
anything is installed or run), run (the run after the install), stages (its stages and their time),
bundle (the zip and the summary), results (importing a zip). Only `pack` and `results` run here; the run's
own modules import nothing beyond what the image and the pack hold.
"""
