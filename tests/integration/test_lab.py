"""Smoke tests of the lab itself: real nodes, real systemd, real SSH, real reboots."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from rdmaforge.lab import Lab
from tests.conftest import LabHandle, run_playbook

pytestmark = pytest.mark.lab

#: A test's playbook, not the product's (playbooks/ ships in the collection).
LAB_REBOOT = Path(__file__).resolve().parents[1] / "playbooks" / "lab_reboot.yml"


def test_every_node_answers_ansible_ping(lab: LabHandle) -> None:
    from rdmaforge.paths import PROJECT_ROOT

    proc = subprocess.run(
        [
            str(PROJECT_ROOT / ".venv" / "bin" / "ansible"),
            "-i",
            str(lab.inventory),
            "cluster",
            "-m",
            "ansible.builtin.ping",
            "-o",
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in lab.nodes:
        assert f"{name} | SUCCESS" in proc.stdout


def test_systemd_is_pid1_and_running(lab: LabHandle) -> None:
    for name in lab.nodes:
        out = lab.ssh(name, "cat /proc/1/comm; systemctl is-system-running --wait; hostname").stdout.split()
        assert out == ["systemd", "running", name]


def test_node_names_resolve_on_every_node(lab: LabHandle) -> None:
    for name in lab.nodes:
        for other, address in lab.nodes.items():
            assert lab.ssh(name, f"getent hosts {other}").stdout.split()[0] == address


def test_each_node_has_its_own_namespace_and_nics(lab: LabHandle) -> None:
    seen_links = set()
    for name, address in lab.nodes.items():
        brief = lab.ssh(name, "ip -br -4 addr show").stdout
        assert f"{address}/24" in brief
        assert "eth1" in brief and "eth2" in brief
        seen_links.add(lab.ssh(name, "readlink /proc/self/ns/net").stdout.strip())
    assert len(seen_links) == len(lab.nodes)


def test_cuda_is_bind_mounted_read_only(lab: LabHandle) -> None:
    node = next(iter(lab.nodes))
    proc = lab.ssh(node, "test -x /usr/local/cuda/bin/nvcc && touch /usr/local/cuda/x", check=False)
    assert proc.returncode != 0 and "Read-only file system" in proc.stderr


def test_apt_uses_only_the_signed_lab_mirror(lab: LabHandle) -> None:
    node = next(iter(lab.nodes))
    lab_source = lab.ssh(node, "cat /etc/apt/sources.list.d/rdmaforge-lab.sources").stdout
    assert "URIs: http://198.18.0.1:8080/debian\n" in lab_source
    assert "Signed-By: /usr/share/keyrings/rdmaforge-lab-archive-keyring.gpg" in lab_source
    # Whatever roles added since (the erdma repository), nothing points outside the lab mirror.
    uris = lab.ssh(node, "grep -rhE '^URIs:|^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/ || true").stdout
    assert [u for u in uris.split() if "://" in u and not u.startswith("http://198.18.0.1:8080/")] == []
    update = lab.ssh(node, "apt-get update 2>&1")
    assert "NO_PUBKEY" not in update.stdout and "not signed" not in update.stdout
    assert "rdma-core" in lab.ssh(node, "apt-cache show rdma-core").stdout


def test_nodes_do_not_trust_each_other(lab: LabHandle) -> None:
    """The lab adds no trust between nodes: once what the ssh_trust role may have added is taken away, a node
    cannot reach another. The role's own tests put the trust back."""
    first, second = list(lab.nodes)[:2]
    for node in lab.nodes:
        for path in ("/root/.ssh/authorized_keys", "/root/.ssh/config", "/etc/ssh/ssh_known_hosts"):
            lab.ssh(node, f"[ ! -f {path} ] || sed -i '/rdmaforge cluster trust/,/rdmaforge cluster trust/d' {path}")
    proc = lab.ssh(first, f"ssh -o BatchMode=yes -o ConnectTimeout=5 {second} true", check=False)
    assert proc.returncode != 0
    assert lab.ssh(second, "grep -c . /root/.ssh/authorized_keys").stdout.strip() == "1"  # the controller's key
    restore = lab.playbook("ssh_trust.yml")
    assert restore.returncode == 0, restore.stdout[-3000:]


def test_reboot_returns_with_state_kept(lab: LabHandle) -> None:
    node = list(lab.nodes)[-1]
    boots_before = {n.name: n.boots for n in Lab().status().nodes}[node]
    lab.ssh(node, "echo kept > /root/reboot-marker")
    proc = run_playbook(str(LAB_REBOOT), "--limit", node, inventory=lab.inventory, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # The nodes share the controller's kernel, so the kernel boot id does not change: the lab's boot
    # counter (one line per systemd-nspawn start) is the proof that systemd really started again.
    assert {n.name: n.boots for n in Lab().status().nodes}[node] == boots_before + 1
    assert lab.ssh(node, "cat /root/reboot-marker").stdout.strip() == "kept"
    assert lab.ssh(node, "systemctl is-system-running --wait").stdout.strip() == "running"


def test_gpu_topology_on_nodes_without_gpus_is_an_empty_map_that_says_why(lab: LabHandle) -> None:
    """Issue 16: the rail map from sysfs on real nodes. Lab nodes have NICs but no GPU: no rail, no NCCL_IB_HCA,
    the reason says so, and each node's RDMA devices (whatever /sys/class/infiniband holds there) are all unused."""
    from rdmaforge.paths import PROJECT_ROOT

    proc = subprocess.run(
        [str(PROJECT_ROOT / ".venv" / "bin" / "ansible"), "-i", str(lab.inventory), "cluster",
         "-m", "rdmaforge.cluster.gpu_topology", "-o"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "ANSIBLE_CACHE_PLUGIN": "memory"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = {}
    for line in proc.stdout.splitlines():
        host, _, payload = line.partition(" | SUCCESS => ")
        if payload:
            results[host] = json.loads(payload)
    assert set(results) == set(lab.nodes), proc.stdout
    for name, result in results.items():
        listing = lab.ssh(name, "ls /sys/class/infiniband 2>/dev/null || true").stdout.split()
        assert result["source"] == "sysfs", result
        assert result["gpus"] == [] and result["rails"] == [] and result["nccl_ib_hca"] == "", result
        assert "no GPU" in result["reason"], result
        assert sorted(result["nics"]) == sorted(listing), result
        assert sorted(result["unused_nics"]) == sorted(listing), result
