"""The benchmark report: verdicts against the line rate, transport fallback, baseline regression, e2e linearity,
artifacts (JSON, CSV, Markdown, PNG) and `rdmaforge report` exit codes. nccl-tests logs come from the corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rdmaforge.bench.e2e import parse_output
from rdmaforge.bench.report import render
from rdmaforge.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


def e2e_run(world: int, nodes: int, step_s: float) -> dict[str, object]:
    point = {"step_s": step_s, "samples_per_s": 32 * world / step_s}
    percentiles = {p: point for p in ("p50", "p75", "p90", "p95")}
    return {
        "world_size": world,
        "nodes": nodes,
        "backend": "gloo",
        "global_batch": 32 * world,
        "percentiles": percentiles,
    }


def make_run(tmp_path: Path, fabric: str, log: Path | None, **extra: object) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    run = {"fabric": fabric, "nodes": ["n1", "n2"], "min_efficiency": 0.8, "tolerance": 0.1, **extra}
    if log is not None:
        (tmp_path / "nccl-all_reduce.log").write_bytes(log.read_bytes())
        run["nccl"] = {"status": "ran", "collectives": ["all_reduce"]}
    else:
        run["nccl"] = {"status": "skipped", "reason": "no GPU on n1, n2 (rdmaforge_node.gpu_count=0)"}
    (tmp_path / "run.json").write_text(json.dumps(run))
    return tmp_path


@pytest.fixture
def socket_log(shared_dir: Path) -> Path:
    return shared_dir / "corpus" / "nccl-tests" / "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt"


def component(results: dict[str, object], name: str) -> dict[str, object]:
    found = [c for c in results["components"] if c["name"] == name]  # type: ignore[attr-defined,index]
    assert len(found) == 1, results["components"]
    return found[0]  # type: ignore[no-any-return]


def test_socket_fallback_on_an_rdma_fabric_fails(tmp_path: Path, socket_log: Path) -> None:
    results = render(make_run(tmp_path, "infiniband", socket_log))
    assert results["verdict"] == "fail"
    transport = component(results, "transport")
    assert transport["status"] == "fail" and transport["required"] is True and transport["value"] == "Socket"
    assert "fell back to the Socket transport" in str(transport["reason"])
    assert any(r.startswith("transport: fail: ") for r in results["reasons"])
    assert results["nccl"]["collectives"]["all_reduce"]["avg_busbw"] == pytest.approx(0.300212)


def test_below_line_rate_fails_with_threshold_and_value(tmp_path: Path, socket_log: Path) -> None:
    results = render(make_run(tmp_path, "tcp", socket_log, line_rate_gbps=25))
    entry = results["nccl"]["collectives"]["all_reduce"]
    assert results["verdict"] == "fail"
    nccl = component(results, "nccl-tests all_reduce")
    # tcp at 25 Gbit/s is 3.125 GB/s; 80% of it is the threshold.
    assert nccl["status"] == "fail" and nccl["threshold"] == pytest.approx(0.8 * 25 / 8, abs=1e-3)
    assert nccl["value"] == entry["peak_busbw"] and nccl["unit"] == "GB/s"
    assert entry["efficiency"] == pytest.approx(entry["peak_busbw"] / 3.125)
    assert "below 80% of the expected 3.1 GB/s line rate" in " ".join(results["reasons"])
    for name in ("results.json", "results.csv", "summary.md", "nccl_busbw.png"):
        assert (tmp_path / name).exists(), name
    assert (tmp_path / "nccl_busbw.png").read_bytes().startswith(PNG)
    csv_lines = (tmp_path / "results.csv").read_text().splitlines()
    assert csv_lines[0].startswith("collective,size_bytes,count,type")
    assert len(csv_lines) - 1 == len(entry["rows"]) == 25
    stored = json.loads((tmp_path / "results.json").read_text())
    assert stored["verdict"] == "fail" and {c["name"] for c in stored["components"]} >= {"nccl-tests all_reduce"}
    assert set(stored["components"][0]) >= {"name", "status", "required", "reason", "threshold", "value"}


def test_passes_when_every_required_component_passed(tmp_path: Path, socket_log: Path) -> None:
    ok = render(make_run(tmp_path, "tcp", socket_log, line_rate_gbps=1))  # 0.125 GB/s expected
    assert ok["verdict"] == "pass", ok["reasons"]
    assert component(ok, "nccl-tests all_reduce")["status"] == "pass"
    assert component(ok, "transport")["status"] == "pass"  # tcp expects the Socket transport
    assert component(ok, "e2e")["status"] == "skipped" and component(ok, "e2e")["required"] is False


def test_no_efficiency_threshold_is_not_judged_hence_incomplete(tmp_path: Path, socket_log: Path) -> None:
    results = render(make_run(tmp_path, "tcp", socket_log, line_rate_gbps=1, min_efficiency=""))
    nccl = component(results, "nccl-tests all_reduce")
    assert nccl["status"] == "not_judged" and nccl["threshold"] is None and nccl["value"] is not None
    assert results["verdict"] == "incomplete"
    assert "nccl-tests all_reduce (required): not judged: no threshold" in results["reasons"][0]
    assert main(["report", str(tmp_path)]) == 5


def e2e_dir(tmp_path: Path, min_linearity: object, **extra: object) -> Path:
    run_dir = make_run(tmp_path, "erdma", None, gpus={"n1": 0, "n2": 0}, e2e_enabled=True, **extra)
    e2e = {"single": e2e_run(1, 1, 0.1), "multi": e2e_run(2, 2, 0.125), "min_linearity": min_linearity}
    (run_dir / "e2e.json").write_text(json.dumps(e2e))
    return run_dir


def test_e2e_without_threshold_and_nccl_without_gpus_is_incomplete_never_pass(tmp_path: Path) -> None:
    """The issue's `make demo`: nccl-tests never ran and e2e had no threshold; this is not a pass."""
    results = render(e2e_dir(tmp_path, None))
    assert results["verdict"] == "incomplete"
    nccl, e2e = component(results, "nccl-tests"), component(results, "e2e")
    assert nccl["status"] == "skipped" and nccl["required"] is False and "no GPU on n1, n2" in str(nccl["reason"])
    assert e2e["status"] == "not_judged" and e2e["required"] is True and e2e["on"] == "gloo on CPU, 2 nodes, 2 ranks"
    assert results["e2e"]["linearity"] == pytest.approx((64 / 0.125) / ((32 / 0.1) * 2))
    assert e2e["value"] == pytest.approx(0.8)
    summary = (tmp_path / "summary.md").read_text()
    assert "**Verdict: incomplete**" in summary
    assert "- e2e: not judged (required), 0.8 linearity, on gloo on CPU, 2 nodes, 2 ranks: no threshold" in summary
    assert "- nccl-tests: skipped (not required): no GPU on n1, n2" in summary
    assert (tmp_path / "e2e_throughput.png").read_bytes().startswith(PNG)
    assert "Linearity (N-node / (1-node x N), p50): 0.80" in summary


