"""Issue 13 on the lab: `rdmaforge doctor` judges each node against its inventory.

- the lab's memlock, missing RDMA devices, unreserved huge pages and AIACC plugin off Alibaba Cloud are
  `accepted` (the lab inventory lists them in doctor_accept), so the lab is healthy and says what it accepted;
- without the acceptances they are problems on every node (nodes that agree can still be wrong): exit 6;
- one node's ENI MTU or huge page count off the plan is that node's problem row.
Every test restores what it changed: the other tests of the session share the lab.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge.runner.exit_codes import ExitCode
from tests.conftest import LabHandle
from tests.integration.test_cli import cli, odd_mtu, run_dir_of, runs, victim

pytestmark = pytest.mark.lab
__all__ = ["odd_mtu", "runs", "victim"]  # fixtures shared with test_cli.py


def lab_group_vars(converged: LabHandle, name: str) -> dict[str, object]:
    data = yaml.safe_load((converged.inventory.parent / "group_vars" / "all" / f"{name}.yml").read_text())
    assert isinstance(data, dict)
    return data


def doctor_json(converged: LabHandle, runs_dir: Path, *extra: str) -> tuple[int, dict[str, object], str]:
    proc = cli(runs_dir, "doctor", "-i", str(converged.inventory), "--json", *extra)
    # stdout holds the JSON document only; stderr (appended by cli()) may follow it.
    document, _ = json.JSONDecoder().raw_decode(proc.stdout.lstrip())
    return proc.returncode, document, proc.stdout


def problems_of(converged: LabHandle, runs: Path, check: str) -> tuple[dict[str, Any], set[str]]:
    """`rdmaforge doctor --json` on the lab, which must say unhealthy: every node's result, and the nodes whose
    ``check`` is a problem."""
    code, document, output = doctor_json(converged, runs)
    assert code == ExitCode.UNHEALTHY, output[-4000:]
    nodes = document["nodes"]
    assert isinstance(nodes, dict)
    return nodes, {name for name, result in nodes.items() if result["checks"][check]["status"] == "problem"}


def test_doctor_accepts_the_lab_deviations_and_says_so(converged: LabHandle, runs: Path) -> None:
    accepted = lab_group_vars(converged, "doctor")["doctor_accept"]
    assert isinstance(accepted, dict) and {"memlock", "rdma"} <= set(accepted)
    proc = cli(runs, "doctor", "-i", str(converged.inventory))
    assert proc.returncode == ExitCode.OK, proc.stdout[-4000:]
    assert f"healthy: {len(converged.nodes)} node(s) meet their inventory's expectations" in proc.stdout
    for node in converged.nodes:
        assert f"  {node}: memlock accepted: " in proc.stdout and f"  {node}: rdma accepted: none " in proc.stdout
    assert f"accepted by the inventory: {accepted['memlock']}" in proc.stdout
    recap = json.loads((run_dir_of(proc.stdout) / "recap.json").read_text())
    assert all(r["changed"] == 0 for r in recap["hosts"].values())  # read-only
    for node, result in recap["nodes"].items():
        checks = result["checks"]
        assert checks["memlock"]["status"] == "accepted" and checks["memlock"]["expected"] == "unlimited"
        assert checks["rdma"]["status"] == "accepted"
        # A lab node is no Alibaba Cloud ECS instance: the AIACC plugin it carries could not initialise.
        assert checks["plugin_host"]["status"] == "accepted", checks["plugin_host"]
        assert checks["plugin_host"]["expected"] == repr("Alibaba Cloud ECS")
        # What the lab can be, it is: the planned ENI MTU, the boot loader's page count, no GPU, the NCCL build.
        for name in ("mtu", "hugepages_boot", "gpus", "nccl", "plugin", "clock"):
            assert checks[name]["status"] == "ok", (node, name, checks[name])
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("node ") and " RDMA " in line)
    table = lines[header : header + 2 + len(converged.nodes)]  # header, dashes, one row per node
    assert [line.split()[0] for line in table[2:]] == list(converged.nodes)
    assert max(len(line) for line in table) <= 120, table


def test_without_the_acceptances_the_lab_is_not_healthy(converged: LabHandle, runs: Path) -> None:
    code, document, output = doctor_json(converged, runs, "-e", '{"doctor_accept": {}}')
    assert code == ExitCode.UNHEALTHY, output[-4000:]
    assert document["healthy"] is False and document["exit_code"] == ExitCode.UNHEALTHY
    nodes = document["nodes"]
    assert isinstance(nodes, dict) and set(nodes) == set(converged.nodes)
    for node in converged.nodes:
        checks = nodes[node]["checks"]
        assert nodes[node]["status"] == "problem"
        assert checks["memlock"]["status"] == "problem" and checks["rdma"]["status"] == "problem"
        assert checks["plugin_host"]["status"] == "problem"
        assert checks["rdma"]["expected"] == "erdma* with every port ACTIVE" and checks["rdma"]["actual"] == "none"
        assert nodes[node]["findings"] == []  # the nodes agree with each other: skew alone called this healthy


def test_a_node_off_the_eni_mtu_plan_is_its_problem_row(
    converged: LabHandle, runs: Path, odd_mtu: tuple[str, int]
) -> None:
    node, mtu = odd_mtu
    nodes, bad = problems_of(converged, runs, "mtu")
    assert bad == {node}
    assert f"eth1={mtu}" in nodes[node]["checks"]["mtu"]["reason"]
    assert nodes[node]["checks"]["mtu"]["expected"].endswith("=1400")  # the eni role's default for the lab


@contextmanager
def spoiled(converged: LabHandle, node: str, path: str, spoil: str, after: str = "") -> Iterator[str]:
    """``node`` with ``path`` saved aside while the shell command ``spoil`` changes the node; the file is put back
    (then ``after`` run) at the end."""
    saved = f"{path}.rdmaforge-test"
    converged.ssh(node, f"cp -p {path} {saved} && {spoil}")
    try:
        yield node
    finally:
        converged.ssh(node, f"mv {saved} {path}" + (f" && {after}" if after else ""))


@pytest.fixture
def odd_hugepages(converged: LabHandle, victim: str) -> Iterator[str]:
    """One node's boot loader defaults with 3 huge pages instead of the planned count; restored afterwards."""
    grub = "/etc/default/grub"
    with spoiled(converged, victim, grub, f"sed -i -E 's/hugepages=[0-9]+/hugepages=3/' {grub}") as node:
        yield node


