"""Numbers as a person reads them in rdmaforge's text output (tables, verdict lines, summary.md).

A corrupt or forged log can hold a finite but absurd value (a bus bandwidth of 1e308): fixed-point notation prints
it as 309 digits that push a table apart. Beyond ``LARGE`` the numbers are shown in four significant digits with an
exponent instead; below it, as before.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

#: From here on a fixed-point number is mostly digits nobody reads (no bandwidth or throughput gets near it).
LARGE = 1e6


def fixed(value: float, places: int = 1, signed: bool = False) -> str:
    """``value`` with ``places`` decimals, or as ``1.235e+09`` from LARGE on (and inf/nan as Python writes them);
    with ``signed`` a ``+`` before what is not negative (an offset)."""
    sign = "+" if signed else ""
    if math.isfinite(value) and abs(value) >= LARGE:
        return f"{value:{sign}.4g}"
    return f"{value:{sign}.{places}f}"


def figure(value: float) -> str:
    """A rate or threshold for a sentence: ``fixed`` from 10 on, three significant digits below it, so that a small
    line rate (0.625 GB/s, a 5 Gbit/s link) is not shown as 0.6 beside its own 80% of 0.5."""
    if value != 0 and math.isfinite(value) and abs(value) < 10:
        return f"{value:.3g}"
    return fixed(value)


def distinct(value: float, threshold: float, shown: str, shown_threshold: str) -> tuple[str, str]:
    """``shown`` and ``shown_threshold`` (a value and its threshold as a sentence writes them), with as many
    significant digits as it takes for two different numbers to read differently: a fail was printed as "320.0
    GB/s against 320.0 GB/s" and "linearity 0.80 is below 0.8" (review round 27c)."""
    if value == threshold or not (math.isfinite(value) and math.isfinite(threshold)):
        return shown, shown_threshold
    try:
        if float(shown) != float(shown_threshold):  # "0.80" and "0.8" read the same
            return shown, shown_threshold
    except ValueError:
        if shown != shown_threshold:
            return shown, shown_threshold
    for digits in range(4, 18):
        left, right = f"{value:.{digits}g}", f"{threshold:.{digits}g}"
        if left != right:
            return left, right
    return repr(value), repr(threshold)


def percent(fraction: float) -> str:
    """``fraction`` as a whole percentage (0.93 -> 93%), or as ``1.235e+09%`` when that is LARGE or more, or with
    the digits it needs when it is not 0 but below half a percent (1e-300 is ``1e-298%``, never ``0%``)."""
    if math.isfinite(fraction) and abs(fraction * 100) >= LARGE:
        return f"{fraction * 100:.4g}%"
    if fraction != 0 and abs(fraction) < 0.005:
        return f"{fraction * 100:.3g}%"
    return f"{fraction:.0%}"


def named_first(names: Sequence[str], most: int) -> str:
    """The first ``most`` of ``names``, comma-separated, then how many more there are (``a, b and 3 more``): a list
    of hosts, rows or values a line of text names without growing with the cluster."""
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


#: How many hosts, nodes or logs a reason names before it only counts the rest: a verdict line at 1,000 nodes stays
#: one a person can read and paste into a ticket.
NAMED = 8


def listed(names: Iterable[str], most: int = NAMED) -> str:
    """``names`` comma-separated, the first ``most`` of them, then how many more (named_first)."""
    return named_first(list(names), most)


def by_value(values: Mapping[str, str], most: int = 5) -> str:
    """``{host: value}`` as the hosts of each value, the smallest group first, each group's hosts named up to ``most``
    (``node500: 4; node1, node2, node3, node4, node5 and 994 more: 8``): the odd node first, and a line that does
    not grow with the cluster (it listed all 1000 hosts: review round 21c)."""
    groups: dict[str, list[str]] = {}
    for host, value in values.items():
        groups.setdefault(value, []).append(host)
    ordered = sorted(groups.items(), key=lambda group: len(group[1]))
    return "; ".join(f"{named_first(hosts, most)}: {value}" for value, hosts in ordered)


def help_text(docstring: str | None) -> str:
    """A module docstring as a command's --help description: without reST's double backquotes."""
    return (docstring or "").replace("``", "")
