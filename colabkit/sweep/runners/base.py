"""What every runner of a plan's runs is (papermill's engines are the model): an `Executor` knows the devices at
its disposal (`inventory`) and runs decisions (`run`), yielding one Outcome per decision as each finishes, so
a sweep stopped with Ctrl-C keeps what finished. The runners: this machine's (colabkit.sweep.runners.local:
one after another, or `--jobs N` side by side), a Dask cluster's (colabkit.sweep.runners.dask), and Colab
sessions' (colabkit.sweep.runners.colab.executor); colabkit.sweep.driver.RUNNERS chooses among them by the name
the plan's options give, each made with the same call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType

from colabkit.sweep.decide import Decision
from colabkit.sweep.devices import Inventory
from colabkit.sweep.expand import Combination
from colabkit.sweep.options import RunOptions
from colabkit.sweep.runners.execute import Outcome

Started = Callable[[Combination], None]  # told when a combination starts (the progress bar names it)


class Executor(ABC):
    """Runs a sweep's combinations into `out`, each as `options` say."""

    def __init__(self, out: Path, options: RunOptions) -> None:
        self.out, self.options = Path(out), options
        self._inventory: Inventory | None = None

    def inventory(self) -> Inventory:
        """The devices the combinations may run on (asked once, then remembered)."""
        if self._inventory is None:
            self._inventory = self.find_devices()
        return self._inventory

    @abstractmethod
    def find_devices(self) -> Inventory:
        """Ask which devices there are (see `inventory`)."""

    @property
    def where(self) -> str:
        """How the sweep's first line names where the combinations run: '' here."""
        return ""

    @property
    def slots(self) -> int:
        """How many combinations run at once (the progress line's estimate divides by it)."""
        return 1

    def notes(self, to_run: Sequence[Decision]) -> list[str]:
        """Warnings to print before running `to_run` (e.g. that side-by-side runs distort timings)."""
        return []

    @abstractmethod
    def run(self, decisions: Sequence[Decision], started: Started | None = None) -> Iterator[Outcome]:
        """Run every decision's combination; yield one Outcome per decision as each finishes (in any
        order). `started`, if given, is told when a combination starts. Closing the iterator early
        (Ctrl-C) stops the runs under way and removes their temporaries; no half result is left."""

    def close(self) -> None:
        """Let go of what the executor holds (a cluster connection)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
