"""A stand-in for nvidia-ml-py's `pynvml`, faithful to what colabkit.device.energy calls (nvidia-ml-py 13.615):

- NVMLError(value) builds the subclass of its code (NVMLError_NotSupported for 3...), `.value` the code, str() the
  library's words ("Not Supported"), as pynvml's _extractNVMLErrorsAsClasses makes them;
- nvmlInit / nvmlShutdown are counted (NVML's reference count); a call before nvmlInit raises Uninitialized;
- nvmlDeviceGetHandleByIndex takes NVML's index, which ignores CUDA_VISIBLE_DEVICES; a handle is opaque;
- nvmlDeviceGetTotalEnergyConsumption(handle): the board's millijoules since the driver was loaded, an int that
  moves in steps (`update_s`), or NVMLError_NotSupported on a board without the counter (before Volta);
- nvmlDeviceGetPowerUsage(handle): milliwatts, an int; nvmlDeviceGetEnforcedPowerLimit(handle) and
  nvmlDeviceGetPowerManagementLimit(handle): milliwatts, or NVMLError_NotSupported on a board without power management.

Each board draws a constant power; its energy follows `clock` (time.perf_counter unless a test gives another).
"""

from __future__ import annotations

import math
import string
import sys
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass

NVML_SUCCESS = 0
CODES = {"UNINITIALIZED": 1, "INVALID_ARGUMENT": 2, "NOT_SUPPORTED": 3, "LIBRARY_NOT_FOUND": 12,
         "FUNCTION_NOT_FOUND": 13, "GPU_IS_LOST": 15}
WORDS = {1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported", 12: "NVML Shared Library Not Found",
         13: "Function Not Found", 15: "GPU is lost"}


@dataclass
class Board:
    """One GPU as NVML sees it: its power, whether it has the energy counter, and what it held at driver load."""

    watts: float
    has_counter: bool = True
    at_driver_load_mj: int = 7_000_000  # the counter counts from the driver's load, long before the run
    limit_w: float | None = 400.0  # None: no power management (the limit calls raise NotSupported)


class Handle:
    """NVML's opaque nvmlDevice_t."""

    def __init__(self, index: int) -> None:
        self.index = index


def fake_nvml(boards: Sequence[Board], *, update_s: float = 0.0, clock: Callable[[], float] = time.perf_counter,
              init_fails: str | None = None) -> types.ModuleType:
    """A `pynvml` module over `boards` (NVML's indices 0, 1...). `update_s`: the counter's step (0: continuous).
    `init_fails`: the name of the error nvmlInit raises (e.g. "LIBRARY_NOT_FOUND": no driver)."""
    nvml = types.ModuleType("pynvml")
    nvml.boards = list(boards)
    nvml.calls = []
    nvml.lost = False  # set True: every board reading then raises GPU is lost
    start = clock()
    state = {"inits": 0}

    class NVMLError(Exception):
        _valClassMapping: dict[int, type] = {}

        def __new__(cls, value: int):
            if cls is NVMLError:
                cls = NVMLError._valClassMapping.get(value, cls)
            error = Exception.__new__(cls)
            error.value = value
            return error

        def __str__(self) -> str:
            return WORDS.get(self.value, f"NVML Error with code {self.value}")

    nvml.NVMLError = NVMLError
    for name, code in CODES.items():
        setattr(nvml, f"NVML_ERROR_{name}", code)
        class_name = "NVMLError_" + string.capwords(name, "_").replace("_", "")

        def gen_new(value: int):
            return lambda cls, *args: NVMLError.__new__(cls, value)

        subclass = type(class_name, (NVMLError,), {"__new__": gen_new(code)})
        NVMLError._valClassMapping[code] = subclass
        setattr(nvml, class_name, subclass)

    def initialised() -> None:
        if state["inits"] <= 0:
            raise NVMLError(CODES["UNINITIALIZED"])

    def board(handle: Handle) -> Board:
        initialised()
        if nvml.lost:
            raise NVMLError(CODES["GPU_IS_LOST"])
        return nvml.boards[handle.index]

    def init() -> None:
        nvml.calls.append("init")
        if init_fails:
            raise NVMLError(CODES[init_fails])
        state["inits"] += 1

    def shutdown() -> None:
        initialised()
        nvml.calls.append("shutdown")
        state["inits"] -= 1

    def handle_by_index(index: int) -> Handle:
        initialised()
        if not 0 <= index < len(nvml.boards):
            raise NVMLError(CODES["INVALID_ARGUMENT"])
        return Handle(index)

    def total_energy(handle: Handle) -> int:
        gpu = board(handle)
        if not gpu.has_counter:
            raise NVMLError(CODES["NOT_SUPPORTED"])
        elapsed = clock() - start
        counted = math.floor(elapsed / update_s) * update_s if update_s else elapsed
        return gpu.at_driver_load_mj + int(gpu.watts * 1000 * counted)

    nvml.nvmlInit = init
    nvml.nvmlShutdown = shutdown
    nvml.nvmlDeviceGetCount = lambda: (initialised(), len(nvml.boards))[1]
    nvml.nvmlDeviceGetHandleByIndex = handle_by_index
    nvml.nvmlDeviceGetTotalEnergyConsumption = total_energy
    nvml.nvmlDeviceGetPowerUsage = lambda handle: int(board(handle).watts * 1000)
    def power_limit(handle: Handle) -> int:
        gpu = board(handle)
        if gpu.limit_w is None:
            raise NVMLError(CODES["NOT_SUPPORTED"])
        return int(gpu.limit_w * 1000)

    nvml.nvmlDeviceGetEnforcedPowerLimit = power_limit
    nvml.nvmlDeviceGetPowerManagementLimit = power_limit
    nvml.initialised = lambda: state["inits"]
    return nvml


def install(monkeypatch, nvml: types.ModuleType | None) -> types.ModuleType | None:
    """Make `import pynvml` give `nvml` (None: ImportError, as where nvidia-ml-py is not installed)."""
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    return nvml
