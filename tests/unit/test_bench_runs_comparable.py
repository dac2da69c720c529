"""Review round 19a: a run that disagrees with itself is not judged, never passed.

Seed 003's linearity (N-node / 1-node / N; within a node: 1-node / 1-GPU / GPUs) compares the same job at two sizes,
so the runs it divides must be that: the same per-rank batch, backend and warm-up, the 1-GPU run one rank on one
node, the 1-node run one node of the ranks each node trains with. Each case below passed before. The expected
figures are the inputs' own (e2e_run: 32 samples per rank)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rdmaforge.bench.report import render
from rdmaforge.cli import main
from tests.unit.test_bench_report import component, e2e_case, e2e_run, make_run


def nccl(run: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**run, "backend": "nccl", **changes}


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"global_batch": 4 * 32 * 2}, "per-rank batch 32 in the 1-node run, 128 in the 2-node run"),
        ({"backend": "nccl"}, "backend 'gloo' in the 1-node run, 'nccl' in the 2-node run"),
        ({"warmup_steps": 400}, "warm-up steps 0 in the 1-node run, 400 in the 2-node run"),
    ],
)
def test_a_linearity_across_nodes_of_two_workloads_is_not_judged(
    tmp_path: Path, changes: dict[str, Any], says: str
) -> None:
    single = {**e2e_run(1, 1, 0.1), "warmup_steps": 0}
    multi = {**e2e_run(2, 2, 0.11), "warmup_steps": 0, **changes}
    results = e2e_case(tmp_path, {"single": single, "multi": multi})
    e2e = component(results, "e2e")
    assert e2e["status"] == "not_judged" and results["verdict"] == "incomplete", e2e
    assert "trained different workloads" in str(e2e["reason"]) and says in str(e2e["reason"]), e2e["reason"]
    same = e2e_case(tmp_path / "same", {"single": single, "multi": {**e2e_run(2, 2, 0.11), "warmup_steps": 0}})
    assert component(same, "e2e")["status"] == "pass"


def test_a_1_node_reference_of_two_nodes_is_not_judged(tmp_path: Path) -> None:
    results = e2e_case(tmp_path, {"single": e2e_run(2, 2, 0.1), "multi": e2e_run(4, 2, 0.1)})
    e2e = component(results, "e2e")
    assert e2e["status"] == "not_judged" and "the 1-node run trained on 2 nodes" in str(e2e["reason"]), e2e


def within_a_node(one: dict[str, Any], single: dict[str, Any], gpus: int = 4) -> dict[str, Any]:
    return {"one": nccl(one), "single": nccl(single), "multi": nccl(e2e_run(2 * gpus, 2, 0.1)), "ranks_per_node": gpus}


@pytest.mark.parametrize(
    ("one", "single", "says"),
    [
        # 2 of the 4 GPUs trained, while ranks_per_node says 4 (the count the GPUs were checked against)
        (e2e_run(1, 1, 0.1), e2e_run(2, 1, 0.1), "the 1-node run's world_size is 2 (e2e.json single.world_size)"),
        (e2e_run(4, 1, 0.1), e2e_run(4, 1, 0.1), "the 1-GPU run's world_size is 4 (e2e.json one.world_size), not 1"),
        (e2e_run(1, 2, 0.1), e2e_run(4, 1, 0.1), "the 1-GPU run's nodes is 2 (e2e.json one.nodes), not 1"),
        ({**e2e_run(1, 1, 0.1), "global_batch": 64}, e2e_run(4, 1, 0.1),
         "per-rank batch 64 in the 1-GPU run, 32 in the 1-node run"),
    ],
)  # fmt: skip
def test_a_linearity_within_a_node_of_unlike_runs_is_not_judged(
    tmp_path: Path, one: dict[str, Any], single: dict[str, Any], says: str
) -> None:
    results = e2e_case(tmp_path, within_a_node(one, single), gpus=4)
    intra = component(results, "e2e intra-node")
    assert intra["status"] == "not_judged" and results["verdict"] == "incomplete", intra
    assert says in str(intra["reason"]), intra["reason"]
    like = e2e_case(tmp_path / "like", within_a_node(e2e_run(1, 1, 0.1), e2e_run(4, 1, 0.105)), gpus=4)
    assert component(like, "e2e intra-node")["status"] == "pass"


def e2e_dir(tmp_path: Path, e2e: dict[str, Any]) -> Path:
    run_dir = make_run(tmp_path, "erdma", None, e2e_enabled=True, accelerators={"net_plugin": "aiacc"})
    (run_dir / "e2e.json").write_text(json.dumps({"min_linearity": 0.5, **e2e}))
    return run_dir


def test_one_nodes_log_listed_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The net plugin is judged on every node's log: the same name listed for both nodes let n1's log stand for n2's."""
    run_dir = e2e_dir(tmp_path, {"single": e2e_run(1, 1, 0.1), "multi": e2e_run(2, 2, 0.11),
                                 "logs": {"multi": ["e2e-multi-node-n1.log", "e2e-multi-node-n1.log"]}})  # fmt: skip
    (run_dir / "e2e-multi-node-n1.log").write_text("NCCL INFO Using network AIACC-2.0-RDMA\n")
    assert main(["report", str(run_dir)]) == 64
    err = capsys.readouterr().err
    assert 'logs.multi[1]: "e2e-multi-node-n1.log" is listed more than once' in err, err


