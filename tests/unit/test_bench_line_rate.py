"""The line rate a benchmark is judged against, from the nodes' RDMA ports (rdmaforge.bench.line_rate).

Ports come from real ibstat outputs (tests/data/ibstat/SOURCES.md) through the parser the rdma_devices module uses;
the nccl-tests log is the corpus' 80-GPU H100 run. A node with more rails than its fabric profile's one-HCA rate
must be judged by its rails: judged by the profile it would pass at a fraction of its capacity.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rdmaforge.bench.line_rate import expected_line_rate, node_line_rate
from rdmaforge.bench.report import render
from rdmaforge.parsers.rdma_devinfo import merge_ibstat
from tests.unit.test_bench_report import component, make_run
from tests.unit.test_ibstat import cas, devinfo_like


def devices(name: str) -> list:
    parsed = cas(name)
    merged, _ = merge_ibstat(devinfo_like(parsed), parsed)
    return merged


CX7 = "mlx5_roce_cx7_and_disabled_cx6dx.txt"  # mlx5_0 and mlx5_1 active at 200, mlx5_10 down


def test_a_node_is_the_sum_of_its_active_rails_one_per_gpu() -> None:
    assert node_line_rate(devices(CX7), "roce", gpus=8) == {
        "gbps": 400.0, "detail": "2 active mlx5* port(s): 200, 200 Gb/s"}  # fmt: skip
    assert node_line_rate(devices(CX7), "roce", gpus=1) == {
        "gbps": 200.0, "detail": "1 of 2 active mlx5* ports (one per GPU): 200 Gb/s"}  # fmt: skip
    assert node_line_rate(devices(CX7), "roce", gpus=0)["gbps"] == 400.0  # no GPU: no cap (nccl-tests is skipped)


def test_no_rate_without_link_rates_or_active_ports() -> None:
    assert node_line_rate(devices(CX7), "erdma", gpus=8) == {
        "gbps": None, "detail": "fabric erdma: port rates are not used"}  # fmt: skip
    assert node_line_rate(devices(CX7), "tcp", gpus=8)["gbps"] is None
    assert node_line_rate([], "infiniband", gpus=8) == {"gbps": None, "detail": "no active mlx5* port"}
    unknown = devinfo_like(cas(CX7))  # ibv_devinfo without -v and no ibstat: no rates at all
    assert node_line_rate(unknown, "roce", gpus=8) == {
        "gbps": None, "detail": "rate unknown for mlx5_0:1, mlx5_1:1"}  # fmt: skip


def test_a_port_of_unknown_rate_is_left_out_of_a_lower_bound() -> None:
    partly = devices(CX7)
    partly[1]["ports"][0]["rate_gbps"] = None  # mlx5_1's rate not read
    assert node_line_rate(partly, "roce", gpus=8) == {
        "gbps": 200.0,
        "detail": "1 active mlx5* port(s): 200 Gb/s; rate unknown for mlx5_1:1, not counted",
    }


def test_the_median_node_sets_the_rate_and_it_only_ever_raises_the_bar() -> None:
    ports = {"n1": {"gbps": 400.0, "detail": "2 active mlx5* port(s): 200, 200 Gb/s"},
             "n2": {"gbps": 200.0, "detail": "1 of 2 active mlx5* ports (one per GPU): 200 Gb/s"}}  # fmt: skip
    off = ("; slowest node n2 carries 200 Gb/s (1 of 2 active mlx5* ports (one per GPU): 200 Gb/s), below the median "
           "it is judged against (benchmark_line_rate_from_ports: false for nodes that differ on purpose)")  # fmt: skip
    assert expected_line_rate("roce", 100.0, ports) == {
        "gbps": 400.0, "source": "ports",
        "detail": "400 Gb/s per node from the ports (the median node's rails), above benchmark_line_rate_gbps "
                  f"100{off}"}  # fmt: skip
    kept = expected_line_rate("roce", 800.0, ports)
    assert (kept["gbps"], kept["source"]) == (800.0, "configured")
    assert kept["detail"].endswith(
        f"; the ports carry 400 Gb/s per node (the median node's rails), no more{off}")
    same = {node: ports["n1"] for node in ("n1", "n2")}
    assert expected_line_rate("roce", 100.0, same)["detail"] == (
        "400 Gb/s per node from the ports (every node: 2 active mlx5* port(s): 200, 200 Gb/s), above "
        "benchmark_line_rate_gbps 100")


EIGHT = {"gbps": 3200.0, "detail": "8 active mlx5* port(s): " + ", ".join(["400"] * 8) + " Gb/s"}
ONE = {"gbps": 400.0, "detail": "1 active mlx5* port(s): 400 Gb/s"}


def test_a_node_that_lost_rails_does_not_lower_the_bar() -> None:
    """Review round 23a: nodes of 8 x 400 Gbit/s rails, 7 of one node's down at benchmark time. The slowest node's
    rails set the rate, 400 Gb/s instead of 3200, and a run at an eighth of the fabric passed."""
    rate = expected_line_rate("infiniband", 200.0, {"n1": EIGHT, "n2": EIGHT, "n3": ONE})
    assert (rate["gbps"], rate["source"]) == (3200.0, "ports")
    assert "slowest node n3 carries 400 Gb/s (1 active mlx5* port(s): 400 Gb/s), below the median" in rate["detail"]
    two = expected_line_rate("infiniband", 200.0, {"n1": EIGHT, "n2": ONE})  # of two middle nodes the faster
    assert two["gbps"] == 3200.0


#: A node whose links trained down: 4 of its 8 rails at 200 Gbit/s instead of 400.
TRAINED_DOWN = {"gbps": 2400.0, "detail": "8 active mlx5* port(s): " + ", ".join(["400"] * 4 + ["200"] * 4) + " Gb/s"}


def test_a_node_of_two_whose_rails_trained_down_does_not_lower_the_bar(tmp_path: Path, h100_log: Path) -> None:
    """Review round 41c: the median of two nodes was their mean, so one node whose rails trained down lowered the
    bar to halfway and a run the healthy rails fail passed. The faster middle node's rails set it."""
    rate = expected_line_rate("infiniband", 200.0, {"n1": EIGHT, "n2": TRAINED_DOWN})
    assert (rate["gbps"], rate["source"]) == (3200.0, "ports")
    assert "slowest node n2 carries 2400 Gb/s" in rate["detail"], rate
    # Ten nodes, half of them trained down: the corpus run is judged by the healthy nodes' rails (8 x 400 Gbit/s,
    # 400 GB/s), where it fails at 90%; against the mean of the two middle nodes (350 GB/s) it passed.
    ports = {f"n{i}": EIGHT if i % 2 else TRAINED_DOWN for i in range(1, 11)}
    results = render(make_run(tmp_path, "infiniband", h100_log, line_rate_gbps=200, port_line_rates=ports,
                              min_efficiency=0.9))  # fmt: skip
    assert results["nccl"]["expected_busbw_gbs"] == 400.0
    nccl = component(results, "nccl-tests all_reduce")
    assert (nccl["status"], nccl["threshold"]) == ("fail", pytest.approx(0.9 * 400.0)), nccl
    assert "slowest node n10 carries 2400 Gb/s" in results["nccl"]["line_rate"]["detail"]


