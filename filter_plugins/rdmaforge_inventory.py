"""Jinja filters for the preflight and cluster_hosts roles: thin adapters from Ansible's variables to
rdmaforge.inventory_checks, which holds the rules (and is what the CLI and tests use too)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    from rdmaforge import inventory_checks as checks
    from rdmaforge import inventory_files, role_defaults
    _missing: ImportError | None = None
except ModuleNotFoundError as error:  # no rdmaforge package on the controller: each filter says so when used
    _missing = error


def role_argument_specs(roles_dir: str) -> dict[str, dict[str, Any]]:
    """``{options, owners}``: every role's options beside the caller merged into one spec, and the role that owns
    each option (runs on the controller)."""
    return checks.merged_argument_specs(checks.discover_argument_specs(roles_dir))


def preload(filter_dir: Path) -> None:
    """Run by the filter_preload callback in the controller before workers fork: the role specs are parsed once, and
    every worker (one per node) inherits them. Not the variable names the misspelling check knows (every role,
    playbook and module read, about 0.2 s): their one reader is preflight's run_once inventory report, a single
    worker, so reading them here would only add that to every run of every playbook, preflight or not."""
    roles = filter_dir.parent.parent / "roles"  # the collection's roles, beside plugins/filter
    if roles.is_dir():
        checks.discover_argument_specs(roles)


def _argspec_results(specs: Mapping[str, Any] | None, values: Mapping[str, Any]) -> list[checks.ArgspecResult]:
    """The errors of one node's role variables against ``specs`` (every role's options merged, and the role that
    owns each)."""
    if not specs:
        return []
    errors = checks.argspec_errors(specs["options"], values)
    # "*": an error that names no option of any role (the problem line then says so). Kept without errors too: the
    # checks Ansible's spec does not make (a list given as text) read its options.
    return [checks.ArgspecResult("*", errors, specs["options"], specs["owners"])]


def inventory_report(
    hostvars: Mapping[str, Mapping[str, Any]],
    cluster_hosts: Sequence[str],
    play_hosts: Sequence[str],
    roles_dir: str | None = None,
) -> dict[str, Any]:
    """``{'problems': {host: [line, ...]}, 'warnings': [line, ...]}``: problems for every host of the cluster group
    (and of the play), and for every host of the inventory outside group cluster, which no playbook converges;
    warnings for the vars files Ansible reads for no host or group. With
    ``roles_dir``, each node of the play has its role variables validated against every role's argument spec too.
    The specs are read here, not passed in: handed over by Ansible they are lazy containers, and validating one
    node against them took 0.7 s instead of 0.02 s."""
    argument_specs = role_argument_specs(roles_dir) if roles_dir else None
    nodes = []
    # the group's name, for messages: preflight_cluster_group as the inventory or -e sets it, else role
    # preflight's default (hostvars hold no role defaults)
    first = hostvars[cluster_hosts[0]] if cluster_hosts else {}
    group = str(first.get("preflight_cluster_group") or role_defaults.default_of("preflight_cluster_group"))
    # Ansible's union filter loses the inventory's order; put it back (the group's hosts first, as listed),
    # so that messages list nodes in that order and a tie between fabrics goes to the first node.
    listed = [str(h) for h in (first.get("groups") or {}).get(group) or []]
    cluster_hosts = sorted(cluster_hosts, key=lambda h: listed.index(h) if h in listed else len(listed))
    for host in cluster_hosts:
        values = hostvars[host]
        address = values.get("ansible_host")
        nodes.append(
            checks.NodeInput(
                name=str(host),
                address=None if address is None else str(address),
                fabric=values.get("rdmaforge_fabric"),
                values=values,
                argspecs=_argspec_results(argument_specs, values) if host in play_hosts else [],
                in_play=host in play_hosts,
            )
        )
    names = checks.variable_names(roles_dir) if roles_dir else None
    problems = checks.inventory_report(nodes, group, names, first.get("groups") or None)
    for host, line in role_own_variable_lines(hostvars, cluster_hosts, first.get("groups") or {}):
        problems.setdefault(host, []).append(line)
    # The inventory's vars files that name no host or group: warnings (a directory may be shared by inventories).
    every = first.get("groups") or {}
    directories = [Path(str(hostvars[h]["inventory_dir"])) for h in cluster_hosts if hostvars[h].get("inventory_dir")]
    unmatched = inventory_files.unmatched_vars_files(directories, [str(g) for g in every],
                                                     [str(h) for h in every.get("all") or []])  # fmt: skip
    return {"problems": problems, "warnings": unmatched}


def role_own_variable_lines(
    hostvars: Mapping[str, Mapping[str, Any]], hosts: Sequence[str], groups: Mapping[str, Sequence[str]]
) -> list[tuple[str, str]]:
    """(host, line) for each role's own variable the inventory's files set (inventory_files.role_own_variable_findings),
    for each node the file applies to: read from the files themselves, so an -e on the command line, which outranks a
    role's value, is not taken for one."""
    sources: dict[Path, list[str]] = {}
    for host in hosts:
        source = hostvars[host].get("inventory_file")
        if source:
            sources.setdefault(Path(str(source)), []).append(host)
    found = []
    for source, listed in sources.items():
        for finding in inventory_files.role_own_variable_findings(source):
            setting = finding.setting
            if setting.host is not None:
                applies = [h for h in listed if h == setting.host]
            elif setting.group is not None:
                applies = [h for h in listed if h in (groups.get(setting.group) or ())]
            else:
                applies = listed
            found += [(host, f"{host}: {finding.line}") for host in applies]
    return found


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


def free_space_problems(df_output: str, host: str, needs: Mapping[str, object], df_error: str = "") -> list[str]:
    """Problems (one line each) where the paths of ``needs`` lack their MiB; ``df_output`` lists them in order."""
    return checks.free_space_problems(host, list(needs), df_output, needs, df_error)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        if _missing is not None:
            from ansible_collections.rdmaforge.cluster.plugins.module_utils.controller_package import (
                unavailable_filters,
            )

            return unavailable_filters(_missing, __file__)
        return {
            "rdmaforge_free_space_problems": free_space_problems,
            "rdmaforge_role_argument_specs": role_argument_specs,
            "rdmaforge_inventory_report": inventory_report,
            "rdmaforge_os_report": os_report,
            "rdmaforge_etc_hosts": etc_hosts,
        }
