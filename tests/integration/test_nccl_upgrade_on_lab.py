"""Issue 18 on the lab: a second NCCL build rolled out a batch at a time and rolled back.

playbooks/upgrade_nccl.yml compiles the new build once (real nvcc, a second ONLY_FUNCS set of the same NCCL source,
so a second build id), then installs it one node per batch; each batch's libnccl is loaded on the node and must
report the release the inventory names before the next batch starts. A batch whose check fails stops the rollout
with the other nodes untouched. playbooks/rollback_nccl.yml switches every node back to the build it kept as
`previous`. The module leaves every node on the suite's build, with a plain converge reporting changed=0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from tests.conftest import LabHandle, assert_no_changes, recap
from tests.integration.test_nccl_build_on_lab import VERSION, task_outcomes

# In make test: the second build is compiled once per machine (209 s on the 2 cores) and then comes from the
# controller's build cache like the first (the module then takes under two minutes).
pytestmark = pytest.mark.lab

# Another reduced function set (the lab's own is "AllReduce Sum f32 RING SIMPLE"): a different build id.
SECOND_FUNCS = "AllReduce Sum f32 RING LL"
VERSION_CODE = 22907  # what ncclGetVersion reports for 2.29.7: nccl.h's NCCL_VERSION(2, 29, 7)
CHECK_TASK = "nccl_build : Fail unless the library loaded and is the expected release"
SWITCH_BACK_TASK = "nccl_build : Point `current` at the previous build"


def links(lab: LabHandle, node: str) -> tuple[str, str]:
    """Where /opt/nccl/current and /opt/nccl/previous point on node ('' when absent)."""
    out = lab.ssh(node, "readlink /opt/nccl/current; echo; readlink /opt/nccl/previous || true").stdout
    current, _, previous = out.partition("\n\n")
    return current.strip(), previous.strip()


def batches(output: str, task: str = CHECK_TASK) -> list[list[str]]:
    """The hosts of each run of ``task``, in order: one list per batch of a serial play."""
    blocks = re.split(r"^TASK \[(?:rdmaforge\.cluster\.)?", output, flags=re.M)
    return [re.findall(r"^(?:ok|changed|failed|fatal): \[([^\]]+)\]", block, re.M) for block in blocks
            if block.startswith(task)]  # fmt: skip


@pytest.fixture(scope="module")
def suite_build(converged: LabHandle) -> Iterator[str]:
    """The build the suite converged to; every node is back on it afterwards, whatever happened."""
    current = {node: links(converged, node)[0] for node in converged.nodes}
    assert len(set(current.values())) == 1, current
    yield next(iter(current.values()))
    proc = converged.playbook("nccl.yml")
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_a_batch_whose_check_fails_stops_the_rollout(converged: LabHandle, suite_build: str) -> None:
    nodes = sorted(converged.nodes)
    # The new build, but each node expected to report a release no library has: the first batch must fail its
    # check, and no later batch may start.
    extra = json.dumps({"nccl_build_only_funcs": SECOND_FUNCS, "nccl_build_check_version": "9.9.9"})
    proc = converged.playbook("upgrade_nccl.yml", "-e", extra, timeout=3600)
    assert proc.returncode != 0
    compiled = [line for line in task_outcomes(proc.stdout, "build_once : Compile") if line.startswith("changed")]
    assert len(compiled) <= 1, compiled  # once, before any node switched (none when an earlier run cached it)
    assert f"{nodes[0]}: /opt/nccl/current/lib/libnccl.so.2 should be NCCL 9.9.9 (ncclGetVersion 90909)" in proc.stdout
    assert f"ncclGetVersion answered 0 {VERSION_CODE}" in proc.stdout
    assert batches(proc.stdout) == [[nodes[0]]]
    first, rest = nodes[0], nodes[1:]
    assert links(converged, first)[0] != suite_build and links(converged, first)[1] == suite_build
    for node in rest:
        assert links(converged, node)[0] == suite_build, f"{node} was switched after the first batch failed"
    # The failed node goes back to the build it kept: the others already run it, so a rollback of that node alone
    # mends the split and goes ahead without nccl_build_rollback_allow_partial.
    back = converged.playbook("rollback_nccl.yml", "--limit", first)
    assert back.returncode == 0, back.stdout[-3000:]
    assert links(converged, first)[0] == suite_build


def test_upgrade_one_node_per_batch_then_roll_back_everywhere(converged: LabHandle, suite_build: str) -> None:
    nodes = sorted(converged.nodes)
    extra = json.dumps({"nccl_build_only_funcs": SECOND_FUNCS, "rdmaforge_upgrade_serial": 1})
    proc = converged.playbook("upgrade_nccl.yml", "-e", extra, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert batches(proc.stdout) == [[node] for node in nodes]
    for node in nodes:
        assert f"{node}: libnccl loads and reports NCCL {VERSION}" in proc.stdout
    upgraded = {node: links(converged, node) for node in nodes}
    new_build = upgraded[nodes[0]][0]
    assert new_build != suite_build and re.search(r"-funcs[0-9a-f]{8}$", new_build)
    assert all(state == (new_build, suite_build) for state in upgraded.values()), upgraded
    same = converged.ssh(nodes[0], f"sha256sum {new_build}/lib/libnccl.so.{VERSION}").stdout.split()[0]
    for node in nodes[1:]:
        assert converged.ssh(node, f"sha256sum {new_build}/lib/libnccl.so.{VERSION}").stdout.split()[0] == same

    # Re-running the upgrade changes nothing: every node already has the build.
    again = converged.playbook("upgrade_nccl.yml", "-e", extra, timeout=1800)
    assert again.returncode == 0, again.stdout[-3000:]
    assert_no_changes(again.stdout)

    # One node rolled back alone would leave it on the suite's build and the others on the new one: refused before
    # it switches, naming the others' builds as read on them.
    alone = converged.playbook("rollback_nccl.yml", "--limit", nodes[0])
    assert alone.returncode != 0
    said = " ".join(alone.stdout.split())
    left_out = "; ".join(f"{node}: {new_build.rsplit('/', 1)[-1]}" for node in nodes[1:])
    assert f"Left out, with the build each is on: {left_out}." in said, said[-4000:]
    assert links(converged, nodes[0]) == (new_build, suite_build)

    back = converged.playbook("rollback_nccl.yml", "-e", json.dumps({"rdmaforge_upgrade_serial": 2}))
    assert back.returncode == 0, back.stdout[-3000:]
    # Hosts of one batch report in the order they finish.
    switched = [sorted(batch) for batch in batches(back.stdout, SWITCH_BACK_TASK)]
    assert switched == [nodes[i : i + 2] for i in range(0, len(nodes), 2)]
    assert sorted(host for batch in batches(back.stdout) for host in batch) == nodes
    assert all(links(converged, node) == (suite_build, new_build) for node in nodes)
    counts = recap(back.stdout)
    assert all(counts[node]["changed"] > 0 for node in nodes)
    # A second rollback would roll forward to the build the first one left (of the same release here: other
    # functions, which no version tells apart): refused, naming the rollback rollback.yml recorded; no node switched.
    twice = converged.playbook("rollback_nccl.yml")
    said = " ".join(twice.stdout.split())
    assert twice.returncode != 0 and "NCCL was rolled back here from " in said, said[-4000:]
    assert all(links(converged, node) == (suite_build, new_build) for node in nodes)
    # The inventory names the suite's build: a converge now finds every node where it should be.
    converge = converged.playbook("nccl.yml")
    assert converge.returncode == 0, converge.stdout[-3000:]
    assert_no_changes(converge.stdout)


def test_rollback_without_a_previous_build_is_refused_by_name(converged: LabHandle, suite_build: str) -> None:
    node = sorted(converged.nodes)[-1]
    kept = links(converged, node)[1]
    converged.ssh(node, "mv /opt/nccl/previous /opt/nccl/previous.held 2>/dev/null || true")
    try:
        proc = converged.playbook("rollback_nccl.yml", "--limit", node)
        assert proc.returncode != 0
        assert f"{node}: no previous NCCL build to roll back to (/opt/nccl/previous is missing" in proc.stdout
        assert links(converged, node)[0] == suite_build
    finally:
        if kept:
            converged.ssh(node, "mv /opt/nccl/previous.held /opt/nccl/previous")
