"""The withdraw tasks of ssh_trust, cluster_hosts and mpi_launch, as playbooks/reset.yml runs them (its tasks for these
roles, taken from the playbook), for real against two fake nodes on this machine (ansible_connection=local). Each
node's files live in its own directory: ssh_trust_home, ssh_trust_known_hosts, cluster_hosts_path and
mpi_launch_hostfile point there, so the user's real ~/.ssh and /etc/hosts are never touched.

They take back what rdmaforge wrote and nothing else, report changed only when they changed something, change nothing
in check mode, remove a trust file rdmaforge created (and recorded) once nothing but its block is left in it, and
refuse a key name that would make them delete ~/.ssh or more before they remove anything."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_playbook

from rdmaforge.paths import PROJECT_ROOT

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}
ROLES = ("rdmaforge.cluster.ssh_trust", "rdmaforge.cluster.cluster_hosts", "rdmaforge.cluster.mpi_launch")
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
         "ansible_become": False}  # fmt: skip
#: Every node's files under its own directory (role vars such as ssh_trust_home are beaten only by -e).
PATHS = {
    "ssh_trust_home": "{{ node_root }}/home",
    "ssh_trust_known_hosts": "{{ node_root }}/ssh_known_hosts",
    "ssh_trust_record": "{{ node_root }}/ssh-trust-files-created",
    "ssh_trust_logins_record": "{{ node_root }}/ssh-trust-logins.json",
    # root's login where a node has no login record (converged before it existed): under the node's directory too
    "ssh_trust_logins_before_record": [{"user": "root", "home": "{{ node_root }}/roothome",
                                        "key": "rdmaforge_cluster_ed25519"}],
    "cluster_hosts_path": "{{ node_root }}/hosts",
    "mpi_launch_hostfile": "{{ node_root }}/etc/hostfile",
}
TRUST = "# BEGIN rdmaforge cluster trust\n{}\n# END rdmaforge cluster trust\n"
HOSTS = "# BEGIN rdmaforge cluster hosts\n10.0.0.1 node1\n10.0.0.2 node2\n# END rdmaforge cluster hosts\n"
HOSTFILE = "# Ansible managed\n# One line per node: address and MPI slots (GPUs per node, or 1 without GPUs).\n"


def withdraw_playbook(tmp_path: Path, closing: bool = False) -> Path:
    """reset.yml's check of the node settings, then its main play with only its tasks for these three roles (the
    others need packages, builds, ...), and with ``closing`` its last tasks (rdmaforge's own directories, and what
    it says stays)."""
    plays = yaml.safe_load((PROJECT_ROOT / "playbooks" / "reset.yml").read_text())
    (check,) = [p for p in plays if str(p.get("name", "")).startswith("Reset | check the settings")]
    (play,) = [p for p in plays if str(p.get("name", "")).startswith("Reset | remove what")]
    tasks = [t for t in play["tasks"] if t.get("ansible.builtin.include_role", {}).get("name") in ROLES]
    assert [t["ansible.builtin.include_role"]["name"] for t in tasks] == [ROLES[2], ROLES[0], ROLES[1]]
    if closing:
        last = [t for t in play["tasks"] if "ansible.builtin.include_role" not in t]
        assert [t["name"] for t in last][-1] == "Say what stays"
        tasks += last
    path = tmp_path / "withdraw.yml"
    path.write_text(yaml.safe_dump([check, {**play, "become": False, "gather_facts": False, "tasks": tasks}]))
    return path


def node(root: Path) -> dict[str, Path]:
    """A node as a converge leaves it: the cluster key, the marked blocks, the hostfile, beside the user's own."""
    ssh = root / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (root / "etc").mkdir()
    files = {
        "key": ssh / "rdmaforge_cluster_ed25519",
        "pub": ssh / "rdmaforge_cluster_ed25519.pub",
        "own_key": ssh / "id_ed25519",
        "authorized_keys": ssh / "authorized_keys",
        "config": ssh / "config",
        "known_hosts": root / "ssh_known_hosts",
        "hosts": root / "hosts",
        "hostfile": root / "etc" / "hostfile",
    }
    files["key"].write_text("cluster private key\n")
    files["pub"].write_text("ssh-ed25519 AAAAcluster rdmaforge node1-cluster\n")  # controller_key.yml's comment
    files["own_key"].write_text("the user's own key\n")
    files["authorized_keys"].write_text("ssh-ed25519 AAAAown user@laptop\n" + TRUST.format("ssh-ed25519 AAAAcluster"))
    files["config"].write_text("Host github.com\n    User git\n" + TRUST.format("Host node1 node2"))
    files["known_hosts"].write_text("other ssh-ed25519 AAAAother\n" + TRUST.format("node1 ssh-ed25519 AAAAnode1"))
    files["hosts"].write_text("127.0.0.1 localhost\n" + HOSTS)
    files["hostfile"].write_text(HOSTFILE + "10.0.0.1 slots=1\n10.0.0.2 slots=1\n")
    return files


