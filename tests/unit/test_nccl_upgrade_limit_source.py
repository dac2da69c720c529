"""An upgrade limited to part of the cluster (limit_check.yml, as upgrade_check.yml imports it) counts a left-out
node as already on the new build only when its build's manifest records the source this run builds from: the build
id names release, CUDA and archs, not the commit, so a node left on a build of another commit under the same id
(a moved tag rebuilt) was taken for one on the target, and the limited upgrade "mended a split" that stayed split.

Run for real on fake nodes on this machine (ansible_connection=local, each its own nccl_build_prefix_root with
`current` linked to a build directory holding the manifest build_once writes); the read is the role's own GNU find."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import LOCAL_NODE, run_playbook

from rdmaforge import nccl_build

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}
BUILD = "2.29.7-cuda13.0-sm_80"
PINNED = "b91894bd5b190c874d98a017f93f5daa515b65d0"  # roles/nccl_build/defaults/main.yml's nccl_build_git_commit
OTHER = "0123456789abcdef0123456789abcdef01234567"


def node_root(tmp_path: Path, node: str, commit: str | None) -> Path:
    """A prefix root as build_once leaves it: the build, its manifest (source.commit; none when commit is None),
    `current` linked to it."""
    root = tmp_path / node
    (root / BUILD / "lib").mkdir(parents=True)
    if commit is not None:
        manifest = {"id": BUILD, "version": "2.29.7", "source": {"kind": "git", "commit": commit, "pinned": True}}
        (root / BUILD / nccl_build.MANIFEST_NAME).write_text(json.dumps(manifest))
    (root / "current").symlink_to(root / BUILD)
    return root


def limit_run(tmp_path: Path, commits: dict[str, str | None]) -> str:
    hosts = {node: {**LOCAL_NODE, "nccl_build_prefix_root": str(node_root(tmp_path, node, commit))}
             for node, commit in commits.items()}  # fmt: skip
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    playbook = tmp_path / "limit.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "The upgrade's --limit check", "hosts": "cluster", "gather_facts": False,
        "tasks": [{"name": "Check", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.nccl_build",
                                                                    "tasks_from": "limit_check"},
                   # upgrade_check.yml's import parameters, with the id detect.yml would name
                   "vars": {"nccl_build_limit_group": "cluster", "nccl_build_limit_action": "upgrade",
                            "nccl_build_limit_target": BUILD, "nccl_build_limit_source_kind": "git",
                            "nccl_build_limit_source_pin": PINNED}}],
    }]))  # fmt: skip
    proc = run_playbook(str(playbook), "--limit", "node1", inventory=inventory, env=ENV, timeout=300)
    return f"rc={proc.returncode} " + " ".join(proc.stdout.split())


def test_left_out_nodes_on_the_target_built_from_the_pin_let_the_limited_upgrade_go_on(tmp_path: Path) -> None:
    said = limit_run(tmp_path, {"node1": PINNED, "node2": PINNED, "node3": PINNED})
    assert said.startswith("rc=0 "), said[-3000:]


def test_a_left_out_node_on_the_targets_id_from_another_commit_is_not_on_the_target(tmp_path: Path) -> None:
    said = limit_run(tmp_path, {"node1": PINNED, "node2": PINNED, "node3": OTHER})
    assert not said.startswith("rc=0 "), said[-3000:]
    assert (f"Not on this run's source whatever the build's name: node3: {BUILD} built from commit {OTHER[:12]}, "
            f"the cluster pins {PINNED[:12]} (nccl_build_git_commit).") in said, said[-3000:]  # fmt: skip
    assert f"node2: {BUILD} built from" not in said  # node2's build is from the pinned commit


def test_a_left_out_build_without_a_manifest_cannot_be_taken_for_the_pinned_one(tmp_path: Path) -> None:
    said = limit_run(tmp_path, {"node1": PINNED, "node2": None, "node3": PINNED})
    assert not said.startswith("rc=0 "), said[-3000:]
    assert f"node2: {BUILD} with no manifest, so its source cannot be told from the pin" in said, said[-3000:]


@pytest.mark.parametrize(("kind", "pin"), [("", ""), ("git", "")])
def test_without_a_pin_only_the_build_names_are_compared(kind: str, pin: str) -> None:
    """A rollback names no source (kind and pin empty); an unpinned git source cannot be compared with a commit."""
    other = {"item": "node3", "rc": 0, "stdout": f"build /opt/nccl/{BUILD}\n" + json.dumps(
        {"id": BUILD, "source": {"kind": "git", "commit": OTHER}})}  # fmt: skip
    assert nccl_build.other_sources([other], kind, pin) == []
    assert nccl_build.current_builds([other]) == [BUILD]
    assert nccl_build.other_sources([other], "git", PINNED) == [
        f"node3: {BUILD} built from commit {OTHER[:12]}, the cluster pins {PINNED[:12]} (nccl_build_git_commit)"]