def test_a_node_off_the_huge_page_plan_is_its_problem_row(
    converged: LabHandle, runs: Path, odd_hugepages: str
) -> None:
    proc = cli(runs, "doctor", "-i", str(converged.inventory))
    assert proc.returncode == ExitCode.UNHEALTHY, proc.stdout[-4000:]
    # No GPU on a lab node: seed 004's rule plans 0 x 5 + 10 pages.
    assert f"  {odd_hugepages}: hugepages_boot problem: hugepages=3 (expected hugepagesz=1G hugepages=10)" in (
        proc.stdout
    )
    recap = json.loads((run_dir_of(proc.stdout) / "recap.json").read_text())
    bad = {n for n, r in recap["nodes"].items() if r["checks"]["hugepages_boot"]["status"] == "problem"}
    assert bad == {odd_hugepages}


@pytest.fixture
def unregistered_plugin(converged: LabHandle, victim: str) -> Iterator[str]:
    """One node whose plugin link is in place but no longer in the ld.so cache (its ld.so.conf.d entry moved away
    and ldconfig run), so NCCL would not load it; restored afterwards."""
    conf = "/etc/ld.so.conf.d/rdmaforge-nccl-plugin.conf"  # nccl_plugin_ldconf (the nccl_plugin role's vars)
    with spoiled(converged, victim, conf, f"rm {conf} && ldconfig", after="ldconfig") as node:
        yield node


def test_a_plugin_ld_so_does_not_hand_out_is_that_nodes_problem(
    converged: LabHandle, runs: Path, unregistered_plugin: str
) -> None:
    nodes, bad = problems_of(converged, runs, "plugin")
    assert bad == {unregistered_plugin}
    reason = nodes[unregistered_plugin]["checks"]["plugin"]["reason"]
    assert reason.startswith("the ld.so cache has no libnccl-net.so, so NCCL does not load "), reason
    # The NCCL build is still handed out there: only the plugin is flagged.
    assert nodes[unregistered_plugin]["checks"]["nccl"]["status"] == "ok"