def fleet(tmp_path: Path, names: tuple[str, ...] = ("node1", "node2"),
          **host_vars: dict[str, Any]) -> tuple[Path, dict[str, dict[str, Path]]]:  # fmt: skip
    nodes = {name: node(tmp_path / name) for name in names}
    hosts = {name: {**LOCAL, "node_root": str(tmp_path / name), **host_vars.get(name, {})} for name in nodes}
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    return inv, nodes


def contents(files: dict[str, Path]) -> dict[str, str | None]:
    return {name: path.read_text() if path.is_file() else None for name, path in files.items()}


def recap(stdout: str) -> dict[str, dict[str, int]]:
    counts = {}
    for line in stdout.split("PLAY RECAP")[-1].splitlines():
        if ":" in line and "ok=" in line:
            host, rest = line.split(":", 1)
            counts[host.strip()] = {k: int(v) for k, v in (kv.split("=") for kv in rest.split())}
    return counts


# Each run costs about ten seconds of CPU (a dozen module runs per node): the tests below share the runs of one fleet
# (scope="module") where they only read what the runs did, each test asserting on its own nodes.


@dataclasses.dataclass
class Withdrawn:
    """One fleet, withdrawn three times: in check mode with --diff, for real, and again."""

    root: Path
    nodes: dict[str, dict[str, Path]]
    before: dict[str, dict[str, str | None]]  # every node's files before the runs
    after_check: dict[str, dict[str, str | None]]  # ... and after the check-mode run
    check: subprocess.CompletedProcess[str]
    proc: subprocess.CompletedProcess[str]
    again: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def withdrawn(tmp_path_factory: pytest.TempPathFactory) -> Withdrawn:
    """node1 and node2 as a converge leaves them (node2 stopped managing /etc/hosts since), node3 and node4 with
    trust files that rdmaforge created (test_the_trust_files_rdmaforge_created_go_when_nothing_else_is_in_them)."""
    root = tmp_path_factory.mktemp("withdrawn")
    inv, nodes = fleet(root, ("node1", "node2", "node3", "node4", "node5", "node6"),
                       node2={"cluster_hosts_manage": False})  # fmt: skip
    three, four = nodes["node3"], nodes["node4"]
    # node5: the trust was installed for another login first (ssh_trust_user changed since), as its login record
    # says: that login's key pair, its authorized_keys block beside the user's own key, a ~/.ssh/config rdmaforge
    # created with the block alone (recorded).
    old = root / "node5" / "oldhome" / ".ssh"
    old.mkdir(parents=True)
    nodes["node5"].update(old_key=old / "rdmaforge_cluster_ed25519", old_pub=old / "rdmaforge_cluster_ed25519.pub",
                          old_authorized_keys=old / "authorized_keys", old_config=old / "config",
                          logins=root / "node5" / "ssh-trust-logins.json",
                          record=root / "node5" / "ssh-trust-files-created")  # fmt: skip
    # node6: converged for root before the login record existed, then ssh_trust_user changed: no record, root's key
    # pair and authorized_keys block still there.
    roots = root / "node6" / "roothome" / ".ssh"
    roots.mkdir(parents=True)
    nodes["node6"].update(root_key=roots / "rdmaforge_cluster_ed25519",
                          root_pub=roots / "rdmaforge_cluster_ed25519.pub",
                          root_authorized_keys=roots / "authorized_keys")  # fmt: skip
    nodes["node6"]["root_key"].write_text("cluster private key\n")
    nodes["node6"]["root_pub"].write_text("ssh-ed25519 AAAAcluster rdmaforge node1-cluster\n")
    nodes["node6"]["root_authorized_keys"].write_text("ssh-ed25519 AAAAadmin admin@laptop\n"
                                                      + TRUST.format("ssh-ed25519 AAAAcluster"))  # fmt: skip
    five = nodes["node5"]
    five["old_key"].write_text("cluster private key\n")
    five["old_pub"].write_text("ssh-ed25519 AAAAcluster rdmaforge node1-cluster\n")
    five["old_authorized_keys"].write_text("ssh-ed25519 AAAAold old@laptop\n"
                                           + TRUST.format("ssh-ed25519 AAAAcluster"))
    five["old_config"].write_text(TRUST.format("Host node1 node2"))
    five["record"].write_text(f"{five['old_config']}\n")
    logins = [{"user": "trainer", "home": str(old.parent)}, {"user": "root", "home": str(root / "node5" / "home")}]
    five["logins"].write_text(json.dumps([{**login, "key": "rdmaforge_cluster_ed25519"} for login in logins]))
    # node3: rdmaforge created authorized_keys (its block alone) and ~/.ssh/config, where the user has added a host
    # since; ssh_known_hosts was there before, empty, so it stays, empty.
    three["authorized_keys"].write_text(TRUST.format("ssh-ed25519 AAAAcluster"))
    three["config"].write_text(TRUST.format("Host node1 node2") + "Host github.com\n    User git\n")
    three["known_hosts"].write_text(TRUST.format("node1 ssh-ed25519 AAAAnode1"))
    # node4: authorized_keys was there before with the user's key (fleet's); rdmaforge created ~/.ssh/config and
    # ssh_known_hosts, the latter left with blank lines around the block (whitespace only, once it is out).
    four["known_hosts"].write_text("\n" + TRUST.format("node1 ssh-ed25519 AAAAnode1") + "  \n")
    four["config"].write_text(TRUST.format("Host node1 node2"))
    created = {"node3": ("authorized_keys", "config"), "node4": ("config", "known_hosts", "config")}
    for name, kinds in created.items():
        nodes[name]["record"] = root / name / "ssh-trust-files-created"
        nodes[name]["record"].write_text("".join(f"{nodes[name][kind]}\n" for kind in kinds))
    playbook = str(withdraw_playbook(root))
    before = {name: contents(files) for name, files in nodes.items()}
    check = run_playbook(playbook, "--check", "--diff", "-e", json.dumps(PATHS), inventory=inv, env=ENV)
    after_check = {name: contents(files) for name, files in nodes.items()}
    proc = run_playbook(playbook, "-e", json.dumps(PATHS), inventory=inv, env=ENV)
    again = run_playbook(playbook, "-e", json.dumps(PATHS), inventory=inv, env=ENV)
    return Withdrawn(root, nodes, before, after_check, check, proc, again)


