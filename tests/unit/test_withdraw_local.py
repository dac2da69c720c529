"""The withdraw tasks of ssh_trust, cluster_hosts and mpi_launch, as playbooks/reset.yml runs them (its tasks for these
roles, taken from the playbook), for real against two fake nodes on this machine (ansible_connection=local). Each
node's files live in its own directory: ssh_trust_home, ssh_trust_known_hosts, cluster_hosts_path and
mpi_launch_hostfile point there, so the user's real ~/.ssh and /etc/hosts are never touched.

They take back what rdmaforge wrote and nothing else, report changed only when they changed something, change nothing
in check mode, remove a trust file rdmaforge created (and recorded) once nothing but its block is left in it, and
refuse a key name that would make them delete ~/.ssh or more before they remove anything."""

from __future__ import annotations

import json
import re
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
    files["pub"].write_text("ssh-ed25519 AAAAcluster\n")
    files["own_key"].write_text("the user's own key\n")
    files["authorized_keys"].write_text("ssh-ed25519 AAAAown user@laptop\n" + TRUST.format("ssh-ed25519 AAAAcluster"))
    files["config"].write_text("Host github.com\n    User git\n" + TRUST.format("Host node1 node2"))
    files["known_hosts"].write_text("other ssh-ed25519 AAAAother\n" + TRUST.format("node1 ssh-ed25519 AAAAnode1"))
    files["hosts"].write_text("127.0.0.1 localhost\n" + HOSTS)
    files["hostfile"].write_text(HOSTFILE + "10.0.0.1 slots=1\n10.0.0.2 slots=1\n")
    return files


def fleet(tmp_path: Path, **host_vars: dict[str, Any]) -> tuple[Path, dict[str, dict[str, Path]]]:
    nodes = {name: node(tmp_path / name) for name in ("node1", "node2")}
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