def test_one_nodes_extra_port_does_not_raise_every_nodes_bar() -> None:
    """Review round 24: a storage HCA of the fabric's pattern up on one node counts among its fastest ports; the
    fastest node's rate would have judged every node against it."""
    storage = {"gbps": 3600.0, "detail": "8 of 9 active mlx5* ports (one per GPU): 800, 400, ... Gb/s"}
    rate = expected_line_rate("infiniband", 200.0, {"n1": EIGHT, "n2": EIGHT, "n3": storage})
    assert rate["gbps"] == 3200.0 and "fastest node n3 carries 3600 Gb/s" in rate["detail"], rate


def test_a_node_without_a_rate_is_named_and_the_others_rails_still_count() -> None:
    ports = {"n1": {"gbps": 3200.0, "detail": "8 active mlx5* port(s)"},
             "n2": {"gbps": None, "detail": "rate unknown for mlx5_3:1"}}  # fmt: skip
    rate = expected_line_rate("infiniband", 200.0, ports)
    assert (rate["gbps"], rate["source"]) == (3200.0, "ports")
    assert "; no port rate from n2 (rate unknown for mlx5_3:1)" in rate["detail"]
    alone = expected_line_rate("infiniband", 200.0, {"n2": ports["n2"]})
    assert (alone["gbps"], alone["source"]) == (200.0, "configured")
    assert "port rates not used; no port rate from n2 (rate unknown for mlx5_3:1)" in alone["detail"]
    assert expected_line_rate("infiniband", 200.0, {})["source"] == "configured"
    assert expected_line_rate("infiniband", 200.0, None)["gbps"] == 200.0


@pytest.fixture
def h100_log(shared_dir: Path) -> Path:
    return shared_dir / "corpus" / "nccl-tests" / "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt"