def test_e2e_with_a_threshold_passes_or_fails(tmp_path: Path) -> None:
    passed = render(e2e_dir(tmp_path / "a", 0.5))
    assert passed["verdict"] == "pass" and component(passed, "e2e")["threshold"] == 0.5
    failed = render(e2e_dir(tmp_path / "b", 0.9))
    assert failed["verdict"] == "fail" and "linearity 0.80 is below 0.9" in failed["reasons"][0]


def test_required_and_optional_from_run_json(tmp_path: Path) -> None:
    # --require nccl-tests on a GPU-less run: the skipped nccl-tests makes it incomplete despite e2e passing.
    forced = render(e2e_dir(tmp_path / "a", 0.5, required=["nccl-tests", "e2e"]))
    assert forced["verdict"] == "incomplete" and component(forced, "nccl-tests")["required"] is True
    # e2e made optional: with nothing required that was judged, an unjudged e2e proves nothing either.
    optional = render(e2e_dir(tmp_path / "b", None, optional=["e2e"]))
    assert optional["verdict"] == "incomplete" and optional["reasons"] == ["nothing was measured against a threshold"]


def test_nccl_tests_is_required_on_gpu_nodes_even_when_switched_off(tmp_path: Path) -> None:
    run_dir = e2e_dir(tmp_path, 0.5)
    run = json.loads((run_dir / "run.json").read_text())
    run["gpus"] = {"n1": 8, "n2": 8}
    run["nccl"] = {"status": "skipped", "reason": "benchmark_nccl_tests is false"}
    (run_dir / "run.json").write_text(json.dumps(run))
    results = render(run_dir)
    assert results["verdict"] == "incomplete"
    assert "nccl-tests (required): skipped: benchmark_nccl_tests is false" in results["reasons"]


def test_nothing_ran_is_incomplete(tmp_path: Path) -> None:
    results = render(make_run(tmp_path, "erdma", None))
    assert results["verdict"] == "incomplete"


def test_report_command_exit_codes(tmp_path: Path, socket_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(make_run(tmp_path / "a", "tcp", socket_log, line_rate_gbps=1))]) == 0
    assert main(["report", str(make_run(tmp_path / "b", "tcp", socket_log, line_rate_gbps=25))]) == 4
    assert main(["report", str(make_run(tmp_path / "c", "infiniband", socket_log))]) == 4
    assert main(["report", str(make_run(tmp_path / "d", "erdma", None))]) == 5
    assert main(["report", str(tmp_path / "nothing")]) == 64
    out, err = capsys.readouterr()
    assert "Verdict: pass" in out and f"{tmp_path / 'nothing'} has no run.json" in err


def test_e2e_output_line_is_found_among_logs() -> None:
    text = 'W1122 warning\nRDMAFORGE_E2E {"world_size": 2}\nother\n'
    assert parse_output(text) == {"world_size": 2}
    assert parse_output("Traceback ...\n") is None


@pytest.fixture
def two_rank_log(shared_dir: Path) -> Path:
    """nccl-tests 2.17.6 on two H100 nodes, one GPU each: 2 ranks (the corpus' INDEX.md)."""
    return shared_dir / "corpus" / "nccl-tests" / "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt"


def test_a_log_with_fewer_ranks_than_the_runs_gpus_is_not_the_clusters_bandwidth(
    tmp_path: Path, two_rank_log: Path
) -> None:
    """The run asked for 8 GPUs on each of two nodes; a log of 2 ranks measured a different job (one GPU per node),
    so its bus bandwidth says nothing about this cluster and must not pass."""
    results = render(make_run(tmp_path / "a", "tcp", two_rank_log, line_rate_gbps=1, gpus={"n1": 8, "n2": 8}))
    nccl = component(results, "nccl-tests all_reduce")
    assert nccl["status"] == "fail" and results["verdict"] == "fail"
    assert nccl["reason"] == ("run ok but it is not this run's job: the log has 2 ranks, the run asked for 16 "
                              "(16 GPUs on 2 nodes)")  # fmt: skip
    matching = render(make_run(tmp_path / "b", "tcp", two_rank_log, line_rate_gbps=1, gpus={"n1": 1, "n2": 1}))
    assert component(matching, "nccl-tests all_reduce")["status"] == "pass"
