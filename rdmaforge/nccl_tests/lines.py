"""Line handling shared by the text parser and the transport detector.

Logs come from mpirun/srun wrappers, so every line may carry an MPI ``--tag-output`` prefix, and the
NCCL library writes its own ``host:pid:tid [dev] NCCL INFO ...`` lines into the same stdout stream as
nccl-tests, sometimes in the middle of a half-printed table row.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

# Open MPI ``--tag-output``: ``[1,0]<stdout>:`` (jobid,rank).
MPI_TAG = re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:")
_NCCL_TAG = re.compile(r"\bNCCL (INFO|WARN|TRACE)\b ?")
# What precedes the tag: ``host:pid:tid [dev] `` and, for WARN lines, ``file.cc:123 ``. Searched only in
# the last _PREFIX_WINDOW characters before the tag: a search over the whole glued prefix retries the
# unbounded ``[^\s:]+`` at every position (quadratic: 80 KB took 41 s).
_NCCL_PREFIX = re.compile(r"[^\s:]+:\d+:\d+ \[\d+\] (?:\d+\.\d+ )?(?:\S+:\d+ )?$")
#: Host name (at most 253), pid, tid, device and WARN's file:line fit in this many characters.
_PREFIX_WINDOW = 512
#: What a line that only quotes NCCL's words starts with: a comment, a shell trace (set -x: "+ ", nested "++ ").
_QUOTING = re.compile(r"\s*(?:#|\++ )")
# Rank 0 of NCCL < 2.2x prints the version as a bare line, without the INFO prefix.
_BARE_VERSION = re.compile(r"^\s*NCCL version (\S+)")


@dataclass(frozen=True)
class NcclLine:
    """A message from the NCCL library found in a line."""

    level: str  # INFO, WARN or TRACE
    message: str
    #: Where the NCCL text starts in the line; > 0 when it was glued onto other output.
    start: int


def decode(data: bytes) -> str:
    """Bytes of a log -> text; undecodable bytes become U+FFFD rather than an exception."""
    return data.decode("utf-8", errors="replace")


def clean_lines(text: str) -> Iterator[str]:
    """Lines without MPI tag prefixes or trailing whitespace; leading spaces kept: rows are aligned."""
    for raw in text.splitlines():
        yield MPI_TAG.sub("", raw, count=1).rstrip()


def find_nccl_line(line: str) -> NcclLine | None:
    """The NCCL INFO/WARN/TRACE message in ``line``, or the bare ``NCCL version`` line; None otherwise.

    Only with NCCL's own ``host:pid:tid [dev]`` before the tag (and a TRACE line's time and ``file:line``), on a
    line that is not a comment or a shell trace (``#``, ``+ ``, ``++ `` first, a ``#`` glued to the host included):
    the words "NCCL INFO" elsewhere (``# note: host:1:2 [0] NCCL INFO Using network IB``, ``+ grep 'NCCL INFO Using
    network IB'``) are not NCCL speaking, and were read as its transport (review rounds 34a, 35). Every NCCL line of
    the corpus carries the prefix at the start of its line."""
    tag = _NCCL_TAG.search(line)
    if tag is None:
        bare = _BARE_VERSION.match(line)
        if bare is None:
            return None
        return NcclLine(level="INFO", message=f"NCCL version {bare.group(1)}", start=0)
    window = max(0, tag.start() - _PREFIX_WINDOW)
    prefix = _NCCL_PREFIX.search(line, window, tag.start())
    if prefix is None or _QUOTING.match(line, 0, tag.start()):
        return None
    return NcclLine(level=tag.group(1), message=line[tag.end() :].strip(), start=prefix.start())


def parse_float(token: str) -> float | None:
    """A finite float, or None (``N/A``, ``nan``, ``inf`` and garbage all mean "no value")."""
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def wrong_count(value: float) -> int:
    """A #wrong read as a count: a fraction (0.5, -1e-05: a garbled column) is no count, and is judged as the next
    whole count away from 0, so that it never reads as 0 wrong values (review round 25b: int() made both 0)."""
    whole = int(value)
    return whole if whole == value else whole + (1 if value > 0 else -1)


def parse_int(token: str) -> int | None:
    """A base-10 integer (sign allowed), or None."""
    try:
        return int(token, 10)
    except ValueError:
        return None
