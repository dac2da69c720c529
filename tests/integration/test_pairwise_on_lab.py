"""Issue 14 on the lab: `rdmaforge pairwise` names the slow node, the slow link and the dead NIC, over real iperf3
between real lab nodes, with faults injected by `rdmaforge lab impair` (tc inside each node's namespace).

The sweep needs 4 nodes: this module brings the lab to 4 and back to the suite's size at the end (node4 is
removed again, so later tests see the lab they expect). Every extra NIC is first shaped to BASE so that the
2 CPUs shared by the concurrent pairs never limit a measurement; a fault is SLOW, a tenth of BASE. Every fault
and the shaping are cleared at the end, whatever happens.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdmaforge.lab import Lab
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.runner.exit_codes import ExitCode
from tests.conftest import LAB_NICS, LAB_NODES, LabHandle, run_playbook

pytestmark = pytest.mark.lab

NODES = max(4, LAB_NODES)
BASE, BASE_GBPS = "200mbit", 0.2
SLOW = "20mbit"
RAILS = [f"eth{k}" for k in range(1, LAB_NICS + 1)]
SHORT = ["-e", "pairwise_iperf_seconds=1", "-e", "pairwise_iperf_streams=2", "-e", "pairwise_timeout=15"]


def rdmaforge(*args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rdmaforge.cli", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def impair(*args: str) -> None:
    proc = rdmaforge("lab", "impair", *args, timeout=60)
    assert proc.returncode == 0, f"lab impair {' '.join(args)}: {proc.stderr}"


def shape_everything() -> None:
    """Every extra NIC of every node limited to BASE, in one command."""
    impair("all", "all", "--rate", BASE)


@pytest.fixture(scope="module")
def lab4(lab: LabHandle) -> Iterator[LabHandle]:
    if LAB_NICS < 2:
        pytest.skip("the pairwise lab proof needs 2 extra NICs per node (RDMAFORGE_TEST_NICS >= 2)")
    target = Lab()
    if NODES != len(lab.nodes):
        target.up(nodes=NODES, nics=LAB_NICS)
    try:
        handle = LabHandle(target.inventory_path, {n.name: n.address for n in target.status().nodes}, target.ssh_key,
                           target.known_hosts)  # fmt: skip
        shape_everything()
        yield handle
    finally:
        rdmaforge("lab", "impair", "all", "all", "--clear", timeout=120)
        if NODES != LAB_NODES:
            target.up(nodes=LAB_NODES, nics=LAB_NICS)


@pytest.fixture
def fault(lab4: LabHandle) -> Iterator[LabHandle]:
    """Whatever a test breaks is put back to the shaped baseline after it."""
    try:
        yield lab4
    finally:
        rdmaforge("lab", "impair", "all", "all", "--clear", timeout=120)
        shape_everything()


def sweep(lab: LabHandle, runs: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    proc = rdmaforge("pairwise", "-i", str(lab.inventory), "--json", "--runs-dir", str(runs), *SHORT, *args)
    assert proc.returncode not in (ExitCode.ERROR, ExitCode.INTERNAL), proc.stderr[-4000:]
    try:
        return proc, json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"no results.json on stdout (exit {proc.returncode}):\n{proc.stderr[-4000:]}") from None


def suspects(results: dict) -> list[tuple[str, str, str]]:
    return sorted((s["kind"], s["node"], s["nic"]) for s in results["suspects"])


def assert_rounds_are_disjoint(results: dict, expected_rounds: int) -> None:
    assert len(results["rounds"]) == expected_rounds
    for index, pairs in enumerate(results["rounds"]):
        members = [n for pair in pairs for n in pair]
        assert len(members) == len(set(members)), f"round {index} measures a node twice: {pairs}"
        measured = {frozenset((m["a"], m["b"])) for m in results["pairs"] if m["round"] == index}
        assert measured == {frozenset(p) for p in pairs}
        busy = [n for pair in measured for n in pair]
        assert len(busy) == len(set(busy))


def test_a_clean_lab_has_no_suspect_and_every_pair_is_measured_both_ways(lab4: LabHandle, tmp_path: Path) -> None:
    # Judged against the line rate the lab shaped every NIC to: without one the sweep is not judged in full (exit 5).
    proc, results = sweep(lab4, tmp_path, "-e", f"pairwise_line_rate_gbps={BASE_GBPS}")
    assert proc.returncode == ExitCode.OK, proc.stderr[-4000:]
    assert results["suspects"] == []
    assert results["method"] == "iperf3"
    assert any(note.startswith("sendrecv_perf: skipped, no GPU") for note in results["notes"])
    # The lab's fabric is erdma without RDMA: its inventory asks for TCP (pairwise_socket_rails), and the results say
    # that the RDMA path was not measured.
    assert any(note.startswith("RDMA path not measured: fabric erdma") for note in results["notes"]), results["notes"]
    assert results["nics"] == RAILS
    nodes = sorted(lab4.nodes)
    directed = {(m["a"], m["b"], m["nic"]) for m in results["pairs"]}
    assert directed == {(a, b, nic) for a in nodes for b in nodes if a != b for nic in RAILS}
    assert all(m["status"] == "ok" for m in results["pairs"]), [m for m in results["pairs"] if m["status"] != "ok"]
    # what was measured is the shaping the lab applied (a token bucket of BASE on every NIC), not the veth's speed
    assert all(0.5 * BASE_GBPS < m["gbps"] < 1.1 * BASE_GBPS for m in results["pairs"]), results["pairs"]
    assert_rounds_are_disjoint(results, NODES - 1 if NODES % 2 == 0 else NODES)
    # Seed 003's one-stream check: the first pair of the first round again with one stream, both ways on every rail,
    # beside its multi-stream rate (on the lab's token buckets one stream fills the shaped link too).
    a, b = results["rounds"][0][0]
    single = results["single_stream"]
    assert {(s["a"], s["b"], s["nic"]) for s in single} == {(x, y, nic) for x, y in ((a, b), (b, a)) for nic in RAILS}
    assert all(s["status"] == "ok" and 0.5 * BASE_GBPS < s["single_gbps"] < 1.1 * BASE_GBPS for s in single), single
    assert all(s["share"] == pytest.approx(s["single_gbps"] / s["multi_gbps"]) for s in single), single
    assert f"one TCP stream (seed 003; measured, not judged): {RAILS[0]} {a}->{b} " in proc.stderr
    run_dir = next(tmp_path.glob("*pairwise*"))
    out = run_dir / "pairwise"
    hosts = [ln.split()[0] for ln in (out / "hostfile.healthy").read_text().splitlines() if not ln.startswith("#")]
    assert hosts == nodes
    for nic in RAILS:
        assert (out / f"heatmap-{nic}.png").read_bytes()[:4] == b"\x89PNG"
    assert "suspects: none" in proc.stderr and "rdmaforge pairwise: exit 0" in proc.stderr


def test_a_slow_node_and_a_dead_nic_on_two_rails_are_each_named_on_their_rail_only_without_hanging(
    fault: LabHandle, tmp_path: Path
) -> None:
    """Two faults in one sweep, one per rail: rails are scored on their own (score.score_rail), so each rail holds
    exactly the fault a sweep of its own would see. node3 is limited on eth1; node4's eth2 is down."""
    impair("node3", "eth1", "--rate", SLOW)
    impair("node4", "eth2", "--down")
    started = time.monotonic()
    proc, results = sweep(fault, tmp_path)
    elapsed = time.monotonic() - started
    assert proc.returncode == ExitCode.SUSPECTS, proc.stderr[-4000:]
    # Each node is named on its own rail only: node3 not on eth2, node4 not on eth1.
    assert suspects(results) == [("node", "node3", "eth1"), ("node", "node4", "eth2")]
    assert sorted(results["healthy_nodes"]) == ["node1", "node2"] and len(fault.nodes) == NODES == 4
    assert "suspects (2):" in proc.stderr and "rdmaforge pairwise: exit 7" in proc.stderr
    # The dead NIC's pairs are unreachable, both ways with every other node; every other pair completed (node3's
    # eth1 pairs too: slow is a value, not a status).
    node4 = [m for m in results["pairs"] if m["nic"] == "eth2" and "node4" in (m["a"], m["b"])]
    assert len(node4) == 2 * (NODES - 1)
    assert {m["status"] for m in node4} == {"unreachable"}, node4
    others = [m for m in results["pairs"] if m not in node4]
    assert all(m["status"] == "ok" for m in others), [m for m in others if m["status"] != "ok"]
    slow = {frozenset((m["a"], m["b"])) for m in others if m["gbps"] < 0.5 * BASE_GBPS}
    assert slow == {frozenset(("node3", peer)) for peer in ("node1", "node2", "node4")}, slow  # eth1's node3 pairs
    # each unreachable measurement ends at iperf3's connect timeout (3 s), far inside pairwise_timeout (15 s)
    assert elapsed < 600


