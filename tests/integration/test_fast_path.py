"""site.yml's fast path on the real lab: a cluster that has not drifted is answered in one module call per node,
and every drift today's full run repairs still leads to a full run that repairs it. The full --check --diff
run after a repair also proves the roles themselves idempotent (issue 3): it changes nothing but what a changed
variable asks for.

The drift is made by hand over SSH on one node (a managed file edited, a package of the profile removed), the
way an operator or an unattended upgrade would; the expected content comes from another node.
"""

from __future__ import annotations

import json
import re

import pytest

from rdmaforge.paths import PROJECT_ROOT
from tests.conftest import LabHandle, assert_no_changes, recap

pytestmark = pytest.mark.lab

IN_SYNC = "fast path: every node is in sync with its last complete converge"


def converge(lab: LabHandle, *extra: str):
    proc = lab.playbook("site.yml", *extra)
    assert proc.returncode == 0, proc.stdout[-6000:]
    return proc


@pytest.fixture(scope="module")
def in_sync(converged: LabHandle) -> LabHandle:
    """The lab converged and recorded once for this module: whatever earlier modules changed is repaired. The tests
    here leave it in sync (check mode changes nothing; the drift test repairs what it breaks)."""
    converge(converged)
    return converged


def test_a_cluster_without_drift_takes_the_fast_path_and_changes_nothing(in_sync: LabHandle) -> None:
    converged = in_sync
    proc = converge(converged)
    assert IN_SYNC in proc.stdout
    assert_no_changes(proc.stdout)
    # No role after preflight's inventory checks ran a task on any node.
    for role in ("rdma_core", "nccl_env", "ssh_trust", "hugepages", "eni", "mpi_launch"):
        assert not re.search(rf"^TASK \[(?:rdmaforge\.cluster\.)?{role} :", proc.stdout, re.M), role
    assert set(recap(proc.stdout)) >= set(converged.nodes)


