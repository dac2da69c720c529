"""A benchmark on an RDMA fabric that never checked NCCL's transport says so beside its verdict.

A cluster without GPUs runs no nccl-tests and trains with gloo over TCP sockets; its pass (the training's
throughput against seed 003's linearity floor) came under a header naming the RDMA fabric, with nothing saying RDMA
between the nodes was not measured (review of the landed main, left undone in the last closing note). The run
directories are built as roles/benchmark writes them; the figures come from the test's own e2e.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rdmaforge.bench.report import render
from rdmaforge.cli import main
from rdmaforge.commands.bench import verdict_case

NODES = ("n1", "n2")


def gloo_run(world: int, nodes: int, samples_per_s: float) -> dict[str, Any]:
    """ddp_train.py's result line of a CPU training (one rank per node): the same throughput at every percentile."""
    point = {"step_s": 32 * world / samples_per_s, "samples_per_s": samples_per_s}
    return {"world_size": world, "nodes": nodes, "backend": "gloo", "device": "cpu", "global_batch": 32 * world,
            "warmup_steps": 5, "steps": 30, "percentiles": {p: dict(point) for p in ("p50", "p75", "p90", "p95")}}


def cpu_only_run(path: Path, fabric: str) -> Path:
    """2 nodes without GPUs (run.json gpus 0: no nccl-tests), e2e on gloo with linearity 0.9 against 0.8."""
    path.mkdir(parents=True)
    run = {"fabric": fabric, "nodes": list(NODES), "min_efficiency": 0.8, "tolerance": 0.1, "e2e_enabled": True,
           "gpus": dict.fromkeys(NODES, 0), "nccl": {"status": "skipped", "reason": "no node has a GPU"}}
    e2e = {"single": gloo_run(1, 1, 100.0), "multi": gloo_run(2, 2, 180.0), "ranks_per_node": 1,
           "min_linearity": 0.8}
    (path / "run.json").write_text(json.dumps(run))
    (path / "e2e.json").write_text(json.dumps(e2e))
    return path


def test_a_cpu_only_pass_on_an_rdma_fabric_names_rdma_as_not_measured(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = cpu_only_run(tmp_path / "run", "erdma")
    results = render(path)
    assert results["verdict"] == "pass"  # the training was measured against its floor: a verdict of its own
    (line,) = results["not_measured"]
    assert line.startswith("RDMA over the erdma fabric: NCCL's transport was not checked (skipped: ")
    assert "the e2e training ran on gloo" in line and line.endswith("this verdict says nothing about RDMA between the "
                                                                    "nodes")
    summary = (path / "summary.md").read_text()
    assert summary.index("**Verdict: pass**") < summary.index(f"Not measured: {line}")
    assert main(["report", str(path)]) == 0
    assert f"Not measured: {line}" in capsys.readouterr().out
    case = verdict_case(results)
    assert case.outcome == "passed" and case.details.startswith(f"not measured: {line}")


def test_a_tcp_fabric_has_no_rdma_to_leave_unmeasured(tmp_path: Path) -> None:
    results = render(cpu_only_run(tmp_path / "run", "tcp"))
    assert results["verdict"] == "pass" and results["not_measured"] == []
    assert "Not measured" not in (tmp_path / "run" / "summary.md").read_text()


def test_a_required_transport_that_did_not_run_is_a_reason_not_a_note(tmp_path: Path) -> None:
    """Nodes with GPUs require nccl-tests and its transport: their absence makes the verdict incomplete, and the
    reasons say so; no second line repeats it."""
    path = cpu_only_run(tmp_path / "run", "erdma")
    run = json.loads((path / "run.json").read_text())
    (path / "run.json").write_text(json.dumps({**run, "gpus": dict.fromkeys(NODES, 8)}))
    results = render(path)
    assert results["verdict"] == "incomplete" and results["not_measured"] == []
    assert any(reason.startswith("transport (required)") for reason in results["reasons"]), results["reasons"]
