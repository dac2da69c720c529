"""Issue 4 on the lab: NCCL's real source compiled once with the real nvcc (sm_80, reduced ONLY_FUNCS),
the same libnccl on every node, no rebuild on re-runs, one rebuild per new arch list, and a node added later
served from the cache without compiling."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdmaforge.lab import Lab
from tests.conftest import LAB_NICS, LAB_NODES, LabHandle, assert_no_changes, recap

pytestmark = pytest.mark.lab

VERSION = "2.29.7"
CONTROLLER_CACHE = Path.home() / ".cache" / "rdmaforge" / "builds"


def task_outcomes(output: str, task: str) -> list[str]:
    """The per-host result lines ('changed: [node1]', 'skipping: [node2]', ...) of one task in a playbook run.

    The role is printed with its collection prefix (``rdmaforge.cluster.build_once : Compile ...``), which this
    accepts. An empty list means the task never ran (build.yml is only included when the cache lacks the build):
    callers that expect "no compile" also check that the role itself ran (compiled_nothing)."""
    blocks = re.split(r"^TASK \[(?:rdmaforge\.cluster\.)?", output, flags=re.M)
    lines: list[str] = []
    for block in blocks:
        if block.startswith(task):
            lines += re.findall(r"^(?:ok|changed|skipping|failed|fatal): \[[^\]]+\]", block, re.M)
    return lines


def compiled_nothing(output: str) -> bool:
    """build_once ran (it looked in the controller cache) and compiled nowhere."""
    looked = task_outcomes(output, "build_once : Check the controller cache for this build")
    compiled = [line for line in task_outcomes(output, "build_once : Compile") if line.startswith("changed")]
    return bool(looked) and not compiled


def library_state(lab: LabHandle, node: str) -> tuple[str, str]:
    real = lab.ssh(node, "readlink -f /opt/nccl/current/lib/libnccl.so.2").stdout.strip()
    digest = lab.ssh(node, f"sha256sum {real}").stdout.split()[0]
    return real, digest


def test_libnccl_is_the_same_on_every_node(converged: LabHandle) -> None:
    states = {node: library_state(converged, node) for node in converged.nodes}
    paths = {path for path, _ in states.values()}
    digests = {digest for _, digest in states.values()}
    assert len(digests) == 1, states
    (path,) = paths
    assert path.endswith(f"/lib/libnccl.so.{VERSION}")
    assert re.search(rf"/opt/nccl/{re.escape(VERSION)}-cuda\d+\.\d+-sm_80-funcs[0-9a-f]{{8}}/lib/", path)
    node = next(iter(converged.nodes))
    assert "/opt/nccl/current/lib" in converged.ssh(node, "cat /etc/ld.so.conf.d/rdmaforge-nccl.conf").stdout
    assert (
        "libnccl.so.2 (libc6,x86-64) => /opt/nccl/current/lib/libnccl.so.2" in converged.ssh(node, "ldconfig -p").stdout
    )
    # really compiled by nvcc: the library carries a CUDA fat binary (device code), built with sm_80's gencode
    sections = converged.ssh(node, f"objdump -h {path}").stdout
    assert ".nv_fatbin" in sections
    manifest = converged.ssh(node, "cat /opt/nccl/current/.rdmaforge-build.json").stdout
    assert '"archs": [\n        "sm_80"\n    ]' in manifest and '"version": "2.29.7"' in manifest


def test_rerun_builds_and_copies_nothing(converged: LabHandle) -> None:
    proc = converged.playbook("nccl.yml")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert_no_changes(proc.stdout)
    assert compiled_nothing(proc.stdout), proc.stdout[-3000:]


@pytest.fixture
def restore_default_build(converged: LabHandle) -> Iterator[LabHandle]:
    yield converged
    proc = converged.playbook("nccl.yml")
    assert proc.returncode == 0, proc.stdout[-3000:]


@pytest.mark.heavy  # a fresh sm_90 compile takes about 8 minutes on 2 cores: make test-heavy
def test_new_arch_list_triggers_exactly_one_rebuild(restore_default_build: LabHandle) -> None:
    lab = restore_default_build
    # The controller cache is machine-wide: an sm_90 build left by an earlier session would be reused (correctly),
    # and this test is about what happens when the build is new.
    for cached in CONTROLLER_CACHE.glob("nccl-*-sm_90-*"):
        cached.unlink()
    proc = lab.playbook("nccl.yml", "-e", '{"nccl_cuda_archs": ["sm_90"]}', timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    compiled = [line for line in task_outcomes(proc.stdout, "build_once : Compile") if line.startswith("changed")]
    assert compiled == ["changed: [node1]"]  # one builder, one build
    states = {node: library_state(lab, node) for node in lab.nodes}
    assert len({d for _, d in states.values()}) == 1
    assert all(re.search(r"-cuda\d+\.\d+-sm_90-", path) for path, _ in states.values())
    # and back: the default build is still cached, so switching back compiles nothing
    back = lab.playbook("nccl.yml")
    assert back.returncode == 0
    assert compiled_nothing(back.stdout), back.stdout[-3000:]


def test_node_added_later_gets_the_cached_build(converged: LabHandle) -> None:
    lab = Lab()
    reference = library_state(converged, "node1")
    lab.up(nodes=LAB_NODES + 1, nics=LAB_NICS)
    try:
        bigger = LabHandle(lab.inventory_path, {n.name: n.address for n in lab.status().nodes}, lab.ssh_key,
                           lab.known_hosts)  # fmt: skip
        proc = bigger.playbook("nccl.yml")
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert compiled_nothing(proc.stdout), proc.stdout[-3000:]
        newcomer = f"node{LAB_NODES + 1}"
        assert library_state(bigger, newcomer) == reference
        counts = {host: c["changed"] for host, c in recap(proc.stdout).items()}
        assert counts[newcomer] > 0 and all(counts[n] == 0 for n in converged.nodes)
    finally:
        lab.up(nodes=LAB_NODES, nics=LAB_NICS)