def test_check_diff_on_a_cluster_without_drift_takes_the_fast_path(in_sync: LabHandle) -> None:
    converged = in_sync
    proc = converged.playbook("site.yml", "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert IN_SYNC in proc.stdout
    assert_no_changes(proc.stdout)


#: Roles of plays that touch only their own node (skipped by a node in sync), and of the cluster-wide plays.
NODE_ROLES = ("rdma_core", "mpi", "nccl_env", "nccl_plugin")
CLUSTER_ROLES = ("cluster_hosts", "ssh_trust", "mpi_launch")


def hosts_in_tasks(output: str, role: str) -> set[str]:
    """The hosts that reported a result (ok, changed, skipping, failed) in a task of ``role`` after preflight
    (preflight runs every role's read-only validate tasks on every node it checks)."""
    hosts: set[str] = set()
    for play in re.split(r"^PLAY \[", output, flags=re.M)[1:]:
        if play.startswith("Preflight"):
            continue
        for block in re.split(r"^TASK \[", play, flags=re.M)[1:]:
            if re.match(rf"(?:rdmaforge\.cluster\.)?{role} : ", block):
                hosts.update(re.findall(r"^(?:ok|changed|skipping|failed|fatal): \[([^\]]+)\]", block, re.M))
    return hosts


def changed_tasks(output: str) -> set[str]:
    """Names ('role : task', collection prefix dropped) of the tasks that reported changed on some host."""
    names: set[str] = set()
    for block in re.split(r"^TASK \[", output, flags=re.M)[1:]:
        if re.search(r"^changed: \[", block, re.M):
            names.add(re.sub(r"^rdmaforge\.cluster\.", "", block.split("]", 1)[0]))
    return names


def test_drift_is_named_and_repaired_and_a_changed_variable_changes_only_what_it_names(in_sync: LabHandle) -> None:
    converged = in_sync
    first, drifted = sorted(converged.nodes)[:2]
    want = converged.ssh(first, "cat /etc/nccl.conf").stdout
    # Two kinds of drift on one node: a managed file edited and a package removed.
    converged.ssh(
        drifted, "echo NCCL_IB_DISABLE=1 >> /etc/nccl.conf; dpkg -r --force-depends ibverbs-utils >/dev/null 2>&1"
    )

    # summary.yml on its own vouches for a node's recorded summary only while the node matches its record: the
    # drifted node keeps its earlier entry, marked with what differs.
    summary = converged.summary()
    assert summary[first]["as_of"] and "not_in_this_run" not in summary[first]
    reason = summary[drifted]["not_in_this_run"]
    assert reason.startswith("not converged by this run, and it differs from its last complete converge ("), reason
    assert "/etc/nccl.conf" in reason and "package ibverbs-utils" in reason, reason
    assert summary[drifted]["nccl_plugin"] == "aiacc"  # the earlier entry is kept, not dropped

    # The operator's repair: one run over the whole cluster. Only the drifted node converges in full; the others
    # are in sync, so they skip the roles that touch only themselves and run the cluster-wide plays (/etc/hosts,
    # SSH trust, the MPI launch across every node).
    proc = converge(converged)
    assert IN_SYNC not in proc.stdout
    assert "/etc/nccl.conf" in proc.stdout and "package ibverbs-utils" in proc.stdout  # the reasons name what drifted
    counts = recap(proc.stdout)
    assert counts[drifted]["changed"] > 0
    assert converged.ssh(drifted, "cat /etc/nccl.conf").stdout == want
    assert "install ok installed" in converged.ssh(drifted, "dpkg-query -W -f '${Status}' ibverbs-utils").stdout
    others = [node for node in converged.nodes if node != drifted]
    for node in others:
        assert counts[node]["changed"] == 0, (node, counts)
        for role in NODE_ROLES:
            assert not hosts_in_tasks(proc.stdout, role) & {node}, (role, node)
        for role in CLUSTER_ROLES:
            assert node in hosts_in_tasks(proc.stdout, role), (role, node)
    for role in NODE_ROLES:
        assert drifted in hosts_in_tasks(proc.stdout, role), role

    # The nodes that skipped their roles wrote records that still check what those roles manage: summary.yml
    # (read-only) sees a hand edit of a file only a skipped role manages; undone, every node is in sync again.
    converged.ssh(first, "chmod 0600 /etc/nccl.conf")
    try:
        reason = converged.summary()[first].get("not_in_this_run", "")
        assert "/etc/nccl.conf" in reason and "mode 0600" in reason, reason
    finally:
        converged.ssh(first, "chmod 0644 /etc/nccl.conf")
    proc = converge(converged)
    assert IN_SYNC in proc.stdout
    assert_no_changes(proc.stdout)

    # One full run (every role's every task; a minute per node here) proves two things at once. A changed variable
    # is never skipped by the fast path, and changes only what it names: NCCL_DEBUG lives in /etc/nccl.conf and the
    # login environment, so the nccl_env role is the only one with something to change. And the repair above left
    # nothing else for a full run to change on the repaired node. Limited to it, which also proves that a --limit
    # run keeps the cluster-wide files whole (the MPI hostfile keeps the nodes left out; SSH trust keeps their keys).
    override = '{"nccl_env_overrides": {"NCCL_DEBUG": "WARN"}}'
    check = converged.playbook("site.yml", "--check", "--diff", "--limit", drifted, "-e", override)
    assert check.returncode == 0, check.stdout[-4000:]
    assert IN_SYNC not in check.stdout
    assert "the desired state changed" in check.stdout
    assert "+NCCL_DEBUG=WARN" in check.stdout  # the full run's diff shows what it would write
    assert recap(check.stdout)[drifted]["changed"] > 0
    changed = changed_tasks(check.stdout)
    assert changed and all(name.startswith("nccl_env : ") for name in changed), changed
    # ... and the diffs show only that variable's lines: the repaired files need nothing else.
    edits = [line for line in check.stdout.splitlines() if re.match(r"[+-](?!\+\+ |-- )", line)]
    assert edits and all("NCCL_DEBUG" in line for line in edits), edits

    # The summary that limited run wrote still lists the nodes left out, marked as such with their earlier time.
    summary = json.loads((PROJECT_ROOT / "artifacts" / "summary.json").read_text())
    nodes = {node["host"]: node for node in summary["nodes"]}
    assert set(nodes) == set(converged.nodes)
    assert nodes[first]["not_in_this_run"] == "not in this run (outside --limit)"
    assert nodes[first]["as_of"] < summary["time"] == nodes[drifted]["as_of"]
