"""The NCCL rollout and rollback never leave the cluster on mixed builds while reporting success.

rollback_nccl.yml runs for real against three fake nodes on this machine (ansible_connection=local, each with its
own nccl_build_prefix_root holding fake builds whose libnccl.so.2 answers ncclGetVersion): a rollback that would
send the nodes to different `previous` builds is refused before any node switches.

upgrade_nccl.yml's own plays need nvcc and a build: its gate play and its batch play's keywords are taken from the
playbook and run around a node that fails earlier, or does not answer (ssh to a closed port), in a batch of two.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_playbook

from rdmaforge import nccl_build
from rdmaforge.paths import PROJECT_ROOT

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}
PLAYBOOKS = PROJECT_ROOT / "playbooks"
NODES = ("node1", "node2", "node3")
# Build id -> NCCL release it reports.
BUILDS = {"b0": ("2.28.3", 22803), "b1": ("2.29.7", 22907), "b2": ("2.30.1", 23001)}
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
         "ansible_become": False}  # fmt: skip
UNREACHABLE = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1}


@pytest.fixture(autouse=True)
def ldconfig_stand_in(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """rollback.yml runs ldconfig on each node, and here the nodes are this machine: a STAND-IN ldconfig (exits 0)
    first on PATH keeps the host's ld.so cache as it is (three real ones at once also race on /etc/ld.so.cache~)."""
    stand_in = tmp_path_factory.mktemp("stand-in-bin")
    (stand_in / "ldconfig").write_text("#!/bin/sh\nexit 0\n")
    (stand_in / "ldconfig").chmod(0o755)
    monkeypatch.setenv("PATH", f"{stand_in}:{os.environ['PATH']}")
    return stand_in


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A shared library per build whose ncclGetVersion reports that build's release."""
    out = tmp_path_factory.mktemp("libs")
    source = out / "nccl.c"
    source.write_text("int ncclGetVersion(int *v) { *v = CODE; return 0; }\n")
    libs = {}
    for build, (_, code) in BUILDS.items():
        libs[build] = out / f"{build}.so"
        subprocess.run(["cc", "-shared", "-fPIC", f"-DCODE={code}", "-o", str(libs[build]), str(source)], check=True)
    return libs


def install(root: Path, libraries: dict[str, Path], current: str, previous: str | None) -> None:
    """A node's prefix root as build_once leaves it: every build, `current` and `previous` links."""
    root.mkdir(parents=True)
    for build, (version, _) in BUILDS.items():
        (root / build / "lib").mkdir(parents=True)
        (root / build / "lib" / "libnccl.so.2").write_bytes(libraries[build].read_bytes())
        (root / build / ".rdmaforge-build.json").write_text(json.dumps({"id": build, "version": version}))
    (root / "current").symlink_to(root / current)
    if previous:
        (root / "previous").symlink_to(root / previous)


def links(root: Path) -> tuple[str, str]:
    return (root / "current").readlink().name, (root / "previous").readlink().name


def links_or_none(root: Path) -> tuple[str, str | None]:
    """`current` and `previous` (None without one)."""
    previous = root / "previous"
    return (root / "current").readlink().name, previous.readlink().name if previous.is_symlink() else None


def inventory(tmp_path: Path, hosts: dict[str, dict[str, Any]]) -> Path:
    """Group cluster of ``hosts``, each on the tcp profile (rollback_nccl.yml checks the inventory first)."""
    path = tmp_path / "hosts.yml"
    hosts = {name: {"rdmaforge_fabric": "tcp", **variables} for name, variables in hosts.items()}
    path.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    return path


def rollback_fleet(tmp_path: Path, libraries: dict[str, Path],
                   states: dict[str, tuple[str, str | None]]) -> tuple[Path, dict[str, Path]]:  # fmt: skip
    roots = {node: tmp_path / node for node in states}
    for node, (current, previous) in states.items():
        install(roots[node], libraries, current, previous)
    hosts = {node: {**LOCAL, "nccl_build_prefix_root": str(roots[node])} for node in states}
    return inventory(tmp_path, hosts), roots


