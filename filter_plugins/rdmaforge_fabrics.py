"""The fabric profile table (rdmaforge.fabrics) for the roles: the defaults of variables such as
``rdma_core_packages``, ``benchmark_line_rates`` and ``nccl_plugin_provider`` come from it, so there is one
definition of a profile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from rdmaforge import fabrics
    _missing: ImportError | None = None
except ModuleNotFoundError as error:  # no rdmaforge package on the controller: each filter says so when used
    _missing = error


def fabric_profiles(fact: str) -> dict[str, Any]:
    """``{profile: value}`` of one fact of every fabric profile (see rdmaforge.fabrics.FACTS)."""
    return fabrics.facts(str(fact))


def default_net_plugin(fabric: Any) -> str:
    """The NCCL net plugin of the fabric profile ``fabric`` (none for a name that is not a profile): the default of
    nccl_plugin_provider, and of benchmark_e2e_net_plugin where nccl_plugin_provider is not set."""
    return fabrics.default_net_plugin(fabric)


def release_package_names(names: list[str], distribution: Any, major_version: Any) -> list[str]:
    """A profile's Debian-family package names as that distribution release calls them (rdmaforge.fabrics)."""
    return fabrics.release_names([str(name) for name in names], str(distribution), major_version)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        if _missing is not None:
            from ansible_collections.rdmaforge.cluster.plugins.module_utils.controller_package import (
                unavailable_filters,
            )

            return unavailable_filters(_missing, __file__)
        return {"rdmaforge_fabric_profiles": fabric_profiles, "rdmaforge_default_net_plugin": default_net_plugin,
                "rdmaforge_release_package_names": release_package_names}
