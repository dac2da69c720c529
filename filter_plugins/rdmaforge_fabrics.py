"""The fabric profile table (rdmaforge.fabrics) for the roles: the defaults of variables such as
``rdma_core_packages`` and ``benchmark_line_rates`` come from it, so there is one definition of a profile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rdmaforge import fabrics


def fabric_profiles(fact: str) -> dict[str, Any]:
    """``{profile: value}`` of one fact of every fabric profile (see rdmaforge.fabrics.FACTS)."""
    return fabrics.facts(str(fact))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"rdmaforge_fabric_profiles": fabric_profiles}
