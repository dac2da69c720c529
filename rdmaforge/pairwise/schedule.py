"""Rounds of disjoint node pairs: a round-robin tournament (N-1 rounds cover every pair once), or K random
perfect matchings for large clusters. In a round every node is in at most one pair, so a round's pairs can
run at the same time without measuring any node twice at once."""

from __future__ import annotations

import random
from collections.abc import Sequence

Pair = tuple[str, str]
Round = list[Pair]


class ScheduleError(ValueError):
    """The nodes or the round count cannot be scheduled; the message says why."""


def _check_nodes(nodes: Sequence[str]) -> list[str]:
    names = list(nodes)
    if len(names) < 2:
        raise ScheduleError(f"pairwise needs at least 2 nodes, got {len(names)}: {', '.join(names) or 'none'}")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ScheduleError(f"node names must be unique; repeated: {', '.join(duplicates)}")
    return names


def round_robin(nodes: Sequence[str]) -> list[Round]:
    """The circle method: fix the first node, rotate the others. N-1 rounds for even N, N rounds for odd N
    (one node sits out each round: the bye); every unordered pair appears exactly once."""
    names = _check_nodes(nodes)
    ring: list[str | None] = [*names, None] if len(names) % 2 else list(names)
    size = len(ring)
    rounds: list[Round] = []
    for _ in range(size - 1):
        pairs = []
        for i in range(size // 2):
            a, b = ring[i], ring[size - 1 - i]
            if a is not None and b is not None:
                pairs.append((a, b))
        rounds.append(pairs)
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def random_matchings(nodes: Sequence[str], k: int, seed: int = 0) -> list[Round]:
    """K random perfect matchings (seeded, so a run can be repeated): each round shuffles the nodes and pairs
    them off; with odd N the last node of the shuffle sits out. Pairs may repeat across rounds."""
    names = _check_nodes(nodes)
    if k < 1:
        raise ScheduleError(f"--rounds must be at least 1, got {k}")
    rng = random.Random(seed)
    rounds: list[Round] = []
    for _ in range(k):
        order = list(names)
        rng.shuffle(order)
        rounds.append([(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)])
    return rounds


def schedule(nodes: Sequence[str], rounds: int = 0, seed: int = 0) -> list[Round]:
    """``rounds`` 0: the round-robin tournament; K > 0: K random perfect matchings."""
    if rounds < 0:
        raise ScheduleError(f"--rounds must be 0 (every pair once) or a positive count, got {rounds}")
    return round_robin(nodes) if rounds == 0 else random_matchings(nodes, rounds, seed)
