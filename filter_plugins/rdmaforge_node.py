"""Jinja filter that builds the ``rdmaforge_node`` fact; the parsing lives in rdmaforge.node_facts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

try:
    from rdmaforge import cluster_summary, node_facts
    from rdmaforge.parsers import gpu_topology
    _missing: ImportError | None = None
except ModuleNotFoundError as error:  # no rdmaforge package on the controller: each filter says so when used
    _missing = error


def rail_outliers(hosts: list[str], hostvars: Mapping[str, Any]) -> dict[str, Any]:
    orders = {
        host: [rail["nic"] for rail in hostvars[host].get("rdmaforge_topology", {}).get("rails", [])]
        for host in hosts
    }
    return gpu_topology.rail_order_outliers(orders)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        if _missing is not None:
            from ansible_collections.rdmaforge.cluster.plugins.module_utils.controller_package import (
                unavailable_filters,
            )

            return unavailable_filters(_missing, __file__)
        return {
            "rdmaforge_node_fact": node_facts.node_fact,
            "rdmaforge_known_gpu_count": node_facts.known_gpu_count,
            "rdmaforge_rail_outliers": rail_outliers,
            "rdmaforge_summary_entries": cluster_summary.entries,
            "rdmaforge_summary_merge": cluster_summary.merge,
            "rdmaforge_summary_port_lines": cluster_summary.port_lines,
        }