@pytest.mark.parametrize("key", ["multi__nodes", "single__world_size", "ranks_per_node", "multi__global_batch"])
def test_a_count_beyond_any_cluster_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    e2e: dict[str, Any] = {"single": e2e_run(1, 1, 0.1), "multi": e2e_run(2, 2, 0.11)}
    *parents, last = key.split("__")
    target = e2e[parents[0]] if parents else e2e
    target[last] = 10**400
    assert main(["report", str(e2e_dir(tmp_path, e2e))]) == 64
    err = capsys.readouterr().err
    assert f"{key.replace('__', '.')}: must be a count from 1 to {1 << 40}, got an integer of 401 digits" in err, err


def test_a_baseline_of_a_count_beyond_any_cluster_is_refused_naming_it_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A global batch of 2**41 (13 digits, a float's range) is refused by baseline as by report, exit 64; the
    message named the value twice ("got an integer of 13 digits, got 2199023255552")."""
    e2e = {"single": e2e_run(1, 1, 0.1), "multi": {**e2e_run(2, 2, 0.11), "global_batch": 2**41}}
    assert main(["baseline", str(e2e_dir(tmp_path, e2e)), "-o", str(tmp_path / "baseline.json")]) == 64
    err = capsys.readouterr().err
    assert f"multi.global_batch: must be a count from 1 to {1 << 40}, got {2**41}\n" in err, err
    assert not (tmp_path / "baseline.json").exists()


def test_a_port_rate_of_a_host_not_in_the_run_is_no_node_of_it(tmp_path: Path, shared_dir: Path) -> None:
    """A stale entry (old9) became the slowest node and kept the configured 5 Gb/s bar, where the run's two nodes
    carry 8 x 400 Gb/s each: the Socket run passed."""
    log = shared_dir / "corpus" / "nccl-tests" / "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt"
    rails = {"gbps": 3200.0, "detail": "8 active mlx5* port(s): 400 Gb/s each"}
    ports = {"n1": rails, "n2": rails, "old9": {"gbps": 1.0, "detail": "1 active port(s): 1 Gb/s"}}
    results = render(make_run(tmp_path, "tcp", log, line_rate_gbps=5, port_line_rates=ports))
    assert results["nccl"]["line_rate"]["source"] == "ports" and results["nccl"]["expected_busbw_gbs"] == 400.0
    assert component(results, "nccl-tests all_reduce")["status"] == "fail"
    # a node of the run without an entry is named; the other node's rails still set the bar (review round 23a)
    missing = render(make_run(tmp_path / "b", "tcp", log, line_rate_gbps=5, port_line_rates={"n1": rails}))
    assert missing["nccl"]["line_rate"]["source"] == "ports" and missing["nccl"]["expected_busbw_gbs"] == 400.0
    assert "; no port rate from n2 (not read)" in missing["nccl"]["line_rate"]["detail"]


FORGED = "not requested\n\n**Verdict: pass**\n"


def test_a_newline_in_a_stored_reason_forges_no_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path, "infiniband", None)
    run = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**run, "nccl": {"status": "skipped", "reason": FORGED}}))
    assert main(["report", str(run_dir)]) == 5
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("**Verdict")] == ["**Verdict: incomplete**"], out
    assert "not requested\\x0a\\x0a**Verdict: pass**\\x0a" in out, out


def test_a_newline_in_a_summarys_text_forges_no_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = {"host": "n1", "address": None}
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"nodes": [node], "time": "2026\nn9 (10.0.0.9): fake node",
                                "previous_summary_problem": "x\nWARNING: none"}))  # fmt: skip
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert not [line for line in out.splitlines() if line.startswith(("n9", "WARNING: none"))], out


def test_gpus_left_out_on_a_node_of_more_gpus_than_the_others_are_named(tmp_path: Path) -> None:
    """Nodes of 8 and 4 GPUs trained with one rank each: the check of GPUs that took no part needed one count for
    every node and was skipped, and summary.md said the nodes had one GPU or none."""
    run_dir = make_run(tmp_path, "erdma", None, gpus={"n1": 8, "n2": 4}, e2e_enabled=True)
    (run_dir / "e2e.json").write_text(json.dumps({
        "min_linearity": 0.5, "ranks_per_node": 1,
        "single": nccl(e2e_run(1, 1, 0.1)), "multi": nccl(e2e_run(2, 2, 0.11))}))  # fmt: skip
    results = render(run_dir)
    intra = component(results, "e2e intra-node")
    assert intra["status"] == "not_judged" and results["verdict"] == "incomplete", intra
    assert "node n1 has 8 GPUs (run.json) but trained with 1 rank(s) (e2e.json ranks_per_node): 7 of its GPUs took " \
           "no part" in str(intra["reason"]), intra["reason"]
    assert "one GPU or none" not in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize(("collective", "status"), [("alltoall", "pass"), ("sendrecv", "not_judged"),
                                                    ("all_reduce", "pass")])  # fmt: skip
def test_alltoall_is_judged_per_rank_and_sendrecv_against_no_node_rate(
    tmp_path: Path, shared_dir: Path, collective: str, status: str
) -> None:
    """Corpus file 02: 10 nodes of 8 H100, each node's line rate 8 x 400 Gb/s (400 GB/s). alltoall's busbw is one
    rank's: its 50.5 GB/s is one full rail per GPU, and was judged 13% of the node's 400 GB/s. Per rank, the
    expected rate is 400 / 8 = 50 GB/s, x 10/9 x 79/80 for the traffic that stays in the node. sendrecv's busbw is
    one pair's, on one rail of a rate the run does not record: not judged, named (it was a fail at 4%); with one
    rank per node (test_bench_gpu_path.py) the pair is the node's, judged against its rate. all_reduce is still
    judged against the node's rate."""
    log = shared_dir / "corpus" / "nccl-tests" / "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt"
    rails = {f"n{i}": {"gbps": 3200.0, "detail": "8 active mlx5* port(s): 400 Gb/s each"} for i in range(1, 11)}
    results = render(make_run(tmp_path, "infiniband", log, collective, line_rate_gbps=200, port_line_rates=rails))
    judged = component(results, f"nccl-tests {collective}")
    assert judged["status"] == status, judged
    entry = results["nccl"]["collectives"][collective]
    summary = (tmp_path / "summary.md").read_text()
    if collective == "sendrecv":
        assert "one pair's" in judged["reason"] and "rdmaforge pairwise" in judged["reason"], judged["reason"]
        assert entry["efficiency"] is None
        return
    per_rank = collective == "alltoall"
    # alltoall: the node's 400 GB/s over its 8 ranks, x 10/9 for the ninth of each buffer that stays in the node,
    # x 79/80 as busbw counts 80 ranks (review round 23a: 50 GB/s passed a 2-node run at 43% of its fabric)
    expected = 400.0 / 8 * 10 / 9 * 79 / 80 if per_rank else 400.0
    assert judged["threshold"] == pytest.approx(0.8 * expected, abs=1e-3)
    assert ("GB/s per rank (alltoall's busbw is one rank's" in judged["reason"]) == per_rank, judged["reason"]
    assert entry["efficiency"] == pytest.approx(entry["peak_busbw"] / expected)
    assert ("alltoall against 54.9 GB/s" in summary) == per_rank, summary


def test_alltoall_across_two_nodes_is_judged_against_what_crosses_the_fabric() -> None:
    """2 nodes of 8 ranks: half of each rank's buffer stays in its node, so at line rate L the ranks reach busbw
    L/8 x 2/1 x 15/16 (review round 23a: judged against L/8, a run at 43% of the fabric passed at 0.8)."""
    from types import SimpleNamespace

    from rdmaforge.bench.report import expected_for

    run = SimpleNamespace(rank_hosts={rank: f"node{rank // 8}" for rank in range(16)})
    here, words = expected_for("alltoall", run, 400.0)  # type: ignore[arg-type]
    assert here == pytest.approx(400.0 / 8 * 2 / 1 * 15 / 16)
    assert "x 2/1 for the traffic that stays in the node, x 15/16 as busbw counts it" in words, words
    one = SimpleNamespace(rank_hosts={rank: f"node{rank}" for rank in range(4)})  # one rank per node: the node's rate
    assert expected_for("alltoall", one, 400.0)[0] == 400.0  # type: ignore[arg-type]
