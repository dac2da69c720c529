"""Issue 18 on the lab: `rdmaforge remove-node` (playbooks/remove_node.yml) takes a node out of a running cluster.

The lab grows to LAB_NODES + 1 nodes; the newcomer joins the cluster (hosts block, OpenMPI, SSH trust, hostfile) and
proves it can log in to the others with the cluster key. Removing it must leave the remaining nodes listing it
nowhere (/etc/hosts block, ssh_known_hosts, ~/.ssh/config, MPI hostfile), its copy of the old cluster key must no
longer open any of them, and the removed node itself must lose rdmaforge's trust, hosts block and hostfile. Once
the node is out of the inventory, the roles the removal ran change nothing. A bad rdmaforge_remove_nodes changes
nothing and names what is allowed. A remaining node that does not answer is named and keeps the old key until a
second removal run, which is `rdmaforge remove-node`: the lab grows once for both.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdmaforge.lab import Lab
from rdmaforge.runner.exit_codes import ExitCode
from tests.conftest import CLUSTER_KEY, LAB_NICS, LAB_NODES, LabHandle, assert_no_changes
from tests.integration.test_cli import cli, run_dir_of

pytestmark = pytest.mark.lab

JOIN = ("cluster_hosts.yml", "mpi.yml", "ssh_trust.yml", "mpi_launch.yml")

HOSTFILE = "/etc/rdmaforge/hostfile"


def block(text: str, marker: str) -> str:
    """The lines between rdmaforge's BEGIN and END markers of ``marker`` ('' when there is no such block)."""
    begin, end = f"# BEGIN {marker}", f"# END {marker}"
    if begin not in text:
        return ""
    return text.split(begin, 1)[1].split(end, 1)[0]


@pytest.fixture(scope="module")
def newcomer(converged: LabHandle) -> Iterator[tuple[LabHandle, str]]:
    """The converged lab with one more node, a bare one rdmaforge never touched, and its name; afterwards the
    suite's lab size again. The removal below rotated the cluster key, so the nodes then differ from their converge
    record: tests/conftest.py runs this module after every other that needs the converged cluster, and the next
    session's first converge repairs it."""
    lab = Lab()
    try:
        lab.up(nodes=LAB_NODES + 1, nics=LAB_NICS)
        bigger = LabHandle(lab.inventory_path, {n.name: n.address for n in lab.status().nodes}, lab.ssh_key,
                           lab.known_hosts)  # fmt: skip
        yield bigger, f"node{LAB_NODES + 1}"
    finally:
        lab.up(nodes=LAB_NODES, nics=LAB_NICS)


@pytest.fixture(scope="module")
def grown(newcomer: tuple[LabHandle, str]) -> tuple[LabHandle, str]:
    """The newcomer joined to the cluster (hosts block, OpenMPI, SSH trust, hostfile)."""
    lab, _ = newcomer
    for playbook in JOIN:
        lab.playbook(playbook, check=True)
    return newcomer


def test_check_mode_with_a_node_added_names_every_node_and_writes_nothing(
    newcomer: tuple[LabHandle, str], tmp_path: Path
) -> None:
    """`provision --check` once a bare node is in the inventory, as an operator checks a scale-out first: the
    newcomer would get everything, and every other node its hosts block and SSH trust (their known_hosts lack the
    newcomer, so pairs to it fail until the run writes them: named, not failed). Nothing is written anywhere.

    On the newcomer, as on any node rdmaforge never touched: check mode writes nothing, so the erdma repository is
    not there for apt to ask about rdma-core's packages, and no NCCL prefix or plugin directory exists for unarchive
    or get_url; before the fix each of those failed the run (exit 2, "No package matching 'libibverbs1'"). (This
    test also stands for a check of a wholly bare cluster, which cost another full check run of make test.)"""
    lab, added = newcomer
    members = sorted(lab.nodes)
    assert added in members and len(members) == LAB_NODES + 1
    files = "sha256sum /etc/hosts /etc/ssh/ssh_known_hosts /root/.ssh/authorized_keys"
    before = {node: lab.ssh(node, files, check=False).stdout for node in members if node != added}
    assert lab.untouched(added), f"{added} is not a bare node"

    check = cli(tmp_path / "runs", "provision", "-i", str(lab.inventory), "--check")
    assert check.returncode == ExitCode.OK, check.stdout[-6000:]
    recap_hosts = json.loads((run_dir_of(check.stdout) / "recap.json").read_text())["hosts"]
    assert {node: recap_hosts[node]["status"] for node in members} == dict.fromkeys(members, "would_change")
    said = " ".join((run_dir_of(check.stdout) / "ansible" / "stdout").read_text().split())
    changing = re.search(r"check mode: SSH trust would change on ([\w, ]+), and until a run writes it", said)
    assert changing and set(changing.group(1).split(", ")) == set(members), said[-4000:]
    assert "the MPI launch test runs with the run that writes it" in said, said[-4000:]
    would_install = re.findall(r"check mode: would install ([\w.+, -]+), not asked", said)
    # Seed 001's package set, by its Debian names.
    assert {"libibverbs1", "rdma-core"} <= {name for line in would_install for name in line.split(", ")}, said[-4000:]

    assert {node: lab.ssh(node, files, check=False).stdout for node in before} == before
    assert lab.untouched(added), f"check mode wrote to {added}"
    assert lab.ssh(added, "test ! -e /etc/apt/sources.list.d/erdma.sources", check=False).returncode == 0