@pytest.mark.parametrize(("rails_gbps", "expected_gbs"), [(400.0, 400.0), (800.0, 800.0)])
def test_the_report_judges_by_the_rails_not_the_profile(tmp_path: Path, h100_log: Path, rails_gbps: float,
                                                        expected_gbs: float) -> None:  # fmt: skip
    """Eight rails per node (the H100 nodes of the corpus run): judged by the infiniband profile's 200 Gbit/s
    (25 GB/s) any H100 run passes; judged by its rails the threshold is 80% of 8 x the rail rate / 8."""
    # The log's ten nodes (make_run names them n1..n10).
    ports = {f"n{i}": {"gbps": 8 * rails_gbps, "detail": f"8 active mlx5* port(s): {rails_gbps:g} Gb/s each"}
             for i in range(1, 11)}  # fmt: skip
    results = render(make_run(tmp_path, "infiniband", h100_log, line_rate_gbps=200, port_line_rates=ports))
    nccl = component(results, "nccl-tests all_reduce")
    assert results["nccl"]["expected_busbw_gbs"] == expected_gbs
    assert results["nccl"]["line_rate"]["source"] == "ports"
    assert nccl["threshold"] == pytest.approx(0.8 * expected_gbs)
    assert nccl["status"] == ("pass" if nccl["value"] >= 0.8 * expected_gbs else "fail")
    assert f"of the expected {expected_gbs:.1f} GB/s line rate" in nccl["reason"]
    summary = (tmp_path / "summary.md").read_text()
    assert f"Expected bus bandwidth (line rate): {expected_gbs:.1f} GB/s" in summary
    assert f"{8 * rails_gbps:g} Gb/s per node from the ports" in summary
    stored = json.loads((tmp_path / "results.json").read_text())
    assert stored["nccl"]["line_rate"]["gbps"] == 8 * rails_gbps


def test_the_report_without_port_rates_says_the_rate_is_configured(tmp_path: Path, h100_log: Path) -> None:
    results = render(make_run(tmp_path, "infiniband", h100_log, line_rate_gbps=200))
    assert results["nccl"]["expected_busbw_gbs"] == 25.0
    assert results["nccl"]["line_rate"] == {"gbps": 200.0, "source": "configured",
                                            "detail": "benchmark_line_rate_gbps 200 Gb/s per node"}  # fmt: skip


def lost_rail(devs: list, name: str, physical: str = "POLLING") -> list:
    """``devs`` with ``name``'s port down, as a rail whose switch failed leaves it (IB: PORT_DOWN, Polling)."""
    for device in devs:
        if device["name"] == name:
            device["ports"][0].update(state="PORT_DOWN", physical_state=physical, rate_gbps=None)
    return devs


def test_a_rail_down_on_every_node_does_not_lower_the_bar() -> None:
    """Review round 27c: only the active ports counted, so when a rail switch failed and every node lost the same
    rail, every node's rate dropped alike and the median with it: the cluster passed at half its fabric."""
    healthy = node_line_rate(devices(CX7), "roce", gpus=8)["gbps"]
    degraded = node_line_rate(lost_rail(devices(CX7), "mlx5_1"), "roce", gpus=8)
    assert degraded["gbps"] == healthy == 400.0
    assert degraded["detail"].startswith("1 active mlx5* port(s): 200 Gb/s; rails not active, counted at 200 Gb/s "
                                         "each: mlx5_1:1 PORT_DOWN")  # fmt: skip
    ports = {node: node_line_rate(lost_rail(devices(CX7), "mlx5_1"), "roce", gpus=8) for node in ("n1", "n2")}
    assert expected_line_rate("roce", 100.0, ports)["gbps"] == 400.0
    # A port switched off on purpose (the sample's Disabled mlx5_10) is no rail, and one GPU uses one rail.
    assert node_line_rate(lost_rail(devices(CX7), "mlx5_1", "DISABLED"), "roce", gpus=8)["gbps"] == 200.0
    assert node_line_rate(lost_rail(devices(CX7), "mlx5_1"), "roce", gpus=1)["gbps"] == 200.0


def test_the_inventorys_expected_ports_are_the_rails() -> None:
    devs = lost_rail(devices(CX7), "mlx5_1", "DISABLED")
    named = node_line_rate(devs, "roce", gpus=8, expected_ports=["mlx5_0:1", "mlx5_1:1", "mlx5_9"])
    assert named["gbps"] == 600.0  # mlx5_1 named as a rail (even Disabled) and mlx5_9 missing: both count
    assert "mlx5_1:1 PORT_DOWN, mlx5_9 missing" in named["detail"]
    assert node_line_rate(devices(CX7), "roce", gpus=8, expected_ports=["mlx5_0:1", "mlx5_1:1"])["gbps"] == 400.0


def test_expected_ports_keep_one_rail_per_gpu_and_leave_other_ports_out() -> None:
    """Review round 28: with rdma_core_expected_ports, active ports that are no rail still counted and rails down
    were added past one per GPU, so a 1-GPU node with a rail down had a higher bar (400) than healthy (200)."""
    rails = ["mlx5_0:1", "mlx5_1:1"]
    healthy = node_line_rate(devices(CX7), "roce", gpus=1, expected_ports=rails)
    degraded = node_line_rate(lost_rail(devices(CX7), "mlx5_1"), "roce", gpus=1, expected_ports=rails)
    assert healthy["gbps"] == degraded["gbps"] == 200.0
    storage_up = devices(CX7)  # mlx5_10 (no rail here) active at 200 too
    storage_up[2]["ports"][0].update(state="PORT_ACTIVE", rate_gbps=200.0)
    assert node_line_rate(storage_up, "roce", gpus=8, expected_ports=rails)["gbps"] == 400.0
    assert node_line_rate(storage_up, "roce", gpus=8)["gbps"] == 600.0  # no rails named: every port may be one
