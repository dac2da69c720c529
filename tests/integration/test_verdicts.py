"""Issue 13 on the lab: bench verdicts a user can trust, and baselines made from a run.

- without an e2e threshold the lab's bench is `incomplete` (exit 5) and says why, never a pass;
- with the lab inventory's threshold it is `pass`, with nccl-tests shown as skipped (no GPU) and not required;
- a baseline made from that run passes against the run itself, and a baseline claiming 10x its throughput fails
  a new bench run, naming the comparison;
- a missing baseline is an error naming its path before anything runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge.runner.exit_codes import ExitCode
from tests.conftest import LabHandle
from tests.integration.test_cli import cli, run_dir_of

pytestmark = pytest.mark.lab

#: Fewer steps than the default keeps each lab run short; the verdict logic is the same.
SHORT = ["-e", "benchmark_e2e_steps=10"]


def components(run_dir: Path) -> dict[str, dict[str, Any]]:
    results = json.loads((run_dir / "benchmark" / "results.json").read_text())
    return {c["name"]: c for c in results["components"]}


def lab_threshold(converged: LabHandle) -> float:
    """The e2e linearity threshold the lab inventory sets (what the test expects the run to be judged by)."""
    group_vars = yaml.safe_load((converged.inventory.parent / "group_vars" / "all" / "benchmark.yml").read_text())
    return float(group_vars["benchmark_e2e_min_linearity"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("verdict-runs")


@pytest.fixture(scope="module")
def judged_run(converged: LabHandle, runs: Path) -> tuple[str, Path]:
    proc = cli(runs, "bench", "-i", str(converged.inventory), *SHORT)
    assert proc.returncode == ExitCode.OK, proc.stdout[-6000:]
    return proc.stdout, run_dir_of(proc.stdout)


def test_bench_without_a_threshold_is_incomplete_and_says_why(converged: LabHandle, runs: Path) -> None:
    proc = cli(runs, "bench", "-i", str(converged.inventory), *SHORT, "-e", '{"benchmark_e2e_min_linearity": ""}')
    assert proc.returncode == ExitCode.INCOMPLETE, proc.stdout[-6000:]
    assert "benchmark verdict: incomplete" in proc.stdout
    assert "  e2e (required): not judged: no threshold: benchmark_e2e_min_linearity is empty" in proc.stdout
    assert "benchmark verdict: pass" not in proc.stdout
    found = components(run_dir_of(proc.stdout))
    assert found["e2e"]["status"] == "not_judged" and found["e2e"]["value"] > 0
    assert found["nccl-tests"]["status"] == "skipped" and not found["nccl-tests"]["required"]
    recap = json.loads((run_dir_of(proc.stdout) / "recap.json").read_text())
    assert recap["exit_code"] == ExitCode.INCOMPLETE and recap["benchmark"]["verdict"] == "incomplete"


def test_bench_with_the_lab_thresholds_passes_with_nccl_tests_skipped(
    converged: LabHandle, judged_run: tuple[str, Path]
) -> None:
    output, run_dir = judged_run
    assert "benchmark verdict: pass" in output
    nodes = ", ".join(converged.nodes)
    assert f"  nccl-tests: skipped (not required): no GPU on {nodes} (rdmaforge_node.gpu_count=0)" in output
    found = components(run_dir)
    e2e = found["e2e"]
    assert e2e["status"] == "pass" and e2e["required"] and e2e["threshold"] == lab_threshold(converged)
    assert e2e["value"] >= e2e["threshold"]
    assert e2e["on"] == f"gloo on CPU, {len(converged.nodes)} nodes, {len(converged.nodes)} ranks"
    assert found["transport"]["status"] == "skipped" and not found["transport"]["required"]
    summary = (run_dir / "benchmark" / "summary.md").read_text()
    assert "**Verdict: pass**" in summary and "- nccl-tests: skipped (not required): no GPU" in summary


def test_a_run_compared_with_its_own_baseline_passes(judged_run: tuple[str, Path], tmp_path: Path) -> None:
    _, run_dir = judged_run
    target = tmp_path / "lab-baseline.json"
    made = cli(None, "baseline", str(run_dir), "-o", str(target))
    assert made.returncode == ExitCode.OK, made.stdout
    data = json.loads(target.read_text())
    assert data["fingerprint"]["fabric"] == "erdma" and data["e2e"]["multi_p50_samples_per_s"] > 0
    assert data["nccl"] == {}  # no GPU: nothing measured by nccl-tests, so nothing claimed
    report = cli(None, "report", str(run_dir), "--baseline", str(target))
    assert report.returncode == ExitCode.OK, report.stdout[-3000:]
    assert "- baseline e2e: pass (required)" in report.stdout


def test_a_baseline_with_throughput_raised_fails_a_new_run(
    converged: LabHandle, runs: Path, judged_run: tuple[str, Path], tmp_path: Path
) -> None:
    """The lab's e2e throughput swings by 2x between runs (its nodes share the controller's 2 CPUs with whatever else
    runs), so the baseline claims 10x: a regression no lab run can hide. Doubled busbw, named per size, is proven
    on a real nccl-tests log in tests/unit/test_bench_baseline.py."""
    _, run_dir = judged_run
    target = tmp_path / "raised.json"
    assert cli(None, "baseline", str(run_dir), "-o", str(target)).returncode == ExitCode.OK
    data = json.loads(target.read_text())
    data["e2e"]["multi_p50_samples_per_s"] *= 10
    target.write_text(json.dumps(data))
    proc = cli(runs, "bench", "-i", str(converged.inventory), *SHORT, "-e", f"benchmark_baseline={target}")
    assert proc.returncode == ExitCode.BELOW_THRESHOLD, proc.stdout[-6000:]
    assert "benchmark verdict: fail" in proc.stdout and "  baseline e2e: fail: N-node p50 throughput" in proc.stdout
    assert components(run_dir_of(proc.stdout))["baseline e2e"]["required"]


def test_a_missing_baseline_is_an_error_before_anything_runs(converged: LabHandle, runs: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-baseline.json"
    before = set(runs.iterdir())
    proc = cli(runs, "bench", "-i", str(converged.inventory), "-e", f"benchmark_baseline={missing}")
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:]
    assert f"benchmark baseline {missing}: cannot read it" in proc.stdout
    assert set(runs.iterdir()) == before  # no run was started
