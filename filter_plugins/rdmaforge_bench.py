"""Filters of the benchmark role; the logic lives in rdmaforge.bench."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rdmaforge.bench.e2e import parse_output
from rdmaforge.bench.line_rate import node_line_rate


def nodes_without_gpus(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Hosts whose preflight fact reports no GPU (or that have no preflight fact at all)."""
    return [h for h in hosts if int((hostvars[h].get("rdmaforge_node") or {}).get("gpu_count", 0) or 0) == 0]


def gpu_counts(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """Each host's GPU count from its preflight fact (0 without one), for run.json."""
    return {h: int((hostvars[h].get("rdmaforge_node") or {}).get("gpu_count", 0) or 0) for h in hosts}


def port_line_rates(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]], fabric: str) -> dict[str, Any]:
    """Each host's line rate from its rails (the benchmark's ``benchmark_ports`` read), for run.json; hosts whose
    ports were not read are left out, and with none read the result is empty (the configured rate stands)."""
    rates: dict[str, Any] = {}
    for host in hosts:
        read = hostvars[host].get("benchmark_ports")
        if not isinstance(read, Mapping) or "devices" not in read:
            continue
        gpus = int((hostvars[host].get("rdmaforge_node") or {}).get("gpu_count", 0) or 0)
        rates[host] = node_line_rate(read.get("devices") or [], fabric, gpus)
    return rates


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "rdmaforge_nodes_without_gpus": nodes_without_gpus,
            "rdmaforge_gpu_counts": gpu_counts,
            "rdmaforge_port_line_rates": port_line_rates,
            "rdmaforge_e2e_result": parse_output,
        }