def test_withdraw_takes_back_what_rdmaforge_wrote_and_nothing_else(tmp_path: Path) -> None:
    # node2 stopped managing /etc/hosts after a converge wrote the block: it is still rdmaforge's, and the reset
    # says it took rdmaforge's settings back.
    inv, nodes = fleet(tmp_path, node2={"cluster_hosts_manage": False})
    playbook = str(withdraw_playbook(tmp_path))
    before = {name: contents(files) for name, files in nodes.items()}

    check = run_playbook(playbook, "--check", "--diff", "-e", json.dumps(PATHS), inventory=inv, env=ENV)
    assert check.returncode == 0, check.stdout[-4000:]
    assert {name: contents(files) for name, files in nodes.items()} == before  # check mode changes nothing
    assert all(counts["changed"] > 0 for counts in recap(check.stdout).values()), check.stdout[-3000:]
    assert "-# BEGIN rdmaforge cluster hosts" in check.stdout  # --diff shows the block going

    proc = run_playbook(playbook, "-e", json.dumps(PATHS), inventory=inv, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    for name, files in nodes.items():
        assert contents(files) == {
            "key": None, "pub": None, "own_key": "the user's own key\n",
            "authorized_keys": "ssh-ed25519 AAAAown user@laptop\n", "config": "Host github.com\n    User git\n",
            "known_hosts": "other ssh-ed25519 AAAAother\n", "hosts": "127.0.0.1 localhost\n", "hostfile": None,
        }, name  # fmt: skip

    again = run_playbook(playbook, "-e", json.dumps(PATHS), inventory=inv, env=ENV)
    assert again.returncode == 0, again.stdout[-4000:]
    assert all(counts["changed"] == 0 for counts in recap(again.stdout).values()), again.stdout[-3000:]


def test_the_trust_files_rdmaforge_created_go_when_nothing_else_is_in_them(tmp_path: Path) -> None:
    inv, nodes = fleet(tmp_path)
    one, two = nodes["node1"], nodes["node2"]
    # node1: rdmaforge created authorized_keys (its block alone) and ~/.ssh/config, where the user has added a host
    # since; ssh_known_hosts was there before, empty, so it stays, empty.
    one["authorized_keys"].write_text(TRUST.format("ssh-ed25519 AAAAcluster"))
    one["config"].write_text(TRUST.format("Host node1 node2") + "Host github.com\n    User git\n")
    one["known_hosts"].write_text(TRUST.format("node1 ssh-ed25519 AAAAnode1"))
    # node2: authorized_keys was there before with the user's key (fleet's); rdmaforge created ~/.ssh/config and
    # ssh_known_hosts, the latter left with blank lines around the block (whitespace only, once it is out).
    two["known_hosts"].write_text("\n" + TRUST.format("node1 ssh-ed25519 AAAAnode1") + "  \n")
    two["config"].write_text(TRUST.format("Host node1 node2"))
    created = {"node1": ("authorized_keys", "config"), "node2": ("config", "known_hosts", "config")}
    for name, files in nodes.items():
        files["record"] = tmp_path / name / "ssh-trust-files-created"
        files["record"].write_text("".join(f"{files[kind]}\n" for kind in created[name]))
    playbook = str(withdraw_playbook(tmp_path))
    before = {name: contents(files) for name, files in nodes.items()}

    check = run_playbook(playbook, "--check", "--diff", "-e", json.dumps(PATHS), inventory=inv, env=ENV)
    assert check.returncode == 0, check.stdout[-4000:]
    assert {name: contents(files) for name, files in nodes.items()} == before  # check mode changes nothing
    said = check.stdout.split("TASK [rdmaforge.cluster.ssh_trust : Remove the trust files rdmaforge created")[1]
    said = said.split("TASK [")[0]
    removing = {(host, path) for host, path in re.findall(r"^changed: \[(\w+)\] => \(item=(\S+)\)", said, re.M)}
    assert removing == {("node1", str(one["authorized_keys"])), ("node2", str(two["config"])),
                        ("node2", str(two["known_hosts"]))}, said  # fmt: skip

    proc = run_playbook(playbook, "-e", json.dumps(PATHS), inventory=inv, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    kept = {"key": None, "pub": None, "own_key": "the user's own key\n", "hosts": "127.0.0.1 localhost\n",
            "hostfile": None, "record": None}  # fmt: skip
    assert contents(one) == {**kept, "authorized_keys": None, "config": "Host github.com\n    User git\n",
                             "known_hosts": ""}  # fmt: skip
    assert contents(two) == {**kept, "authorized_keys": "ssh-ed25519 AAAAown user@laptop\n", "config": None,
                             "known_hosts": None}  # fmt: skip
    assert (tmp_path / "node1" / "home" / ".ssh").is_dir()

    again = run_playbook(playbook, "-e", json.dumps(PATHS), inventory=inv, env=ENV)
    assert again.returncode == 0, again.stdout[-4000:]
    assert all(counts["changed"] == 0 for counts in recap(again.stdout).values()), again.stdout[-3000:]


@pytest.mark.parametrize("key_name", ["", ".", "..", "../..", "keys/cluster", "-x"])
def test_a_key_name_outside_ssh_is_refused_before_anything_is_removed(tmp_path: Path, key_name: str) -> None:
    # With the name "" the key pair's paths are ~/.ssh/ and ~/.ssh/.pub: state absent would delete ~/.ssh.
    inv, nodes = fleet(tmp_path)
    before = {name: contents(files) for name, files in nodes.items()}
    extra = json.dumps({**PATHS, "ssh_trust_key_name": key_name})
    proc = run_playbook(str(withdraw_playbook(tmp_path)), "-e", extra, inventory=inv, env=ENV)
    assert proc.returncode != 0
    said = " ".join(proc.stdout.split())
    assert f"node1: ssh_trust_key_name={json.dumps(key_name)}; allowed: a file name in the user's ~/.ssh" in said, said
    assert {name: contents(files) for name, files in nodes.items()} == before
    assert (tmp_path / "node1" / "home" / ".ssh").is_dir()


def test_a_hostfile_rdmaforge_did_not_write_is_kept(tmp_path: Path) -> None:
    inv, nodes = fleet(tmp_path)
    nodes["node1"]["hostfile"].write_text("# my own hostfile\ngpu01 slots=8\n")
    nodes["node2"]["hostfile"].unlink()
    nodes["node2"]["hostfile"].mkdir()  # mpi_launch_hostfile naming a directory: never removed
    (nodes["node2"]["hostfile"] / "inside").write_text("kept\n")
    proc = run_playbook(str(withdraw_playbook(tmp_path)), "-e", json.dumps(PATHS), inventory=inv, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert nodes["node1"]["hostfile"].read_text() == "# my own hostfile\ngpu01 slots=8\n"
    assert (nodes["node2"]["hostfile"] / "inside").read_text() == "kept\n"
    said = " ".join(proc.stdout.split())
    for name in ("node1", "node2"):
        assert f"WARNING: {name}: {tmp_path / name}/etc/hostfile was kept: it is not the MPI hostfile" in said, said


def test_the_closing_message_says_what_check_mode_would_remove(tmp_path: Path) -> None:
    # rdmaforge's own directory, per node: node1's is empty, node2's holds a file of someone else's.
    inv, _ = fleet(tmp_path)
    for name in ("node1", "node2"):
        (tmp_path / name / "opt" / "rdmaforge").mkdir(parents=True)
    (tmp_path / "node2" / "opt" / "rdmaforge" / "notes.txt").write_text("kept\n")
    extra = json.dumps({**PATHS, "reset_own_directories": ["{{ node_root }}/opt/rdmaforge"]})
    playbook = str(withdraw_playbook(tmp_path, closing=True))

    check = run_playbook(playbook, "--check", "-e", extra, inventory=inv, env=ENV)
    assert check.returncode == 0, check.stdout[-4000:]
    said = " ".join(check.stdout.split())
    for name in ("node1", "node2"):
        assert (f"{name}: check mode, nothing was changed: rdmaforge's files and settings would be removed, and the "
                "packages it added; would be kept: packages that came in only as dependencies") in said, said[-3000:]
        assert f"and any of {tmp_path / name}/opt/rdmaforge not empty once the rest is removed." in said
    assert "settings removed" not in said
    assert (tmp_path / "node1" / "opt" / "rdmaforge").is_dir()  # check mode removed nothing

    proc = run_playbook(playbook, "-e", extra, inventory=inv, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    said = " ".join(proc.stdout.split())
    assert "node1: rdmaforge's files and settings removed, and the packages it added; kept: packages" in said, said
    assert "build cache." in said and "would be" not in said and "check mode" not in said
    assert f"build cache, and {tmp_path / 'node2'}/opt/rdmaforge, which are not empty" in said
    assert not (tmp_path / "node1" / "opt" / "rdmaforge").exists()