def retired_login(lab: LabHandle, newcomer: str, target_address: str) -> subprocess.CompletedProcess[str]:
    """From the newcomer, log in to a node with the copy of the cluster key it kept (host keys still checked)."""
    return lab.ssh(newcomer, f"ssh -i /root/retired_key -o IdentitiesOnly=yes -o BatchMode=yes -o ConnectTimeout=10 "
                             f"-o UserKnownHostsFile=/root/retired_known_hosts -o GlobalKnownHostsFile=/dev/null "
                             f"root@{target_address} true", check=False)  # fmt: skip


def remove_with_one_node_silent(lab: LabHandle, removing: str, silent: str) -> subprocess.CompletedProcess[str]:
    """remove_node.yml taking out ``removing``, with a second inventory source that sends Ansible to a closed port
    of ``silent``: unreachable to the run, the node itself intact."""
    override = Lab().inventory_path.parent.parent / "remove-node-unreachable.yml"
    override.write_text(json.dumps({"all": {"hosts": {silent: {"ansible_port": 1}}}}))
    try:
        return lab.playbook("remove_node.yml", "-i", str(override),
                            "-e", json.dumps({"rdmaforge_remove_nodes": [removing]}))  # fmt: skip
    finally:
        override.unlink()


def test_a_bad_node_list_is_refused_before_anything_changes(grown: tuple[LabHandle, str]) -> None:
    lab, _ = grown
    before = lab.ssh("node1", "sha256sum /etc/hosts /etc/ssh/ssh_known_hosts").stdout
    for bad, says in (
        (["node99"], "not in the cluster: node99"),
        ([], "allowed: a non-empty list of hosts of group 'cluster'"),
        (sorted(lab.nodes), "that leaves at least one node"),
    ):
        proc = lab.playbook("remove_node.yml", "-e", json.dumps({"rdmaforge_remove_nodes": bad}))
        assert proc.returncode != 0
        assert f"rdmaforge_remove_nodes={json.dumps(bad)}" in proc.stdout and says in proc.stdout, proc.stdout[-3000:]
    assert lab.ssh("node1", "sha256sum /etc/hosts /etc/ssh/ssh_known_hosts").stdout == before


