"""Jinja filter that builds the ``rdmaforge_node`` fact; the parsing lives in rdmaforge.node_facts."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

try:
    from rdmaforge import node_facts
    from rdmaforge.parsers import gpu_topology
except ImportError:  # ansible-playbook run by a Python without rdmaforge installed: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rdmaforge import node_facts
    from rdmaforge.parsers import gpu_topology

DOCUMENTATION = r"""
name: rdmaforge_node
short_description: build the rdmaforge_node fact from gathered facts and tool output
description:
  - C(ansible_facts | rdmaforge_node_fact(nvidia_smi=..., lspci=..., ibv_devinfo=..., sysfs_rdma=...));
    pass none for a tool that is absent or failed.
  - C(ansible_play_hosts | rdmaforge_rail_outliers(hostvars)) compares the hosts' C(rdmaforge_topology) rail
    orders (GPU0's NIC, GPU1's NIC, ...) and returns C({reference, outliers, compared}); hosts without a rail
    map (no GPU or no RDMA device) are not compared.
"""


def rail_outliers(hosts: list[str], hostvars: Mapping[str, Any]) -> dict[str, Any]:
    orders = {
        host: [rail["nic"] for rail in hostvars[host].get("rdmaforge_topology", {}).get("rails", [])]
        for host in hosts
    }
    return gpu_topology.rail_order_outliers(orders)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"rdmaforge_node_fact": node_facts.node_fact, "rdmaforge_rail_outliers": rail_outliers}
