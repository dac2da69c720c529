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


def test_socket_fallback_on_an_rdma_fabric_fails(tmp_path: Path, socket_log: Path) -> None:
    results = render(make_run(tmp_path, "infiniband", socket_log))
    assert results["verdict"]["status"] == "fail"
    assert any("fell back to the Socket transport" in r for r in results["verdict"]["reasons"])
    assert results["nccl"]["collectives"]["all_reduce"]["avg_busbw"] == pytest.approx(0.300212)


def test_below_line_rate_is_below_threshold(tmp_path: Path, socket_log: Path) -> None:
    results = render(make_run(tmp_path, "tcp", socket_log, line_rate_gbps=25))
    entry = results["nccl"]["collectives"]["all_reduce"]
    assert results["verdict"]["status"] == "below_threshold"
    assert entry["efficiency"] == pytest.approx(entry["peak_busbw"] / 3.125)
    assert "below 80% of the expected 3.1 GB/s line rate" in " ".join(results["verdict"]["reasons"])
    for name in ("results.json", "results.csv", "summary.md", "nccl_busbw.png"):
        assert (tmp_path / name).exists(), name
    assert (tmp_path / "nccl_busbw.png").read_bytes().startswith(PNG)
    csv_lines = (tmp_path / "results.csv").read_text().splitlines()
    assert csv_lines[0].startswith("collective,size_bytes,count,type")
    assert len(csv_lines) - 1 == len(entry["rows"]) == 25


def test_passes_when_the_line_rate_is_met_and_flags_a_regression(tmp_path: Path, socket_log: Path) -> None:
    ok = render(make_run(tmp_path, "tcp", socket_log, line_rate_gbps=1))  # 0.125 GB/s expected
    assert ok["verdict"]["status"] == "pass", ok["verdict"]
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"nccl": {"collectives": {"all_reduce": {"avg_busbw": 0.5}}}}))
    regressed = render(make_run(tmp_path, "tcp", socket_log, line_rate_gbps=1, baseline=str(baseline)))
    assert regressed["verdict"]["status"] == "below_threshold"
    assert "regressed from the baseline's 0.5 GB/s" in " ".join(regressed["verdict"]["reasons"])


def test_skipped_nccl_is_never_a_pass_of_nccl_and_e2e_linearity(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "erdma", None)
    (run_dir / "e2e.json").write_text(json.dumps({"single": e2e_run(1, 1, 0.1), "multi": e2e_run(2, 2, 0.125)}))
    results = render(run_dir)
    assert results["nccl"]["status"] == "skipped" and results["nccl"]["collectives"] == {}
    assert "nccl-tests not run: no GPU on n1, n2" in results["verdict"]["reasons"][0]
    assert results["e2e"]["linearity"] == pytest.approx((64 / 0.125) / ((32 / 0.1) * 2))
    assert (run_dir / "e2e_throughput.png").read_bytes().startswith(PNG)
    assert "Linearity (N-node / (1-node x N), p50): 0.80" in (run_dir / "summary.md").read_text()


def test_nothing_ran_is_skipped(tmp_path: Path) -> None:
    assert render(make_run(tmp_path, "erdma", None))["verdict"]["status"] == "skipped"


def test_report_command_exit_codes(tmp_path: Path, socket_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(make_run(tmp_path / "a", "tcp", socket_log, line_rate_gbps=1))]) == 0
    assert main(["report", str(make_run(tmp_path / "b", "tcp", socket_log, line_rate_gbps=25))]) == 4
    assert main(["report", str(make_run(tmp_path / "c", "infiniband", socket_log))]) == 1
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "Verdict: pass" in capsys.readouterr().out


def test_e2e_output_line_is_found_among_logs() -> None:
    text = 'W1122 warning\nRDMAFORGE_E2E {"world_size": 2}\nother\n'
    assert parse_output(text) == {"world_size": 2}
    assert parse_output("Traceback ...\n") is None
