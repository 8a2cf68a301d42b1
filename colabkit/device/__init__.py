"""Devices: what the machine has (probes), peak figures (peaks), and the set-up a notebook runs under.

`setup_device("gpu")` returns a DeviceSetup or raises DeviceNotFoundError naming what the machine
has; it never falls back to another device. Keras backends (TensorFlow, JAX, PyTorch) are set up in
`backends`, TensorFlow's multi-worker strategy in `multiworker`.
"""

from colabkit.device.probes import available_devices, cpu_info, machine_details
from colabkit.device.setup import setup_device
from colabkit.device.spec import DEVICE_CHOICES, DEVICE_KINDS, MULTI_WORKER, DeviceRequest, DeviceSetup, parse_device

__all__ = ["DEVICE_CHOICES", "DEVICE_KINDS", "MULTI_WORKER", "DeviceRequest", "DeviceSetup", "available_devices",
           "cpu_info", "machine_details", "parse_device", "setup_device"]