def test_a_removal_one_remaining_node_misses_is_named_and_the_cli_finishes_it(
    grown: tuple[LabHandle, str], converged: LabHandle, tmp_path: Path
) -> None:
    """A remaining node that cannot be reached during the removal still authorises the old key: the others go on
    and the run fails naming it. `rdmaforge remove-node`, run again once the node answers, finishes the job: the
    removed node is then listed nowhere, its copy of the cluster key opens nothing, and it gave back what rdmaforge
    gave it. One grown lab serves both halves (each growth of the lab costs about a minute of make test)."""
    lab, newcomer = grown
    address = lab.nodes[newcomer]
    remaining = sorted(n for n in lab.nodes if n != newcomer)
    silent, answering = remaining[1], [n for n in remaining if n != remaining[1]]
    # Joined: every remaining node lists it, and its cluster key opens them. Keep a copy of that key, as a
    # retired machine would.
    assert address in block(lab.ssh("node1", "cat /etc/hosts").stdout, "rdmaforge cluster hosts")
    lab.ssh(newcomer, f"cp {CLUSTER_KEY} /root/retired_key && cp /etc/ssh/ssh_known_hosts /root/retired_known_hosts")
    for node in remaining:
        login = retired_login(lab, newcomer, lab.nodes[node])
        assert login.returncode == 0, login.stderr

    partial = remove_with_one_node_silent(lab, newcomer, silent)
    assert partial.returncode != 0
    said = " ".join(partial.stdout.split())
    assert f"the removal is incomplete: {silent} did not take the new cluster key" in said, partial.stdout[-4000:]
    assert f"the old key, which the removed nodes ({newcomer}) hold" in said
    assert retired_login(lab, newcomer, lab.nodes[silent]).returncode == 0  # as the message says
    for node in answering:
        assert retired_login(lab, newcomer, lab.nodes[node]).returncode != 0

    # Through the CLI, as an operator runs it once the node answers (the tests above run the playbook): --check first
    # names what the removal would finish, the node the first run missed above all, and changes nothing.
    silent_before = lab.ssh(silent, "sha256sum /etc/hosts /etc/ssh/ssh_known_hosts /root/.ssh/authorized_keys").stdout
    check = cli(tmp_path / "runs", "remove-node", newcomer, "-i", str(lab.inventory), "--check")
    assert check.returncode == ExitCode.OK, check.stdout[-4000:]
    checked = json.loads((run_dir_of(check.stdout) / "recap.json").read_text())
    assert checked["hosts"][silent]["status"] == "would_change", checked["hosts"]
    # (The task's name is templated: the file is named in it or, from the arguments, in what it would change.)
    said = rf"^  {silent}: would change: cluster_hosts : Write the cluster block into .*/etc/hosts"
    assert re.search(said, check.stdout, re.M), check.stdout[-4000:]
    assert lab.ssh(silent, "sha256sum /etc/hosts /etc/ssh/ssh_known_hosts /root/.ssh/authorized_keys").stdout == (
        silent_before)  # fmt: skip
    assert retired_login(lab, newcomer, lab.nodes[silent]).returncode == 0  # the old key still opens it
    # The pairs only the checked run can fix are named, not failed; so is the MPI launch test that waits for it.
    said = " ".join((run_dir_of(check.stdout) / "ansible" / "stdout").read_text().split())
    assert f"check mode: SSH trust would change on {silent}, and until a run writes it" in said, said[-3000:]
    assert f"check mode: SSH trust would change on {silent}; the MPI launch test runs with the run" in said

    proc = cli(tmp_path / "runs", "remove-node", newcomer, "-i", str(lab.inventory))
    assert proc.returncode == ExitCode.OK, proc.stdout[-4000:]
    assert f"rdmaforge remove-node: exit 0 (success); artifacts: {run_dir_of(proc.stdout)}" in proc.stdout

    for node in remaining:
        hosts = block(lab.ssh(node, "cat /etc/hosts").stdout, "rdmaforge cluster hosts")
        assert hosts and newcomer not in hosts and address not in hosts, hosts
        known = block(lab.ssh(node, "cat /etc/ssh/ssh_known_hosts").stdout, "rdmaforge cluster trust")
        assert known and newcomer not in known and address not in known, known
        config = block(lab.ssh(node, "cat /root/.ssh/config").stdout, "rdmaforge cluster trust")
        assert config and newcomer not in config and address not in config, config
        hostfile = lab.ssh(node, f"cat {HOSTFILE}").stdout
        assert address not in hostfile and all(lab.nodes[n] in hostfile for n in remaining), hostfile
        # The key the removed node kept is no longer authorised anywhere.
        login = retired_login(lab, newcomer, lab.nodes[node])
        assert login.returncode != 0 and "Permission denied" in login.stderr, (node, login.stderr)
    # The remaining nodes still reach each other with the new cluster key, as mpirun will.
    for node in remaining:
        peer = lab.nodes[remaining[(remaining.index(node) + 1) % len(remaining)]]
        assert lab.ssh(node, f"ssh -o BatchMode=yes {peer} hostname", check=False).returncode == 0

    # The removed node gave back what rdmaforge gave it, and kept the rest.
    leftovers = lab.ssh(newcomer, f"ls {CLUSTER_KEY} {CLUSTER_KEY}.pub {HOSTFILE} 2>/dev/null; true").stdout
    assert leftovers.strip() == "", leftovers
    assert "rdmaforge cluster" not in lab.ssh(newcomer, "cat /etc/hosts /root/.ssh/authorized_keys").stdout
    assert "rdmaforge lab nodes" in lab.ssh(newcomer, "cat /etc/hosts").stdout  # the lab's own block stays

    # A removed node that does not answer (most often a dead machine) is named and left; the removal still succeeds
    # on the remaining nodes (it was a template error, exit 2: review round 15a).
    dead = remove_with_one_node_silent(lab, newcomer, newcomer)
    assert dead.returncode == 0, dead.stdout[-4000:]
    said = " ".join(dead.stdout.split())
    assert f"{newcomer} did not answer: it keeps its copy of the old cluster key" in said, dead.stdout[-4000:]

    # Out of the inventory, the roles the removal ran find nothing to change on the remaining nodes.
    Lab().up(nodes=LAB_NODES, nics=LAB_NICS)
    for playbook in ("cluster_hosts.yml", "ssh_trust.yml", "mpi_launch.yml"):
        again = converged.playbook(playbook)
        assert again.returncode == 0, again.stdout[-3000:]
        assert_no_changes(again.stdout)
