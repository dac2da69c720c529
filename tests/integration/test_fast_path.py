"""site.yml's fast path on the real lab: a cluster that has not drifted is answered in one module call per node,
and every drift today's full run repairs still leads to a full run that repairs it. The full --check --diff
run after a repair also proves the roles themselves idempotent (issue 3): it changes nothing but what a changed
variable asks for.

The drift is made by hand over SSH on one node (a managed file edited, a package of the profile removed, the NCCL
plugin's library cut short), the way an operator or an unattended upgrade would; the expected
content comes from another node. The repair runs with a third node out of the inventory, which is then put back: a
node removed or added changes only the cluster-wide files, and the nodes in sync run no role of their own.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import pytest

from rdmaforge.lab import inventory as lab_inventory
from rdmaforge.paths import CONTROLLER_CACHE, PROJECT_ROOT
from tests.conftest import IN_SYNC, LabHandle, assert_no_changes, gate_decision, recap
from tests.integration.test_remove_node_on_lab import block as marked_block

pytestmark = pytest.mark.lab

#: Each node's converge record (converge_state_path) and reset's list of the packages rdmaforge added
#: (os_packages_record): their defaults.
STATE_RECORD = "/var/lib/rdmaforge/converge-state.json"
PACKAGES_ADDED = "/var/lib/rdmaforge/packages-added"
#: The benchmark role's environment (torch in a venv), as `rdmaforge bench` installs it.
PREPARE_BENCH_ENV = Path(__file__).resolve().parents[1] / "playbooks" / "prepare_bench_env.yml"
#: One of the packages it installs (benchmark role, e2e_env.yml) that site.yml does not.
BENCH_ENV_PACKAGE = "python3-packaging"
#: Programs that no role manages or looks for, where packages put theirs.
UNRELATED_TOOLS = ("/usr/bin/rdmaforge-test-unrelated-tool", "/usr/sbin/rdmaforge-test-unrelated-daemon")
#: The AIACC plugin's library as nccl_plugin unpacks it from the sdist (nccl_plugin_aiacc_dir, version 2.0.1).
PLUGIN_LIBRARY = "/opt/rdmaforge/nccl-plugin/aiacc-2.0.1/libnccl-net.so.0.0.0"


def converge(lab: LabHandle, *extra: str, inventory: Path | None = None):
    proc = lab.playbook("site.yml", *extra, inventory=inventory)
    assert proc.returncode == 0, proc.stdout[-6000:]
    return proc


def first_lab_module(request: pytest.FixtureRequest) -> bool:
    """Whether no lab test of this session runs before this module (LAB_ORDER puts it first)."""
    items = request.session.items
    mine = next(i for i, item in enumerate(items) if getattr(item, "module", None) is request.module)
    return not any(item.get_closest_marker("lab") for item in items[:mine])


@pytest.fixture(scope="module")
def in_sync(converged: LabHandle, request: pytest.FixtureRequest) -> LabHandle:
    """The lab converged and recorded for this module. When this is the session's first lab module, the session's
    own complete converge left every node as recorded and nothing has touched the lab since; otherwise one more
    converge repairs whatever earlier modules changed. The tests here leave it in sync (check mode changes nothing;
    the drift test repairs what it breaks)."""
    if not first_lab_module(request):
        converge(converged)
    return converged


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


def changed_tasks(output: str, host: str = "") -> set[str]:
    """Names ('role : task', collection prefix dropped) of the tasks that reported changed on ``host`` (any host
    when empty)."""
    names: set[str] = set()
    changed = re.compile(rf"^changed: \[{re.escape(host)}" + (r"[\] ]" if host else ""), re.M)
    for block in re.split(r"^TASK \[", output, flags=re.M)[1:]:
        if changed.search(block):
            names.add(re.sub(r"^rdmaforge\.cluster\.", "", block.split("]", 1)[0]))
    return names


def cluster_block(lab: LabHandle, node: str) -> str:
    return marked_block(lab.ssh(node, "cat /etc/hosts").stdout, "rdmaforge cluster hosts")


def test_drift_is_named_and_repaired_and_a_changed_variable_changes_only_what_it_names(
    in_sync: LabHandle, tmp_path: Path
) -> None:
    converged = in_sync
    first, drifted, left_out = sorted(converged.nodes)[:3]
    want = converged.ssh(first, "cat /etc/nccl.conf").stdout
    want_plugin = converged.ssh(first, f"sha256sum < {PLUGIN_LIBRARY}").stdout
    # Three kinds of drift on one node: a managed file edited, a package removed, and the NCCL plugin's library cut
    # short (a disk error, or a copy stopped halfway). (And the benchmark environment's python3-packaging is gone,
    # with its line in reset's record: no drift for site.yml; the next test installs it the way bench does.)
    converged.ssh(
        drifted, "echo NCCL_IB_DISABLE=1 >> /etc/nccl.conf; dpkg -r --force-depends ibverbs-utils >/dev/null 2>&1; "
        f"truncate -s 4096 {PLUGIN_LIBRARY}; dpkg -r --force-depends {BENCH_ENV_PACKAGE} >/dev/null 2>&1; "
        f"sed -i '/^{BENCH_ENV_PACKAGE}$/d' {PACKAGES_ADDED}",
    )  # fmt: skip

    # summary.yml on its own vouches for a node's recorded summary only while the node matches its record: the
    # drifted node keeps its earlier entry, marked with what differs.
    summary = converged.summary()
    assert summary[first]["as_of"] and "not_in_this_run" not in summary[first]
    reason = summary[drifted]["not_in_this_run"]
    assert reason.startswith("not converged by this run, and it differs from its last complete converge ("), reason
    assert "/etc/nccl.conf" in reason and "package ibverbs-utils" in reason, reason
    assert summary[drifted]["nccl_plugin"] == "aiacc"  # the earlier entry is kept, not dropped

    # The operator's repair: one run over the cluster, while one node is out of the inventory (for maintenance,
    # say). Only the drifted node converges in full; the other node is in sync, so it skips the roles that touch
    # only itself and runs the cluster-wide plays (/etc/hosts, SSH trust, the MPI launch), which now list the
    # nodes of this inventory only.
    smaller = lab_inventory.without(converged.inventory, left_out, tmp_path / "inventory")
    proc = converge(converged, inventory=smaller)
    assert IN_SYNC not in proc.stdout
    assert "/etc/nccl.conf" in proc.stdout and "package ibverbs-utils" in proc.stdout  # the reasons name what drifted
    assert PLUGIN_LIBRARY in proc.stdout
    counts = recap(proc.stdout)
    assert counts[drifted]["changed"] > 0 and left_out not in counts
    assert converged.ssh(drifted, "cat /etc/nccl.conf").stdout == want
    assert "install ok installed" in converged.ssh(drifted, "dpkg-query -W -f '${Status}' ibverbs-utils").stdout
    assert converged.ssh(drifted, f"sha256sum < {PLUGIN_LIBRARY}").stdout == want_plugin
    for role in NODE_ROLES:
        assert first not in hosts_in_tasks(proc.stdout, role), role
        assert drifted in hosts_in_tasks(proc.stdout, role), role
    for role in CLUSTER_ROLES:
        assert first in hosts_in_tasks(proc.stdout, role), role
    # On the node in sync, only the cluster-wide files changed: the node left out is gone from them.
    assert {name.split(" : ")[0] for name in changed_tasks(proc.stdout, first)} <= set(CLUSTER_ROLES)
    for node in (first, drifted):
        listed = cluster_block(converged, node)
        assert converged.nodes[first] in listed and converged.nodes[left_out] not in listed, (node, listed)

    # The nodes that skipped their roles wrote records that still check what those roles manage: summary.yml
    # (read-only) sees a hand edit of a file only a skipped role manages (then undone).
    converged.ssh(first, "chmod 0600 /etc/nccl.conf")
    try:
        reason = converged.summary()[first].get("not_in_this_run", "")
        assert "/etc/nccl.conf" in reason and "mode 0600" in reason, reason
    finally:
        converged.ssh(first, "chmod 0644 /etc/nccl.conf")

    # The node is put back (as a node is added). Every node is in sync with its own record, so no node-local role
    # runs anywhere; the two nodes recorded for the smaller cluster make the cluster-wide plays run on every node.
    # The node put back kept its record and its files from before: nothing to change on it. (A check run first, as
    # an operator adding a node would, is test_remove_node_on_lab's: it names the nodes whose SSH trust would change.)
    proc = converge(converged)
    assert IN_SYNC not in proc.stdout, proc.stdout[-3000:]
    decision = gate_decision(proc.stdout)
    assert decision["converge"] == {}, decision  # every node is in sync with its own record
    # Exactly the two nodes recorded for the smaller cluster; all three skip their own roles.
    assert set(decision["cluster_changed_since_their_record"]) == {first, drifted}, decision
    assert set(decision["in_sync_skip_their_own_roles"]) == {first, drifted, left_out}, decision
    counts = recap(proc.stdout)
    assert counts[first]["changed"] > 0 and counts[drifted]["changed"] > 0 and counts[left_out]["changed"] == 0
    for role in NODE_ROLES:
        assert not hosts_in_tasks(proc.stdout, role), role
    for role in CLUSTER_ROLES:
        assert {host.split(" -> ")[0] for host in hosts_in_tasks(proc.stdout, role)} == set(converged.nodes), role
    assert {name.split(" : ")[0] for name in changed_tasks(proc.stdout)} <= set(CLUSTER_ROLES)
    for node in converged.nodes:
        assert all(address in cluster_block(converged, node) for address in converged.nodes.values()), node
    # The records the in-sync nodes rewrote still hold their summary: summary.yml on its own vouches for each.
    summary = converged.summary()
    unvouched = {host: node["not_in_this_run"] for host, node in summary.items() if "not_in_this_run" in node}
    assert not unvouched, unvouched
    # (The tests after this one start with a run that must find every node in sync again.)

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


def test_a_nodes_own_drift_is_repaired_with_the_cluster_wide_plays_on_that_node_alone(in_sync: LabHandle) -> None:
    """A file's mode, a package and the NCCL library changed on one node differ only in what that node manages:
    nothing the other nodes' /etc/hosts, SSH trust or MPI hostfile is written from. The drifted node converges in
    full, the cluster-wide plays included; the nodes in sync are in no play after preflight, change nothing, and the
    next run finds every node in sync (their records still hold).

    The NCCL build's files are in the converge record (build_once's build_tree): a library changed on one node made
    neither the fast path nor a full converge look at it (review round 21a); now that node gets the package's
    library back. (One drifted node for the three changes: each converge of the lab is a minute of make test.)"""
    converged = in_sync
    first, drifted = sorted(converged.nodes)[:2]
    others = set(converged.nodes) - {drifted}
    trust_files = "cat /etc/ssh/ssh_known_hosts ~/.ssh/config"
    trusted = converged.ssh(drifted, trust_files).stdout
    library = "$(readlink -f /opt/nccl/current/lib/libnccl.so.2)"
    digest = f"sha256sum {library} | cut -d' ' -f1"
    expected = converged.ssh(first, digest).stdout.strip()
    converged.ssh(drifted, "chmod 0600 /etc/nccl.conf; dpkg -r --force-depends ibverbs-utils >/dev/null 2>&1; "
                           f"printf 'a hand-made change' >> {library}")  # fmt: skip
    assert converged.ssh(drifted, digest).stdout.strip() != expected
    proc = converge(converged)
    decision = gate_decision(proc.stdout)
    assert list(decision["converge"]) == [drifted], decision
    assert any("/etc/nccl.conf" in reason for reason in decision["converge"][drifted]), decision
    assert any("libnccl.so.2" in reason for reason in decision["converge"][drifted]), decision
    assert decision["cluster_changed_since_their_record"] == [] and decision["not_checked_unreachable_or_failed"] == []
    assert decision["cluster_wide_plays_only_on_the_nodes_that_converge"] is True, decision
    assert set(decision["in_sync_skip_their_own_roles"]) == others, decision
    for role in NODE_ROLES + CLUSTER_ROLES:
        # (ssh_trust prepares the cluster key on the controller: "node2 -> localhost" counts as node2)
        assert {host.removesuffix(" -> localhost") for host in hosts_in_tasks(proc.stdout, role)} == {drifted}, role
    # The other nodes' host keys and addresses came from this run's converge check, not from a fact gathering
    # delegated to each (no "node2 -> node1" above), and wrote the same ssh_known_hosts and ~/.ssh/config lines as
    # the full converge before, where every node gathered its own facts with Ansible's setup.
    assert not {task for task in changed_tasks(proc.stdout, drifted) if task.startswith("ssh_trust : ")}
    assert converged.ssh(drifted, trust_files).stdout == trusted
    counts = recap(proc.stdout)
    assert counts[drifted]["changed"] > 0 and all(counts[node]["changed"] == 0 for node in others), counts
    assert converged.ssh(drifted, "stat -c %a /etc/nccl.conf").stdout.strip() == "644"
    assert "install ok installed" in converged.ssh(drifted, "dpkg-query -W -f '${Status}' ibverbs-utils").stdout
    assert converged.ssh(drifted, digest).stdout.strip() == expected
    assert "lib/libnccl.so.2" in proc.stdout and "content differs from the record" in proc.stdout, proc.stdout[-6000:]
    # The cluster-wide files on every node still list every node.
    for node in converged.nodes:
        assert all(address in cluster_block(converged, node) for address in converged.nodes.values()), node
    again = converge(converged)
    assert IN_SYNC in again.stdout, again.stdout[-4000:]
    assert_no_changes(again.stdout)


def test_the_benchmark_environment_and_other_tools_installed_later_are_not_drift(in_sync: LabHandle) -> None:
    """`rdmaforge bench` installs its Python environment with the os_packages role, which appends each package it
    adds to reset's record of them. That record is bookkeeping, not state a converge repairs: the next provision
    still takes the fast path. (It did not: after the first benchmark every node's next converge was a full one.)
    The drift test above removed one of the environment's packages on its node, then repaired the node with a run
    that added a package, the kind of run whose record watched reset's. Likewise a program another package puts in
    /usr/bin or /usr/sbin: the roles look there only for a few names (the GPU tools, grubby)."""
    converged = in_sync
    node = sorted(converged.nodes)[1]
    before = converged.ssh(node, f"cat {PACKAGES_ADDED}").stdout
    assert BENCH_ENV_PACKAGE not in before.split(), before
    ready = converged.playbook(str(PREPARE_BENCH_ENV), "--limit", node)
    assert ready.returncode == 0, ready.stdout[-4000:]
    after = converged.ssh(node, f"cat {PACKAGES_ADDED}").stdout
    # Appended (python3-venv too, on a node a reset in an earlier run took it from).
    assert after.startswith(before) and BENCH_ENV_PACKAGE in after[len(before) :].split(), after
    tools = " ".join(UNRELATED_TOOLS)
    converged.ssh(node, f"for tool in {tools}; do cp /bin/true $tool; done")
    try:
        proc = converge(converged)
        assert IN_SYNC in proc.stdout, proc.stdout[-4000:]
        assert_no_changes(proc.stdout)
    finally:
        converged.ssh(node, f"rm -f {tools}")
    record = json.loads(converged.ssh(node, f"cat {STATE_RECORD}").stdout)
    assert PACKAGES_ADDED not in record["resources"]["paths"], record["resources"]["paths"]


# After the drift test (above), these first prove that it left every node in sync.
def test_a_cluster_without_drift_takes_the_fast_path_and_changes_nothing(in_sync: LabHandle) -> None:
    converged = in_sync
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    proc = converge(converged)
    assert IN_SYNC in proc.stdout
    assert_no_changes(proc.stdout)
    # No role after preflight's inventory checks ran a task on any node.
    for role in ("rdma_core", "nccl_env", "ssh_trust", "hugepages", "eni", "mpi_launch"):
        assert not re.search(rf"^TASK \[(?:rdmaforge\.cluster\.)?{role} :", proc.stdout, re.M), role
    assert set(recap(proc.stdout)) >= set(converged.nodes)
    # No node was in the summary's per-node play, yet this run's summary lists every node as current: the entry
    # kept with the record each node was found to match, with what the lab inventory asks for.
    assert not re.search(r"^TASK \[(?:rdmaforge\.cluster\.)?cluster_summary : Assemble", proc.stdout, re.M)
    summary = json.loads((PROJECT_ROOT / "artifacts" / "summary.json").read_text())
    assert summary["time"] >= started, (summary["time"], started)
    nodes = {node["host"]: node for node in summary["nodes"]}
    assert set(nodes) == set(converged.nodes)
    for host, node in nodes.items():
        assert node["as_of"] == summary["time"] and "not_in_this_run" not in node, node
        assert node["address"] == converged.nodes[host] and node["fabric"] == "erdma", node
        assert node["nccl_plugin"] == "aiacc" and node["nccl_plugin_version"] == "2.0.1", node


def test_check_diff_on_a_cluster_without_drift_takes_the_fast_path(in_sync: LabHandle) -> None:
    converged = in_sync
    proc = converged.playbook("site.yml", "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert IN_SYNC in proc.stdout
    assert_no_changes(proc.stdout)


def test_a_controller_file_the_run_writes_back_is_recorded_and_one_added_later_leaves_every_node_in_sync(
    in_sync: LabHandle,
) -> None:
    """Each node's record keeps the controller files there at its converge (the verified erdma key, the cluster SSH
    key, the NCCL builds). One of them gone makes the node converge in full, naming the file; the file the run writes
    back is recorded as it is then, so the next run is in sync. The file taken away here is one the run writes back
    as it was: the verified erdma keyring (rdma_repos: the one copy of the key the controller keeps, the pinned key
    exported again from the download). One node is enough to show it (each node's record is its own): the runs are
    limited to it, so the full converge the missing file causes is one node's, not the cluster's. A file added to a
    cache after the records (here a stand-in for a second NCCL build or an nccl-tests build) is not one any node's
    converge used: the whole cluster stays in sync. Before, every cache file was part of every node's digest, and
    such an addition made every node converge in full."""
    converged = in_sync
    node = sorted(converged.nodes)[0]
    (keyring,) = (CONTROLLER_CACHE / "keys").glob("erdma-*.gpg")
    content = keyring.read_bytes()
    added = CONTROLLER_CACHE / "rdmaforge-test-added-after-the-records"
    keyring.unlink()
    try:
        proc = converge(converged, "--limit", node)
        decision = gate_decision(proc.stdout)
        assert set(decision["converge"]) == {node}, decision
        assert decision["converge"][node] == [f"controller file {keyring} is gone since the record"], decision
        assert_no_changes(proc.stdout)  # nothing on the nodes
        assert keyring.read_bytes() == content
        again = converge(converged, "--limit", node)
        assert IN_SYNC in again.stdout, again.stdout[-4000:]
        assert_no_changes(again.stdout)
        added.write_text("a build no node's converge read\n")
        whole = converge(converged)
        assert IN_SYNC in whole.stdout, whole.stdout[-4000:]
        assert_no_changes(whole.stdout)
    finally:
        if not keyring.exists():
            keyring.write_bytes(content)
        added.unlink(missing_ok=True)
