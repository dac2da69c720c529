"""Scoring a sweep, per rail.

A pair's value is the slower of its two directions (a link is as fast as its slower way); a pair that did not
complete (hang, unreachable, failed) or moved 0 Gb/s counts as slow. A pair is *slow* when its value is below
``slow_ratio`` x the rail's reference, or below ``min_line_fraction`` x the line rate where the line rate is
known. The reference is the cluster's median of each node's fastest pair on the rail: the plain median of all
pairs would be pulled down by a bad node in a small cluster (with 3 nodes, 2 of the 3 pairs include it). Each
node's median pair is reported against the rail's median pair (``ratio_to_cluster``) and the line rate.

- A node is a *node suspect* on a rail when more than ``node_fraction`` of its pairs there are slow while its
  slow partners' other pairs are mostly fine (so the common factor is the node, not the partner).
- A slow pair whose two nodes are not node suspects, and whose nodes' other pairs are mostly fine, is a *link
  suspect*: the cable, port or path between those two nodes.
- With two nodes there is one pair and nothing to compare it with: a slow pair there is a link suspect.

A direction measured above the rail's ceiling (twice ``line_rate_gbps``, or twice the fastest port any NIC has when
no line rate is set: rdmaforge.bench.line_rate.rate_ceiling) is no measurement of the link: it is ``failed``, as a
NaN rate is, naming the pair, the value and the ceiling.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rdmaforge.bench.line_rate import CEILING_FACTOR, FASTEST_PORT_GBPS, rate_ceiling
from rdmaforge.stored import beyond_float, shown
from rdmaforge.text import fixed, named_first

Status = Literal["ok", "hang", "unreachable", "failed"]
STATUSES: tuple[str, ...] = ("ok", "hang", "unreachable", "failed")


@dataclass(frozen=True, slots=True)
class Measurement:
    """One direction of one pair on one rail: ``a`` sends to ``b``. (Slots: a sweep of 1,000 nodes holds a million of
    them, each with a dict of its own otherwise.)"""

    a: str
    b: str
    nic: str
    gbps: float | None
    status: str
    round: int = 0
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        # Its fields are scalars: asdict's deep copy was a fifth of a 1000-node report.
        return {"a": self.a, "b": self.b, "nic": self.nic, "gbps": self.gbps, "status": self.status,
                "round": self.round, "detail": self.detail}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        gbps, detail = data.get("gbps"), str(data.get("detail") or "")
        # An integer of hundreds of digits: float() would raise OverflowError. Like JSON's 1e400 (inf), not a rate.
        huge = beyond_float(gbps)
        # Interned: a sweep names each node and rail a million times, and json gives each its own string.
        found = cls(a=sys.intern(str(data["a"])), b=sys.intern(str(data["b"])), nic=sys.intern(str(data["nic"])),
                    gbps=None if gbps is None or huge else float(gbps), status=sys.intern(str(data["status"])),
                    round=int(data.get("round", 0)), detail=sys.intern(detail))  # fmt: skip
        if huge and found.status == "ok":
            why = f"not a rate: {shown(gbps)}, reported as Gb/s" + (f" ({detail})" if detail else "")
            return Measurement(found.a, found.b, found.nic, None, "failed", found.round, why)
        return checked(found)


def checked(m: Measurement) -> Measurement:
    """A measurement that says ``ok`` with no rate, or a rate that is not a finite number of 0 or more (NaN, inf,
    negative: what no link moves), is ``failed``, naming the value: it is never judged as if it were a rate. So is
    one whose status is none of STATUS_ORDER's ("OK", "passed", ""): it is not shown as if it were one."""
    if m.status not in STATUS_ORDER:
        why = f"status {shown(m.status)} is none of {', '.join(STATUS_ORDER)}" + (f" ({m.detail})" if m.detail else "")
        return Measurement(m.a, m.b, m.nic, None, "failed", m.round, why)
    if m.status != "ok" or (m.gbps is not None and math.isfinite(m.gbps) and m.gbps >= 0):
        return m
    shown_rate = "no rate" if m.gbps is None else f"not a rate: {m.gbps} Gb/s"
    why = f"{shown_rate} reported" + (f" ({m.detail})" if m.detail else "")
    return Measurement(m.a, m.b, m.nic, None, "failed", m.round, why)


