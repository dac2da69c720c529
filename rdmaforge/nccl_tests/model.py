"""Typed results of parsing nccl-tests output, and their JSON shape (``to_dict``).

The text parser (parser.py) and the ``-J`` JSON parser (json_format.py) both produce these objects, so
every consumer (the CLI, the Ansible plugin, the tests) sees one structure whatever the input format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from rdmaforge.nccl_tests.rowstore import RowStore

RunStatus = Literal["ok", "failed", "incomplete"]


@dataclass(frozen=True)
class Half:
    """One half of a result row: the out-of-place or the in-place measurement."""

    time_us: float
    algbw: float
    busbw: float
    #: Count of wrong elements (#wrong, v2.13+); None where the version printed a relative error or N/A.
    wrong: int | None
    #: Maximum relative error (the ``error``/``res`` column of v1 and v2.0-2.11); None otherwise.
    rel_error: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "time_us": self.time_us,
            "algbw": self.algbw,
            "busbw": self.busbw,
            "wrong": self.wrong,
            "rel_error": self.rel_error,
        }


@dataclass(frozen=True)
class Row:
    """One message size of a sweep."""

    size: int
    count: int
    type: str
    #: Reduction op; None for collectives that print none (blank, ``none`` or no column at all).
    redop: str | None
    #: Root rank of rooted collectives; None for the others (v2.13+ prints -1 for them).
    root: int | None
    out_of_place: Half
    in_place: Half | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "count": self.count,
            "type": self.type,
            "redop": self.redop,
            "root": self.root,
            "out_of_place": self.out_of_place.to_dict(),
            "in_place": self.in_place.to_dict() if self.in_place is not None else None,
        }

    def has_wrong_values(self) -> bool:
        halves = (self.out_of_place, self.in_place)
        return any(h is not None and h.wrong is not None and h.wrong > 0 for h in halves)


#: What a report says of a run's data that nccl-tests did not check (``-c 0``).
NOT_VALIDATED = "not validated (nccl-tests -c 0: #wrong is N/A, so wrong results were not counted)"
#: ... and of a table with no count of wrong results although its nThread line says ``validation: 1`` (a log edited
#: or spliced: nccl-tests -c 1 counts the out-of-place results).
NO_WRONG_COUNTS = ("not validated (every #wrong is N/A although the nThread line says validation: 1: the table counts "
                   "no wrong results)")


@dataclass
class Run:
    """One invocation of an nccl-tests binary (one collective's size sweep)."""

    collective: str | None = None
    nccl_tests_version: str | None = None
    nccl_version: str | None = None
    ranks: int | None = None
    #: Rank -> the host it ran on, from the ``#  Rank N ... on HOST device ...`` lines (nccl-tests prints the host
    #: name up to its first dot); empty when the log lists none. Not part of ``to_dict``.
    rank_hosts: dict[int, str] = field(default_factory=dict)
    #: How many NCCL_TESTS_SPLIT groups the run's ranks formed: the distinct ``Group`` of its ``#  Rank`` lines (or
    #: of a -J document's ``devices``); 0 when the log lists no rank. Each group runs a communicator of its own, so
    #: with more than one the table's bandwidth is one group's (a node's NVLink, one rail), not the whole job's.
    #: In ``to_dict`` only when more than one (``split_groups``).
    split_groups: int = 0
    #: How many rows the sweep its ``nThread`` line announces measures (minBytes to maxBytes); None when unknown
    #: (JSON output, a log without that line). Not part of ``to_dict``.
    expected_rows: int | None = None
    #: Packed and spilled to disk past a size (rowstore.py); reads like a list of Row.
    rows: RowStore = field(default_factory=lambda: _row_store())
    avg_busbw: float | None = None
    #: The footer's average as printed when it is no number (``nan``): the line came, its value did not.
    avg_unreadable: str | None = None
    out_of_bounds: int | None = None
    #: The table's rows carry no #wrong column (v1 to v2.11 print a relative ``error``, whose bound nccl-tests applies
    #: only in its ``Out of bounds values`` line): without that line, the values are not judged. Not part of to_dict.
    rows_judged_by_oob: bool = False
    #: Whether the run checked its results (nccl-tests ``-c``): its nThread line's ``validation: 1`` or ``0``, or a
    #: -J document's ``config.validation``; None where the log says neither. A run with ``-c 0`` counts no wrong
    #: value, so its ``ok`` says nothing of the data.
    validated: bool | None = None
    #: Failure lines as printed (``Test NCCL failure``, ``Test CUDA failure``, v1 ``NCCL failure``...).
    errors: list[str] = field(default_factory=list)
    #: NCCL WARN messages and ``# error:`` lines: worth showing, but not a failure by themselves.
    warnings: list[str] = field(default_factory=list)
    #: Whether the result table started (text: header line seen; JSON: ``results`` present).
    has_table: bool = False
    #: ``# Avg bus bandwidth : X FAILED`` (NCCL_TESTS_MIN_BW check, or JSON ``okay: false``).
    bw_check_failed: bool = False
    #: The input ended in the middle of the run (a JSON file that had to be repaired).
    truncated: bool = False
    #: The file the run came from, when known.
    source: str | None = None
    #: Why the run's lines cannot be told apart from another process's (several non-MPI processes writing
    #: one file); such a run is never ok.
    split_problem: str | None = None
    #: Why a row cannot be one nccl-tests printed (consistency.table_problem: a type or op it never prints, a count
    #: that is not the size in elements): a log edited or spliced; such a run is never ok.
    table_problem: str | None = None
    #: NCCL INFO lines the log printed for this run (from the previous run's end to this one's); None where they
    #: cannot be told apart (JSON, processes writing one file at once). One run's INFO lines say nothing of
    #: another's transport: a rerun appended to a log without NCCL_DEBUG=INFO proves none. Not part of ``to_dict``.
    info_lines: int | None = None

    @property
    def status(self) -> RunStatus:
        return self.status_and_reason()[0]

    def data_unchecked(self) -> str | None:
        """Why the run's results were not checked (NOT_VALIDATED, NO_WRONG_COUNTS), or None when its table counts
        wrong results. The table decides, the nThread line only words it: review round 33b's log said validation: 1
        with every #wrong N/A and was reported without a note. A checked table stops the scan at its first row."""
        if self.validated is False:
            return NOT_VALIDATED
        halves = (h for row in self.rows for h in (row.out_of_place, row.in_place) if h is not None)
        if any(h.wrong is not None or h.rel_error is not None for h in halves) or not self.rows:
            return None
        return NO_WRONG_COUNTS if self.validated else NOT_VALIDATED

    @property
    def status_reason(self) -> str | None:
        """Why the run is not ok, in words; None for an ok run."""
        return self.status_and_reason()[1]

    def status_and_reason(self) -> tuple[RunStatus, str | None]:
        """``status`` and ``status_reason``, each reason worked out once."""
        failure = self._failure_reason()
        if failure is not None:
            return "failed", failure or self._incomplete_reason()
        incomplete = self._incomplete_reason()
        return ("ok" if incomplete is None else "incomplete"), incomplete

    def _failure_reason(self) -> str | None:
        if self.errors:
            return self.errors[0]
        if self.out_of_bounds:
            return f"out of bounds values: {self.out_of_bounds}"
        wrong_rows = self.rows.wrong_rows
        if wrong_rows:
            return f"{wrong_rows} row(s) with #wrong > 0"
        invalid = self.rows.invalid_rows
        if invalid:
            sizes = ", ".join(map(str, self.rows.invalid_sizes)) + (", ..." if invalid > len(self.rows.invalid_sizes)
                                                                     else "")  # fmt: skip
            return (f"{invalid} invalid row(s), not a measurement: a negative size, count, time, bandwidth or "
                    f"#wrong, a size or count past 64 bits, a time or bandwidth that is not a number (nan, inf, N/A, "
                    f"a word), a zero time for a message of some bytes, or numbers that disagree (an NCCL line cut the "
                    f"row inside a number) (size {sizes})")  # fmt: skip
        if self.bw_check_failed:
            return "average bus bandwidth below the NCCL_TESTS_MIN_BW threshold"
        return None

    def _incomplete_reason(self) -> str | None:
        if self.split_problem is not None:
            return self.split_problem
        if self.table_problem is not None:
            return self.table_problem
        if not self.has_table:
            return "no result table (the run stopped before printing it)"
        if self.truncated:
            return "the output is truncated"
        if not self.rows:
            return "the result table has no rows (hang or truncated log)"
        if self.avg_busbw is None and self.avg_unreadable is not None:
            return (f"its 'Avg bus bandwidth' is {self.avg_unreadable!r}, no number: nccl-tests could not average its "
                    f"{len(self.rows)} row(s)")  # fmt: skip
        if self.avg_busbw is None:
            return f"no 'Avg bus bandwidth' line after {len(self.rows)} row(s) (hang or truncated log)"
        if self.rows_judged_by_oob and self.out_of_bounds is None:
            return ("no readable 'Out of bounds values' line: this nccl-tests version's table has an error column and "
                    "no #wrong, and it judges the values only in that line, so they were not checked")
        # Every size of the sweep prints a row; an invalid row counts as printed (it fails the run already).
        expected, printed = self.expected_rows, len(self.rows) + self.rows.invalid_rows
        if expected is not None and printed < expected:
            return (f"{expected - printed} of the {expected} message sizes the run's nThread line announces (minBytes "
                    f"to maxBytes) have no row: rows printed garbled or cut, or lines lost from the log")  # fmt: skip
        if self.validated and self.data_unchecked() == NO_WRONG_COUNTS:
            # The log contradicts itself (edited or spliced): its run checked its results, and the table shows none
            # of the counts; a -c 0 run (NOT_VALIDATED) says so itself and stays ok, with its note (review 34a).
            return ("its nThread line says validation: 1, yet every #wrong is N/A: the table counts no wrong results "
                    "(a log edited or spliced), so nothing shows its data was checked")  # fmt: skip
        return None

    def to_dict(self, with_rows: bool = True) -> dict[str, Any]:
        """The run's JSON shape; ``with_rows=False`` leaves ``rows`` empty (for writers that stream them)."""
        status, reason = self.status_and_reason()
        data: dict[str, Any] = {
            "collective": self.collective,
            "nccl_tests_version": self.nccl_tests_version,
            "nccl_version": self.nccl_version,
            "ranks": self.ranks,
            "rows": [row.to_dict() for row in self.rows] if with_rows else [],
            "avg_busbw": self.avg_busbw,
            "out_of_bounds": self.out_of_bounds,
            "status": status,
            "status_reason": reason,
            "validated": self.validated,
            "errors": list(self.errors),
            "warnings": list(self.warnings),
        }
        if self.source is not None:
            data["source"] = self.source
        if self.split_groups > 1:
            data["split_groups"] = self.split_groups
        return data


def _row_store() -> RowStore:
    from rdmaforge.nccl_tests.rowstore import RowStore  # rowstore imports Row and Half from here

    return RowStore()


def normalize_collective(name: str) -> str | None:
    """``./build/all_reduce_perf`` / ``all_reduce_perf_mpi`` -> ``all_reduce``; None when empty."""
    base = name.strip().rsplit("/", 1)[-1]
    for suffix in ("_mpi", "_perf"):
        base = base.removesuffix(suffix)
    return base or None


def nccl_version_from_code(code: int) -> str | None:
    """NCCL_VERSION_CODE -> "major.minor.patch" (22807 -> 2.28.7; before 2.9 it was 2604 -> 2.6.4)."""
    if code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def ranks_from_devices(max_rank: int, per_process: int) -> int | None:
    """Total ranks from the highest rank in the device list and the GPUs each process drives.

    Each process owns ranks ``[p * per_process, (p + 1) * per_process)``; the device list may hold only
    each process's first rank (JSON without MPI, capped device blocks), so round up to a whole process.
    """
    if max_rank < 0:
        return None
    if per_process <= 0:
        return max_rank + 1
    return (max_rank // per_process + 1) * per_process


def add_unique(items: list[str], item: str, limit: int = 50) -> None:
    """Append ``item`` unless present; ``limit`` keeps a log full of repeated warnings readable."""
    if item and item not in items and len(items) < limit:
        items.append(item)


#: The exit status of coreutils ``timeout`` when it stopped the command it ran (both roles launch through it).
TIMEOUT_EXIT = 124


def launch_problem(code: int | None, timeout_setting: str) -> str | None:
    """Why a launch of nccl-tests (``timeout ... mpirun ... *_perf``) did not end well, from its exit status: a table
    printed in full and then a rank that failed, an mpirun that reported an error, or the timeout (named by the
    variable that set it, ``timeout_setting``). None when it exited 0 or when the exit status is unknown (None).
    Whatever the table shows, a launch with a problem is no passing measurement."""
    if code is None or code == 0:
        return None
    if code == TIMEOUT_EXIT:
        return f"the launch reached {timeout_setting} (exit {TIMEOUT_EXIT})"
    return f"the launch exited {code} (timeout, mpirun or the binary reported a failure)"


#: How far the printed "Avg bus bandwidth" may be from the mean of the rows' busbw: the rows print 2 decimals.
_AVG_RELATIVE, _AVG_ABSOLUTE = 0.05, 0.01


def average_mismatch(run: Run) -> str | None:
    """Why the footer's average cannot be this run's (it is the mean busbw of every half of every row), or None.

    A mismatch means rows are missing or another process's rows or footer landed in this run.
    """
    rows = run.rows
    if run.avg_busbw is None or not rows.busbw_count:
        return None
    mean = rows.busbw_sum / rows.busbw_count
    if abs(mean - run.avg_busbw) <= max(_AVG_RELATIVE * max(abs(mean), abs(run.avg_busbw)), _AVG_ABSOLUTE):
        return None
    return (
        f"its 'Avg bus bandwidth' ({run.avg_busbw:g} GB/s) is not the mean of its {len(rows)} row(s) "
        f"({mean:.4g} GB/s): rows are missing, or another process's rows or footer are mixed into this run"
    )