def test_a_uniform_rollback_switches_every_node(tmp_path: Path, libraries: dict[str, Path]) -> None:
    inv, roots = rollback_fleet(tmp_path, libraries, {node: ("b2", "b1") for node in NODES})
    proc = run_playbook("rollback_nccl.yml", "-e", "rdmaforge_upgrade_serial=2", inventory=inv, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert {node: links(root) for node, root in roots.items()} == {node: ("b1", "b2") for node in NODES}
    for node in NODES:
        assert f"{node}: libnccl loads and reports NCCL 2.29.7 (22907)" in proc.stdout


def test_the_inventorys_batch_size_reaches_the_rolling_play(tmp_path: Path, libraries: dict[str, Path]) -> None:
    """serial is a play keyword, which Ansible templates with -e only: rdmaforge_upgrade_serial in the inventory
    (group_vars) left the rollout at one node per batch without a word. The check play now hands it to the rolling
    play through a group's name (rdmaforge.batch_size)."""
    inv, roots = rollback_fleet(tmp_path, libraries, {node: ("b2", "b1") for node in NODES})
    doc = yaml.safe_load(inv.read_text())
    doc["all"]["children"]["cluster"]["vars"] = {"rdmaforge_upgrade_serial": 2}
    inv.write_text(yaml.safe_dump(doc))
    proc = run_playbook("rollback_nccl.yml", inventory=inv, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert proc.stdout.count("PLAY [Rollback | switch each batch back") == 2, proc.stdout[-4000:]  # 2 + 1 nodes
    assert {node: links(root) for node, root in roots.items()} == {node: ("b1", "b2") for node in NODES}


def test_a_second_rollback_which_would_roll_forward_is_refused(tmp_path: Path, libraries: dict[str, Path]) -> None:
    """After a rollback `previous` is the newer build it left: running rollback-nccl again rolled every node forward
    to it, green, while the inventory was pinned back (review round 15a). Going forward is an upgrade."""
    inv, roots = rollback_fleet(tmp_path, libraries, {node: ("b2", "b1") for node in NODES})
    first = run_playbook("rollback_nccl.yml", "-e", "rdmaforge_upgrade_serial=3", inventory=inv, env=ENV)
    assert first.returncode == 0, first.stdout[-4000:]
    again = run_playbook("rollback_nccl.yml", "-e", "rdmaforge_upgrade_serial=3", inventory=inv, env=ENV)
    assert again.returncode != 0
    said = " ".join(again.stdout.split())
    assert (f"node1: NCCL was rolled back here from b2 to b1 ({roots['node1']}/.rdmaforge-rolled-back), so "
            "`previous` is the build that rollback left and a rollback now would roll forward to it") in said, said
    assert {node: links(root) for node, root in roots.items()} == {node: ("b1", "b2") for node in NODES}
    # A rollback made before the record existed: `previous`'s newer release refuses it all the same.
    for root in roots.values():
        (root / ".rdmaforge-rolled-back").unlink()
    older = run_playbook("rollback_nccl.yml", "-e", "rdmaforge_upgrade_serial=3", inventory=inv, env=ENV)
    said = " ".join(older.stdout.split())
    assert older.returncode != 0 and (f"node1: {roots['node1']}/previous leads to NCCL 2.30.1, newer than the NCCL "
                                      "2.29.7 current runs (a rollback already happened)") in said, said
    assert {node: links(root) for node, root in roots.items()} == {node: ("b1", "b2") for node in NODES}


def test_a_second_rollback_between_builds_of_one_release_is_refused(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    """Two builds of NCCL 2.29.7 (other archs or functions): no release tells which is newer, and a second rollback
    swapped them back, green, while the inventory was pinned back (review round 21a). The rollback's record does."""
    inv, roots = rollback_fleet(tmp_path, libraries, {node: ("b1", None) for node in NODES})
    for root in roots.values():
        shutil.copytree(root / "b1", root / "b1-sm_90", symlinks=True)
        (root / "b1-sm_90" / ".rdmaforge-build.json").write_text(json.dumps({"id": "b1-sm_90", "version": "2.29.7"}))
        (root / "current").unlink()
        (root / "current").symlink_to(root / "b1-sm_90")
        (root / "previous").symlink_to(root / "b1")
    first = run_playbook("rollback_nccl.yml", "-e", "rdmaforge_upgrade_serial=3", inventory=inv, env=ENV)
    assert first.returncode == 0, first.stdout[-4000:]
    assert {node: links(root) for node, root in roots.items()} == {node: ("b1", "b1-sm_90") for node in NODES}
    assert (roots["node1"] / ".rdmaforge-rolled-back").read_text() == "b1-sm_90 -> b1\n"
    again = run_playbook("rollback_nccl.yml", "-e", "rdmaforge_upgrade_serial=3", inventory=inv, env=ENV)
    said = " ".join(again.stdout.split())
    assert again.returncode != 0 and "node2: NCCL was rolled back here from b1-sm_90 to b1" in said, said
    assert {node: links(root) for node, root in roots.items()} == {node: ("b1", "b1-sm_90") for node in NODES}


def test_the_rollback_is_recorded_before_the_links_switch() -> None:
    """Written after them, a run stopped between the two left a rollback without its record, and a second rollback
    (between builds of one release) went ahead (review round 22)."""
    names = [task["name"] for task in yaml.safe_load((PROJECT_ROOT / "roles" / "nccl_build" / "tasks" /
                                                       "rollback.yml").read_text())]  # fmt: skip
    assert names.index("Record this rollback") < names.index("Point `current` at the previous build")


def test_a_rollback_is_refused_where_the_current_builds_manifest_cannot_be_read(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    """Without it, whether `previous` is newer could not be told, and the check was skipped."""
    inv, roots = rollback_fleet(tmp_path, libraries, {node: ("b2", "b1") for node in NODES})
    (roots["node3"] / "b2" / ".rdmaforge-build.json").unlink()
    proc = run_playbook("rollback_nccl.yml", "-e", "rdmaforge_upgrade_serial=3", inventory=inv, env=ENV)
    said = " ".join(proc.stdout.split())
    assert proc.returncode != 0 and f"node3: {roots['node3']}/b2/.rdmaforge-build.json cannot be read" in said, said
    assert {node: links(root) for node, root in roots.items()} == {node: ("b2", "b1") for node in NODES}


@pytest.mark.parametrize("damage", ["cut", "not-an-object", "missing"])
def test_a_previous_build_whose_manifest_is_damaged_is_refused_before_any_node_switches(
    tmp_path: Path, libraries: dict[str, Path], damage: str
) -> None:
    """The release the switched library is checked against comes from the previous build's manifest: one cut short
    failed the node with a template error after its links were switched (the other nodes switched too). Refused now,
    before any node switches, naming the file."""
    inv, roots = rollback_fleet(tmp_path, libraries, {node: ("b2", "b1") for node in NODES})
    manifest = roots["node2"] / "b1" / ".rdmaforge-build.json"
    if damage == "missing":
        manifest.unlink()
    else:
        manifest.write_text(manifest.read_text()[:12] if damage == "cut" else '"b1"')
    proc = run_playbook("rollback_nccl.yml", inventory=inv, env=ENV)
    assert proc.returncode != 0, proc.stdout[-4000:]
    said = " ".join(proc.stdout.split())
    what = "missing" if damage == "missing" else "damaged (no JSON object naming a version)"
    assert f"node2: {roots['node2'] / 'b1'}/.rdmaforge-build.json is {what}" in said, proc.stdout[-4000:]
    assert {node: links(root) for node, root in roots.items()} == {node: ("b2", "b1") for node in NODES}


def test_a_rollback_to_different_previous_builds_is_refused_before_any_node_switches(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    # An upgrade b1 -> b2 stopped after node1: node1 is on b2 (previous b1), the others still on b1 with b0, from
    # an earlier upgrade, as previous. Rolling every node back would put node1 on b1 and the others on b0.
    states: dict[str, tuple[str, str | None]] = {"node1": ("b2", "b1"), "node2": ("b1", "b0"), "node3": ("b1", "b0")}
    inv, roots = rollback_fleet(tmp_path, libraries, states)
    proc = run_playbook("rollback_nccl.yml", inventory=inv, env=ENV)
    assert proc.returncode != 0, proc.stdout[-4000:]
    assert "rolling back would leave the cluster on different NCCL builds" in proc.stdout, proc.stdout[-4000:]
    assert "node1: b2 -> b1; node2: b1 -> b0; node3: b1 -> b0." in proc.stdout, proc.stdout[-4000:]
    assert {node: links(root) for node, root in roots.items()} == states  # nothing switched
    # What the message says to do: roll back the switched node only. The nodes left out run b1, the build node1 goes
    # back to, so the rollback mends the split and needs no nccl_build_allow_partial.
    proc = run_playbook("rollback_nccl.yml", "--limit", "node1", inventory=inv, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert {node: links(root)[0] for node, root in roots.items()} == dict.fromkeys(NODES, "b1")


def test_a_limited_rollback_mends_a_split_only_when_every_node_left_out_is_read(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    # As above, with a fourth node that does not answer: its build cannot be read, so leaving it out could leave a
    # split, and the run is refused naming it.
    states: dict[str, tuple[str, str | None]] = {"node1": ("b2", "b1"), "node2": ("b1", "b0"), "node3": ("b1", "b0")}
    inv, roots = rollback_fleet(tmp_path, libraries, states)
    hosts = yaml.safe_load(inv.read_text())["all"]["children"]["cluster"]["hosts"]
    inv = inventory(tmp_path, {**hosts, "node4": UNREACHABLE})
    proc = run_playbook("rollback_nccl.yml", "--limit", "node1", inventory=inv, env=ENV)
    assert proc.returncode != 0, proc.stdout[-4000:]
    said = " ".join(proc.stdout.split())
    assert "node2: b1; node3: b1; node4: not read (did not answer)." in said, said[-4000:]
    assert {node: links(root) for node, root in roots.items()} == states


def test_a_node_left_out_whose_current_build_was_deleted_does_not_count_as_on_the_target(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    """limit_check read `current` with stat, which does not follow the link: a left-out node whose current build
    was deleted (its link names b1, and leads nowhere) counted as already on b1, so a --limit rollback mended a
    'split' and left that node without any NCCL."""
    states: dict[str, tuple[str, str | None]] = {"node1": ("b2", "b1"), "node2": ("b1", "b0"), "node3": ("b1", "b0")}
    inv, roots = rollback_fleet(tmp_path, libraries, states)
    shutil.rmtree(roots["node3"] / "b1")  # node3's current link stays, dangling
    proc = run_playbook("rollback_nccl.yml", "--limit", "node1", inventory=inv, env=ENV)
    assert proc.returncode != 0, proc.stdout[-4000:]
    said = " ".join(proc.stdout.split())
    assert f"node2: b1; node3: a link to {roots['node3'] / 'b1'}, which is gone." in said, said[-4000:]
    assert links(roots["node1"]) == ("b2", "b1")  # nothing switched
    (roots["node2"] / "current").unlink()  # node2: a directory where the link was (not build_once's layout)
    (roots["node2"] / "current").mkdir()
    proc = run_playbook("rollback_nccl.yml", "--limit", "node1", inventory=inv, env=ENV)
    assert proc.returncode != 0, proc.stdout[-4000:]
    assert "node2: current is no link to a build; node3: a link to" in " ".join(proc.stdout.split())
    # With node3's build back, and node2 on it, the same run mends the split.
    install(tmp_path / "spare", libraries, "b1", None)
    shutil.copytree(tmp_path / "spare" / "b1", roots["node3"] / "b1")
    (roots["node2"] / "current").rmdir()
    (roots["node2"] / "current").symlink_to(roots["node2"] / "b1")
    proc = run_playbook("rollback_nccl.yml", "--limit", "node1", inventory=inv, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert {node: links(root)[0] for node, root in roots.items()} == dict.fromkeys(NODES, "b1")


def test_a_limited_rollback_of_a_large_cluster_reads_few_nodes_before_it_refuses(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    """Eleven nodes, --limit one: the first nodes left out already run another build than the one the run goes to,
    so the run is refused on those (nccl_build_limit_first_reads of roles/nccl_build/vars/main.yml), and the
    others are not read one after another (at 1,000 nodes, 999 delegated reads)."""
    first_reads = yaml.safe_load((PROJECT_ROOT / "roles/nccl_build/vars/main.yml").read_text())[
        "nccl_build_limit_first_reads"]  # fmt: skip
    names = [f"node{i:02d}" for i in range(1, first_reads + 4)]
    states: dict[str, tuple[str, str | None]] = dict.fromkeys(names, ("b2", "b1"))
    inv, roots = rollback_fleet(tmp_path, libraries, states)
    proc = run_playbook("rollback_nccl.yml", "--limit", names[0], inventory=inv, env=ENV)
    assert proc.returncode != 0, proc.stdout[-4000:]
    said = " ".join(proc.stdout.split())
    read = "; ".join(f"{name}: b2" for name in names[1 : first_reads + 1])
    assert f"Left out, with the build each is on: {read}. 2 other node(s) left out not read" in said, said[-4000:]
    for name in names[first_reads + 1 :]:
        assert f"(item={name})" not in proc.stdout  # never read
    assert {node: links(root) for node, root in roots.items()} == states
    # Every node but one already back on b1: the split is mended only after every node left out is read.
    mended: dict[str, tuple[str, str | None]] = {**dict.fromkeys(names, ("b1", "b2")), names[0]: ("b2", "b1")}
    for node, (current, previous) in mended.items():
        for link, build in (("current", current), ("previous", previous)):
            (roots[node] / link).unlink()
            (roots[node] / link).symlink_to(roots[node] / str(build))
    proc = run_playbook("rollback_nccl.yml", "--limit", names[0], inventory=inv, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    for name in names[1:]:
        assert f"(item={name})" in proc.stdout
    assert {node: links(root)[0] for node, root in roots.items()} == dict.fromkeys(names, "b1")


PARTIAL = "nccl_build_allow_partial=true"


def test_a_rollback_limited_to_part_of_the_cluster_is_refused_before_any_node_switches(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    # Every node could go back from b2 to b1, but --limit picks two of four: the other two would stay on b2. The
    # node that does not answer is left out as well, and named as such.
    states: dict[str, tuple[str, str | None]] = {node: ("b2", "b1") for node in NODES}
    inv, roots = rollback_fleet(tmp_path, libraries, states)
    hosts = yaml.safe_load(inv.read_text())["all"]["children"]["cluster"]["hosts"]
    inv = inventory(tmp_path, {**hosts, "node4": UNREACHABLE})
    for extra in ([], ["-e", "nccl_build_allow_partial=false"], ["-e", "nccl_build_rollback_allow_partial=false"]):
        proc = run_playbook("rollback_nccl.yml", "--limit", "node1,node2", *extra, inventory=inv, env=ENV)
        assert proc.returncode != 0, proc.stdout[-4000:]
        said = " ".join(proc.stdout.split())
        refusal = "this run rolls back only node1, node2 (--limit), to b1; the other nodes of group cluster keep"
        assert refusal in said, proc.stdout[-6000:]
        assert "no node was switched" in said
        assert "Left out, with the build each is on: node3: b2; node4: not read (did not answer)." in said, said[-4000:]
        assert "-e nccl_build_allow_partial=true" in said
        assert {node: links(root) for node, root in roots.items()} == states  # nothing switched
        assert "Point `current` at the previous build" not in proc.stdout


@pytest.mark.parametrize("allow", [PARTIAL, "nccl_build_rollback_allow_partial=true"])  # and the deprecated alias
def test_a_partial_rollback_runs_when_the_user_allows_it(tmp_path: Path, libraries: dict[str, Path],
                                                        allow: str) -> None:  # fmt: skip
    states: dict[str, tuple[str, str | None]] = {node: ("b2", "b1") for node in NODES}
    inv, roots = rollback_fleet(tmp_path, libraries, states)
    proc = run_playbook("rollback_nccl.yml", "--limit", "node1,node2", "-e", allow, inventory=inv, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert {node: links(root) for node, root in roots.items()} == {
        "node1": ("b1", "b2"), "node2": ("b1", "b2"), "node3": ("b2", "b1")}  # fmt: skip


def test_a_limit_that_covers_the_whole_cluster_is_no_partial_rollback(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    # The nodes as a partial rollback of node1 and node2 leaves them (the test above): nothing to allow.
    states: dict[str, tuple[str, str | None]] = {"node1": ("b1", "b2"), "node2": ("b1", "b2"), "node3": ("b2", "b1")}
    inv, roots = rollback_fleet(tmp_path, libraries, states)
    proc = run_playbook("rollback_nccl.yml", "--limit", "cluster", inventory=inv, env=ENV)
    assert proc.returncode != 0  # node3's previous is b1, the others' now b2: refused as before, for that reason
    assert "rolling back would leave the cluster on different NCCL builds" in proc.stdout, proc.stdout[-4000:]
    assert "this run rolls back only" not in proc.stdout
    assert {node: links(root) for node, root in roots.items()} == states


#: The first task of each check that reads a node: rollback_links.yml's, and detect.yml's on the builder.
READS_LINKS = "Look at the builds `current` and `previous` point to"
READS_NVCC = "Read the nvcc release"
BAD_ALLOW_PARTIAL = [
    {"nccl_build_allow_partial": "maybe"},
    {"nccl_build_rollback_allow_partial": "maybe"},  # the deprecated alias alone
    # Both at once, each refused under its own name: with the two above, every bad value under both names.
    {"nccl_build_allow_partial": "2", "nccl_build_rollback_allow_partial": [True]},
    {"nccl_build_allow_partial": [True], "nccl_build_rollback_allow_partial": "2"},
]


@pytest.mark.parametrize("given", BAD_ALLOW_PARTIAL)
def test_a_bad_allow_partial_is_refused_before_any_node_is_read(
    tmp_path: Path, libraries: dict[str, Path], given: dict[str, object]
) -> None:
    # node3 has no previous build: had its links been read first, that refusal would hide the mistyped value. No
    # --limit: a value read as false would let the rollback go on and switch every node.
    states: dict[str, tuple[str, str | None]] = {"node1": ("b2", "b1"), "node2": ("b2", "b1"), "node3": ("b2", None)}
    inv, roots = rollback_fleet(tmp_path, libraries, states)
    proc = run_playbook("rollback_nccl.yml", "-e", json.dumps(given), inventory=inv, env=ENV)
    assert proc.returncode != 0
    said = " ".join(proc.stdout.split())
    for name in given:
        # Refused by the inventory check that comes first (its argument spec's wording), or by the role's own check
        refusal = rf"{name}=\S+?:? (is not valid for role nccl_build; )?allowed: true or false"
        assert re.search(refusal, said), said[-4000:]
    assert READS_LINKS not in proc.stdout and "no previous NCCL build" not in proc.stdout, proc.stdout[-4000:]
    assert {node: links_or_none(root) for node, root in roots.items()} == states  # nothing switched


def test_a_node_without_a_previous_build_stops_the_rollback_before_any_node_switches(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    states: dict[str, tuple[str, str | None]] = {"node1": ("b2", "b1"), "node2": ("b2", "b1"), "node3": ("b2", None)}
    inv, roots = rollback_fleet(tmp_path, libraries, states)
    proc = run_playbook("rollback_nccl.yml", inventory=inv, env=ENV)
    assert proc.returncode != 0
    assert "node3: no previous NCCL build to roll back to" in proc.stdout, proc.stdout[-4000:]
    assert [(root / "current").readlink().name for root in roots.values()] == ["b2", "b2", "b2"]


def test_a_previous_link_to_a_deleted_build_stops_the_rollback_before_any_node_switches(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    """stat does not follow a link by default: a `previous` whose build was deleted (disk cleanup) 'existed', every
    node passed the check, and node3 failed only in its own batch, after node1 and node2 had switched."""
    states: dict[str, tuple[str, str | None]] = {node: ("b2", "b1") for node in NODES}
    inv, roots = rollback_fleet(tmp_path, libraries, states)
    shutil.rmtree((roots["node3"] / "previous").resolve())  # the link stays, dangling
    proc = run_playbook("rollback_nccl.yml", "-e", "rdmaforge_upgrade_serial=1", inventory=inv, env=ENV)
    assert proc.returncode != 0
    assert "node3: no previous NCCL build to roll back to" in " ".join(proc.stdout.split()), proc.stdout[-4000:]
    assert [(root / "current").readlink().name for root in roots.values()] == ["b2", "b2", "b2"]


def test_a_previous_that_is_the_current_build_stops_the_rollback(tmp_path: Path, libraries: dict[str, Path]) -> None:
    """The same build reached by two spellings of the prefix ('/opt/nccl/' then '/opt/nccl') became its own
    'previous': the rollback 'succeeded' and changed nothing."""
    states: dict[str, tuple[str, str | None]] = {node: ("b2", "b1") for node in NODES}
    inv, roots = rollback_fleet(tmp_path, libraries, states)
    (roots["node2"] / "previous").unlink()
    (roots["node2"] / "previous").symlink_to(f"{roots['node2']}//b2")  # current's build, spelt otherwise
    proc = run_playbook("rollback_nccl.yml", inventory=inv, env=ENV)
    assert proc.returncode != 0
    said = " ".join(proc.stdout.split())
    assert f"node2: {roots['node2']}/previous leads to the build current already is" in said, proc.stdout[-4000:]
    assert [(root / "current").readlink().name for root in roots.values()] == ["b2", "b2", "b2"]


CHECK_PLAYBOOK = """---
- name: The check the upgrade runs on each batch after installing
  hosts: cluster
  gather_facts: false
  tasks:
    - name: Check the build in use
      ansible.builtin.include_role:
        name: rdmaforge.cluster.nccl_build
        tasks_from: check
"""


def test_the_check_tells_builds_of_one_release_apart(tmp_path: Path, libraries: dict[str, Path]) -> None:
    """An upgrade that changes only nccl_cuda_archs or nccl_build_only_funcs keeps the release: `current` still on the
    old build loads and reports the expected release, so the check must compare the build `current` points at."""
    inv, roots = rollback_fleet(tmp_path, libraries, {"node1": ("b1", None), "node2": ("b1", None)})
    (roots["node2"] / "current").unlink()
    (roots["node2"] / "b1-sm_90").symlink_to(roots["node2"] / "b1")  # same library, same release, another build id
    (roots["node2"] / "current").symlink_to(roots["node2"] / "b1-sm_90")
    playbook = tmp_path / "check.yml"
    playbook.write_text(CHECK_PLAYBOOK)
    expected = json.dumps({"nccl_build_check_id": "b1-sm_90", "nccl_build_check_version": "2.29.7"})
    proc = run_playbook(str(playbook), "-e", expected, inventory=inv, env=ENV)
    assert proc.returncode != 0
    said = " ".join(proc.stdout.split())
    node1 = roots["node1"]
    assert f"node1: {node1}/current should point at build b1-sm_90, but it points at {node1}/b1" in said
    assert "node2: libnccl loads and reports NCCL 2.29.7 (22907)" in said, proc.stdout[-4000:]


def play(playbook: str, name_starts: str) -> dict[str, Any]:
    plays = yaml.safe_load((PLAYBOOKS / playbook).read_text())
    (found,) = [p for p in plays if str(p.get("name", "")).startswith(name_starts)]
    return found


def serial_plays() -> list[dict[str, Any]]:
    """check_upgrade_serial.yml's plays, which the rollouts import first: they hand the batch size to the batch play's
    serial (through a group's name), so a batch play run without them goes one node at a time."""
    plays: list[dict[str, Any]] = yaml.safe_load((PLAYBOOKS / "check_upgrade_serial.yml").read_text())
    return plays


def batch_play(playbook: str, marks: Path) -> dict[str, Any]:
    """The playbook's batch play as it is, but for the tasks that install or switch a build: those only reach the
    node and leave a mark per node in ``marks``."""
    found = play(playbook, "Upgrade | install" if "upgrade" in playbook else "Rollback | switch")
    stub = [
        # A node whose install fails in the very task where another node of its batch does not answer.
        {"name": "Reach the node", "ansible.builtin.ping": None, "failed_when": "fail_check | default(false)"},
        {"name": "Switch", "ansible.builtin.file": {"path": f"{marks}/{{{{ inventory_hostname }}}}", "state": "touch",
                                                    "mode": "0644"}, "delegate_to": "localhost"},
    ]  # fmt: skip
    tasks: list[dict[str, Any]] = []
    for task in found["tasks"]:
        role = task.get("ansible.builtin.include_role", {})
        if role.get("name") == "rdmaforge.cluster.nccl_build" and role.get("tasks_from") != "batch_gate":
            tasks += stub if not any(t["name"] == "Switch" for t in tasks) else []
        else:
            tasks.append(task)
    assert any(t["name"] == "Switch" for t in tasks) and "nccl_build_batch_done" in str(tasks)
    return {**found, "become": False, "tasks": tasks}


@pytest.mark.parametrize("node1_fails", [False, True])
@pytest.mark.parametrize("playbook", ["upgrade_nccl.yml", "rollback_nccl.yml"])
def test_a_node_that_does_not_answer_in_a_batch_stops_the_rollout(tmp_path: Path, playbook: str,
                                                                  node1_fails: bool) -> None:  # fmt: skip
    # Batches of two: node2 (of the first batch) does not answer. max_fail_percentage does not count it, and when
    # node1 fails in the same batch Ansible counts node2 twice: either way, without the batch gate, node3 and node4
    # would switch too.
    marks = tmp_path / "switched"
    marks.mkdir()
    hosts = {"node1": {**LOCAL, "fail_check": node1_fails}, "node2": UNREACHABLE, "node3": LOCAL, "node4": LOCAL}
    inv = inventory(tmp_path, hosts)
    path = tmp_path / "batches.yml"
    path.write_text(yaml.safe_dump([*serial_plays(), batch_play(playbook, marks)]))
    proc = run_playbook(str(path), "-e", "rdmaforge_upgrade_serial=2", inventory=inv, env=ENV)  # absolute path
    assert proc.returncode != 0
    assert sorted(p.name for p in marks.iterdir()) == ([] if node1_fails else ["node1"]), proc.stdout[-4000:]
    unfinished = "node1, node2" if node1_fails else "node2"
    assert f"{unfinished} did not finish its batch (failed or did not answer, see above)" in proc.stdout, proc.stdout
    assert "stops here, with these nodes not switched: node3, node4." in proc.stdout


def test_upgrade_switches_no_node_when_one_was_left_out_before_the_rollout(tmp_path: Path) -> None:
    # node2 fails a play before the rollout (as preflight leaves out a node that fails its checks or does not
    # answer): the gate stops the run, naming it, before the batch play starts.
    marks = tmp_path / "switched"
    marks.mkdir()
    inv = inventory(tmp_path, {node: LOCAL for node in NODES})
    before = {"name": "Preflight stand-in", "hosts": "cluster", "gather_facts": False, "tasks": [
        {"name": "Fail node2", "ansible.builtin.fail": {"msg": "node2 fails preflight"},
         "when": "inventory_hostname == 'node2'"}]}  # fmt: skip
    path = tmp_path / "upgrade.yml"
    path.write_text(yaml.safe_dump([before, play("upgrade_nccl.yml", "Upgrade | stop before"),
                                    batch_play("upgrade_nccl.yml", marks)]))  # fmt: skip
    proc = run_playbook(str(path), inventory=inv, env=ENV)
    assert proc.returncode != 0
    assert "node2 failed or did not answer before the rollout" in proc.stdout, proc.stdout[-4000:]
    assert "no node was switched" in proc.stdout
    assert list(marks.iterdir()) == [], proc.stdout[-4000:]


# upgrade_nccl.yml with a stand-in nvcc (detect.yml names the new build from it) and its build and install stubbed.
NVCC = """#!/bin/sh
case "$1" in
  --version) echo "Cuda compilation tools, release 13.0, V13.0.88" ;;
  --list-gpu-code) printf 'sm_75\\nsm_80\\nsm_90\\n' ;;
esac
"""
NEW = nccl_build.build_id("2.29.7", "13.0", ["sm_80"])  # the build id detect.yml names from that nvcc


def upgrade_fleet(tmp_path: Path, libraries: dict[str, Path], on: dict[str, str]) -> tuple[Path, dict[str, Path]]:
    """Nodes with builds b0..b2 and the new one (b1's library under its id), `current` on the build ``on`` names."""
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin" / "nvcc").write_text(NVCC)
    (cuda / "bin" / "nvcc").chmod(0o755)
    inv, roots = rollback_fleet(tmp_path, libraries, {node: ("b1", None) for node in on})
    for node, root in roots.items():
        (root / NEW).symlink_to(root / "b1")
        (root / "current").unlink()
        (root / "current").symlink_to(root / on[node])
    hosts = yaml.safe_load(inv.read_text())["all"]["children"]["cluster"]["hosts"]
    hosts = {node: {**host, "nccl_build_cuda_home": str(cuda)} for node, host in hosts.items()}
    return inventory(tmp_path, hosts), roots


def upgrade_playbook(tmp_path: Path, marks: Path) -> Path:
    """upgrade_nccl.yml's plays after preflight (which needs real nodes) as they are, but for the build (a stand-in
    that leaves ``built``) and the batch play's install (a mark per node in ``marks``, see batch_play)."""
    built = {"name": "Build stand-in", "ansible.builtin.file": {"path": str(tmp_path / "built"), "state": "touch",
                                                                "mode": "0644"}, "delegate_to": "localhost",
             "run_once": True}  # fmt: skip
    plays = []
    for found in yaml.safe_load((PLAYBOOKS / "upgrade_nccl.yml").read_text()):
        if "ansible.builtin.import_playbook" in found:
            continue  # the batch size (test_upgrade_serial.py) and preflight
        if str(found["name"]).startswith("Upgrade | install"):
            plays.append(batch_play("upgrade_nccl.yml", marks))
            continue
        builds = {"name": "rdmaforge.cluster.nccl_build"}  # the role's main tasks: build (and install)
        tasks = [built if task.get("ansible.builtin.include_role") == builds else task for task in found["tasks"]]
        plays.append({**found, "become": False, "tasks": tasks})
    path = tmp_path / "upgrade.yml"
    path.write_text(yaml.safe_dump(plays))
    return path


def test_an_upgrade_limited_to_part_of_the_cluster_is_refused_before_the_build(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    # node4 does not answer: left out as well, and named as such.
    inv, roots = upgrade_fleet(tmp_path, libraries, dict.fromkeys(NODES, "b1"))
    hosts = yaml.safe_load(inv.read_text())["all"]["children"]["cluster"]["hosts"]
    inv = inventory(tmp_path, {**hosts, "node4": UNREACHABLE})
    marks = tmp_path / "switched"
    marks.mkdir()
    playbook = upgrade_playbook(tmp_path, marks)
    # nccl_build_allow_partial wins over its deprecated alias when both are set.
    alias = ["-e", "nccl_build_allow_partial=false", "-e", "nccl_build_rollback_allow_partial=true"]
    for extra in ([], ["-e", "nccl_build_allow_partial=false"], alias):
        proc = run_playbook(str(playbook), "--limit", "node1", *extra, inventory=inv, env=ENV)
        assert proc.returncode != 0
        said = " ".join(proc.stdout.split())
        refusal = f"this run upgrades only node1 (--limit), to {NEW}; the other nodes of group cluster keep"
        assert refusal in said, said[-4000:]
        assert "Left out, with the build each is on: node2: b1; node3: b1; node4: not read (did not answer)." in said
        assert "-e nccl_build_allow_partial=true" in said
        assert list(marks.iterdir()) == [], said[-4000:]  # no node switched
        assert not (tmp_path / "built").exists()  # nor was the build compiled
        assert [(root / "current").readlink().name for root in roots.values()] == ["b1", "b1", "b1"]


def test_a_limited_upgrade_goes_ahead_when_the_nodes_left_out_run_the_new_build(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    # An upgrade that stopped after node2 and node3 switched: upgrading node1 alone mends the split.
    inv, _ = upgrade_fleet(tmp_path, libraries, {"node1": "b1", "node2": NEW, "node3": NEW})
    marks = tmp_path / "switched"
    marks.mkdir()
    proc = run_playbook(str(upgrade_playbook(tmp_path, marks)), "--limit", "node1", inventory=inv, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert sorted(p.name for p in marks.iterdir()) == ["node1"]
    # One left-out node on another build is enough to refuse.
    inv, _ = upgrade_fleet(tmp_path / "other", libraries, {"node1": "b1", "node2": NEW, "node3": "b2"})
    proc = run_playbook(str(upgrade_playbook(tmp_path / "other", marks)), "--limit", "node1", inventory=inv, env=ENV)
    assert proc.returncode != 0
    assert f"node2: {NEW}; node3: b2." in " ".join(proc.stdout.split()), proc.stdout[-4000:]
    assert sorted(p.name for p in marks.iterdir()) == ["node1"]  # the first run's mark only


@pytest.mark.parametrize("allow", ["nccl_build_allow_partial", "nccl_build_rollback_allow_partial"])
def test_a_partial_upgrade_runs_when_the_user_allows_it(tmp_path: Path, libraries: dict[str, Path],
                                                       allow: str) -> None:  # fmt: skip
    inv, _ = upgrade_fleet(tmp_path, libraries, dict.fromkeys(NODES, "b1"))
    marks = tmp_path / "switched"
    marks.mkdir()
    proc = run_playbook(str(upgrade_playbook(tmp_path, marks)), "--limit", "node1,node2", "-e", f"{allow}=true",
                        inventory=inv, env=ENV)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert sorted(p.name for p in marks.iterdir()) == ["node1", "node2"]


def test_an_upgrade_of_the_whole_cluster_is_not_a_partial_one(tmp_path: Path, libraries: dict[str, Path]) -> None:
    inv, _ = upgrade_fleet(tmp_path, libraries, dict.fromkeys(NODES, "b1"))
    marks = tmp_path / "switched"
    marks.mkdir()
    for extra in ([], ["--limit", "cluster"]):
        proc = run_playbook(str(upgrade_playbook(tmp_path, marks)), *extra, inventory=inv, env=ENV)
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert sorted(p.name for p in marks.iterdir()) == list(NODES)
        assert (tmp_path / "built").exists()
        assert "this run upgrades only" not in proc.stdout


def test_a_bad_allow_partial_stops_the_upgrade_before_any_node_is_read(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    # Both names mistyped, each refused under its own name (the same check as the rollback's, which tries each alone).
    inv, roots = upgrade_fleet(tmp_path, libraries, dict.fromkeys(NODES, "b1"))
    marks = tmp_path / "switched"
    marks.mkdir()
    given = {"nccl_build_allow_partial": "maybe", "nccl_build_rollback_allow_partial": "2"}
    proc = run_playbook(str(upgrade_playbook(tmp_path, marks)), "--limit", "node1", "-e", json.dumps(given),
                        inventory=inv, env=ENV)  # fmt: skip
    assert proc.returncode != 0
    said = " ".join(proc.stdout.split())
    for name, value in given.items():
        refusal = f"{name}={json.dumps(value)}: allowed: true or false (true: upgrade the nodes --limit picks"
        assert refusal in said, said[-4000:]
    assert READS_NVCC not in proc.stdout and "Read the builds of the first nodes" not in proc.stdout, said[-4000:]
    assert list(marks.iterdir()) == [] and not (tmp_path / "built").exists()
    assert [(root / "current").readlink().name for root in roots.values()] == ["b1", "b1", "b1"]


def test_an_upgrade_in_check_mode_does_not_fail_on_the_link_it_did_not_switch(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    """`upgrade-nccl --check` failed in its first batch: check mode switches no link, and the batch's check then
    read the build being replaced ("current should point at build b1, but it points at b0"), exit 2 for an upgrade
    that would work (review round 15a). The batch play's own check task runs here, as upgrade_nccl.yml has it."""
    tasks = play("upgrade_nccl.yml", "Upgrade | install")["tasks"]
    (check,) = [t for t in tasks if t["name"] == "Check that this batch loads the new release"]
    # ... and says what it left to the real run (review round 42: skipped without a word)
    (said,) = [t for t in tasks if t["name"] == "Say what check mode leaves to the real run"]
    inv, _ = rollback_fleet(tmp_path, libraries, {"node1": ("b0", None)})
    playbook = tmp_path / "batch_check.yml"
    playbook.write_text(yaml.safe_dump([{"name": "The batch's check", "hosts": "cluster", "gather_facts": False,
                                         "tasks": [check, said]}]))  # fmt: skip
    target = json.dumps({"nccl_build_check_id": "b1", "nccl_build_check_version": "2.29.7"})
    checked = run_playbook(str(playbook), "-e", target, "--check", inventory=inv, env=ENV)
    assert checked.returncode == 0, checked.stdout[-4000:]
    assert "NOT CHECKED (check mode): node1: no link was switched" in " ".join(checked.stdout.split())
    # For real the same task does judge the link: node1 is still on b0.
    real = run_playbook(str(playbook), "-e", target, inventory=inv, env=ENV)
    assert real.returncode != 0 and "current should point at build b1" in " ".join(real.stdout.split())


# NCCL's plugin loader names (ncclNetPlugin_vN) per build, beside its ncclGetVersion: b0 and b1 as NCCL 2.28 and
# 2.29.7 load (v6-v10, v6-v11); b2's cutoff (v7-v12) is made up, one past 2.29.7's like 2.26.2's was past 2.25.1's.
LOADERS = {"b0": range(6, 11), "b1": range(6, 12), "b2": range(7, 13)}


@pytest.fixture(scope="module")
def loader_libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """As ``libraries``, each also holding its loader's names and NCCL's init banner (what nccl_net_api reads)."""
    out = tmp_path_factory.mktemp("loader-libs")
    libs = {}
    for build, (version, code) in BUILDS.items():
        names = ", ".join(f'"ncclNetPlugin_v{v}"' for v in LOADERS[build])
        source = out / f"{build}.c"
        source.write_text(f"const char *loader_names[] = {{{names}}};\n"
                          f'const char *banner = "NCCL version {version}+cuda13.0";\n'
                          f"int ncclGetVersion(int *v) {{ *v = {code}; return 0; }}\n")  # fmt: skip
        libs[build] = out / f"{build}.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(libs[build]), str(source)], check=True)
    return libs


def net_plugin(directory: Path, versions: range) -> Path:
    """A stand-in NCCL net plugin exporting ncclNetPlugin_vN for each of ``versions`` (AIACC 2.0.1: v2-v6)."""
    source = directory / "plugin.c"
    source.write_text("struct net { const char *name; };\n"
                      + "".join(f'struct net ncclNetPlugin_v{v} = {{"stand-in"}};\n' for v in versions))  # fmt: skip
    library = directory / "libnccl-net.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


def with_plugin(inv: Path, plugin: Path) -> Path:
    """Every node of ``inv`` with ``plugin`` as its net plugin (the harp provider: a library already on the node)."""
    doc = yaml.safe_load(inv.read_text())
    doc["all"]["children"]["cluster"]["vars"] = {"nccl_plugin_provider": "harp", "nccl_plugin_harp_lib": str(plugin)}
    inv.write_text(yaml.safe_dump(doc))
    return inv


def test_an_upgrade_past_the_plugins_api_versions_stops_at_its_first_batch(
    tmp_path: Path, loader_libraries: dict[str, Path]
) -> None:
    """The batch's check compared ncclGetVersion only: an NCCL whose loader no longer knows the plugin's API versions
    passed it, every batch switched, and NCCL fell back from the plugin (AIACC on eRDMA) without a word (review round
    41b). The batch play as upgrade_nccl.yml has it, its install switching `current` to b2 here."""
    inv, roots = rollback_fleet(tmp_path, loader_libraries, {node: ("b1", "b0") for node in NODES})
    plugin = net_plugin(tmp_path, range(2, 7))
    with_plugin(inv, plugin)
    found = play("upgrade_nccl.yml", "Upgrade | install")
    switch = {"name": "Switch", "ansible.builtin.file": {"src": "{{ nccl_build_prefix_root }}/b2",
                                                         "dest": "{{ nccl_build_prefix_root }}/current",
                                                         "state": "link"}}  # fmt: skip
    tasks = [switch if t.get("ansible.builtin.include_role") == {"name": "rdmaforge.cluster.nccl_build"} else t
             for t in found["tasks"]]  # fmt: skip
    assert switch in tasks
    path = tmp_path / "upgrade.yml"
    path.write_text(yaml.safe_dump([*serial_plays(), {**found, "become": False, "tasks": tasks}]))
    target = json.dumps({"nccl_build_check_id": "b2", "nccl_build_check_version": "2.30.1"})
    proc = run_playbook(str(path), "-e", target, inventory=inv, env=ENV)
    assert proc.returncode != 0, proc.stdout[-4000:]
    said = " ".join(proc.stdout.split())
    assert "node1: libnccl loads and reports NCCL 2.30.1 (23001)" in said, said[-4000:]
    assert (f"node1: NCCL 2.30.1 ({roots['node1']}/current/lib/libnccl.so.2) loads net plugin API v7, v8, v9, v10, "
            f"v11, v12, but {plugin} exports v2, v3, v4, v5, v6: no common version") in said, said[-4000:]
    assert "the upgrade stops here: playbooks/rollback_nccl.yml --limit node1 switches" in said
    assert {node: links(root)[0] for node, root in roots.items()} == {"node1": "b2", "node2": "b1", "node3": "b1"}


def test_a_rollback_to_an_nccl_that_cannot_load_the_plugin_is_refused_before_any_node_switches(
    tmp_path: Path, loader_libraries: dict[str, Path]
) -> None:
    """rollback_nccl.yml for real: a plugin (v11 only) that b1 loads and b0, the previous build, does not. Each batch's
    check read ncclGetVersion only, and the rollback went green; then (0f335de) the first batch found it after it
    had switched. The previous build is on every node already: read before any node switches (review round 42). A
    plugin both load rolls every node back."""
    states: dict[str, tuple[str, str | None]] = {node: ("b1", "b0") for node in NODES}
    inv, roots = rollback_fleet(tmp_path, loader_libraries, states)
    (tmp_path / "v11").mkdir()
    plugin = net_plugin(tmp_path / "v11", range(11, 12))
    with_plugin(inv, plugin)
    proc = run_playbook("rollback_nccl.yml", inventory=inv, env=ENV)
    assert proc.returncode != 0, proc.stdout[-4000:]
    said = " ".join(proc.stdout.split())
    for node in NODES:
        assert (f"{node}: NCCL 2.28.3 ({roots[node]}/previous/lib/libnccl.so.2) loads net plugin API v6, v7, v8, v9, "
                f"v10, but {plugin} exports v11: no common version") in said, said[-4000:]
    assert "No node was switched back." in said
    assert {node: links(root) for node, root in roots.items()} == states
    inv, roots = rollback_fleet(tmp_path / "both", loader_libraries, states)
    plugin = net_plugin(tmp_path / "both", range(6, 12))
    proc = run_playbook("rollback_nccl.yml", "-e", "rdmaforge_upgrade_serial=3", inventory=with_plugin(inv, plugin),
                        env=ENV)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert {node: links(root) for node, root in roots.items()} == dict.fromkeys(NODES, ("b0", "b1"))
