"""Filters of the nccl_build and nccl_tests roles; the logic lives in rdmaforge.nccl_build."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

try:
    from rdmaforge import nccl_build
    _missing: ImportError | None = None
except ModuleNotFoundError as error:  # no rdmaforge package on the controller: each filter says so when used
    _missing = error


def nvcc_gencode(archs: list[str], supported: list[str], host: str = "", cuda: str = "") -> str:
    try:
        return nccl_build.nvcc_gencode(archs, supported, host, cuda)
    except nccl_build.ArchError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def nccl_arch_problem(archs: object, new_archs: object = ()) -> str:
    """nccl_build.arch_list_problem, with "" for none (a template's None would be the text "None")."""
    return nccl_build.arch_list_problem(archs, new_archs) or ""


def nccl_version_code(version: str) -> int:
    try:
        return nccl_build.version_code(version)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        if _missing is not None:
            from ansible_collections.rdmaforge.cluster.plugins.module_utils.controller_package import (
                unavailable_filters,
            )

            return unavailable_filters(_missing, __file__)
        return {
            "rdmaforge_nvcc_version": nccl_build.parse_nvcc_version,
            "rdmaforge_nvcc_gencode": nvcc_gencode,
            "rdmaforge_nccl_build_id": nccl_build.build_id,
            "rdmaforge_nccl_make_argv": nccl_build.nccl_make_argv,
            "rdmaforge_nccl_tests_make_argv": nccl_build.nccl_tests_make_argv,
            "rdmaforge_nccl_tests_build_id": nccl_build.nccl_tests_build_id,
            "rdmaforge_nccl_tests_binaries": nccl_build.nccl_tests_binaries,
            "rdmaforge_nccl_seconds": nccl_build.delta_seconds,
            "rdmaforge_nccl_builder": nccl_build.builder_of,
            "rdmaforge_nccl_version_code": nccl_version_code,
            "rdmaforge_nccl_uncovered_caps": nccl_build.uncovered_caps,
            "rdmaforge_nccl_arch_for": nccl_build.arch_for,
            "rdmaforge_nccl_arch_problem": nccl_arch_problem,
            "rdmaforge_nccl_current_builds": nccl_build.current_builds,
            "rdmaforge_nccl_other_sources": nccl_build.other_sources,
            "rdmaforge_build_manifest": nccl_build.manifest_of,
            "rdmaforge_build_link_reads": nccl_build.link_reads,
            "rdmaforge_build_link_owners": nccl_build.link_owners,
        }
