"""Telling apart several non-MPI nccl-tests processes that write one file (issue 13).

Each process prints the same sequence: version line, ``nThread`` line, its ``#  Rank .. Pid`` lines, the
table header, rows in increasing message size, then the footer. While runs are open together (a *group*:
a run started before the previous one printed its table), each line goes to the open run it can continue:
a Rank line to the run with its pid (or the latest without Rank lines), a header to the latest run that has
listed its ranks but has no table, a row to the earliest run whose last row is a smaller message, a footer
to the earliest run with rows and no footer. Lines carry no pid, so rows of equal size from two processes
may be swapped between them: every run of such a group says so in a warning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Protocol

_RANK_PID = re.compile(r"^#\s*Rank\s+\d+\s+(?:Group\s+-?\d+\s+)?Pid\s+(\d+)\s")


class Lane(Protocol):
    """What routing needs to know about an open run (parser._RunState)."""

    seen_starting: bool
    seen_nthread: bool
    max_rank: int
    last_size: int
    footer_done: bool
    rank_pids: dict[int, list[str]]

    @property
    def has_table(self) -> bool: ...

    @property
    def has_rows(self) -> bool: ...

    @property
    def has_oob(self) -> bool: ...


def route(lanes: Sequence[Lane], line: str) -> int | None:
    """The index of the lane ``line`` continues, or None to leave the current one."""
    text = line.lstrip()
    if not text:
        return None
    if text[0].isdigit():
        return _row_lane(lanes, text)
    words = text.lstrip("#").split(None, 2)
    if not words:
        return None
    word = words[0]
    # Header lines go to the latest run still missing them: for processes started together the runs are alike,
    # and for a run that died during start-up followed by a retry, the retry is the latest.
    open_lanes = [i for i, lane in reversed(list(enumerate(lanes))) if not lane.has_table]
    if word == "Collective" and len(words) > 1 and words[1] == "test" and "starting" in text:
        return _first(i for i in open_lanes if not lanes[i].seen_starting and not lanes[i].seen_nthread)
    if word == "nThread":
        return _first(i for i in open_lanes if not lanes[i].seen_nthread)
    if word == "Rank":
        pid = _RANK_PID.match(text)
        if pid is not None:
            owned = (i for i, lane in enumerate(lanes) if any(pid.group(1) in p for p in lane.rank_pids.values()))
            owner = _first(owned)
            if owner is not None:
                return owner
        return _first(i for i in open_lanes if lanes[i].max_rank < 0 and lanes[i].seen_nthread)
    if word in ("size", "bytes"):
        return _first(i for i in open_lanes if lanes[i].max_rank >= 0)
    if word == "Out":
        return _first(i for i, ln in enumerate(lanes) if ln.has_rows and not ln.has_oob and not ln.footer_done)
    if word == "Avg":
        return _first(i for i, lane in enumerate(lanes) if lane.has_rows and not lane.footer_done)
    return None


def _row_lane(lanes: Sequence[Lane], text: str) -> int | None:
    token = text.split(None, 1)[0]
    if not token.isdecimal():
        return None
    size = int(token)
    tabled = [i for i, lane in enumerate(lanes) if lane.has_table and not lane.footer_done]
    growing = _first(i for i in tabled if lanes[i].last_size < size)
    return growing if growing is not None else _first(i for i in tabled if lanes[i].last_size <= size)


def _first(indices: Iterable[int]) -> int | None:
    return next(iter(indices), None)