def test_a_slow_link_is_a_link_suspect_and_a_rail_slow_on_every_node_a_rail_suspect(
    fault: LabHandle, tmp_path: Path
) -> None:
    """Two faults in one sweep, one per rail (scored on their own, as above), against a line rate of BASE:
    - eth2: node1's link to node2 limited to SLOW, its other links at BASE: a link suspect, and neither node blamed;
    - eth1: every node's eth1 limited to SLOW (a rail's switch port speed set wrong everywhere): no node is worse
      than its partners, so neither the node nor the link rule blames anyone; the rail is named.
    Nobody is dropped from hostfile.healthy, and the exit code is 7, not 0."""
    impair("node1", "eth2", "--rate", SLOW, "--to", "node2", "--others", BASE)
    for node in sorted(fault.nodes):
        impair(node, "eth1", "--rate", SLOW)
    proc, results = sweep(fault, tmp_path, "-e", f"pairwise_line_rate_gbps={BASE_GBPS}")
    assert proc.returncode == ExitCode.SUSPECTS, proc.stderr[-4000:]
    assert suspects(results) == [("link", "node1<->node2", "eth2"), ("rail", "rail eth1", "eth1")], results["suspects"]
    by_kind = {s["kind"]: s for s in results["suspects"]}
    assert by_kind["link"]["nodes"] == ["node1", "node2"]
    pairs = NODES * (NODES - 1) // 2
    assert f"{pairs} of {pairs} pairs slow" in by_kind["rail"]["evidence"], results["suspects"]
    assert sorted(by_kind["rail"]["nodes"]) == sorted(fault.nodes)
    assert sorted(results["healthy_nodes"]) == sorted(fault.nodes)
    assert "rdmaforge pairwise: exit 7" in proc.stderr


