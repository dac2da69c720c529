"""Filters of the converge_state role (the fast no-op path); the logic lives in rdmaforge.converge."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleFilterError

try:
    from rdmaforge.converge import digest, ledger, targets
    from rdmaforge.paths import RESOURCES
    _missing: ImportError | None = None
except ModuleNotFoundError as error:  # no rdmaforge package on the controller: each filter says so when used
    _missing = error


def running_collection(plugin_file: str = __file__) -> Path:
    """The collection this filter was loaded from (``plugins/filter/`` in it): the roles and playbooks Ansible runs.
    A collection installed with ansible-galaxy beside the wheel (whose copy rdmaforge.paths names) is the code of
    the converge then, and its digest must follow that copy's changes. Loaded from anywhere else: the package's."""
    root = Path(plugin_file).absolute().parents[2]
    if (root / "roles").is_dir() and ((root / "galaxy.yml").is_file() or (root / "MANIFEST.json").is_file()):
        return root
    return RESOURCES


def converge_digests(hostvars: Mapping[str, Mapping[str, Any]], hosts: Sequence[str]) -> dict[str, Any]:
    """{cluster: the cluster digest, nodes: {host: its node digest}, files: the controller files, caches: their
    directories} (rdmaforge.converge.digest.digests), of the code of the collection that runs."""
    return digest.digests(hostvars, hosts, running_collection())


def converge_recorded_files(start: Mapping[str, Any]) -> dict[str, str]:
    """The controller files the end of the run records: the start's, and those the run added as they are now
    (rdmaforge.converge.digest.recorded_files)."""
    if not isinstance(start, Mapping) or not {"files", "caches"} <= set(start):
        raise AnsibleFilterError("rdmaforge_converge_recorded_files needs what rdmaforge_converge_digests returned")
    return digest.recorded_files(start)


def converge_ledger(host: str) -> dict[str, Any]:
    """What this run's tasks managed and read on the host (unverifiable without the callback)."""
    found = ledger.resources_for(host)
    if found is None:
        return {"unverifiable": ["no ledger: the converge_ledger callback is not enabled (see ansible.cfg)"]}
    return found


def _check(hostvars: Mapping[str, Mapping[str, Any]], host: str) -> Mapping[str, Any]:
    check = hostvars[host].get("converge_state_check")
    return check if isinstance(check, Mapping) else {}


def converge_reasons(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """{host: why it is not in sync} for the hosts that are not; empty when the whole cluster is."""
    out: dict[str, list[str]] = {}
    for host in hosts:
        check = _check(hostvars, host)
        if not check or check.get("skipped"):
            reasons = ["not checked"]
        else:
            reasons = list(check.get("reasons") or [])
            if not check.get("in_sync") and not reasons:
                reasons = ["not in sync"]
        if reasons:
            out[host] = reasons
    return out


def converge_cluster_changes(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """{host: why} for the hosts whose record was written for another cluster (a node added, removed or with other
    variables): they may be in sync themselves, but their cluster-wide files must be written again."""
    out: dict[str, str] = {}
    for host in hosts:
        reason = _check(hostvars, host).get("cluster_changed")
        if isinstance(reason, str) and reason:
            out[host] = reason
    return out


def converge_drift_is_local(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether every host out of sync differs only in what it manages itself (targets.drift_is_local)."""
    return targets.drift_is_local({host: _check(hostvars, host) for host in hosts})


def converge_targets(groups: Mapping[str, Sequence[str]], scope: str, group: str = "cluster") -> list[str]:
    """The hosts of ``group`` a play after preflight targets (rdmaforge.converge.targets.play_hosts)."""
    try:
        return targets.play_hosts(groups, scope, group)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def converge_skip_groups(cluster_plays_skip_in_sync: bool) -> list[str]:
    """The groups the fast path puts a node in sync into (rdmaforge.converge.targets.skip_groups)."""
    if not isinstance(cluster_plays_skip_in_sync, bool):
        raise AnsibleFilterError(
            f"rdmaforge_converge_skip_groups needs true or false, not {cluster_plays_skip_in_sync!r}"
        )
    return targets.skip_groups(cluster_plays_skip_in_sync)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        if _missing is not None:
            from ansible_collections.rdmaforge.cluster.plugins.module_utils.controller_package import (
                unavailable_filters,
            )

            return unavailable_filters(_missing, __file__)
        return {
            "rdmaforge_converge_cluster_changes": converge_cluster_changes,
            "rdmaforge_converge_digests": converge_digests,
            "rdmaforge_converge_drift_is_local": converge_drift_is_local,
            "rdmaforge_converge_ledger": converge_ledger,
            "rdmaforge_converge_reasons": converge_reasons,
            "rdmaforge_converge_recorded_files": converge_recorded_files,
            "rdmaforge_converge_skip_groups": converge_skip_groups,
            "rdmaforge_converge_targets": converge_targets,
        }