def test_withdraw_takes_back_what_rdmaforge_wrote_and_nothing_else(withdrawn: Withdrawn) -> None:
    # node2 stopped managing /etc/hosts after a converge wrote the block: it is still rdmaforge's, and the reset
    # says it took rdmaforge's settings back.
    mine = ("node1", "node2")
    check = withdrawn.check
    assert check.returncode == 0, check.stdout[-4000:]
    assert {name: withdrawn.after_check[name] for name in mine} == {name: withdrawn.before[name] for name in mine}
    assert all(recap(check.stdout)[name]["changed"] > 0 for name in mine), check.stdout[-3000:]
    assert "-# BEGIN rdmaforge cluster hosts" in check.stdout  # --diff shows the block going

    proc = withdrawn.proc
    assert proc.returncode == 0, proc.stdout[-4000:]
    for name in mine:
        assert contents(withdrawn.nodes[name]) == {
            "key": None, "pub": None, "own_key": "the user's own key\n",
            "authorized_keys": "ssh-ed25519 AAAAown user@laptop\n", "config": "Host github.com\n    User git\n",
            "known_hosts": "other ssh-ed25519 AAAAother\n", "hosts": "127.0.0.1 localhost\n", "hostfile": None,
        }, name  # fmt: skip

    again = withdrawn.again
    assert again.returncode == 0, again.stdout[-4000:]
    assert all(recap(again.stdout)[name]["changed"] == 0 for name in mine), again.stdout[-3000:]