def test_rounds_k_from_ansible_playbook(lab4: LabHandle, tmp_path: Path) -> None:
    """The role runs without the CLI too: K random perfect matchings, their pairs disjoint within a round."""
    out = tmp_path / "sweep"
    proc = run_playbook("pairwise.yml", *SHORT, "-e", "pairwise_rounds=2", "-e", "pairwise_seed=3", "-e",
                        f"pairwise_output_dir={out}", "-e", f"pairwise_line_rate_gbps={BASE_GBPS}",
                        inventory=lab4.inventory, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert_rounds_are_disjoint(results, 2)
    for pairs in results["rounds"]:  # a perfect matching: every node in one pair (one sits out when N is odd)
        assert len({n for pair in pairs for n in pair}) == 2 * (NODES // 2)
    assert results["suspects"] == []


def test_bad_input_is_refused_before_anything_is_measured(lab4: LabHandle, tmp_path: Path) -> None:
    proc = rdmaforge("pairwise", "-i", str(lab4.inventory), "--runs-dir", str(tmp_path), "--nics", "eth1,eth9")
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "node1: no IPv4 address on eth9" in proc.stdout + proc.stderr
    assert not list(tmp_path.glob("*/pairwise/raw.json"))
    refused = rdmaforge("lab", "impair", "node1", "eth0", "--down")
    assert refused.returncode == ExitCode.BAD_INPUT and "eth0 carries SSH" in refused.stderr
    assert lab4.ssh("node1", "true").returncode == 0
