"""Filters of the benchmark role; the logic lives in rdmaforge.bench."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rdmaforge.bench.e2e import parse_output


def nodes_without_gpus(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Hosts whose preflight fact reports no GPU (or that have no preflight fact at all)."""
    return [h for h in hosts if int((hostvars[h].get("rdmaforge_node") or {}).get("gpu_count", 0) or 0) == 0]


def gpu_counts(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """Each host's GPU count from its preflight fact (0 without one), for run.json."""
    return {h: int((hostvars[h].get("rdmaforge_node") or {}).get("gpu_count", 0) or 0) for h in hosts}


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "rdmaforge_nodes_without_gpus": nodes_without_gpus,
            "rdmaforge_gpu_counts": gpu_counts,
            "rdmaforge_e2e_result": parse_output,
        }