@dataclass(frozen=True)
class Thresholds:
    #: A pair slower than this fraction of its rail's reference pair is slow.
    slow_ratio: float = 0.5
    #: A node is a suspect when more than this fraction of its pairs on a rail are slow.
    node_fraction: float = 0.5
    #: Line rate of one rail in Gbit/s; None when unknown (then only the rail's reference pair is).
    line_rate_gbps: float | None = None
    #: A pair slower than this fraction of the line rate is slow (only with a known line rate).
    min_line_fraction: float = 0.5

    def check(self) -> None:
        problems = []
        if not 0 < self.slow_ratio <= 1:
            problems.append(f"pairwise_slow_ratio must be in (0, 1], got {self.slow_ratio}")
        if not 0 <= self.node_fraction < 1:
            problems.append(f"pairwise_node_fraction must be in [0, 1), got {self.node_fraction}")
        if self.line_rate_gbps is not None and not (math.isfinite(self.line_rate_gbps) and self.line_rate_gbps > 0):
            problems.append(f"pairwise_line_rate_gbps must be a positive number or null, got {self.line_rate_gbps}")
        if not 0 < self.min_line_fraction <= 1:
            problems.append(f"pairwise_min_line_fraction must be in (0, 1], got {self.min_line_fraction}")
        if problems:
            raise ValueError("; ".join(problems))


def ceiling(limits: Thresholds) -> tuple[float, str]:
    """The highest rate (Gb/s) one direction of a pair can show on a rail, and where that bound comes from."""
    rate = limits.line_rate_gbps
    if rate is not None:
        return rate_ceiling(rate), f"{CEILING_FACTOR:g} x pairwise_line_rate_gbps {rate:g}"
    return rate_ceiling(FASTEST_PORT_GBPS), (f"{CEILING_FACTOR:g} x {FASTEST_PORT_GBPS:g} Gb/s, the fastest port a NIC "
                                             "has: no pairwise_line_rate_gbps")  # fmt: skip


def implausible(m: Measurement, limits: Thresholds) -> bool:
    """Whether ``m`` says ``ok`` with a rate above the rail's ceiling."""
    return m.status == "ok" and m.gbps is not None and m.gbps > ceiling(limits)[0]


def plausible(m: Measurement, limits: Thresholds) -> Measurement:
    """An ``ok`` measurement above the rail's ceiling is ``failed``, its detail naming the pair, the value and the
    ceiling: a corrupt result or a broken timer (or a line rate set far too low) is never a healthy link."""
    if not implausible(m, limits):
        return m
    top, source = ceiling(limits)
    why = (f"implausible: {m.a}->{m.b} on {m.nic} measured {m.gbps:g} Gb/s, above the ceiling {top:g} Gb/s ({source}): "
           "a corrupt result or a broken timer, or pairwise_line_rate_gbps set too low; not a rate of this link"
           + (f" ({m.detail})" if m.detail else ""))  # fmt: skip
    return Measurement(m.a, m.b, m.nic, None, "failed", m.round, why)


def ceiling_note(measurements: Iterable[Measurement], limits: Thresholds, most: int = 4) -> str | None:
    """One line naming the measurements above the ceiling (the first ``most``, then how many more), for the table's
    notes; None when there is none."""
    found = [m for m in measurements if implausible(checked(m), limits)]
    if not found:
        return None
    top, source = ceiling(limits)
    named = named_first([f"{m.a}->{m.b} on {m.nic} {m.gbps:g} Gb/s" for m in found], most)
    return (f"failed as implausible, above the ceiling {top:g} Gb/s ({source}): {named}; not judged as "
            "rates of their links")


def admitted(measurements: Iterable[Measurement], limits: Thresholds) -> list[Measurement]:
    """The measurements as they are judged: a rate that is no number (``checked``) or above the ceiling
    (``plausible``) is a failed measurement."""
    return [plausible(checked(m), limits) for m in measurements]


@dataclass(frozen=True)
class PairResult:
    """Both directions of a pair on a rail, reduced to one value."""

    a: str
    b: str
    nic: str
    gbps: float | None  # the slower direction; None when a direction did not complete
    status: str  # the worst status of the two directions ("missing" when a direction was never measured)
    slow: bool = False

    def other(self, node: str) -> str:
        return self.b if node == self.a else self.a


@dataclass(frozen=True)
class NodeScore:
    node: str
    nic: str
    median_gbps: float | None
    ratio_to_cluster: float | None
    ratio_to_line_rate: float | None
    pairs: int
    slow_pairs: int


