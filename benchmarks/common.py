"""Result type and reporting shared by the benchmarks.

A result is judged against its target (PASS or FAIL), or carries no verdict at all, which is never a pass: a
reference (measured for other targets to be compared with, nothing to judge it against) or a target this run
could not judge (what it needs was left out; the detail says what). ``verdict`` is what the table prints.
"""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.runner.exit_codes import ExitCode

Kind = Literal["judged", "reference", "not_judged"]
REFERENCE = "measured (reference, not judged)"


@dataclass
class Result:
    name: str
    #: None when nothing was measured for it (a target this run could not judge).
    value: float | None
    unit: str
    target: str  # human-readable, e.g. "< 30 s"
    passed: bool
    detail: str = ""
    #: judged: ``passed`` is the verdict; reference or not_judged: no verdict, and ``passed`` is always False.
    kind: Kind = "judged"

    def __post_init__(self) -> None:
        if self.kind != "judged":
            self.passed = False  # nothing was judged: never a pass

    @property
    def verdict(self) -> str:
        if self.kind == "reference":
            return REFERENCE
        if self.kind == "not_judged":
            return f"not judged ({self.detail})"
        return "PASS" if self.passed else "FAIL"


def reference(name: str, value: float, unit: str, detail: str = "") -> Result:
    """A figure measured for other targets to be compared with: shown, never judged (nor a pass)."""
    return Result(name, value, unit, "reference", False, detail, kind="reference")


def not_judged(name: str, unit: str, target: str, why: str) -> Result:
    """A target this run could not judge, and why (``why`` ends up as "not judged (why)")."""
    return Result(name, None, unit, target, False, why, kind="not_judged")


def table_line(result: Result, width: int) -> str:
    """One line of the table ``python -m benchmarks`` prints."""
    value = "-" if result.value is None else result.value
    detail = "" if result.kind == "not_judged" else f"  {result.detail}"  # the verdict already says why
    return f"{result.name:{width}}  {value:>10} {result.unit:3} target {result.target:12} {result.verdict}{detail}"


def exit_code(results: Sequence[Result]) -> int:
    """1 when a target was missed; else 5 (INCOMPLETE) when a target was not judged; else 0. A reference is no
    target: it counts neither way."""
    if any(r.kind == "judged" and not r.passed for r in results):
        return 1
    if any(r.kind == "not_judged" for r in results):
        return int(ExitCode.INCOMPLETE)
    return 0


def write_report(results: list[Result]) -> Path:
    out = PROJECT_ROOT / "artifacts" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps([{**asdict(r), "verdict": r.verdict} for r in results], indent=2))
    return path


@dataclass
class Timing:
    """Wall and CPU seconds (this process's user + system time: what the load of other jobs does not inflate)."""

    wall: float = 0.0
    cpu: float = 0.0

    def __add__(self, other: Timing) -> Timing:
        return Timing(self.wall + other.wall, self.cpu + other.cpu)


@contextmanager
def stopwatch() -> Iterator[Timing]:
    """Times the block: the Timing it yields is filled in when the block ends."""
    timing = Timing()
    cpu, started = time.process_time(), time.perf_counter()
    try:
        yield timing
    finally:
        timing.wall, timing.cpu = time.perf_counter() - started, time.process_time() - cpu


def peak_rss_mib() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def least(timings: Sequence[Timing]) -> Timing:
    """The timing of several runs of the same work that took the least CPU time (the one least disturbed)."""
    return min(timings, key=lambda timing: timing.cpu)
