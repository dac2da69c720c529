"""testinfra suite for any inventory: `pytest tests/infra --hosts='ansible://cluster' --ansible-inventory=INV`.

Read-only. Expectations come from the inventory itself (fabric profile, plugin provider), so the same
suite verifies the lab and a production cluster.
"""

from __future__ import annotations

from typing import Any

import pytest

from rdmaforge import fabrics
from rdmaforge.infra_expectations import fabric_of
from rdmaforge.infra_report import NODE_PROPERTY

#: The fabric profiles that use RDMA (rdmaforge.fabrics, the one table of profiles).
RDMA_PROFILES = set(fabrics.RDMA_NAMES)


@pytest.fixture(autouse=True)
def _record_node(request: pytest.FixtureRequest, record_property: Any) -> None:
    """Each per-node test records its node's inventory name in the JUnit file (infra_report.NODE_PROPERTY): the
    test id alone (``ansible://node-1-erdma``) cannot tell node ``node`` with a parameter from node ``node-1``."""
    # Only the families that keep properties (verify asks for xunit1); pytest warns on each test otherwise.
    if "host" in request.fixturenames and request.config.getini("junit_family") in ("xunit1", "legacy"):
        record_property(NODE_PROPERTY, str(request.getfixturevalue("host").backend.host))


@pytest.fixture
def hostvars(host: Any) -> dict[str, Any]:
    """The node's inventory variables (what it should look like)."""
    variables: dict[str, Any] = host.ansible.get_variables()
    return variables


@pytest.fixture
def fabric(hostvars: dict[str, Any]) -> str:
    """The node's fabric profile. A value that is no profile's name (a template testinfra does not render, an
    !unsafe or !vault value as ansible-inventory lists it) is not judged: read as text it was "no RDMA", and every
    RDMA test skipped as if the node had none."""
    return fabric_of(hostvars)
