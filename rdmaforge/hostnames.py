"""Host names as the tools print them. One rule, shared by the inventory checks, SSH trust and the benchmark report:
nccl-tests' ``#  Rank`` lines, ``hostname -s`` and ssh_known_hosts' short aliases all cut a name at its first dot."""

from __future__ import annotations


def short_name(name: str) -> str:
    """The part of a host name before the first dot: ``node1.example.com`` -> ``node1``."""
    return name.split(".", 1)[0]
