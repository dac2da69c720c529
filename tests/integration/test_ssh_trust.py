"""Issue 6 on the lab (3 nodes): cluster SSH trust with verified host keys, the all-pairs check, mpirun."""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pytest

from rdmaforge.lab import Lab
from tests.conftest import LabHandle, assert_no_changes

pytestmark = pytest.mark.lab

MARK = "# BEGIN rdmaforge cluster trust"


def untrust_everyone(lab: LabHandle) -> None:
    """Back to a freshly provisioned state: no cluster key authorised, no cluster host keys known."""
    for node in lab.nodes:
        for path in ("/root/.ssh/authorized_keys", "/etc/ssh/ssh_known_hosts"):
            lab.ssh(node, f"[ ! -f {path} ] || sed -i '/rdmaforge cluster trust/,/rdmaforge cluster trust/d' {path}")


def test_check_fails_before_and_passes_after_converge(converged: LabHandle) -> None:
    lab = converged
    untrust_everyone(lab)
    before = lab.playbook("ssh_check.yml")
    assert before.returncode != 0
    failing = set(re.findall(r"(node\d) -> (node\d) \(198\.18\.0\.\d+\)", before.stdout))
    assert failing == {(a, b) for a, b in itertools.permutations(lab.nodes, 2)}, before.stdout[-3000:]
    converge = lab.playbook("ssh_trust.yml")
    assert converge.returncode == 0, converge.stdout[-4000:]
    after = lab.playbook("ssh_check.yml")
    assert after.returncode == 0, after.stdout[-3000:]


def test_trust_uses_a_marked_block_and_private_keys_are_0600(lab: LabHandle) -> None:
    node = next(iter(lab.nodes))
    lab.ssh(node, "grep -q rdmaforge-lab-controller /root/.ssh/authorized_keys")  # the lab's own key is kept
    assert lab.ssh(node, f"grep -c '{MARK}' /root/.ssh/authorized_keys").stdout.strip() == "1"
    assert lab.ssh(node, "stat -c %a /root/.ssh/rdmaforge_cluster_ed25519").stdout.strip() == "600"
    cache = Path.home() / ".cache" / "rdmaforge" / "ssh-trust"
    keys = list(cache.glob("*/id_ed25519"))
    assert keys and all(oct(k.stat().st_mode & 0o777) == "0o600" for k in keys)
    known = lab.ssh(node, "cat /etc/ssh/ssh_known_hosts").stdout
    for name, address in lab.nodes.items():
        assert re.search(rf"^{name},{re.escape(address)},\S* ssh-ed25519 ", known, re.M), known
    # host-key checking stays on everywhere
    assert "StrictHostKeyChecking no" not in lab.ssh(node, "cat /root/.ssh/config").stdout