def test_every_login_the_trust_was_installed_for_is_withdrawn(withdrawn: Withdrawn) -> None:
    """node5 of the fixture: its login record names a login the trust was installed for before ssh_trust_user
    changed. Reset used to take the trust back from ssh_trust_user alone: the old login kept the cluster key, and
    its authorized_keys kept accepting it."""
    five = withdrawn.nodes["node5"]
    assert withdrawn.check.returncode == 0, withdrawn.check.stdout[-4000:]
    assert withdrawn.after_check["node5"] == withdrawn.before["node5"]  # check mode changes nothing
    assert withdrawn.proc.returncode == 0, withdrawn.proc.stdout[-4000:]
    after = contents(five)
    assert {name: after[name] for name in ("old_key", "old_pub", "old_authorized_keys", "old_config", "logins",
                                           "record")} == {  # fmt: skip
        "old_key": None, "old_pub": None, "old_authorized_keys": "ssh-ed25519 AAAAold old@laptop\n",
        "old_config": None, "logins": None, "record": None}  # fmt: skip
    assert after["key"] is None and after["authorized_keys"] == "ssh-ed25519 AAAAown user@laptop\n"
    assert recap(withdrawn.again.stdout)["node5"]["changed"] == 0, withdrawn.again.stdout[-3000:]


def test_root_s_trust_from_before_the_login_record_is_withdrawn(withdrawn: Withdrawn) -> None:
    """Review round 42: a node converged for root before the login record existed, then for another user, has no
    record: the withdrawal read no login but the current one and left root's cluster key and block."""
    six = withdrawn.nodes["node6"]
    assert withdrawn.after_check["node6"] == withdrawn.before["node6"]  # check mode changes nothing
    assert withdrawn.proc.returncode == 0, withdrawn.proc.stdout[-4000:]
    after = contents(six)
    assert (after["root_key"], after["root_pub"]) == (None, None)
    assert after["root_authorized_keys"] == "ssh-ed25519 AAAAadmin admin@laptop\n"
    assert recap(withdrawn.again.stdout)["node6"]["changed"] == 0, withdrawn.again.stdout[-3000:]


def test_the_trust_files_rdmaforge_created_go_when_nothing_else_is_in_them(withdrawn: Withdrawn) -> None:
    # node3 and node4 of the fixture: the trust files rdmaforge created, as its record lists them.
    three, four = withdrawn.nodes["node3"], withdrawn.nodes["node4"]
    check = withdrawn.check
    assert check.returncode == 0, check.stdout[-4000:]
    for name in ("node3", "node4"):
        assert withdrawn.after_check[name] == withdrawn.before[name]  # check mode changes nothing
    said = check.stdout.split("TASK [rdmaforge.cluster.ssh_trust : Remove the trust files rdmaforge created")[1]
    said = said.split("TASK [")[0]
    found = re.findall(r"^changed: \[(\w+)\] => \(item=(\S+)\)", said, re.M)
    removing = {(host, path) for host, path in found if host in ("node3", "node4")}
    assert removing == {("node3", str(three["authorized_keys"])), ("node4", str(four["config"])),
                        ("node4", str(four["known_hosts"]))}, said  # fmt: skip

    assert withdrawn.proc.returncode == 0, withdrawn.proc.stdout[-4000:]
    kept = {"key": None, "pub": None, "own_key": "the user's own key\n", "hosts": "127.0.0.1 localhost\n",
            "hostfile": None, "record": None}  # fmt: skip
    assert contents(three) == {**kept, "authorized_keys": None, "config": "Host github.com\n    User git\n",
                               "known_hosts": ""}  # fmt: skip
    assert contents(four) == {**kept, "authorized_keys": "ssh-ed25519 AAAAown user@laptop\n", "config": None,
                              "known_hosts": None}  # fmt: skip
    assert (withdrawn.root / "node3" / "home" / ".ssh").is_dir()

    again = withdrawn.again
    assert again.returncode == 0, again.stdout[-4000:]
    assert all(recap(again.stdout)[name]["changed"] == 0 for name in ("node3", "node4")), again.stdout[-3000:]


#: One node per key name, each refused by name in one run: the check runs on every node before any is changed.
BAD_KEY_NAMES = {"node1": "", "node2": ".", "node3": "..", "node4": "../..", "node5": "keys/cluster", "node6": "-x"}


