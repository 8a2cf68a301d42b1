"""Helpers shared by the tests, imported as a plain module (`from helpers import REPO`): the
repository's paths, a papermill runner for notebooks, and a fake TensorFlow for device logic."""

from __future__ import annotations

import functools
import shutil
import subprocess
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"


@functools.lru_cache(maxsize=1)
def visible_gpus() -> int:
    """How many GPUs `nvidia-smi -L` lists on this machine (0 without nvidia-smi or a driver)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in listed.stdout.splitlines()) if listed.returncode == 0 else 0


def notebook_builders() -> dict:
    """The model-building functions (and classes) of notebooks/paradnn.ipynb, as the notebook defines them:
    build_fc, build_cnn, build_rnn, build_transformer, PositionEmbedding."""
    import ast
    import json

    import keras

    cells = json.loads((NOTEBOOKS / "paradnn.ipynb").read_text())["cells"]
    source = next("".join(cell["source"]) for cell in cells if "def build_fc(" in "".join(cell["source"]))
    functions = [node for node in ast.parse(source).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    namespace = {"keras": keras}
    exec(compile(ast.Module(body=functions, type_ignores=[]), "paradnn.ipynb", "exec"), namespace)  # noqa: S102
    return namespace


class WarmKernels:
    """A test file's warm kernels, lent as `sweep --kernels reuse` lends them (colabkit.sweep.runners.kernels): a
    kernel serves only runs of its key (backend, device and replicas, mixed precision, and here the environment
    variables a test set after the pool was made, so a run never sees a kernel started without them), is cleared
    between runs and replaced after a failure. The kernel start and TensorFlow's import are then paid once per key
    in a test process, not once per test (the `warm_kernels` fixture of tests/conftest.py)."""

    def __init__(self) -> None:
        import os

        from colabkit.sweep.runners.kernels import KernelPool

        self.pool = KernelPool(capacity=2)  # a file's keys (cpu, cpu:2) take turns without a restart each
        self.environment = dict(os.environ)

    def key(self, parameters: dict[str, Any]) -> Any:
        """The key of the kernel that runs a notebook with `parameters`; None when the test removed a variable
        from the environment (a kernel cannot be started without one: that run gets a fresh kernel)."""
        import os

        from colabkit.device.backends import resolve_backend
        from colabkit.sweep.runners.kernels import KernelKey

        if set(self.environment) - set(os.environ):
            return None
        added = tuple(sorted((name, value) for name, value in os.environ.items()
                             if self.environment.get(name) != value))
        device = str(parameters.get("device", "auto"))
        return KernelKey("python3", str(REPO), added, resolve_backend(str(parameters.get("backend", "auto")), device),
                         device, str(parameters.get("mixed_precision", "none")))

    def close(self) -> None:
        self.pool.close()


def execute_notebook(name: str, output_dir: Path, kernels: WarmKernels | None = None, source: Path | None = None,
                     **parameters: Any):
    """Run notebooks/<name>.ipynb (or `source`, a changed copy of it) through papermill (the production path) with
    `parameters`, in a fresh kernel or one of `kernels` (warm, as `--kernels reuse` runs it).

    Returns (executed notebook node, record path). The record goes to output_dir/record.json.
    A training notebook's breakdown passes (seconds per run) are off unless a test asks for them
    (`breakdown=True`): tests/test_breakdown.py and the CNN smoke test measure them.
    """
    import papermill

    from colabkit.experiments import find

    experiment = find(name)
    if experiment is not None and "breakdown" in experiment.parameter_names:
        parameters.setdefault("breakdown", False)
    record_path = output_dir / "record.json"
    parameters.setdefault("results_path", str(record_path))
    key = kernels.key(parameters) if kernels is not None else None
    warm = kernels.pool.take(key) if key is not None else None
    finished = False
    try:
        executed = papermill.execute_notebook(
            str(source or NOTEBOOKS / f"{name}.ipynb"), str(output_dir / f"{name}.ipynb"), parameters=parameters,
            progress_bar=False, cwd=str(REPO), **({"km": warm.manager} if warm is not None else {}))
        finished = True
    finally:
        if warm is not None:
            kernels.pool.give_back(warm, finished)
    return executed, Path(parameters["results_path"])


class FakeStrategy:
    """Stands in for a tf.distribute strategy: remembers how it was built."""

    def __init__(self, *args: Any, devices: list[str] | None = None, **kwargs: Any) -> None:
        self.args, self.devices = args, devices
        if devices is not None:
            self.num_replicas_in_sync = len(devices)
        elif args and isinstance(args[0], str):
            self.num_replicas_in_sync = 1
        else:
            self.num_replicas_in_sync = kwargs.get("replicas", 8)


class OneDeviceStrategy(FakeStrategy):
    pass


class _DefaultDistributionStrategy(FakeStrategy):
    """tf.distribute.get_strategy() outside any scope: plain Keras on one device."""

    def __init__(self) -> None:
        super().__init__(replicas=1)


class MirroredStrategy(FakeStrategy):
    pass


class TPUStrategy(FakeStrategy):
    pass


class FakeTensorFlow(types.ModuleType):
    """A fake `tensorflow` with just what colabkit.device touches, configurable per test."""

    class OpError(Exception):
        pass

    def __init__(self, gpus: list[dict[str, Any]] | None = None, tpu_cores: int | None = None,
                 tpu_fails: bool = False, initialised: bool = False) -> None:
        super().__init__("tensorflow")
        self.gpus = gpus or []
        self.calls: list[tuple] = []
        self.visible_gpus = True
        fake = self

        class _Resolver:
            def __init__(self, tpu: str) -> None:
                fake.calls.append(("TPUClusterResolver", tpu))
                self.tpu = tpu

        def list_physical_devices(kind: str) -> list[str]:
            if kind == "CPU":
                return ["/physical_device:CPU:0"]
            if kind == "GPU" and fake.visible_gpus:
                return [f"/physical_device:GPU:{index}" for index in range(len(fake.gpus))]
            return []

        def get_device_details(device: str) -> dict[str, Any]:
            gpu = fake.gpus[int(device.rsplit(":", 1)[1])]
            return {"device_name": gpu["name"], "compute_capability": gpu["cc"]}

        def set_visible_devices(devices: list, kind: str) -> None:
            if initialised:
                raise RuntimeError("Visible devices cannot be modified after being initialized")
            fake.calls.append(("set_visible_devices", list(devices), kind))
            fake.visible_gpus = False

        def initialize_tpu_system(resolver: Any) -> Any:
            fake.calls.append(("initialize_tpu_system", resolver.tpu))
            if tpu_fails:
                raise fake.errors.OpError("No TPU devices found")
            return types.SimpleNamespace(num_tasks=1)

        def tpu_strategy(resolver: Any) -> TPUStrategy:
            return TPUStrategy(resolver, replicas=tpu_cores or 8)

        self.config = types.SimpleNamespace(
            list_physical_devices=list_physical_devices,
            list_logical_devices=lambda kind: list_physical_devices(kind),
            set_visible_devices=set_visible_devices,
            set_logical_device_configuration=lambda device, configs: fake.calls.append(("logical", len(configs))),
            LogicalDeviceConfiguration=lambda: object(),
            experimental_connect_to_cluster=lambda resolver: fake.calls.append(("connect", resolver.tpu)),
            experimental=types.SimpleNamespace(
                get_device_details=get_device_details,
                tensor_float_32_execution_enabled=lambda: True,
            ),
        )
        self.distribute = types.SimpleNamespace(
            OneDeviceStrategy=OneDeviceStrategy, MirroredStrategy=MirroredStrategy, TPUStrategy=tpu_strategy,
            get_strategy=_DefaultDistributionStrategy,
            cluster_resolver=types.SimpleNamespace(TPUClusterResolver=_Resolver),
        )
        self.tpu = types.SimpleNamespace(experimental=types.SimpleNamespace(initialize_tpu_system=initialize_tpu_system))
        self.errors = types.SimpleNamespace(OpError=FakeTensorFlow.OpError)