def test_mpirun_reaches_every_node(lab: LabHandle) -> None:
    proc = lab.playbook("mpi_launch.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]
    first = next(iter(lab.nodes))
    hostfile = lab.ssh(first, "grep -v '^#' /etc/rdmaforge/hostfile").stdout.split("\n")
    assert [line for line in hostfile if line] == [f"{address} slots=1" for address in lab.nodes.values()]
    out = lab.ssh(first, f"mpirun --allow-run-as-root -np {len(lab.nodes)} --hostfile /etc/rdmaforge/hostfile "
                         "--map-by ppr:1:node hostname").stdout  # fmt: skip
    assert sorted(out.split()) == sorted(lab.nodes)


def test_second_converge_changes_nothing(lab: LabHandle) -> None:
    proc = lab.playbook("ssh_trust.yml")
    assert proc.returncode == 0
    assert_no_changes(proc.stdout)


def test_a_limited_run_keeps_every_node_trusted(lab: LabHandle) -> None:
    """--limit one node on a converged cluster: its files still name every node (the others' host keys are read
    over SSH), so nothing changes, and its all-pairs check still reaches the nodes the run left out."""
    first = next(iter(lab.nodes))
    files = "cat /etc/ssh/ssh_known_hosts /root/.ssh/config"
    before = lab.ssh(first, files).stdout
    proc = lab.playbook("ssh_trust.yml", "--limit", first)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert_no_changes(proc.stdout)
    after = lab.ssh(first, files).stdout
    assert after == before
    for name, address in lab.nodes.items():
        assert re.search(rf"^{name},{re.escape(address)},\S* ssh-ed25519 ", after, re.M), after
    assert re.search(r"ok: \[" + first + r"\]", proc.stdout)
    assert "Read the SSH host keys of the cluster's nodes that this run leaves out" in proc.stdout


def test_a_new_trust_user_takes_the_trust_from_the_old_one(lab: LabHandle) -> None:
    """ssh_trust_user changed from root to another user: the converge used to install the cluster key for the new
    user and leave root's key pair and root's authorized_keys block, so the new user's key logged in as root on
    every node. Now the old login is withdrawn in the same run, and changing back withdraws the new one."""
    user, home = "trainer", "/home/trainer"
    for node in lab.nodes:
        lab.ssh(node, f"id -u {user} >/dev/null 2>&1 || useradd -m -s /bin/bash {user}")
    first, peer = list(lab.nodes)[:2]
    try:
        moved = lab.playbook("ssh_trust.yml", "-e", f"ssh_trust_user={user}")
        assert moved.returncode == 0, moved.stdout[-4000:]
        for node in lab.nodes:
            root_keys = lab.ssh(node, "cat /root/.ssh/authorized_keys").stdout
            assert MARK not in root_keys and "rdmaforge-lab-controller" in root_keys, (node, root_keys)
            assert lab.ssh(node, "ls /root/.ssh").stdout.split().count("rdmaforge_cluster_ed25519") == 0, node
            assert lab.ssh(node, f"stat -c %U:%a {home}/.ssh/rdmaforge_cluster_ed25519").stdout.strip() == f"{user}:600"
        # The new user reaches the peer as itself, and is refused as root.
        as_user = f"runuser -u {user} -- ssh -o BatchMode=yes -o ConnectTimeout=10"
        assert lab.ssh(first, f"{as_user} {lab.nodes[peer]} id -un").stdout.strip() == user
        refused = lab.ssh(first, f"{as_user} root@{lab.nodes[peer]} true", check=False)
        assert refused.returncode != 0 and "Permission denied" in refused.stderr, refused.stderr
        back = lab.playbook("ssh_trust.yml")
        assert back.returncode == 0, back.stdout[-4000:]
        for node in lab.nodes:
            assert lab.ssh(node, f"ls -A {home}/.ssh 2>/dev/null; cat {home}/.ssh/authorized_keys 2>/dev/null",
                           check=False).stdout.split() == [], node  # fmt: skip
            assert MARK in lab.ssh(node, "cat /root/.ssh/authorized_keys").stdout, node
        assert_no_changes(lab.playbook("ssh_trust.yml").stdout)
    finally:
        for node in lab.nodes:
            lab.ssh(node, f"userdel -r {user} 2>/dev/null; true", check=False)


def test_rotation_installs_a_new_key_and_the_old_one_is_refused(lab: LabHandle, tmp_path: Path) -> None:
    cache = Path.home() / ".cache" / "rdmaforge" / "ssh-trust"
    old_key = next(cache.glob("*/id_ed25519"))
    kept = tmp_path / "old_key"
    kept.write_bytes(old_key.read_bytes())
    kept.chmod(0o600)
    old_pub = old_key.with_suffix(".pub").read_text().split()[1]
    rotate = lab.playbook("ssh_trust.yml", "-e", "ssh_trust_rotate=true")
    assert rotate.returncode == 0, rotate.stdout[-4000:]
    assert old_key.with_suffix(".pub").read_text().split()[1] != old_pub
    for node in lab.nodes:
        assert old_pub not in lab.ssh(node, "cat /root/.ssh/authorized_keys").stdout
    # The old private key, offered alone, is refused by every node.
    for node, address in lab.nodes.items():
        options = [
            "IdentitiesOnly=yes",
            "BatchMode=yes",
            f"UserKnownHostsFile={lab.known_hosts}",
            "StrictHostKeyChecking=yes",
        ]
        argv = ["ssh", "-i", str(kept), *(f"-o{o}" for o in options), f"root@{address}", "true"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert proc.returncode != 0 and "Permission denied" in proc.stderr, (node, proc.stderr)
    assert lab.playbook("ssh_check.yml").returncode == 0


def test_changed_host_key_is_caught_and_healed(lab: LabHandle) -> None:
    victim = list(lab.nodes)[-1]
    lab.ssh(victim, "rm -f /etc/ssh/ssh_host_* && ssh-keygen -A >/dev/null && systemctl restart ssh")
    Lab().refresh_known_hosts()  # the operator accepts the node's new key on the controller
    check = lab.playbook("ssh_check.yml")
    assert check.returncode != 0
    failing = set(re.findall(r"(node\d) -> (node\d) \(", check.stdout))
    assert failing == {(other, victim) for other in lab.nodes if other != victim}, check.stdout[-3000:]
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in check.stdout or "Host key verification failed" in check.stdout
    # In check mode the check alone (it writes nothing, so no run of it could fix a pair) fails the same pairs.
    checked_alone = lab.playbook("ssh_check.yml", "--check")
    assert checked_alone.returncode != 0
    assert set(re.findall(r"(node\d) -> (node\d) \(", checked_alone.stdout)) == failing, checked_alone.stdout[-3000:]
    # The role in check mode: the run it checks would write the new key into the other nodes' known_hosts, so the
    # failing pairs are named, not failed, and nothing is written.
    known_before = {node: lab.ssh(node, "cat /etc/ssh/ssh_known_hosts").stdout for node in lab.nodes}
    would = lab.playbook("ssh_trust.yml", "--check")
    assert would.returncode == 0, would.stdout[-4000:]
    said = re.search(r"check mode: SSH trust would change on ([\w, ]+), and until a run writes it (\d+) connections"
                     r" to or from those nodes \(a pair by each name or address checked\) fail \((.*?)\);"
                     r" the run\s+checks",
                     would.stdout, re.S)  # fmt: skip
    assert said, would.stdout[-4000:]
    assert {other for other in lab.nodes if other != victim} <= set(said.group(1).split(", "))
    # The count is of connections, one per pair and address form the check probes (name and IP): the same
    # connections as the check alone failed.
    connections = set(re.findall(r"(node\d) -> (node\d) \(([^)]+)\)", checked_alone.stdout))
    assert {(source, target) for source, target, _ in connections} == failing
    named = set(re.findall(r"(node\d) -> (node\d) \(([^)]+)\)", said.group(3)))
    assert (int(said.group(2)), named) == (len(connections), connections), said.group(0)
    assert {node: lab.ssh(node, "cat /etc/ssh/ssh_known_hosts").stdout for node in lab.nodes} == known_before
    heal = lab.playbook("ssh_trust.yml")
    assert heal.returncode == 0, heal.stdout[-4000:]
    assert lab.playbook("ssh_check.yml").returncode == 0