@dataclasses.dataclass
class Refused:
    root: Path
    nodes: dict[str, dict[str, Path]]
    before: dict[str, dict[str, str | None]]
    proc: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def bad_key_names(tmp_path_factory: pytest.TempPathFactory) -> Refused:
    """A withdraw run over nodes that each name their key with one of BAD_KEY_NAMES (a host variable)."""
    root = tmp_path_factory.mktemp("bad-key-names")
    key_names = {name: {"ssh_trust_key_name": key_name} for name, key_name in BAD_KEY_NAMES.items()}
    inv, nodes = fleet(root, tuple(BAD_KEY_NAMES), **key_names)
    before = {name: contents(files) for name, files in nodes.items()}
    proc = run_playbook(str(withdraw_playbook(root)), "-e", json.dumps(PATHS), inventory=inv, env=ENV)
    return Refused(root, nodes, before, proc)


@pytest.mark.parametrize(("name", "key_name"), BAD_KEY_NAMES.items())
def test_a_key_name_outside_ssh_is_refused_before_anything_is_removed(
    bad_key_names: Refused, name: str, key_name: str
) -> None:
    # With the name "" the key pair's paths are ~/.ssh/ and ~/.ssh/.pub: state absent would delete ~/.ssh.
    proc = bad_key_names.proc
    assert proc.returncode != 0
    said = " ".join(proc.stdout.split())
    assert f"{name}: ssh_trust_key_name={json.dumps(key_name)}; allowed: a file name in the user's ~/.ssh" in said, said
    assert contents(bad_key_names.nodes[name]) == bad_key_names.before[name]
    assert (bad_key_names.root / name / "home" / ".ssh").is_dir()


@dataclasses.dataclass
class Closing:
    """withdraw_playbook with its closing tasks, in check mode, then for real, over one fleet."""

    root: Path
    nodes: dict[str, dict[str, Path]]
    check: subprocess.CompletedProcess[str]
    own_after_check: bool  # node1's own directory still there after the check-mode run
    proc: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def closing(tmp_path_factory: pytest.TempPathFactory) -> Closing:
    """rdmaforge's own directory, per node: node1's is empty, node2's holds a file of someone else's. node1's MPI
    hostfile is the user's own, and node2's mpi_launch_hostfile names a directory
    (test_a_hostfile_rdmaforge_did_not_write_is_kept)."""
    root = tmp_path_factory.mktemp("closing")
    # STAND-IN for what os_packages' withdraw registers (its package queries need the node's package manager): node1
    # read a record of one package it removed; node2 has no record (converged before rdmaforge kept one).
    removed = {"os_packages_added": {"content": "aWJ2ZXJicy11dGlscwo="}, "os_packages_removing": ["ibverbs-utils"]}
    inv, nodes = fleet(root, node1=removed)
    for name in ("node1", "node2"):
        (root / name / "opt" / "rdmaforge").mkdir(parents=True)
    (root / "node2" / "opt" / "rdmaforge" / "notes.txt").write_text("kept\n")
    nodes["node1"]["hostfile"].write_text("# my own hostfile\ngpu01 slots=8\n")
    nodes["node2"]["hostfile"].unlink()
    nodes["node2"]["hostfile"].mkdir()  # mpi_launch_hostfile naming a directory: never removed
    (nodes["node2"]["hostfile"] / "inside").write_text("kept\n")
    extra = json.dumps({**PATHS, "reset_own_directories": ["{{ node_root }}/opt/rdmaforge"]})
    playbook = str(withdraw_playbook(root, closing=True))
    check = run_playbook(playbook, "--check", "-e", extra, inventory=inv, env=ENV)
    own_after_check = (root / "node1" / "opt" / "rdmaforge").is_dir()
    proc = run_playbook(playbook, "-e", extra, inventory=inv, env=ENV)
    return Closing(root, nodes, check, own_after_check, proc)


def test_a_hostfile_rdmaforge_did_not_write_is_kept(closing: Closing) -> None:
    nodes, proc = closing.nodes, closing.proc
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert nodes["node1"]["hostfile"].read_text() == "# my own hostfile\ngpu01 slots=8\n"
    assert (nodes["node2"]["hostfile"] / "inside").read_text() == "kept\n"
    said = " ".join(proc.stdout.split())
    for name in ("node1", "node2"):
        assert f"WARNING: {name}: {closing.root / name}/etc/hostfile was kept: it is not the MPI hostfile" in said, said