@dataclass(frozen=True)
class Suspect:
    node: str  # a node name, "a<->b" for a link, or "rail NIC" for slow pairs no node or link explains
    nic: str
    kind: Literal["node", "link", "rail"]
    evidence: str
    nodes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "nic": self.nic, "kind": self.kind, "evidence": self.evidence,
                "nodes": list(self.nodes)}  # fmt: skip


@dataclass
class RailScore:
    nic: str
    median_gbps: float | None
    #: What a pair is judged against: the median of each node's fastest pair.
    reference_gbps: float | None
    pairs: list[PairResult] = field(default_factory=list)
    nodes: list[NodeScore] = field(default_factory=list)
    suspects: list[Suspect] = field(default_factory=list)


@dataclass(frozen=True)
class SingleStream:
    """Seed 003's check, one direction of one pair on one rail: one TCP stream against ``streams`` streams."""

    a: str
    b: str
    nic: str
    streams: int
    single_gbps: float | None
    multi_gbps: float | None
    #: single_gbps / multi_gbps; None when either run did not complete. Measured, never judged.
    share: float | None
    status: str
    detail: str = ""


def single_stream(single: Sequence[Measurement], multi: Sequence[Measurement], streams: int) -> list[SingleStream]:
    """Each one-stream measurement beside the same direction's multi-stream one of the sweep."""
    by_direction = {(m.a, m.b, m.nic): m for m in multi}
    found = []
    for one in sorted(single, key=lambda m: (m.nic, m.a, m.b)):
        many = by_direction.get((one.a, one.b, one.nic))
        multi_gbps = many.gbps if many is not None and many.status == "ok" else None
        single_gbps = one.gbps if one.status == "ok" else None
        share = single_gbps / multi_gbps if single_gbps is not None and multi_gbps else None
        found.append(SingleStream(one.a, one.b, one.nic, streams, single_gbps, multi_gbps, share, one.status,
                                  one.detail))  # fmt: skip
    return found


def _worst(statuses: Iterable[str]) -> str:
    return max(statuses, key=lambda s: STATUS_ORDER.get(s, 1))


def directions(measurements: Iterable[Measurement], nic: str) -> dict[tuple[str, str], Measurement]:
    """Each direction measured on ``nic``, reduced to one measurement: the worst of its rounds (``--rounds K`` and
    the round-robin can measure a pair more than once). A hang or a slow run in any round stays the direction's
    result, not hidden by a later good one: a failed status wins over ok, and among ok runs the slowest."""
    found: dict[tuple[str, str], Measurement] = {}
    for m in measurements:
        if m.nic != nic:
            continue
        seen = found.get((m.a, m.b))
        if seen is None or _rank(m) > _rank(seen):
            found[(m.a, m.b)] = m
    return found


def _rank(m: Measurement) -> tuple[int, float]:
    """Worse is greater: the status first, then (among ok runs) the lower rate."""
    return (STATUS_ORDER.get(m.status, 1), -(m.gbps if m.gbps is not None else math.inf))


#: Statuses from best to worst ("missing": a direction never measured).
STATUS_ORDER = {"ok": 0, "failed": 1, "hang": 2, "unreachable": 3, "missing": 4}


def combine(measurements: Sequence[Measurement], nic: str) -> list[PairResult]:
    """One PairResult per unordered pair measured on ``nic``: each direction the worst of its rounds (directions),
    the pair the slower direction (a failed one, or one never measured, makes the pair that status)."""
    by_direction = directions(measurements, nic)
    pairs: dict[tuple[str, str], PairResult] = {}
    for a, b in by_direction:
        key = (min(a, b), max(a, b))
        if key in pairs:
            continue
        both = [by_direction.get(key), by_direction.get((key[1], key[0]))]
        statuses = [m.status if m is not None else "missing" for m in both]
        status = _worst(statuses)
        values = [m.gbps for m in both if m is not None and m.status == "ok" and m.gbps is not None]
        gbps = min(values) if status == "ok" and len(values) == 2 else None
        pairs[key] = PairResult(key[0], key[1], nic, gbps, status)
    return [pairs[k] for k in sorted(pairs)]


def _by_node(pairs: Sequence[PairResult], nodes: Sequence[str]) -> dict[str, list[PairResult]]:
    """Each of ``nodes``' pairs, in ``pairs``' order."""
    mine: dict[str, list[PairResult]] = {n: [] for n in nodes}
    for pair in pairs:
        for node in (pair.a, pair.b) if pair.a != pair.b else (pair.a,):
            if node in mine:
                mine[node].append(pair)
    return mine


