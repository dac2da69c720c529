"""site.yml's fast path on the real lab: a cluster that has not drifted is answered in one module call per node,
and every drift today's full run repairs still leads to a full run that repairs it.

The drift is made by hand over SSH on one node each (a managed file edited, a package of the profile removed), the
way an operator or an unattended upgrade would; the expected content comes from another node.
"""

from __future__ import annotations

from tests.conftest import LabHandle, assert_no_changes, recap

IN_SYNC = "fast path: every node is in sync with its last complete converge"


def converge(lab: LabHandle, *extra: str):
    proc = lab.playbook("site.yml", *extra)
    assert proc.returncode == 0, proc.stdout[-6000:]
    return proc


def test_a_cluster_without_drift_takes_the_fast_path_and_changes_nothing(converged: LabHandle) -> None:
    converge(converged)  # whatever earlier tests changed is repaired and recorded
    proc = converge(converged)
    assert IN_SYNC in proc.stdout
    assert_no_changes(proc.stdout)
    # No role after preflight's inventory checks ran a task on any node.
    for role in ("rdma_core", "nccl_env", "ssh_trust", "hugepages", "eni", "mpi_launch"):
        assert f"TASK [{role} :" not in proc.stdout
    assert set(recap(proc.stdout)) >= set(converged.nodes)


def test_check_diff_on_a_cluster_without_drift_takes_the_fast_path(converged: LabHandle) -> None:
    converge(converged)
    proc = converged.playbook("site.yml", "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert IN_SYNC in proc.stdout
    assert_no_changes(proc.stdout)


def test_a_changed_variable_is_never_skipped(converged: LabHandle) -> None:
    converge(converged)
    proc = converged.playbook("site.yml", "--check", "--diff", "-e", '{"nccl_env_overrides": {"NCCL_DEBUG": "WARN"}}')
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert IN_SYNC not in proc.stdout
    assert "the desired state changed" in proc.stdout
    assert "+NCCL_DEBUG=WARN" in proc.stdout  # the full run's diff shows what it would write
    assert all(c["changed"] > 0 for h, c in recap(proc.stdout).items() if h in converged.nodes)


def test_drift_on_one_node_is_named_and_the_full_run_repairs_it(converged: LabHandle) -> None:
    first, edited, stripped = sorted(converged.nodes)[:3]
    converge(converged)
    want = converged.ssh(first, "cat /etc/nccl.conf").stdout
    converged.ssh(edited, "echo NCCL_IB_DISABLE=1 >> /etc/nccl.conf")
    converged.ssh(stripped, "dpkg -r --force-depends ibverbs-utils >/dev/null 2>&1")

    proc = converge(converged)
    assert IN_SYNC not in proc.stdout
    assert "/etc/nccl.conf" in proc.stdout and "package ibverbs-utils" in proc.stdout  # the reasons name what drifted
    counts = recap(proc.stdout)
    assert counts[edited]["changed"] > 0 and counts[stripped]["changed"] > 0
    assert converged.ssh(edited, "cat /etc/nccl.conf").stdout == want
    assert "install ok installed" in converged.ssh(stripped, "dpkg-query -W -f '${Status}' ibverbs-utils").stdout

    again = converge(converged)
    assert IN_SYNC in again.stdout
    assert_no_changes(again.stdout)