def test_the_closing_message_says_what_check_mode_would_remove(closing: Closing) -> None:
    tmp_path, check = closing.root, closing.check
    assert check.returncode == 0, check.stdout[-4000:]
    said = " ".join(check.stdout.split())
    assert ("node1: check mode, nothing was changed: rdmaforge's files and settings would be removed, and the "
            "packages it added (ibverbs-utils); would be kept: packages that came in only as dependencies") in said
    # Without the record nothing says which packages rdmaforge added: the message does not claim they went.
    assert ("node2: check mode, nothing was changed: rdmaforge's files and settings would be removed; no record of "
            "packages it added (os_packages_record), so none would be removed; would be kept: ") in said, said[-3000:]
    for name in ("node1", "node2"):
        assert f"and any of {tmp_path / name}/opt/rdmaforge not empty once the rest is removed." in said
    assert "settings removed" not in said
    assert closing.own_after_check  # check mode removed nothing

    proc = closing.proc
    assert proc.returncode == 0, proc.stdout[-4000:]
    said = " ".join(proc.stdout.split())
    assert "node1: rdmaforge's files and settings removed, and the packages it added (ibverbs-utils); kept: " in said
    assert "node2: rdmaforge's files and settings removed; no record of packages it added (os_packages_record), so " \
           "none was removed; kept: packages" in said, said
    assert "build cache." in said and "would be" not in said and "check mode" not in said
    assert f"build cache, and {tmp_path / 'node2'}/opt/rdmaforge, which are not empty" in said
    assert not (tmp_path / "node1" / "opt" / "rdmaforge").exists()


def test_a_key_of_the_users_at_the_cluster_keys_name_is_never_overwritten_nor_removed(tmp_path: Path) -> None:
    """ssh_trust_key_name: id_ed25519 (the user's own key): the converge wrote the cluster key over it, and a reset
    deleted it, though the role promises the user's keys are never touched (review round 15a). The converge now
    stops before writing; the withdrawal keeps a key whose public half lacks rdmaforge's comment."""
    inv, nodes = fleet(tmp_path, ("node1",))
    own_key = nodes["node1"]["own_key"]
    (own_key.parent / "id_ed25519.pub").write_text("ssh-ed25519 AAAAown user@laptop\n")
    before = contents(nodes["node1"])
    playbook = tmp_path / "converge.yml"
    playbook.write_text(yaml.safe_dump([{"name": "converge", "hosts": "cluster", "gather_facts": False,
                                         "roles": [{"role": "rdmaforge.cluster.ssh_trust"}]}]))  # fmt: skip
    extra = json.dumps({**PATHS, "ssh_trust_key_name": "id_ed25519", "ssh_trust_check": False,
                        "ssh_trust_controller_cache": str(tmp_path / "controller")})  # fmt: skip
    converge = run_playbook(str(playbook), "-e", extra, inventory=inv, env=ENV)
    assert converge.returncode != 0
    said = " ".join(converge.stdout.split())
    assert (f"node1: ssh_trust_key_name=\"id_ed25519\" names a key of the user's own ({own_key}, whose .pub has no "
            "'rdmaforge <cluster>' comment): the converge would overwrite it and a reset delete it") in said, said
    assert contents(nodes["node1"]) == before
    withdraw = run_playbook(str(withdraw_playbook(tmp_path)), "-e", extra, inventory=inv, env=ENV)
    assert withdraw.returncode == 0, withdraw.stdout[-4000:]
    assert own_key.read_text() == "the user's own key\n"
    assert f"node1: {own_key} was kept: it is not rdmaforge's cluster key" in " ".join(withdraw.stdout.split())


def test_a_login_record_that_is_not_rdmaforge_s_stops_the_reset_before_anything_is_removed(tmp_path: Path) -> None:
    """Review round 42: the login record names what the withdrawal deletes, and was read only when ssh_trust's turn
    came, after reset had removed the NCCL settings, plugin and builds. reset.yml's settings check reads it first."""
    inv, nodes = fleet(tmp_path)
    (tmp_path / "node2" / "ssh-trust-logins.json").write_text('[{"user": "x", "home": "relative", "key": "k"}]')
    before = {name: contents(files) for name, files in nodes.items()}
    proc = run_playbook(str(withdraw_playbook(tmp_path)), "-e", json.dumps(PATHS), inventory=inv, env=ENV)
    assert proc.returncode != 0
    said = " ".join(proc.stdout.split())
    assert f"{tmp_path / 'node2' / 'ssh-trust-logins.json'}: entry" in said, said[-3000:]
    assert "is not a login rdmaforge recorded" in said
    assert {name: contents(files) for name, files in nodes.items()} == before  # neither node changed
