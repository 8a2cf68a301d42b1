"""What a runtime costs per hour, where that figure comes from, and which rate a run's record gets.

A rate prices a whole runtime (a Colab runtime, a machine) per hour, in Colab's compute units and in dollars: the
one given, the other through the price of a compute unit (`compute_unit`). Every rate names its source and the date
it was read. colabkit ships a few (rates.yaml beside this module); a rates file of the user's (`--rates FILE`:
YAML, or JSON, which YAML reads too) replaces them runtime by runtime and may add any. A file that cannot be used
is one line (RatesFileError) before anything is computed. Nothing is guessed: a runtime neither names gets NoRate.

A file names each runtime it rates in one of three ways (`runtime_kind`): one of Colab's runtime types in any of
its spellings ('T4', 'v5e-1', 'V5E1': colabkit.colab.runtime.RUNTIME_TYPES), `cpu` (a runtime without an
accelerator) or a GPU model ('V100', 'H200': words of the GPU's name as its driver gives it). The vendor's words
(VENDOR_WORDS: NVIDIA, Tesla) are no part of a name: the driver calls a T4 'Tesla T4' and an L4 'NVIDIA L4', so
'NVIDIA T4', 'Tesla T4' and 'T4' are one runtime. A record is priced by the accelerator its runtime really had
(`accelerator_found`), never the one asked for: a GPU model the file names in that name first (the longest such
name, the most specific), else the runtime type that grants it, else, for 'none', `cpu`. A CPU run on a GPU runtime
is priced as that GPU runtime: it is what the runtime bills. Two names for one runtime (`_same_runtime`) are
refused in a file, and a user's entry replaces the shipped one of its runtime. `RateTable.unused` names the entries
of a user's file that priced no run.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from colabkit.colab.runtime import NO_ACCELERATOR, granted_runtime_type, runtime_type
from colabkit.errors import RatesFileError
from colabkit.io import RepeatedKeyError, load_strict_yaml

SHIPPED_RATES = Path(__file__).with_name("rates.yaml")
RATE_FIELDS = ("compute_units_per_hour", "usd_per_hour", "source", "read")
COMPUTE_UNIT_FIELDS = ("usd", "source", "read")
RuntimeKind = Literal["runtime type", "cpu", "gpu model"]
GivenIn = Literal["compute units", "dollars", "both"]
_READ = re.compile(r"\d{4}-\d{2}(-\d{2})?")
SHIPPED = "colabkit"  # the `origin` of a shipped rate
VENDOR_WORDS = ("nvidia", "tesla")  # no part of a runtime's name (module docstring)
RATE_CEILING = 1e6  # the most a rate (dollars or compute units an hour) or a compute unit's price may be: far above
# any one runtime or machine, and below what the report's tables can print
AGREE = 0.05  # how far a rate's dollars may be from its compute units at the compute unit's price: rounding


@dataclass(frozen=True)
class ComputeUnitPrice:
    """Dollars per Colab compute unit, its source and the date it was read."""

    usd: float
    source: str
    read: str


@dataclass(frozen=True)
class Rate:
    """One runtime's hourly rate: `runtime` as the file names it, in compute units and dollars per hour (`given_in`:
    which the file gave; the other through the compute unit's price), its `source` and the date it was `read`,
    and `origin`, the file it came from ('colabkit' for the shipped table)."""

    runtime: str
    compute_units_per_hour: float
    usd_per_hour: float
    given_in: GivenIn
    source: str
    read: str
    origin: str


@dataclass(frozen=True)
class NoRate:
    """A run without a rate: the `runtime` it ran on, as far as the record says, and why it has no rate."""

    runtime: str
    reason: str


def _plain(name: str) -> str:
    """A runtime's name without the vendor's words (VENDOR_WORDS), its words single-spaced: 'NVIDIA  T4' -> 'T4'."""
    return " ".join(word for word in name.split() if word.lower() not in VENDOR_WORDS)


def runtime_kind(name: str) -> RuntimeKind:
    """How a rates file's runtime `name` is read: a Colab runtime type, `cpu`, or else a GPU model (the vendor's
    words left out: 'NVIDIA T4' is the runtime type T4)."""
    plain = _plain(name)
    if plain.lower() == "cpu":
        return "cpu"
    return "runtime type" if runtime_type(plain) is not None else "gpu model"


def _canonical(name: str) -> str:
    """The one spelling of a runtime name, so that 'v5e1' and 'v5e-1', 'Tesla T4' and 'T4' are one entry: a runtime
    type's dialog name, 'cpu', or a GPU model in lower case with single spaces, the vendor's words left out."""
    kind = runtime_kind(name)
    if kind == "runtime type":
        return runtime_type(_plain(name)).dialog  # type: ignore[union-attr]
    return "cpu" if kind == "cpu" else _plain(name).lower()


def _names_model(model: str, found: str) -> bool:
    """Whether the GPU model `model` ('V100', 'NVIDIA V100') is in the accelerator's name `found` ('Tesla
    V100-SXM2-16GB') as whole words, any case, the vendor's words left out of `model`."""
    return re.search(rf"(?<!\w){re.escape(_plain(model))}(?!\w)", found, flags=re.IGNORECASE) is not None


def _same_runtime(first: str, second: str) -> str | None:
    """Why two names a rates file gives price the same runtime, or None where they do not: one spelling
    (`_canonical`), or a GPU model found in the GPU a Colab runtime type grants ('A100-SXM4-40GB' and 'A100').
    A GPU model within another ('A100' and 'A100-SXM4-80GB') is not: the more specific one wins (`rate_for`)."""
    if _canonical(first) == _canonical(second):
        return f"both are {_canonical(first)}"
    for kind_of, model in ((first, second), (second, first)):
        granted = runtime_type(_plain(kind_of)) if runtime_kind(kind_of) == "runtime type" else None
        if (granted is not None and granted.kind == "gpu" and runtime_kind(model) == "gpu model"
                and _names_model(model, granted.model)):
            return f"{granted.dialog}'s GPU is {granted.model}"
    return None


@dataclass(frozen=True)
class RateTable:
    """The rates a report or a comparison prices runs with (`load_rates`): the shipped ones overridden by a user's
    file (each rate's `origin` names its file), and the compute unit's price."""

    rates: tuple[Rate, ...]
    compute_unit: ComputeUnitPrice

    def rate_for(self, found: str | None) -> Rate | NoRate:
        """The rate of the runtime whose accelerator was `found` (a record's `accelerator_found`; 'none' on a
        runtime without one), or NoRate saying why there is none."""
        if not found:
            return NoRate("unknown", "the record does not say which accelerator its runtime had (no "
                                     "accelerator_found): no rate can be chosen")
        models = [rate for rate in self.rates if runtime_kind(rate.runtime) == "gpu model"
                  and found != NO_ACCELERATOR and _names_model(rate.runtime, found)]
        if models:
            return max(models, key=lambda rate: len(rate.runtime))
        granted = granted_runtime_type(found)
        runtime = "cpu" if found == NO_ACCELERATOR else granted.dialog if granted else found
        rate = next((rate for rate in self.rates if _canonical(rate.runtime) == runtime), None)
        return rate or NoRate(runtime, f"no rate given for {runtime} (a rates file can give one: --rates FILE, "
                                       "docs/cost.md)")

    def unused(self, priced: Iterable[str]) -> str | None:
        """The line naming each rate of the user's file that priced no run (`priced`: the runtimes, as rates name
        them, that priced one), and why that can be; None when every one priced a run (or no file was given)."""
        priced = set(priced)
        idle = [rate for rate in self.rates if rate.origin != SHIPPED and rate.runtime not in priced]
        if not idle:
            return None
        files = ", ".join(dict.fromkeys(rate.origin for rate in idle))
        return (f"rates file {files}: {', '.join(rate.runtime for rate in idle)} priced no run: no run had that "
                "runtime, or a GPU model named more closely priced it (docs/cost.md says how names are matched)")

    def sources(self, runtimes: set[str] | None = None) -> list[str]:
        """Each source of a rate (of `runtimes` alone, where given) with the runtimes it rates and the date read, once,
        then the compute unit's price where one of them was given in one unit only: what a Methods paragraph cites."""
        cited = [rate for rate in self.rates if runtimes is None or rate.runtime in runtimes]
        by_source: dict[tuple[str, str], list[str]] = {}
        for rate in cited:
            by_source.setdefault((rate.source, rate.read), []).append(rate.runtime)
        unit = self.compute_unit
        lines = [f"{', '.join(runtimes)}: {source}, read {read}" for (source, read), runtimes in by_source.items()]
        if any(rate.given_in != "both" for rate in cited):  # its other unit derived at the compute unit's price
            lines.append(f"one compute unit = ${unit.usd:g}: {unit.source}, read {unit.read}")
        return lines


