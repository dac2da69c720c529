"""Jinja filters of role workload_manifests: thin adapters from Ansible's variables to rdmaforge.workloads,
which holds the logic (and is what ``rdmaforge render`` and the tests use too)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

try:
    from rdmaforge import fabrics
    from rdmaforge.plain_data import plain
    from rdmaforge.workloads import nodes, options, plan, render
    _missing: ImportError | None = None
except ModuleNotFoundError as error:  # no rdmaforge package on the controller: each filter says so when used
    _missing = error


def option_names(_: object = None) -> list[str]:
    return options.option_names()


def is_rdma(fabric: object) -> bool:
    return fabrics.is_rdma(fabric)


def workload_plan(
    hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]], nccl_env_profiles: Mapping[str, Any]
) -> dict[str, Any]:
    """The plan for ``hosts``; each host's ``workload_manifests_node_input`` (set by the role) holds its
    options and the device files found on it, the other variables come from hostvars."""
    inputs = []
    for host in hosts:
        values = hostvars[host]
        node_input = plain(values.get("workload_manifests_node_input")) or {}
        variables = {name: plain(values[name]) for name in nodes.HOST_VARIABLES if name in values}
        inputs.append(
            nodes.HostInput(
                name=str(host),
                options=node_input.get("options") or {},
                variables=variables,
                found_device_files=node_input.get("found_device_files"),
            )
        )
    return plan.plan_from_hosts(inputs, plain(nccl_env_profiles)).to_dict()


def validate_plan(planned: Mapping[str, Any], kubernetes_version: str) -> list[str]:
    from rdmaforge.workloads import validate  # heavy: imported only when asked for

    problems: list[str] = []
    for item in plain(planned).get("files", []):
        document = item["context"].get("document")
        if document is not None:
            problems += [f"{item['path']}: {p}" for p in validate.problems(document, str(kubernetes_version))]
    return problems


def stale_warnings(planned: Mapping[str, Any], out_dir: str) -> list[str]:
    """The warning about files an earlier render left under ``out_dir`` (none or one), as `rdmaforge render` says it."""
    from pathlib import Path

    warning = render.stale_warning((item["path"] for item in plain(planned).get("files", [])), Path(str(out_dir)))
    return [] if warning is None else [warning]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        if _missing is not None:
            from ansible_collections.rdmaforge.cluster.plugins.module_utils.controller_package import (
                unavailable_filters,
            )

            return unavailable_filters(_missing, __file__)
        return {
            "rdmaforge_workload_option_names": option_names,
            "rdmaforge_workload_is_rdma": is_rdma,
            "rdmaforge_workload_plan": workload_plan,
            "rdmaforge_workload_validate": validate_plan,
            "rdmaforge_workload_stale_warnings": stale_warnings,
            **render.TEMPLATE_FILTERS,
        }
