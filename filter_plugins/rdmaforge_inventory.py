"""Jinja filters for the preflight and cluster_hosts roles: thin adapters from Ansible's variables to
rdmaforge.inventory_checks, which holds the rules (and is what the CLI and tests use too)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    from rdmaforge import inventory_checks as checks
except ImportError:  # ansible-playbook run by a Python without rdmaforge installed: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rdmaforge import inventory_checks as checks

DOCUMENTATION = r"""
name: rdmaforge_inventory
short_description: inventory checks of the preflight role, and the /etc/hosts lines of cluster_hosts
description:
  - C(rdmaforge_role_argument_specs) - the main options of every role in a roles directory.
  - C(rdmaforge_inventory_report) - every inventory problem of every node (no connection needed).
  - C(rdmaforge_os_report) - whether a node's OS is supported, legacy (warning) or unsupported.
  - C(rdmaforge_etc_hosts) - the lines cluster_hosts writes into /etc/hosts.
  - C(rdmaforge_free_space_problems) - where a node lacks the free space it needs, from C(df -P -k).
"""


def role_argument_specs(roles_dir: str) -> list[dict[str, Any]]:
    """``[{role, path, options}]`` for every role beside the caller (runs on the controller)."""
    return [{"role": s.role, "path": s.path, "options": s.options} for s in checks.discover_argument_specs(roles_dir)]


def _argspec_results(registered: object) -> list[checks.ArgspecResult]:
    """Pull (role, errors, options) out of a registered ``validate_argument_spec`` loop; the role comes
    from the ``validate_args_context`` the task passed, the options from the failed result."""
    results = registered.get("results", []) if isinstance(registered, Mapping) else []
    parsed = []
    for result in results:
        errors = result.get("argument_errors") or []
        if errors:
            context = result.get("validate_args_context") or {}
            parsed.append(
                checks.ArgspecResult(
                    role=str(context.get("role", "?")),
                    errors=[str(e) for e in errors],
                    options=result.get("argument_spec_data") or {},
                )
            )
    return parsed


def inventory_report(
    hostvars: Mapping[str, Mapping[str, Any]],
    cluster_hosts: Sequence[str],
    play_hosts: Sequence[str],
    argspec_var: str = "preflight_argspec_results",
) -> dict[str, dict[str, list[str]]]:
    """``{'problems': {host: [line, ...]}}`` for every host of the cluster group (and of the play)."""
    nodes = []
    for host in cluster_hosts:
        values = hostvars[host]
        address = values.get("ansible_host")
        nodes.append(
            checks.NodeInput(
                name=str(host),
                address=None if address is None else str(address),
                fabric=values.get("rdmaforge_fabric"),
                values=values,
                argspecs=_argspec_results(values.get(argspec_var)),
                in_play=host in play_hosts,
            )
        )
    return {"problems": checks.inventory_report(nodes)}


def os_report(
    facts: Mapping[str, Any],
    host: str,
    supported: Mapping[str, Any],
    legacy: Mapping[str, Any] | None = None,
) -> dict[str, list[str]]:
    """``{'problems': [...], 'warnings': [...]}`` for one host's gathered facts."""
    problems, warnings = checks.os_problems(
        host,
        str(facts.get("distribution", "")),
        str(facts.get("distribution_version", "")),
        str(facts.get("distribution_major_version", "")),
        supported,
        legacy,
    )
    return {"problems": [p.message for p in problems], "warnings": warnings}


def etc_hosts(cluster_hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``{'lines': [...], 'problems': [...]}``: the /etc/hosts lines for every node of the cluster."""
    entries = []
    for host in cluster_hosts:
        values = hostvars[host]
        address = values.get("ansible_host")
        facts = values.get("ansible_facts") or {}
        default_ipv4 = (facts.get("default_ipv4") or {}).get("address")
        entries.append(
            checks.HostsEntry(
                str(host),
                None if address is None else str(address),
                None if default_ipv4 is None else str(default_ipv4),
            )
        )
    lines, problems = checks.etc_hosts_lines(entries)
    return {"lines": lines, "problems": problems}


def free_space_problems(df_output: str, host: str, needs: Mapping[str, object]) -> list[str]:
    """Problems (one line each) where the paths of ``needs`` lack their MiB; ``df_output`` lists them in order."""
    return checks.free_space_problems(host, list(needs), df_output, needs)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "rdmaforge_free_space_problems": free_space_problems,
            "rdmaforge_role_argument_specs": role_argument_specs,
            "rdmaforge_inventory_report": inventory_report,
            "rdmaforge_os_report": os_report,
            "rdmaforge_etc_hosts": etc_hosts,
        }
