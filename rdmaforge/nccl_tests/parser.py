"""Parser for the text that nccl-tests prints on stdout, every version from v1 to 2.19.

Formats (see the corpus FORMAT_HISTORY.md): the table header names the columns, so the parser reads the
layout from it rather than from a version number: v1 (``bytes N type op ... res``, time in ms), v2.0-2.11
(per-collective preamble, ``error`` column), 2.13+ (``redop root ... #wrong``), 2.17.3+ exponent-form
numbers and ``N/A``. A run starts at the version line (2.17.4+), ``# Collective test starting`` (2.16.7+)
or the ``nThread`` line (every version). Anything the parser does not recognise is skipped: it never
raises on odd input.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from itertools import compress
from operator import le

from rdmaforge.nccl_tests import accel
from rdmaforge.nccl_tests.consistency import table_problem
from rdmaforge.nccl_tests.interleave import route
from rdmaforge.nccl_tests.lines import MPI_TAG as _MPI_TAG
from rdmaforge.nccl_tests.lines import NcclLine, find_nccl_line, parse_float, parse_int, wrong_count
from rdmaforge.nccl_tests.model import (
    Half,
    Row,
    Run,
    add_unique,
    average_mismatch,
    nccl_version_from_code,
    normalize_collective,
    ranks_from_devices,
)
from rdmaforge.nccl_tests.rowstore import _RECORD, RowStore, record_column
from rdmaforge.nccl_tests.transport import Transport, add_channels, read_message

_VERSION_LINE = re.compile(
    r"^#\s*nccl-tests version (?P<version>\S+)(?: \([^)]*\))?"
    r"(?: nccl-headers=(?P<headers>[0-9]{1,9}))?(?: nccl-library=(?P<library>[0-9]{1,9}))?"
)
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
# v1 prints the nThread line without the leading '#'.
_NTHREAD = re.compile(r"^#?\s*nThread\s+([0-9]{1,9})\s+nGpus\s+([0-9]{1,9})\b")
#: The size sweep the nThread line announces: ``minBytes 8 maxBytes 134217728 step: 2(factor)`` (or ``(bytes)``).
_SWEEP = re.compile(r"\bminBytes\s+([0-9]{1,20})\s+maxBytes\s+([0-9]{1,20})\s+step:\s*([0-9]{1,20})\((factor|bytes)\)")
#: ``validation: 0`` on the nThread line: the run was started with ``-c 0``, so it checked no result (#wrong N/A).
_VALIDATION = re.compile(r"\bvalidation:\s*([01])\b")
#: 2.10+: ``# Reducing maxBytes to N due to memory limitation``, after the nThread line: the sweep ends there.
_REDUCING = re.compile(r"^#?\s*Reducing maxBytes to ([0-9]{1,20})\b")
#: ``#  Rank  N Group  G Pid  P on HOST device ...``: the rank, its pid and the host it ran on.
#: ``Group`` (2.13.4+) is the rank's NCCL_TESTS_SPLIT group: ranks of several groups run one communicator each.
_RANK = re.compile(r"^#\s*Rank\s+([0-9]{1,9})\s+(?:Group\s+(?P<group>-?\d+)\s+)?(?:Pid\s+(?P<pid>\d+)\s+)?on\s"
                   r"(?:\s*(?P<host>\S+))?")
_COMPILED_WITH = re.compile(r"^#\s*NCCL Tests compiled with NCCL (\d+\.\d+(?:\.\d+)?)")
# v1 footer lines have no '#', but a leading space.
_OOB = re.compile(r"^\s*#?\s*Out of bounds values\s*:\s*(\S*)(?:\s+(OK|FAILED))?")
#: A count as nccl-tests prints one: ASCII digits, few enough for int() (a longer one is no count; review 25b).
_COUNT = re.compile(r"[0-9]{1,18}")
_AVG_BW = re.compile(r"^\s*#?\s*Avg bus bandwidth\s*:\s*(\S+)(?:\s+(OK|FAILED))?")
_LAST_ERROR = re.compile(r"^#\s*error:\s*(.+)")
# ``host: Test NCCL failure file:line 'msg'``, ``Test CUDA failure``, ``Test timeout (Ns)`` (2.13.4+).
_TEST_FAILURE = re.compile(r"Test (?:NCCL failure|CUDA failure|timeout)\b.*")
# v1: ``NCCL failure file:line 'msg'`` / ``Cuda failure file:line 'msg'``, no host. The file:line part
# keeps NCCL's own ``NCCL WARN Cuda failure 1 'invalid argument'`` out (those are handled earlier).
_V1_FAILURE = re.compile(r"(?<!Test )(?:NCCL|Cuda|CUDA) failure \S+:\d+\b.*")
# `` .. host pid N: Test failure common.cu:1189``: the stack printed under a failure, or alone when the
# out-of-bounds / min-bandwidth check failed (2.17.3+).
_TRACE = re.compile(r"^\s*\.\. .*Test failure\b")
# A command line that names the binary (``mpirun ... all_reduce_perf -b 8``, run.sh's ``Running: ...``):
# the only source of the collective's name before 2.16.7.
_COMMAND_HINT = re.compile(r"(?:^|[\s/=])([a-z][a-z0-9_]*?_perf)(?:_mpi)?(?=\s|$)")
_ROW_START = re.compile(r"^\s*\d")
#: What a launcher prints when a rank of its job failed (OpenMPI's mpirun, PRRTE's prterun, Slurm's srun and
#: slurmstepd): the job failed whatever table it printed (review round 33b: such a log was `ok`, exit 0).
_LAUNCH_FAILURE = re.compile(
    r"\b(?:mpirun|prterun) (?:noticed that process rank|has exited due to process rank|detected that one or more "
    r"processes exited with non-zero status)"
    r"|\bPrimary job +terminated normally, but \d+ process(?:es)? returned"
    r"|\bsrun: error: \S+: tasks? [0-9,\-\[\]]+: (?:Exited with exit code [1-9]|Segmentation fault|Killed|Aborted"
    r"|Bus error|Terminated)"
    r"|\*\*\* (?:STEP|JOB) \S+ ON \S+ CANCELLED AT\b"
)
#: A cheap look before _LAUNCH_FAILURE: one of these is in each line it matches.
_LAUNCH_WORDS = ("mpirun", "prterun", "Primary job", "srun: error", "CANCELLED")
#: A size or count: ASCII digits, 20 at most (a 64-bit number). A longer one is a size past what a row stores (an
#: invalid row, like one beyond 64 bits), never handed to int(), which refuses more than 4300 digits (review 25b).
MAX_DIGITS = 20
_DIGITS = re.compile(r"^[0-9]+$")
_TYPE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TIMESTAMP_PARTS = 2  # ``-S`` adds ``%Y-%m-%d %H:%M:%S``: two tokens

_PREAMBLE_NAMES = {
    "size": "size",
    "bytes": "size",
    "count": "count",
    "N": "count",
    "type": "type",
    "redop": "redop",
    "op": "redop",
    "root": "root",
}
_HALF_NAMES = {
    "time": "time",
    "cputime": "time",
    "algbw": "algbw",
    "busbw": "busbw",
    "#wrong": "wrong",
    "wrong": "wrong",
    "error": "error",
    "res": "error",
}


@dataclass(frozen=True)
class Layout:
    """The columns of a result table, read from its header line."""

    #: Canonical names of the leading columns: size, count, type, then redop and/or root when printed.
    preamble: tuple[str, ...]
    #: Canonical names of one half's columns (time, algbw, busbw, wrong|error, then per-iteration stats).
    half: tuple[str, ...]
    halves: int
    #: Token counts of the columns after the halves (``-S`` timestamp: 2, anything else: 1).
    trailing: tuple[int, ...]
    #: v1 printed milliseconds; every later version microseconds.
    time_scale: float
    #: Column where the preamble ends (rows are printed with the header's widths); used to cut a row
    #: apart from an NCCL line glued onto it.
    preamble_end: int

    @property
    def tail_tokens(self) -> int:
        return len(self.half) * self.halves + sum(self.trailing)


#: Layouts of the header lines seen (a log repeats a handful of them once per run); bounded.
_HEADER_CACHE: dict[str, Layout | None] = {}
_HEADER_CACHE_SIZE = 256


def parse_header(line: str) -> Layout | None:
    """The table layout if ``line`` is a column-header line (``#  size count type ... time algbw busbw``)."""
    try:
        return _HEADER_CACHE[line]
    except KeyError:
        pass
    layout = _parse_header(line)
    if len(_HEADER_CACHE) >= _HEADER_CACHE_SIZE:
        _HEADER_CACHE.clear()
    _HEADER_CACHE[line] = layout
    return layout


def _parse_header(line: str) -> Layout | None:
    hash_match = re.match(r"\s*#", line)
    if hash_match is None:
        return None
    spans = [(m.group(), m.end()) for m in re.finditer(r"\S+", line[hash_match.end() :])]
    names = [name for name, _ in spans]
    time_positions = [i for i, name in enumerate(names) if name in ("time", "cputime")]
    if not time_positions or "busbw" not in names:
        return None
    preamble = names[: time_positions[0]]
    if len(preamble) < 3 or preamble[0] not in ("size", "bytes"):
        return None
    if len(time_positions) >= 2:
        half = names[time_positions[0] : time_positions[1]]
        trailing = names[time_positions[1] + len(half) :]
        halves = 2
    else:
        half, trailing, halves = names[time_positions[0] :], [], 1
    return Layout(
        preamble=tuple(_PREAMBLE_NAMES.get(name, "other") for name in preamble),
        half=tuple(_HALF_NAMES.get(name, "other") for name in half),
        halves=halves,
        trailing=tuple(_TIMESTAMP_PARTS if name == "timestamp" else 1 for name in trailing),
        time_scale=1000.0 if preamble[0] == "bytes" else 1.0,
        preamble_end=hash_match.end() + spans[len(preamble) - 1][1],
    )


_Preamble = tuple[int, int, str, "str | None", "int | None"]


def _row_parts(tokens: list[str], layout: Layout) -> tuple[_Preamble, list[str]] | None:
    """A row's preamble (size, count, type, redop, root) and the tokens after it, or None for no row's start."""
    split_at = len(tokens) - layout.tail_tokens
    if split_at < 3:
        return None
    preamble = _parse_preamble(tokens[:split_at], layout)
    return None if preamble is None else (preamble, tokens[split_at:])


def parse_row(line: str, layout: Layout) -> Row | None:
    """A result row, or None unless every numeric column is present (truncated rows do not count)."""
    parts = _row_parts(line.split(), layout)
    if parts is None:
        return None
    (size, count, type_name, redop, root), tail = parts
    half_len = len(layout.half)
    out_of_place = _parse_half(tail[:half_len], layout)
    in_place = _parse_half(tail[half_len : 2 * half_len], layout) if layout.halves == 2 else None
    if out_of_place is None or (layout.halves == 2 and in_place is None):
        return None
    return Row(
        size=size,
        count=count,
        type=type_name,
        redop=redop,
        root=root,
        out_of_place=out_of_place,
        in_place=in_place,
    )


#: The columns of a half that make its measurement; a row with one of them not a number measured nothing.
_MEASURED = ("time", "algbw", "busbw")


#: The size given to a row whose size or count has more than MAX_DIGITS digits: past what a row stores, so invalid.
OVERSIZE = 2**64


def _whole(token: str) -> int:
    """A size or count of ASCII digits (_DIGITS): its value, or OVERSIZE past MAX_DIGITS digits."""
    return int(token) if len(token) <= MAX_DIGITS else OVERSIZE


def unmeasured_row_size(tokens: list[str], layout: Layout) -> int | None:
    """The size of a row printed in full whose time or bandwidth is no number (printf's ``nan``, ``-nan``, ``inf``,
    or ``N/A``), or None for any other line. parse_row declines such a row; dropped, it vanished from a run that
    then passed on its other sizes. A row cut short (``in`` of ``inf``) is no number at all, and stays no row; a
    0-byte row is none of these (a bandwidth of 0 bytes may be 0/0, and the report judges no 0-byte row)."""
    parts = _row_parts(tokens, layout)
    if parts is None:
        return None
    preamble, tail = parts
    half_len = len(layout.half)
    halves = tail[: half_len * layout.halves]
    unmeasured = False
    for index, token in enumerate(halves):
        if token == "N/A":
            value = math.nan
        else:
            try:
                value = float(token)
            except ValueError:
                return None
        if not math.isfinite(value) and layout.half[index % half_len] in _MEASURED:
            unmeasured = True
    return preamble[0] if unmeasured and preamble[0] > 0 else None


def _parse_preamble(tokens: list[str], layout: Layout) -> tuple[int, int, str, str | None, int | None] | None:
    if not (_DIGITS.match(tokens[0]) and _DIGITS.match(tokens[1]) and _TYPE_NAME.match(tokens[2])):
        return None
    extra_names = [name for name in layout.preamble[3:] if name in ("redop", "root")]
    extra = tokens[3:]
    if len(extra) > len(extra_names):
        return None
    redop: str | None = None
    root: int | None = None
    if len(extra) == len(extra_names):
        pairs = list(zip(extra_names, extra, strict=True))
    else:
        # A column printed blank (pre-2.13.4 alltoall passed "" as the op name): numbers are the root.
        pairs = [
            ("root" if parse_int(token) is not None and "root" in extra_names else "redop", token) for token in extra
        ]
    for name, token in pairs:
        if name == "root":
            root = parse_int(token)
            if root is None:
                return None
        else:
            redop = token
    return _whole(tokens[0]), _whole(tokens[1]), tokens[2], _normalize_redop(redop), _normalize_root(root)


def _normalize_redop(redop: str | None) -> str | None:
    # Non-reductions print a blank op before 2.13.4 and "none" after: both mean "no reduction".
    return None if redop is None or redop in ("", "none") else redop


def _normalize_root(root: int | None) -> int | None:
    # 2.13+ prints -1 for collectives without a root; older versions have no column for them.
    return None if root is None or root < 0 else root


def _parse_half(tokens: list[str], layout: Layout) -> Half | None:
    values = dict(zip(layout.half, tokens, strict=False))
    time = parse_float(values.get("time", ""))
    algbw = parse_float(values.get("algbw", ""))
    busbw = parse_float(values.get("busbw", ""))
    if time is None or algbw is None or busbw is None:
        return None
    wrong: int | None = None
    rel_error: float | None = None
    if "wrong" in values:
        if values["wrong"] != "N/A":
            # %6g: large counts print as 1.04858e+06.
            wrong_value = parse_float(values["wrong"])
            if wrong_value is None:
                return None
            wrong = wrong_count(wrong_value)
    elif "error" in values and values["error"] != "N/A":
        rel_error = parse_float(values["error"])
        if rel_error is None:
            return None
    return Half(time_us=time * layout.time_scale, algbw=algbw, busbw=busbw, wrong=wrong, rel_error=rel_error)


_Columns = tuple[int, int, int, int, int]


class _FastRow:
    """``parse_row`` specialised for one layout and the common case (every column printed, numbers plain).

    Gives the same values as parse_row or declines (False) so that parse_row decides: any exception, a
    non-finite number or an unusual token leaves the row to the general code.
    """

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        extra = [name for name in layout.preamble[3:] if name in ("redop", "root")]
        self.extra = tuple(extra)
        self.width = 3 + len(extra) + layout.tail_tokens
        half = layout.half
        last = {name: index for index, name in enumerate(half)}  # dict(zip(...)) keeps the last column
        self.time, self.algbw, self.busbw = last.get("time"), last.get("algbw"), last.get("busbw")
        self.wrong = last.get("wrong")
        self.error = None if self.wrong is not None else last.get("error")
        self.half_len = len(half)
        self.halves = layout.halves
        self.scale = layout.time_scale
        self.usable = None not in (self.time, self.algbw, self.busbw)
        self.types: dict[str, bool] = {}
        base = 3 + len(extra)
        self.out_at = self._columns(base)
        self.in_at = self._columns(base + self.half_len)
        #: The same facts for the C accelerator's scan() (_fastrows.c, parse_spec).
        self.spec = (
            self.usable, self.width, self.halves, tuple(name == "root" for name in extra),
            self.out_at, self.in_at, self.scale,
        )  # fmt: skip

    def _columns(self, start: int) -> _Columns:
        """Token indices of time, algbw, busbw, wrong, error in the half starting at ``start`` (-1: none)."""
        return tuple(-1 if index is None else start + index  # type: ignore[return-value]
                     for index in (self.time, self.algbw, self.busbw, self.wrong, self.error))  # fmt: skip

    def parse(self, tokens: list[str], store: RowStore) -> bool:
        if not self.usable:
            return False
        size_token, count_token, type_name = tokens[0], tokens[1], tokens[2]
        if not (len(size_token) <= MAX_DIGITS >= len(count_token) and size_token.isascii() and count_token.isascii()
                and size_token.isdecimal() and count_token.isdecimal()):
            return False
        type_ok = self.types.get(type_name)
        if type_ok is None:
            type_ok = self.types[type_name] = _TYPE_NAME.match(type_name) is not None
        if not type_ok:
            return False
        redop: str | None = None
        root: int | None = None
        position = 3
        for name in self.extra:
            token = tokens[position]
            position += 1
            if name == "root":
                root = parse_int(token)
                if root is None:
                    return False
            else:
                redop = token
        out = self._half(tokens, self.out_at)
        if out is None:
            return False
        inp = None
        if self.halves == 2:
            inp = self._half(tokens, self.in_at)
            if inp is None:
                return False
        if redop == "none":
            redop = None
        if root is not None and root < 0:
            root = None
        size = int(size_token)
        if not store.append_values(size, int(count_token), type_name, redop, root, out, inp):
            store.note_invalid(size)  # past what a row stores (64 bits): an invalid row, never one dropped (round 26)
        return True

    def _half(self, tokens: list[str], at: _Columns) -> tuple[float, float, float, float, float] | None:
        time_at, algbw_at, busbw_at, wrong_at, error_at = at
        try:
            time = float(tokens[time_at])
            algbw = float(tokens[algbw_at])
            busbw = float(tokens[busbw_at])
        except ValueError:
            return None
        if time - time != 0.0 or algbw - algbw != 0.0 or busbw - busbw != 0.0:
            return None  # inf or nan: parse_float says "no value"
        wrong = rel_error = _NAN
        if wrong_at >= 0:
            token = tokens[wrong_at]
            if token == "0":
                wrong = 0.0
            elif token != "N/A":
                value = parse_float(token)
                if value is None:
                    return None
                wrong = float(wrong_count(value))
        elif error_at >= 0:
            token = tokens[error_at]
            if token != "N/A":
                value = parse_float(token)
                if value is None:
                    return None
                rel_error = value
        return time * self.scale, algbw, busbw, wrong, rel_error


_NAN = math.nan
#: One _FastRow per layout (layouts come from parse_header's cache, so runs of one log share them).
_FAST_ROWS: dict[Layout, _FastRow] = {}


def _fast_row(layout: Layout) -> _FastRow:
    fast = _FAST_ROWS.get(layout)
    if fast is None:
        if len(_FAST_ROWS) >= _HEADER_CACHE_SIZE:
            _FAST_ROWS.clear()
        fast = _FAST_ROWS[layout] = _FastRow(layout)
    return fast


class _RunState:
    """A run being assembled, with the facts that only matter while parsing (a plain class: one is made a run)."""

    __slots__ = (
        "run", "layout", "seen_nthread", "seen_starting", "max_rank", "gpus_per_process", "library_version",
        "info_version", "compiled_with", "traces", "fast", "rank_pids", "rank_hosts", "interleaved", "last_size",
        "footer_done", "oob_seen", "repeated_size", "sweep", "after_footer", "other_groups", "collective_named",
    )  # fmt: skip

    def __init__(self) -> None:
        self.run = Run()
        self.layout: Layout | None = None
        self.seen_nthread = False
        self.seen_starting = False
        self.max_rank = -1
        self.gpus_per_process = 0
        self.library_version: str | None = None
        self.info_version: str | None = None
        self.compiled_with: str | None = None
        self.traces: list[str] = []
        self.fast: _FastRow | None = None
        #: Rank -> pid of each ``#  Rank`` line (a list: an interleaved file lists a rank more than once).
        self.rank_pids: dict[int, list[str]] = {}
        #: Rank -> the host its ``#  Rank`` line names (the first one, when a rank is listed again).
        self.rank_hosts: dict[int, str] = {}
        self.interleaved: set[int] = set()
        #: Size of the last row and whether the Avg line came: what interleave.route needs.
        self.last_size = -1
        self.footer_done = False
        #: Whether the ``Out of bounds values`` line came (its count may be unreadable).
        self.oob_seen = False
        self.repeated_size: int | None = None
        #: minBytes, maxBytes, step and whether the step is a factor, from the nThread line; None without one.
        self.sweep: tuple[int, int, int, bool] | None = None
        #: Size of the first row that came after the run's ``# Avg bus bandwidth`` footer (not stored in the run).
        self.after_footer: int | None = None
        #: Ranks listed in each NCCL_TESTS_SPLIT group other than 0 (``#  Rank N Group G``).
        self.other_groups: dict[str, int] = {}
        #: Whether the run's collective comes from its own ``Collective test starting/concluded`` line, not from a
        #: ``*_perf`` word on an earlier line (a command line, or a listing of several binaries).
        self.collective_named = False

    def groups(self) -> int:
        """How many NCCL_TESTS_SPLIT groups the ``#  Rank`` lines list (Run.split_groups): with more than one, each
        runs its own communicator and a row's count is per group (nccl-tests' nranks is the group's), while the
        ``#  Rank`` lines list every rank. Group 0's ranks are those not counted in another (the C accelerator reads
        their lines)."""
        in_group_zero = len(self.rank_pids) - sum(self.other_groups.values())
        return len(self.other_groups) + (in_group_zero > 0)

    @property
    def has_table(self) -> bool:
        return self.layout is not None

    @property
    def has_rows(self) -> bool:
        return bool(self.run.rows)

    @property
    def has_oob(self) -> bool:
        return self.oob_seen

    def may_interleave(self) -> bool:
        """Started, still before its table, nothing failed: another process's run may start beside it."""
        started = self.seen_nthread or self.seen_starting or self.run.nccl_tests_version is not None
        return started and self.layout is None and not self.run.errors and not self.traces

    def ended(self) -> bool:
        return self.footer_done or bool(self.run.errors) or bool(self.traces)

    def finish(self) -> Run:
        run = self.run
        run.nccl_version = self.library_version or self.info_version or self.compiled_with
        run.ranks = ranks_from_devices(self.max_rank, self.gpus_per_process)
        run.rank_hosts = dict(sorted(self.rank_hosts.items()))
        run.split_groups = self.groups()
        run.expected_rows = sweep_length(*self.sweep) if self.sweep is not None else None
        if not run.errors:
            # Without a primary failure line, the `` .. Test failure`` stack is what says the run failed.
            run.errors = list(self.traces)
        if self.repeated_size is not None and not self.interleaved:
            run.split_problem = repeated_size_problem(self.repeated_size)
        if self.after_footer is not None and run.split_problem is None:
            run.split_problem = (
                f"a row of {self.after_footer} bytes comes after the run's 'Avg bus bandwidth' line, where its sweep "
                "has ended: the output of more than one nccl-tests process or run is mixed in this run"
            )
        if run.split_problem is None:
            run.split_problem = sweep_order_problem(run.rows, self.sweep, finished=self.footer_done)
        mismatch = average_mismatch(run)
        if mismatch is not None and run.split_problem is None:
            run.split_problem = mismatch
        if run.split_problem is None:
            run.table_problem = table_problem(run.rows, run.collective if self.collective_named else None,
                                              run.ranks if run.split_groups <= 1 else None)  # fmt: skip
        if self.interleaved:
            rank = min(self.interleaved)
            pids = self.rank_pids[rank]
            run.split_problem = (
                f"the output of {len(pids)} nccl-tests processes is interleaved in this file (rank {rank} is "
                f"listed {len(pids)} times, pids {', '.join(pids)}): rows cannot be attributed to a process; "
                "give each process its own log or run them under MPI"
            )
        return run



class TextParser:
    """Feeds lines one at a time; ``take_finished()`` hands over each run once nothing can change it.

    Only the last run can still change (every handler works on it), so a run is final as soon as the next one
    starts: a caller that drains ``take_finished()`` while feeding holds one run in memory, not the file.
    The NCCL INFO lines feed ``transport`` in the same pass.
    """

    def __init__(self) -> None:
        self._state: _RunState | None = None
        self._finished: list[Run] = []
        self._pending_collective: str | None = None
        self._pending_nccl_version: str | None = None
        self._pending_warnings: list[str] = []
        # Start of a row whose rest went to the next line because an NCCL line was glued onto it.
        self._fragment: str | None = None
        self.transport = Transport()
        #: transport.info_lines when the last run ended: the lines after it are the next run's.
        self._info_mark = 0
        #: "NCCL version" lines read (counted in info_lines, but printed at every debug level), and at the last end.
        self._version_lines = 0
        self._version_mark = 0
        #: Runs open together (interleave.py), in start order; empty for the usual one-run-at-a-time file.
        self._lanes: list[_RunState] = []

    def take_finished(self) -> list[Run]:
        """The runs completed since the last call, in order."""
        finished, self._finished = self._finished, []
        return finished

    def _finish(self, state: _RunState) -> Run:
        """``state``'s run, ended, with the NCCL INFO lines read since the previous run ended (its own)."""
        run = state.finish()
        # "NCCL version X" is printed without NCCL_DEBUG=INFO too: it is no evidence of the transport
        run.info_lines = (self.transport.info_lines - self._info_mark) - (self._version_lines - self._version_mark)
        self._info_mark, self._version_mark = self.transport.info_lines, self._version_lines
        return run

    def close(self) -> list[Run]:
        """End of input: the runs not yet taken, the last one included."""
        if self._lanes:
            self._end_group()
        elif self._state is not None:
            self._finished.append(self._finish(self._state))
        self._state = None
        return self.take_finished()

    def _end_group(self) -> None:
        lanes, self._lanes = self._lanes, []
        tabled = [lane for lane in lanes if lane.layout is not None]
        pids = sorted({pid for lane in lanes for pids in lane.rank_pids.values() for pid in pids})
        for lane in lanes:
            run = lane.finish()  # processes writing at once: whose INFO lines are whose cannot be told (None)
            if len(tabled) >= 2:
                add_unique(
                    run.warnings,
                    f"{len(lanes)} nccl-tests processes wrote this file at the same time (pids {', '.join(pids)}); "
                    "their lines were told apart by headers, pids and message-size order, so rows of equal size "
                    "may belong to another of these runs",
                )
            self._finished.append(run)
        self._info_mark, self._version_mark = self.transport.info_lines, self._version_lines  # the next run's start

    def runs(self) -> list[Run]:
        """Every run (for callers that feed everything first and never called take_finished)."""
        return self.close()

    def feed_block(self, block: str) -> None:
        """Every line of a block of text (MPI tag prefixes removed, trailing whitespace stripped)."""
        fast = accel.fast
        if fast is None:
            self._feed_lines(block.splitlines())
            return
        # The C accelerator takes the plain lines (rows, NCCL INFO noise, Rank lines, ignored text) in bulk,
        # exactly as feed() would, and stops at each other line, which feed() then handles here.
        scan, next_line = fast.scan, fast.next_line
        feed = self.feed
        # The handlers of kind 3 + i: a line whose first word is WORDS[i] (_fastrows.c), as _handlers_for finds them.
        by_kind = ((), (), (), *map(self._handlers_for, fast.WORDS))
        strip_tag = _MPI_TAG.sub
        transport = self.transport
        messages: list[str] = []
        channels: list[str] = []
        pos, size = 0, len(block)
        while pos < size:
            if self._lanes or self._fragment is not None:
                span = next_line(block, pos)  # interleaved runs or a row fragment: feed() decides
                if span is None:
                    self._feed_lines(block[pos:].splitlines())
                    return
                start, end, pos = span
            else:
                state = self._state
                spec = None
                if state is not None and state.layout is not None:
                    # After the footer, rows come back to _try_row (which does not store them), one at a time.
                    spec = _DECLINE_ROWS if state.footer_done else self._fast_for(state).spec
                kind, start, end, after, info, gdr, host = scan(block, pos, state, spec, messages, channels)
                if info:
                    transport.info_lines += info
                if gdr or host:  # before the messages: the extension gathers channels only until one is queued
                    add_channels(transport, channels, gdr, host)
                    channels.clear()
                if messages:
                    for message in messages:
                        read_message(transport, message)
                    messages.clear()
                if kind == 0:
                    return
                if kind < 0:  # a str of 2 or 4 bytes a character: no accelerator
                    self._feed_lines(block[pos:].splitlines())
                    return
                pos = after
                if kind > 1:  # a line the extension classified: what feed() would do with it, without feed()
                    raw = block[start:end]
                    if raw.startswith("["):
                        raw = strip_tag("", raw, count=1)
                    line = raw.rstrip()
                    if kind > 2:
                        self._on_words(line, by_kind[kind])
                    elif not self._on_failure(line):
                        self._on_words(line, self._handlers_for(line))
                    continue
            raw = block[start:end]
            if raw.startswith("["):
                raw = strip_tag("", raw, count=1)
            feed(raw.rstrip())

    def _feed_lines(self, lines: list[str]) -> None:
        feed = self.feed
        strip_tag = _MPI_TAG.sub
        for raw in lines:
            if raw.startswith("["):
                raw = strip_tag("", raw, count=1)
            feed(raw.rstrip())

    def feed(self, line: str) -> None:
        fragment, self._fragment = self._fragment, None
        if self._lanes:
            lane = route(self._lanes, line)
            if lane is not None:
                self._state = self._lanes[lane]
        if "NCCL" in line:
            nccl = find_nccl_line(line)
            if nccl is not None:
                self._on_nccl_line(line, nccl, fragment)
                return
        elif fragment is None and "failure" not in line and "timeout" not in line:
            # Fast path for the bulk of a log: a line that starts with a digit can only be a row.
            first = line.lstrip()[:1]
            if first.isdigit():
                self._try_row(line)
                return
        if fragment is not None and self._try_joined_row(fragment + line):
            return
        if ("failure" in line or "timeout" in line) and self._on_failure(line):
            return
        self._on_words(line, self._handlers_for(line))

    def _on_words(self, line: str, handlers: tuple[Callable[[str], bool], ...]) -> None:
        """The end of feed(): the handlers of the line's first word, else a row, else other text."""
        for handler in handlers:
            if handler(line):
                return
        if _ROW_START.match(line):
            self._try_row(line)
        elif not line.lstrip().startswith("#"):
            self._on_other(line)

    def _handlers_for(self, line: str) -> tuple[Callable[[str], bool], ...]:
        """The handlers whose pattern can match ``line``: each one requires a known first word (after an
        optional ``#``), so the others are not tried (same result as trying all, in the same order)."""
        words = line.lstrip().lstrip("#").split(None, 1)
        if not words:
            return ()
        word = words[0]
        if word.startswith("error:"):
            return (self._on_last_error,)
        return self._by_first_word.get(word, ())

    @cached_property
    def _by_first_word(self) -> dict[str, tuple[Callable[[str], bool], ...]]:
        return {
            "nccl-tests": (self._on_version_line,),
            "Collective": (self._on_starting, self._on_concluded),
            "nThread": (self._on_nthread,),
            "Rank": (self._on_rank,),
            "NCCL": (self._on_compiled_with,),
            "Out": (self._on_oob,),
            "Avg": (self._on_avg,),
            "size": (self._on_header,),
            "bytes": (self._on_header,),
            "Reducing": (self._on_reducing,),
        }

    # -- run boundaries -------------------------------------------------------------------------------

    def _current(self) -> _RunState | None:
        return self._state

    def _new_run(self) -> _RunState:
        previous = self._state
        if self._lanes and all(lane.ended() for lane in self._lanes):
            self._end_group()
        elif not self._lanes and previous is not None:
            if previous.may_interleave():
                self._lanes = [previous]  # a run starts before the previous one printed its table
            else:
                self._finished.append(self._finish(previous))
        state = _RunState()
        if self._lanes:
            self._lanes.append(state)
        if self._pending_collective is not None:
            state.run.collective = self._pending_collective
            self._pending_collective = None
        if self._pending_nccl_version is not None:
            state.info_version = self._pending_nccl_version
            self._pending_nccl_version = None
        state.run.warnings.extend(self._pending_warnings)
        self._pending_warnings = []
        self._state = state
        return state

    def _current_or_new(self) -> _RunState:
        return self._current() or self._new_run()

    def _on_version_line(self, line: str) -> bool:
        match = _VERSION_LINE.match(line)
        if match is None:
            return False
        # The version line is the first thing every 2.17.4+ binary prints: always a new run.
        state = self._new_run()
        state.run.nccl_tests_version = match.group("version")
        code = match.group("library") or match.group("headers")
        if code is not None:
            state.library_version = nccl_version_from_code(int(code))
        return True

    def _on_starting(self, line: str) -> bool:
        match = _STARTING.match(line)
        if match is None:
            return False
        state = self._current()
        if state is None or state.seen_starting or state.seen_nthread or state.layout is not None:
            state = self._new_run()
        state.seen_starting = True
        state.run.collective = normalize_collective(match.group(1))
        state.collective_named = True
        return True

    def _on_nthread(self, line: str) -> bool:
        match = _NTHREAD.match(line)
        if match is None:
            return False
        state = self._current()
        if state is None or state.seen_nthread or state.layout is not None:
            state = self._new_run()
        state.seen_nthread = True
        state.gpus_per_process = int(match.group(1)) * int(match.group(2))
        sweep = _SWEEP.search(line, match.end())
        if sweep is not None:
            state.sweep = (int(sweep.group(1)), int(sweep.group(2)), int(sweep.group(3)), sweep.group(4) == "factor")
        validation = _VALIDATION.search(line, match.end())
        if validation is not None:
            state.run.validated = validation.group(1) == "1"
        return True

    def _on_reducing(self, line: str) -> bool:
        match = _REDUCING.match(line)
        if match is None:
            return False
        state = self._current()
        if state is not None and state.sweep is not None and state.layout is None:
            low, _, step, by_factor = state.sweep
            state.sweep = (low, int(match.group(1)), step, by_factor)
        return True

    def _on_concluded(self, line: str) -> bool:
        match = _CONCLUDED.match(line)
        if match is None:
            return False
        state = self._current_or_new()
        if not state.collective_named:  # the run's own line names it, where an earlier *_perf word only guessed
            state.run.collective = normalize_collective(match.group(1))
            state.collective_named = True
        return True

    # -- header block ---------------------------------------------------------------------------------

    def _on_rank(self, line: str) -> bool:
        match = _RANK.match(line)
        if match is None:
            return False
        state = self._current_or_new()
        rank, pid = int(match.group(1)), match.group("pid")
        state.max_rank = max(state.max_rank, rank)
        written = match.group("group") or "0"
        digits = written.lstrip("-").lstrip("0")  # the group's number as text: no int() of a long run of digits
        if digits:
            # Group 0's lines are the C accelerator's (it hands back the others): counted the same both ways.
            group = "-" * written.startswith("-") + digits
            state.other_groups[group] = state.other_groups.get(group, 0) + 1
        if rank in state.rank_pids:
            # One run lists each rank once: a rank listed again is another process writing to the same file.
            state.interleaved.add(rank)
        state.rank_pids.setdefault(rank, []).append(pid or "?")
        if match.group("host"):
            state.rank_hosts.setdefault(rank, match.group("host"))
        return True

    def _on_compiled_with(self, line: str) -> bool:
        match = _COMPILED_WITH.match(line)
        if match is None:
            return False
        self._current_or_new().compiled_with = match.group(1)
        return True

    def _on_header(self, line: str) -> bool:
        layout = parse_header(line)
        if layout is None:
            return False
        state = self._current_or_new()
        state.layout = layout
        state.fast = _fast_row(layout)
        state.run.has_table = True
        state.run.rows_judged_by_oob = "wrong" not in layout.half
        return True

    # -- rows, footer, failures -----------------------------------------------------------------------

    def _try_row(self, line: str) -> bool:
        state = self._current()
        if state is None or state.layout is None:
            return False
        layout = state.layout
        if state.footer_done:
            return self._row_after_footer(state, line, layout)
        fast = self._fast_for(state)
        tokens = line.split()
        if len(tokens) == fast.width and fast.parse(tokens, state.run.rows):
            self._after_row(state, int(tokens[0]))
            return True
        row = parse_row(line, layout)
        if row is None:
            size = unmeasured_row_size(tokens, layout)
            if size is None:
                return False
            state.run.rows.note_invalid(size)  # not stored (no number to keep), but it fails the run, by size
            self._after_row(state, size)
            return True
        if not state.run.rows.append(row):  # a number past what a row stores (size beyond 64 bits)
            state.run.rows.note_invalid(row.size)
        self._after_row(state, row.size)
        return True

    def _try_joined_row(self, line: str) -> bool:
        """A row put back together after an NCCL line cut it: where the cut fell inside a number, the joined
        numbers disagree (algbw is not size / time) and the row is no measurement, counted invalid by its size."""
        state = self._current()
        if state is None or state.layout is None:
            return False
        if state.footer_done:
            return self._row_after_footer(state, line, state.layout)
        row = parse_row(line, state.layout)
        if row is not None and not row_agrees(row):
            state.run.rows.note_invalid(row.size)
            self._after_row(state, row.size)
            return True
        return self._try_row(line)

    @staticmethod
    def _row_after_footer(state: _RunState, line: str, layout: Layout) -> bool:
        """A row after the run's footer: the sweep has ended, so it is another process's or run's. It is not stored
        (the run's numbers stay its own) but it makes the run incomplete. False when the line is no row."""
        row = parse_row(line, layout)
        size = row.size if row is not None else unmeasured_row_size(line.split(), layout)
        if size is None:
            return False
        if state.after_footer is None:
            state.after_footer = size
        return True

    @staticmethod
    def _fast_for(state: _RunState) -> _FastRow:
        """The fast row parser of the state's layout (set with it by _on_header; equal layouts share one)."""
        fast = state.fast
        if fast is None or (fast.layout is not state.layout and fast.layout != state.layout):
            assert state.layout is not None
            fast = state.fast = _fast_row(state.layout)
        return fast

    @staticmethod
    def _after_row(state: _RunState, size: int) -> None:
        if size == state.last_size and size > 0:
            # A sweep never measures a size twice in a row (only 0-byte rows repeat, from rounding): two
            # processes' rows are in this run.
            state.repeated_size = size
        state.last_size = size

    def _on_oob(self, line: str) -> bool:
        oob = _OOB.match(line)
        if oob is None:
            return False
        state = self._current_or_new()
        state.oob_seen = True
        run = state.run
        count, word = oob.group(1), oob.group(2)
        run.out_of_bounds = int(count) if _COUNT.fullmatch(count) else None
        if word == "FAILED" and not run.out_of_bounds:
            # nccl-tests' own verdict with a count that is garbled or 0: the word is the verdict (review round 25b).
            run.errors.append(line.strip())
        return True

    def _on_avg(self, line: str) -> bool:
        avg = _AVG_BW.match(line)
        if avg is None:
            return False
        state = self._current_or_new()
        state.footer_done = True
        state.run.avg_busbw = parse_float(avg.group(1))
        state.run.avg_unreadable = avg.group(1)[:40] if state.run.avg_busbw is None else None
        state.run.bw_check_failed = avg.group(2) == "FAILED"
        return True

    def _on_last_error(self, line: str) -> bool:
        match = _LAST_ERROR.match(line)
        if match is None:
            return False
        add_unique(self._current_or_new().run.warnings, match.group(1).strip())
        return True

    def _on_failure(self, line: str) -> bool:
        if _TRACE.match(line):
            self._current_or_new().traces.append(line.strip())
            return True
        match = _TEST_FAILURE.search(line) or _V1_FAILURE.search(line)
        if match is None:
            return False
        self._current_or_new().run.errors.append(self._failure_text(line, match.start()))
        return True

    def _failure_text(self, line: str, start: int) -> str:
        """The failure message; when it was glued onto a half-printed row, without the row's numbers."""
        if not _ROW_START.match(line):
            return line.strip()
        message = line[start:].strip()
        state = self._current()
        if state is not None and state.layout is not None:
            # Right after the preamble, the text up to "Test" is the host name: ``-1node-03: Test ...``
            host = line[state.layout.preamble_end : start].strip()
            if host.endswith(":") and " " not in host:
                return f"{host} {message}"
        return message

    # -- noise ----------------------------------------------------------------------------------------

    def _on_nccl_line(self, line: str, nccl: NcclLine, fragment: str | None) -> None:
        self.transport.info_lines += 1
        read_message(self.transport, nccl.message)
        state = self._current()
        if nccl.start > 0 and _ROW_START.match(line) and state is not None and state.layout is not None:
            # NCCL printed into the middle of a row (lazy connection setup): keep the row's beginning.
            start = host_start(line, nccl.start, state.rank_hosts.values())
            self._fragment = line[: max(start, state.layout.preamble_end)]
        elif fragment is not None:
            self._fragment = fragment  # keep waiting for the row's continuation
        if nccl.level == "WARN":
            # A warning alone is no run: before the first banner it waits for the run that follows.
            add_unique(state.run.warnings if state is not None else self._pending_warnings, nccl.message)
        elif nccl.message.startswith("NCCL version "):
            self._version_lines += 1
            self._on_nccl_version(nccl.message.split()[2])

    def _on_nccl_version(self, text: str) -> None:
        version = text.split("+", 1)[0]
        state = self._current()
        if state is None or state.layout is not None:
            # Printed at communicator init, i.e. before the table of the run it belongs to.
            self._pending_nccl_version = version
        elif state.info_version is None:
            state.info_version = version

    def _on_other(self, line: str) -> None:
        if any(word in line for word in _LAUNCH_WORDS):
            failure = _LAUNCH_FAILURE.search(line)
            if failure is not None:
                # The launch's, so the run it launched: the last one (a job aborted before any output is a run
                # that failed, not no run).
                add_unique(self._current_or_new().run.errors, line[failure.start() :].strip()[:300])
                return
        hint = _COMMAND_HINT.search(line)
        if hint is not None:
            self._pending_collective = normalize_collective(hint.group(1))


#: A row spec the C accelerator cannot use (_fastrows.c parse_spec): it hands every row line back to feed().
_DECLINE_ROWS = (False, 3, 1, (), (-1, -1, -1, -1, -1), (-1, -1, -1, -1, -1), 1.0)
_RECORD_BYTES = _RECORD.size


def sweep_order_problem(
    rows: RowStore, sweep: tuple[int, int, int, bool] | None, finished: bool = True
) -> str | None:
    """Why the sizes of ``rows`` (in arrival order) are not one sweep, or whole sweeps one after the other, of the
    run's nThread line (``sweep``: minBytes, maxBytes, step, by factor); None when they are. ``finished``: the run
    printed its footer, so its last sweep is whole too (a run cut short is incomplete for that reason instead).

    nccl-tests measures its sizes in increasing order from minBytes to maxBytes, and repeats the whole sweep for
    ``-N`` cycles, each datatype of ``-d all`` and each op of ``-o all``: each repetition starts again at minBytes
    (a printed size is the asked size rounded down to whole elements, so at most minBytes). A size that goes back
    to more than minBytes, or one above maxBytes, is another process's or run's row mixed into this run. Without
    an nThread line the first row's size stands for minBytes. Sizes are read from the packed rows in bulk (8 bytes
    of each record), so the check costs a few operations a row in C, not a Python loop over the rows."""
    low, high = (sweep[0], sweep[1]) if sweep is not None else (None, None)
    previous, restarts = -1, 0
    for chunk in rows.record_chunks():
        count = len(chunk) // _RECORD_BYTES
        if not count:
            continue
        sizes = record_column(chunk, 0, "q")  # the little-endian size that opens each record
        if low is None:
            low = sizes[0]
        if high is not None and max(sizes) > high:
            above = next(size for size in sizes if size > high)
            return (
                f"a row of {above} bytes, above the {high} bytes (maxBytes) its nThread line announces: the output "
                "of more than one nccl-tests process or run is mixed in this run"
            )
        backs = compress(range(1, count), map(le, sizes[1:], sizes))  # each i where sizes[i] <= sizes[i - 1]
        for at, before in ((0, previous), *((i, sizes[i - 1]) for i in backs)):
            if before == sizes[at] > 0:  # only 0-byte rows repeat (from rounding)
                return repeated_size_problem(before)
            if before > sizes[at] > low:
                return (
                    f"a row of {sizes[at]} bytes follows one of {before} bytes: a sweep goes to larger sizes and "
                    f"starts again only at its first size ({low} bytes, minBytes), so the output of more than one "
                    "nccl-tests process or run is mixed in this run"
                )
            restarts += before > sizes[at]
        previous = sizes[-1]
    return whole_sweeps_problem(len(rows), restarts + 1, sweep) if finished and not rows.invalid_rows else None


def whole_sweeps_problem(printed: int, sweeps: int, sweep: tuple[int, int, int, bool] | None) -> str | None:
    """Why ``printed`` rows in ``sweeps`` sweeps (each a return to minBytes) are not whole sweeps of the nThread
    line's sizes: a row at minBytes after a finished sweep, a second sweep cut short, passed the order check, and
    its rate became the run's peak (review round 33b: one row turned a fail into a pass). Fewer rows than one sweep
    are the incomplete run's own reason (Run._incomplete_reason)."""
    expected = sweep_length(*sweep) if sweep is not None else None
    if not expected or printed <= expected or printed == sweeps * expected:
        return None
    return (
        f"the table holds {printed} rows in {sweeps} sweeps, and the nThread line announces {expected} message sizes "
        "a sweep: a sweep started again and did not finish, so rows of another nccl-tests process or run are mixed "
        "in this run"
    )


def repeated_size_problem(size: int) -> str:
    """A sweep never measures a size twice in a row (only 0-byte rows repeat, from rounding)."""
    return (
        f"two rows of {size} bytes follow each other: the output of more than one nccl-tests process is mixed in "
        "this run and cannot be split; give each process its own log"
    )


def sweep_length(low: int, high: int, step: int, by_factor: bool) -> int | None:
    """How many message sizes nccl-tests' loop measures from ``low`` to ``high`` (each size times the factor, or
    plus the step); None for a sweep that loop would not end or that says nothing (a zero factor or step)."""
    if by_factor:
        if low <= 0 or step < 2:
            return None
        count, size = 0, low
        while size <= high:
            count, size = count + 1, size * step
        return count
    if step <= 0:
        return None
    return (high - low) // step + 1 if high >= low else 0


#: How far a row's algbw may be from size / time and still be its own: the table prints time with 2 to 0
#: decimals and algbw with 2, so a small message's algbw is rounded to 0.01 GB/s and a large one's within a few %.
_AGREE_ABS, _AGREE_REL = 0.01, 0.05


def row_agrees(row: Row) -> bool:
    """Whether each half's algbw is its size over its time (nccl-tests computes it so for every collective)."""
    for half in (row.out_of_place, row.in_place):
        if half is None or row.size <= 0 or half.time_us <= 0:
            continue
        expected = row.size / (half.time_us * 1e3)  # bytes / us -> GB/s
        if abs(half.algbw - expected) > _AGREE_ABS + _AGREE_REL * max(half.algbw, expected):
            return False
    return True


def host_start(line: str, start: int, hosts: Iterable[str]) -> int:
    """Where the NCCL line's host name begins in ``line``: ``start`` as lines.find_nccl_line found it, or later
    when the text glued before it ends with a host the run's ``#  Rank`` lines name (a row cut inside a number:
    ``63587cnode2-001:440010:...``, where ``63587`` belongs to the row)."""
    colon = line.find(":", start)
    glued = line[start:colon] if colon > 0 else ""
    known = set(hosts)
    if not glued or glued in known:
        return start
    for host in sorted(known, key=len, reverse=True):
        if host and glued.endswith(host):
            return colon - len(host)
    return start


def parse_text(text: str) -> list[Run]:
    """Every run in the text output of nccl-tests (any version, any amount of interleaved noise)."""
    parser = TextParser()
    parser.feed_block(text)
    return parser.close()
