"""Jinja filter that builds the ``rdmaforge_node`` fact; the parsing lives in rdmaforge.node_facts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

try:
    from rdmaforge import node_facts
except ImportError:  # ansible-playbook run by a Python without rdmaforge installed: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rdmaforge import node_facts

DOCUMENTATION = r"""
name: rdmaforge_node
short_description: build the rdmaforge_node fact from gathered facts and tool output
description:
  - C(ansible_facts | rdmaforge_node_fact(nvidia_smi=..., lspci=..., ibv_devinfo=..., sysfs_rdma=...));
    pass none for a tool that is absent or failed.
"""


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"rdmaforge_node_fact": node_facts.node_fact}