def _median(values: Iterable[float | None]) -> float | None:
    present = sorted(v for v in values if v is not None)
    if not present:
        return None
    middle = len(present) // 2
    if len(present) % 2:
        return present[middle]
    # Halved first: statistics.median's (a + b) / 2 is inf for two finite rates near 1e308 (a rail reference of
    # inf, every pair "slow"); halving a float is exact, so below that the result is the same float.
    return present[middle - 1] / 2 + present[middle] / 2


def _is_slow(pair: PairResult, median: float | None, limits: Thresholds) -> bool:
    if pair.status != "ok" or pair.gbps is None or pair.gbps <= 0:
        return True  # did not complete, or moved nothing (a rail of zeros has a reference of 0: nothing is below it)
    if median is not None and pair.gbps < limits.slow_ratio * median:
        return True
    return limits.line_rate_gbps is not None and pair.gbps < limits.min_line_fraction * limits.line_rate_gbps


def _line_rate_text(pairs: Sequence[PairResult], limits: Thresholds) -> str:
    """", below 0.5 x line rate 100 Gb/s" when a completed pair of ``pairs`` is slow against the line rate (the
    reference alone would not say why it is slow)."""
    rate = limits.line_rate_gbps
    if rate is None or not any(p.gbps is not None and p.gbps < limits.min_line_fraction * rate for p in pairs):
        return ""
    return f", below {limits.min_line_fraction:g} x line rate {rate:g} Gb/s"


def _pair_text(pair: PairResult) -> str:
    return f"{fixed(pair.gbps, 2)} Gb/s" if pair.gbps is not None else pair.status


def score_rail(nic: str, measurements: Sequence[Measurement], nodes: Sequence[str], limits: Thresholds) -> RailScore:
    raw = combine(measurements, nic)
    median = _median(p.gbps for p in raw)
    # Each node's pairs gathered in one pass over them: a scan of every pair per node was n^3 work per rail (two
    # minutes a rail at 1000 nodes, review round 21b).
    raw_of_node = _by_node(raw, nodes)
    best = [max((p.gbps for p in raw_of_node[n] if p.gbps is not None), default=None) for n in nodes]
    reference = _median(best)
    fastest = max((p.gbps for p in raw if p.gbps is not None), default=None)
    # A rail split in two: most nodes' fastest pair is slow against the rail's fastest pair. The median would make
    # the slow majority the norm; the fastest pair shows what the rail carries, so it is the reference.
    split_from = reference if reference is not None and fastest and reference < limits.slow_ratio * fastest else None
    if split_from is not None:
        reference = fastest
    pairs = [PairResult(p.a, p.b, p.nic, p.gbps, p.status, _is_slow(p, reference, limits)) for p in raw]
    of_node = _by_node(pairs, nodes)
    slow_of_node = {n: sum(p.slow for p in mine) for n, mine in of_node.items()}
    by_key = {(p.a, p.b): p for p in pairs}  # combine's key: one PairResult per unordered pair, a < b

    def slow_share(node: str, excluding: str | None = None) -> float | None:
        """The share of ``node``'s pairs that are slow, leaving out its pair with ``excluding``; None when it has no
        other pair (nothing shows it fine or slow: one random round, or two nodes)."""
        total, slow = len(of_node[node]), slow_of_node[node]
        left_out = by_key.get((min(node, excluding), max(node, excluding))) if excluding is not None else None
        if left_out is not None:
            total, slow = total - 1, slow - left_out.slow
        return slow / total if total else None

    def fine(share: float | None) -> bool:
        return share is not None and share <= limits.node_fraction

    scores, suspects = [], []
    node_suspects: set[str] = set()
    for n in nodes:
        mine = of_node[n]
        node_median = _median(p.gbps for p in mine)
        ratio = node_median / median if node_median is not None and median else None
        to_line = node_median / limits.line_rate_gbps if node_median is not None and limits.line_rate_gbps else None
        slow = [p for p in mine if p.slow]
        scores.append(NodeScore(n, nic, node_median, ratio, to_line, len(mine), len(slow)))
        # One pair cannot tell the node from the link (or the partner): that pair is named as a link below.
        if len(nodes) < 3 or len(mine) < 2 or len(slow) / len(mine) <= limits.node_fraction:
            continue
        # The partners of the slow pairs must be fine elsewhere, or the slowness is not this node's.
        partners_fine = [fine(slow_share(p.other(n), excluding=n)) for p in slow]
        if sum(partners_fine) * 2 > len(slow):
            node_suspects.add(n)
            shown = ", ".join(f"{p.other(n)} {_pair_text(p)}" for p in slow)
            where = (f"rail reference {fixed(reference, 2)} Gb/s" if reference is not None
                     else "no pair on this rail completed") + _line_rate_text(slow, limits)  # fmt: skip
            suspects.append(Suspect(n, nic, "node", f"{len(slow)} of {len(mine)} pairs slow ({shown}); {where}; "
                                    "their partners' other pairs are fine", (n,)))  # fmt: skip
    for p in pairs:
        if not p.slow or p.a in node_suspects or p.b in node_suspects:
            continue
        a_share, b_share = slow_share(p.a, excluding=p.b), slow_share(p.b, excluding=p.a)
        alone = a_share is None and b_share is None  # the pair is all either node was measured in
        # A node with no other pair shows nothing either way: the pair is the link's when the other node is fine.
        if alone or all(share is None or fine(share) for share in (a_share, b_share)):
            where = (f"rail reference {fixed(reference, 2)} Gb/s" if reference is not None
                     else "no pair completed") + _line_rate_text([p], limits)  # fmt: skip
            lone = p.a if a_share is None else p.b
            others = ("both nodes' other pairs are fine" if a_share is not None and b_share is not None
                      else f"{lone} has no other pair on this rail: cannot tell the link from {lone}" if not alone
                      else "only two nodes: cannot tell which" if len(nodes) == 2
                      else "neither node has another pair on this rail (too few rounds): "
                           "cannot tell which")  # fmt: skip
            suspects.append(Suspect(f"{p.a}<->{p.b}", nic, "link",
                                    f"{p.a}-{p.b} {_pair_text(p)} ({where}); {others}", (p.a, p.b)))  # fmt: skip
    blamed = {frozenset(s.nodes) for s in suspects if s.kind == "link"}
    unexplained = [p for p in pairs if p.slow and not ({p.a, p.b} & node_suspects or frozenset((p.a, p.b)) in blamed)]
    # (With no pair completed there is nothing to compare with: the rail is reported as not judged instead.)
    if unexplained and reference is not None:
        suspects.append(rail_suspect(nic, unexplained, len(pairs), reference, limits, split_from))
    return RailScore(nic, median, reference, pairs, scores, suspects)


