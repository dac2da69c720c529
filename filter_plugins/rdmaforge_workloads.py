"""Jinja filters of role workload_manifests: thin adapters from Ansible's variables to rdmaforge.workloads,
which holds the logic (and is what ``rdmaforge render`` and the tests use too)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    from rdmaforge.nccl_tests.transport import FABRIC_PROFILES
    from rdmaforge.workloads import nodes, options, plan, render
except ImportError:  # ansible-playbook run by a Python without rdmaforge installed: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rdmaforge.nccl_tests.transport import FABRIC_PROFILES
    from rdmaforge.workloads import nodes, options, plan, render

DOCUMENTATION = r"""
name: rdmaforge_workloads
short_description: plan and render the training workloads of role workload_manifests
description:
  - C(rdmaforge_workload_option_names) - names of the role's options, which the role hands over.
  - C(rdmaforge_workload_is_rdma) - whether a fabric profile expects RDMA (and so RDMA device files).
  - C(rdmaforge_workload_plan) - C(hosts | rdmaforge_workload_plan(hostvars, nccl_env_profiles)):
    the files to write for the whole cluster, with the problems and warnings found.
  - C(rdmaforge_workload_validate) - problems of the plan's Kubernetes objects against their schemas.
  - C(rdmaforge_workload_shell_lines), C(rdmaforge_workload_systemd_lines), C(rdmaforge_workload_yaml) -
    what the role's templates use to write a command or a Kubernetes object.
"""


def option_names(_: object = None) -> list[str]:
    return options.option_names()


def is_rdma(fabric: object) -> bool:
    return FABRIC_PROFILES.get(str(fabric)) == "rdma"


def workload_plan(
    hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]], nccl_env_profiles: Mapping[str, Any]
) -> dict[str, Any]:
    """The plan for ``hosts``; each host's ``workload_manifests_node_input`` (set by the role) holds its
    options and the device files found on it, the other variables come from hostvars."""
    inputs = []
    for host in hosts:
        values = hostvars[host]
        node_input = render.plain(values.get("workload_manifests_node_input")) or {}
        variables = {name: render.plain(values[name]) for name in nodes.HOST_VARIABLES if name in values}
        inputs.append(
            nodes.HostInput(
                name=str(host),
                options=node_input.get("options") or {},
                variables=variables,
                found_device_files=node_input.get("found_device_files"),
            )
        )
    return plan.plan_from_hosts(inputs, render.plain(nccl_env_profiles)).to_dict()


def validate_plan(planned: Mapping[str, Any], kubernetes_version: str) -> list[str]:
    from rdmaforge.workloads import validate  # needs the test extras: imported only when asked for

    problems: list[str] = []
    for item in render.plain(planned).get("files", []):
        document = item["context"].get("document")
        if document is not None:
            problems += [f"{item['path']}: {p}" for p in validate.problems(document, str(kubernetes_version))]
    return problems


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "rdmaforge_workload_option_names": option_names,
            "rdmaforge_workload_is_rdma": is_rdma,
            "rdmaforge_workload_plan": workload_plan,
            "rdmaforge_workload_validate": validate_plan,
            **render.TEMPLATE_FILTERS,
        }
