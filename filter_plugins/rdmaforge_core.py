"""Filters for rdmaforge roles; the logic lives in rdmaforge.parsers (one implementation for filters,
modules, CLI and tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible.utils.display import Display

try:
    from rdmaforge import batch_size, mpi_hosts, network_retry, paths, ssh_mesh
    from rdmaforge.parsers import gpg, nccl_env, nccl_net_api, packages
    _missing: ImportError | None = None
except ModuleNotFoundError as error:  # no rdmaforge package on the controller: each filter says so when used
    _missing = error


def batch_size_problem(value: object, variable: str) -> str:
    """'' for a batch size Ansible's serial reads as meant, else the line that refuses it (rdmaforge.batch_size)."""
    return batch_size.problem(variable, value)


def installed_versions(query_output: str, names: list[str]) -> dict[str, str]:
    """{name: version} for the given names that a package query (rdmaforge_package_query_argv) found installed."""
    return packages.installed_versions(query_output, names)


def package_query_argv(names: list[str], manager: str) -> list[str]:
    """The dpkg-query or rpm command line that prints the installed versions of ``names``."""
    return packages.query_argv(manager, names)


def packages_absent(query_output: str, names: list[str]) -> list[str]:
    """The names that a package query (rdmaforge_package_query_argv) did not find installed."""
    return packages.absent(query_output, names)


def packages_pending(query_output: str, names: list[str]) -> list[str]:
    """The specs an install must still hand to the package manager (absent, or with a version constraint)."""
    return packages.pending(query_output, names)


def package_removal_argv(names: list[str], manager: str) -> list[str]:
    """The dry run of removing ``names`` (apt-get -s remove, rpm -e --test)."""
    return packages.removal_argv(manager, names)


def package_file_name_argv(path: str, manager: str) -> list[str]:
    """The command that prints the name of the package in a downloaded .deb or .rpm file."""
    return packages.file_name_argv(manager, path)


def nccl_env_topology(enabled: Any, topology: Any) -> dict[str, Any]:
    """nccl_env_ib_hca_from_topology: ``settings`` (NCCL_IB_HCA from the node's rail map, {} when not enabled) and
    ``problem`` (why the node cannot have them, else "")."""
    settings, problem = nccl_env.topology_settings(enabled, topology)
    return {"settings": settings, "problem": problem}


def network_retry_done(result: dict[str, Any], retries: int, delay: float) -> bool:
    """The until condition of a retried network task: True once it succeeded or failed for good; after a failure
    that another try follows, first waits what a doubling backoff adds to the task's fixed delay."""
    return network_retry.settled(result, retries, delay, warn=Display().warning)


def package_manual_argv(manager: str) -> list[str]:
    """The command that lists the packages installed on purpose."""
    return packages.manual_argv(manager)


def role_validators(roles_dir: str) -> list[str]:
    """Roles beside the caller that ship read-only checks in tasks/validate.yml (run by preflight)."""
    return sorted(p.parent.parent.name for p in Path(roles_dir).glob("*/tasks/validate.yml"))


def workspace_path(relative: str) -> str:
    """``relative`` under the workspace: the checkout, or (installed) the directory the run started in."""
    return str(paths.WORKSPACE / relative)


def controller_cache(relative: str) -> str:
    """``relative`` under the controller cache (RDMAFORGE_CONTROLLER_CACHE, default ~/.cache/rdmaforge): the
    directory the converge digest watches, so the roles' keys, keyrings and builds are where it looks."""
    return str(paths.CONTROLLER_CACHE / relative)


def package_path(relative: str) -> str:
    """``relative`` under the installed rdmaforge package (a file the roles copy to the nodes)."""
    return str(paths.PACKAGE_DIR / relative)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        if _missing is not None:
            from ansible_collections.rdmaforge.cluster.plugins.module_utils.controller_package import (
                unavailable_filters,
            )

            return unavailable_filters(_missing, __file__)
        return {
            "rdmaforge_gpg_fingerprints": gpg.fingerprints,
            "rdmaforge_gpg_armor": gpg.armor,
            "rdmaforge_network_retry_done": network_retry_done,
            "rdmaforge_batch_size_problem": batch_size_problem,
            "rdmaforge_batch_size_group": batch_size.group_name,
            "rdmaforge_batch_size_of": batch_size.from_groups,
            "rdmaforge_installed_versions": installed_versions,
            "rdmaforge_package_query_argv": package_query_argv,
            "rdmaforge_packages_absent": packages_absent,
            "rdmaforge_packages_pending": packages_pending,
            "rdmaforge_package_removal_argv": package_removal_argv,
            "rdmaforge_package_manual_argv": package_manual_argv,
            "rdmaforge_package_file_name_argv": package_file_name_argv,
            "rdmaforge_package_removal_blockers": packages.removal_blockers,
            "rdmaforge_package_dry_run_problem": packages.dry_run_problem,
            "rdmaforge_rpm_requirements": packages.rpm_requirements,
            "rdmaforge_role_validators": role_validators,
            "rdmaforge_workspace_path": workspace_path,
            "rdmaforge_controller_cache": controller_cache,
            "rdmaforge_package_path": package_path,
            "rdmaforge_mpi_names": mpi_hosts.names,
            "rdmaforge_mpi_host_list": mpi_hosts.host_list,
            "rdmaforge_mpi_missing_answers": mpi_hosts.missing_answers,
            "rdmaforge_ssh_peer_names": ssh_mesh.peer_names,
            "rdmaforge_ssh_peer_forms": ssh_mesh.peer_forms,
            "rdmaforge_ssh_known_hosts_lines": ssh_mesh.known_hosts_lines,
            "rdmaforge_ssh_left_out_share": ssh_mesh.left_out_share,
            "rdmaforge_ssh_mesh_matrix": ssh_mesh.matrix,
            "rdmaforge_ssh_mesh_failures": ssh_mesh.failures,
            "rdmaforge_ssh_mesh_ring_peers": ssh_mesh.ring_peers,
            "rdmaforge_ssh_trust_logins": ssh_mesh.recorded_logins,
            "rdmaforge_nccl_env_merge": nccl_env.merge,
            "rdmaforge_nccl_env_topology": nccl_env_topology,
            "rdmaforge_nccl_env_gpu_count": nccl_env.with_gpu_count,
            "rdmaforge_nccl_env_problems": nccl_env.problems,
            "rdmaforge_nccl_env_unknown": nccl_env.unknown_names,
            "rdmaforge_nccl_env_node_problems": nccl_env.node_problems,
            "rdmaforge_nccl_env_split_nccl": lambda env: nccl_env.split(env)[0],
            "rdmaforge_nccl_env_split_other": lambda env: nccl_env.split(env)[1],
            "rdmaforge_nccl_conf_render": nccl_env.render_conf,
            "rdmaforge_nccl_plugin_api_versions": nccl_env.plugin_api_versions,
            "rdmaforge_version_in_range": nccl_net_api.version_in_range,
            "rdmaforge_api_list": nccl_net_api.format_versions,
        }
