"""Filters for rdmaforge roles; the logic lives in rdmaforge.parsers (one implementation for filters,
modules, CLI and tests)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    from rdmaforge import ssh_mesh
    from rdmaforge.parsers import gpg, nccl_env, nccl_net_api
except ImportError:  # ansible-playbook run by a Python without rdmaforge installed: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rdmaforge import ssh_mesh
    from rdmaforge.parsers import gpg, nccl_env, nccl_net_api


def installed_versions(packages: dict[str, list[dict[str, Any]]], names: list[str]) -> dict[str, str]:
    """{name: version} for the given names that package_facts found installed."""
    return {name: str(packages[name][0].get("version")) for name in names if packages.get(name)}


def role_validators(roles_dir: str) -> list[str]:
    """Roles beside the caller that ship read-only checks in tasks/validate.yml (run by preflight)."""
    return sorted(p.parent.parent.name for p in Path(roles_dir).glob("*/tasks/validate.yml"))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "gpg_fingerprints": gpg.fingerprints,
            "installed_versions": installed_versions,
            "rdmaforge_role_validators": role_validators,
            "ssh_peer_names": ssh_mesh.peer_names,
            "ssh_peer_forms": ssh_mesh.peer_forms,
            "ssh_known_hosts_lines": ssh_mesh.known_hosts_lines,
            "ssh_mesh_matrix": ssh_mesh.matrix,
            "ssh_mesh_failures": ssh_mesh.failures,
            "nccl_env_merge": nccl_env.merge,
            "nccl_env_problems": nccl_env.problems,
            "nccl_env_unknown": nccl_env.unknown_names,
            "nccl_env_split_nccl": lambda env: nccl_env.split(env)[0],
            "nccl_env_split_other": lambda env: nccl_env.split(env)[1],
            "nccl_conf_render": nccl_env.render_conf,
            "nccl_plugin_api_versions": nccl_env.plugin_api_versions,
            "rdmaforge_version_in_range": nccl_net_api.version_in_range,
            "rdmaforge_api_list": nccl_net_api.format_versions,
        }
