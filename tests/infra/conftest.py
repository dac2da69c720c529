"""testinfra suite for any inventory: `pytest tests/infra --hosts='ansible://cluster' --ansible-inventory=INV`.

Read-only. Expectations come from the inventory itself (fabric profile, plugin provider), so the same
suite verifies the lab and a production cluster.
"""

from __future__ import annotations

from typing import Any

import pytest

from rdmaforge import fabrics

#: The fabric profiles that use RDMA (rdmaforge.fabrics, the one table of profiles).
RDMA_PROFILES = set(fabrics.RDMA_NAMES)


@pytest.fixture
def hostvars(host: Any) -> dict[str, Any]:
    """The node's inventory variables (what it should look like)."""
    variables: dict[str, Any] = host.ansible.get_variables()
    return variables


@pytest.fixture
def fabric(hostvars: dict[str, Any]) -> str:
    return str(hostvars.get("rdmaforge_fabric", "tcp"))