def _problem(path: str, text: str) -> RatesFileError:
    return RatesFileError(f"rates file {path}: {text} (docs/cost.md gives the form)")


def _read_date(value: Any, path: str, where: str) -> str:
    """A `read` date as text, 'YYYY-MM' or 'YYYY-MM-DD' (colabkit.io's StrictLoader keeps YAML's unquoted dates as text)."""
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    if not _READ.fullmatch(text):
        raise _problem(path, f"{where}: `read` must be the date the rate was read, YYYY-MM-DD or YYYY-MM, not {value!r}")
    try:
        datetime.date.fromisoformat(text if len(text) == 10 else f"{text}-01")
    except ValueError:
        raise _problem(path, f"{where}: `read` {text!r} is no date") from None
    return text


def _source(value: Any, path: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _problem(path, f"{where}: `source` must say where the figure comes from (a page and its owner, an "
                             "invoice, Colab's Resources panel)")
    return " ".join(value.split())


def _amount(value: Any, path: str, where: str) -> float | None:
    """A number above 0 and at most RATE_CEILING, or None where the field is absent."""
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0
            or value > RATE_CEILING):
        raise _problem(path, f"{where} must be a number above 0 and at most {RATE_CEILING:g}, not {value!r}")
    return float(value)


def _fields(entry: Any, allowed: tuple[str, ...], path: str, where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise _problem(path, f"{where} must be a mapping of {', '.join(allowed)}")
    unknown = sorted(str(key) for key in entry if key not in allowed)
    if unknown:
        raise _problem(path, f"{where}: unknown field(s) {', '.join(unknown)} (expected {', '.join(allowed)})")
    return entry


def _compute_unit(entry: Any, path: str) -> ComputeUnitPrice:
    fields = _fields(entry, COMPUTE_UNIT_FIELDS, path, "compute_unit")
    usd = _amount(fields.get("usd"), path, "compute_unit: usd")
    if usd is None:
        raise _problem(path, "compute_unit: `usd`, the dollars one compute unit costs, is missing")
    return ComputeUnitPrice(usd, _source(fields.get("source"), path, "compute_unit"),
                            _read_date(fields.get("read"), path, "compute_unit"))


def _rate(name: str, entry: Any, unit: ComputeUnitPrice, path: str, origin: str) -> Rate:
    where = f"rates: {name}"
    fields = _fields(entry, RATE_FIELDS, path, where)
    units = _amount(fields.get("compute_units_per_hour"), path, f"{where}: compute_units_per_hour")
    usd = _amount(fields.get("usd_per_hour"), path, f"{where}: usd_per_hour")
    if units is None and usd is None:
        raise _problem(path, f"{where}: give compute_units_per_hour or usd_per_hour (or both)")
    given: GivenIn = "both" if units is not None and usd is not None else "compute units" if units else "dollars"
    at_price = f"at ${unit.usd:g} a compute unit"
    if units is not None and usd is not None and abs(usd / (units * unit.usd) - 1) > AGREE:
        ratio = usd / (units * unit.usd)
        raise _problem(path, f"{where}: usd_per_hour and compute_units_per_hour disagree: {units:g} compute units "
                             f"{at_price} are ${units * unit.usd:.4g} an hour, not ${usd:g} ({ratio:.3g}x; rounding "
                             f"allows {AGREE:.0%}): give one of them")
    derived, derived_name = (usd / unit.usd, "compute units") if units is None else (units * unit.usd, "dollars")
    if (usd is None or units is None) and not 0 < derived <= RATE_CEILING:
        raise _problem(path, f"{where}: {derived:.4g} {derived_name} an hour {at_price} is no rate (it must be above 0 "
                             f"and at most {RATE_CEILING:g})")
    return Rate(name, units if units is not None else derived, usd if usd is not None else derived,
                given, _source(fields.get("source"), path, where), _read_date(fields.get("read"), path, where), origin)


def _read_file(path: Path) -> dict[str, Any]:
    """A rates file's mapping; RatesFileError when it cannot be read or parsed, or is no mapping."""
    if not path.is_file():
        raise _problem(str(path), "not found" if not path.exists() else "is not a file")
    try:
        content = load_strict_yaml(path.read_text(encoding="utf-8"))
    except RepeatedKeyError as exc:
        raise _problem(str(path), exc.one_line()) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise _problem(str(path), f"not YAML or JSON{where}: {getattr(exc, 'problem', None) or 'unreadable'}") from None
    except UnicodeDecodeError as exc:
        raise _problem(str(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise _problem(str(path), f"cannot be read ({exc.strerror})") from None
    if not isinstance(content, dict) or not isinstance(content.get("rates", {}), dict):
        raise _problem(str(path), "expected a mapping with `rates:`, each runtime's compute_units_per_hour or "
                                  "usd_per_hour, source and read")
    unknown = sorted(str(key) for key in content if key not in ("rates", "compute_unit"))
    if unknown:
        raise _problem(str(path), f"unknown top-level key(s) {', '.join(unknown)} (expected rates, compute_unit)")
    return content


def _table(path: Path, origin: str, base: ComputeUnitPrice | None) -> tuple[list[Rate], ComputeUnitPrice]:
    """The rates and compute unit price a file gives (the price `base` where it gives none)."""
    content = _read_file(path)
    unit = _compute_unit(content["compute_unit"], str(path)) if "compute_unit" in content else base
    if unit is None:
        raise _problem(str(path), "compute_unit (usd, source, read) is missing")
    rates: list[Rate] = []
    for name, entry in (content.get("rates") or {}).items():
        if not isinstance(name, (str, int)) or not _plain(str(name)):
            raise _problem(str(path), f"rates: {name!r} is no runtime name (a Colab runtime type, cpu, or a GPU model)")
        for rate in rates:
            why = _same_runtime(rate.runtime, str(name))
            if why:
                raise _problem(str(path), f"rates: {rate.runtime} and {name} name the same runtime ({why}): give it "
                                          "once")
        rates.append(_rate(str(name).strip(), entry, unit, str(path), origin))
    return rates, unit


def load_rates(user_file: str | Path | None = None) -> RateTable:
    """The shipped rates, each replaced by the rate a `user_file` gives for the same runtime, with those it adds;
    the file's compute unit price, where it gives one, for all of them. RatesFileError (one line) when the file
    cannot be used."""
    shipped, unit = _table(SHIPPED_RATES, SHIPPED, None)
    if user_file is None:
        return RateTable(tuple(shipped), unit)
    path = Path(user_file)
    theirs, their_unit = _table(path, path.name, unit)
    kept = [rate for rate in shipped if not any(_same_runtime(rate.runtime, their.runtime) for their in theirs)]
    if their_unit != unit:  # the shipped rates given in compute units are re-priced at the user's price of a unit
        kept = [_rate(rate.runtime, _as_entry(rate), their_unit, str(path), rate.origin) for rate in kept]
    return RateTable(tuple(kept + theirs), their_unit)


def _as_entry(rate: Rate) -> dict[str, Any]:
    """A rate back as the file gave it, to price again at another compute unit price."""
    given = {"compute_units_per_hour": rate.compute_units_per_hour} if rate.given_in != "dollars" else {}
    given |= {"usd_per_hour": rate.usd_per_hour} if rate.given_in != "compute units" else {}
    return {**given, "source": rate.source, "read": rate.read}