def rail_suspect(nic: str, slow: Sequence[PairResult], total: int, reference: float | None,
                 limits: Thresholds, split_from: float | None = None) -> Suspect:  # fmt: skip
    """Slow pairs that no node or link explains: slow everywhere (the rail, its switch, the whole fabric, or a
    reference too low for the line rate), or too mixed to point at one node. Never a clean result. ``split_from``:
    the median of the nodes' fastest pairs, when it was below slow_ratio x the rail's fastest pair (the reference)."""
    shown = ", ".join(f"{p.a}-{p.b} {_pair_text(p)}" for p in slow[:4]) + (", ..." if len(slow) > 4 else "")
    against = [f"rail reference {fixed(reference, 2)} Gb/s" if reference is not None else "no reference"]
    if split_from is not None:
        against[0] += (f", its fastest pair: most nodes' fastest pair ({fixed(split_from, 2)} Gb/s, the median) is "
                       f"below {limits.slow_ratio:g} x it")  # fmt: skip
    if limits.line_rate_gbps is not None:
        against.append(f"line rate {limits.line_rate_gbps:g} Gb/s")
    nodes = tuple(dict.fromkeys(n for p in slow for n in (p.a, p.b)))
    return Suspect(f"rail {nic}", nic, "rail", f"{len(slow)} of {total} pairs slow ({shown}; {', '.join(against)}) "
                   "and no single node or link to blame: the rail, its switch or the fabric", nodes)  # fmt: skip


def score(measurements: Sequence[Measurement], nodes: Sequence[str], rails: Sequence[str],
          limits: Thresholds) -> list[RailScore]:  # fmt: skip
    limits.check()
    measurements = admitted(measurements, limits)
    return [score_rail(nic, measurements, nodes, limits) for nic in rails]


def suspects_first(rails: Sequence[RailScore]) -> list[Suspect]:
    """Node suspects, then link suspects, then rails; each by rail and name."""
    every = [s for rail in rails for s in rail.suspects]
    order = {"node": 0, "link": 1, "rail": 2}
    return sorted(every, key=lambda s: (order[s.kind], s.nic, s.node))
