"""Devices: what the machine has (probes), peak figures (peaks), and the set-up a notebook runs under (setup:
`setup_device("gpu")` returns a DeviceSetup or raises DeviceNotFoundError naming what the machine has; it never
falls back to another device). Keras backends (TensorFlow, JAX, PyTorch) are set up in `backends`, TensorFlow's
multi-worker strategy in `multiworker`; the tests' CPU standing in for a GPU or TPU is `stand_in`'s alone.
"""
