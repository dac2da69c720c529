"""Seed 003's measuring rules in the e2e benchmark: warm-up steps left out of the throughput percentiles,
linearity within one node and across nodes, and the default linearity floor.

Expected values come from seed 003's text:
- "建議模型訓練的warmup_iteration設定為400" (warm up 400 iterations before measuring);
- "單機內部擴充性:線性度=多卡效能/單卡效能/單機卡數" (within a node: multi-GPU / single-GPU / GPUs per node);
- "多機之間擴充性:線性度=多機效能/單機效能/叢集數" (across nodes: multi-node / single-node / node count);
- "當線性度不高(例如小於0.8)" (below about 0.8, communication is the bottleneck).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge.bench.ddp_train import replicas_in_sync, summarize
from rdmaforge.bench.report import render
from rdmaforge.cli import main
from rdmaforge.role_defaults import defaults as role_defaults

ROLE = Path(__file__).resolve().parents[2] / "roles" / "benchmark"
SEED_003 = "003_24faf922dd2d1668.txt"


@pytest.fixture
def seed(shared_dir: Path) -> str:
    return (shared_dir / "seeds" / SEED_003).read_text()


def test_seed_003_figures_are_the_role_defaults(seed: str) -> None:
    assert "warmup_iteration設定為400" in seed and "小於0.8" in seed
    defaults = role_defaults("benchmark")
    assert defaults["benchmark_e2e_warmup_steps"] == 400
    assert defaults["benchmark_e2e_min_linearity"] == 0.8
    assert defaults["benchmark_e2e_min_intra_node_linearity"] == "{{ benchmark_e2e_min_linearity }}"
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    new = ("warmup_steps", "min_linearity", "min_intra_node_linearity", "acspeed", "net_plugin")
    for name in (f"benchmark_e2e_{suffix}" for suffix in new):
        assert name in defaults and specs[name]["description"], name
    train_args = role_defaults("benchmark", "vars")["benchmark_e2e_train_args"]
    assert "--warmup={{ benchmark_e2e_warmup_steps }}" in train_args


def test_warm_up_steps_are_left_out_of_the_percentiles() -> None:
    """400 slow warm-up steps (ACSpeed's autotuning) and 20 measured ones; nearest-rank percentiles of the 20:
    p50 is the 10th smallest, p75 the 15th, p90 the 18th, p95 the 19th."""
    measured = [0.1] * 10 + [0.2] * 5 + [0.3] * 3 + [0.4] * 2
    report: Any = summarize([5.0] * 400 + measured[::-1], warmup=400, global_batch=256)
    assert report["warmup_steps"] == 400 and report["steps"] == 20
    steps = {p: report["percentiles"][p]["step_s"] for p in ("p50", "p75", "p90", "p95")}
    assert steps == {"p50": 0.1, "p75": 0.2, "p90": 0.3, "p95": 0.4}
    assert report["percentiles"]["p50"]["samples_per_s"] == pytest.approx(2560.0)
    assert report["mean_step_s"] == pytest.approx((1.0 + 1.0 + 0.9 + 0.8) / 20)
    with pytest.raises(ValueError, match="no step left to measure: 400 steps, 400 of them warm-up"):
        summarize([5.0] * 400, warmup=400, global_batch=256)


def run_result(world: int, nodes: int, samples_per_s: float) -> dict[str, Any]:
    point = {"step_s": 32 * world / samples_per_s, "samples_per_s": samples_per_s}
    return {"world_size": world, "nodes": nodes, "backend": "nccl", "global_batch": 32 * world, "warmup_steps": 400,
            "steps": 30, "percentiles": {p: point for p in ("p50", "p75", "p90", "p95")}}  # fmt: skip


def make_run(tmp_path: Path, one: dict[str, Any] | None, single: dict[str, Any], multi: dict[str, Any],
             ranks: int, floor: float | str, intra_floor: float | str | None = None) -> Path:  # fmt: skip
    run = {"fabric": "erdma", "nodes": ["n1", "n2"], "min_efficiency": 0.8, "tolerance": 0.1, "e2e_enabled": True,
           "gpus": {"n1": ranks, "n2": ranks}, "optional": ["nccl-tests", "transport"],
           "nccl": {"status": "skipped", "reason": "benchmark_nccl_tests is false"}}  # fmt: skip
    e2e: dict[str, Any] = {"one": one, "single": single, "multi": multi, "ranks_per_node": ranks,
                           "min_linearity": floor}  # fmt: skip
    if intra_floor is not None:
        e2e["min_intra_node_linearity"] = intra_floor
    (tmp_path / "run.json").write_text(json.dumps(run))
    (tmp_path / "e2e.json").write_text(json.dumps(e2e))
    return tmp_path


def components(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in results["components"]}


def test_linearity_within_a_node_and_across_nodes_by_seed_003s_formulas(tmp_path: Path) -> None:
    """1 GPU: 100 samples/s; the node's 8 GPUs: 640 (640 / 100 / 8 = 0.8); 2 nodes: 1024 (1024 / 640 / 2 = 0.8)."""
    results = render(make_run(tmp_path, run_result(1, 1, 100.0), run_result(8, 1, 640.0), run_result(16, 2, 1024.0),
                              ranks=8, floor=0.75))  # fmt: skip
    assert results["e2e"]["linearity_intra_node"] == pytest.approx(0.8)
    assert results["e2e"]["linearity"] == pytest.approx(0.8)
    found = components(results)
    intra = found["e2e intra-node"]
    assert intra["status"] == "pass" and intra["required"] and intra["threshold"] == 0.75  # the floor applies to both
    assert intra["on"] == "nccl on GPU, 1 node, 8 ranks against 1" and intra["value"] == pytest.approx(0.8)
    assert found["e2e"]["status"] == "pass" and results["verdict"] == "pass"
    summary = (tmp_path / "summary.md").read_text()
    assert "| 1 GPU | 1 | 100.0 | 100.0 | 100.0 | 100.0 |" in summary
    assert "Linearity within one node (1-node / (1-GPU x 8), p50): 0.80" in summary
    assert "Linearity (N-node / (1-node x N), p50): 0.80" in summary
    assert "Each run's first 400 steps are warm-up, left out of the percentiles (30 steps measured" in summary


def test_the_floor_fails_a_poorly_scaling_node_and_the_user_can_change_it(tmp_path: Path) -> None:
    """Seed 003's 0.8: 8 GPUs at 480 samples/s against 1 GPU at 100 is 0.6, communication-bound."""
    args = (run_result(1, 1, 100.0), run_result(8, 1, 480.0), run_result(16, 2, 960.0))
    (tmp_path / "a").mkdir()
    failed = render(make_run(tmp_path / "a", *args, ranks=8, floor=0.8))
    intra = components(failed)["e2e intra-node"]
    assert intra["status"] == "fail" and failed["verdict"] == "fail"
    assert "e2e intra-node: fail: linearity 0.60 is below 0.8" in failed["reasons"]
    assert components(failed)["e2e"]["status"] == "pass"  # 960 / 480 / 2 = 1.0 across nodes
    (tmp_path / "b").mkdir()
    lowered = render(make_run(tmp_path / "b", *args, ranks=8, floor=0.8, intra_floor=0.5))
    assert components(lowered)["e2e intra-node"]["status"] == "pass" and lowered["verdict"] == "pass"
    (tmp_path / "c").mkdir()
    unjudged = render(make_run(tmp_path / "c", *args, ranks=8, floor=0.8, intra_floor=""))
    intra = components(unjudged)["e2e intra-node"]
    assert intra["status"] == "not_judged" and unjudged["verdict"] == "incomplete"
    assert intra["reason"] == "no threshold: benchmark_e2e_min_intra_node_linearity is empty"


def test_a_failed_one_gpu_run_fails_and_one_rank_per_node_has_nothing_to_judge(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    results = render(make_run(tmp_path / "a", None, run_result(8, 1, 640.0), run_result(16, 2, 1024.0), ranks=8,
                              floor=0.8))  # fmt: skip
    intra = components(results)["e2e intra-node"]
    assert intra["status"] == "fail" and intra["reason"] == "the 1-GPU run printed no result"
    (tmp_path / "b").mkdir()
    results = render(make_run(tmp_path / "b", None, run_result(1, 1, 100.0), run_result(2, 2, 180.0), ranks=1,
                              floor=0.8))  # fmt: skip
    assert "e2e intra-node" not in components(results) and results["verdict"] == "pass"
    summary = (tmp_path / "b" / "summary.md").read_text()
    assert "Linearity within one node: not measured, a node trains with one rank" in summary


@pytest.mark.parametrize("floor", [0.8, ""])
def test_a_linearity_above_the_ceiling_fails_with_or_without_a_floor(tmp_path: Path, floor: float | str) -> None:
    """2 nodes at 25x one node (40000 / 1600 / 2 = 12.5), and a node's 8 GPUs at 160x one GPU (1600 / 10 / 8 = 20): at a
    fixed per-rank batch neither can train that much faster; a wrong measurement, never a pass, not merely not judged
    when no floor is set."""
    results = render(make_run(tmp_path, run_result(1, 1, 10.0), run_result(8, 1, 1600.0), run_result(16, 2, 40000.0),
                              ranks=8, floor=floor))  # fmt: skip
    found = components(results)
    across, intra = found["e2e"], found["e2e intra-node"]
    assert across["status"] == "fail" and intra["status"] == "fail" and results["verdict"] == "fail"
    assert across["reason"].startswith("linearity 12.50 is above 1.5: N nodes cannot train more than N times faster")
    assert "the 1-node or N-node measurement (or multi.nodes) is wrong" in across["reason"]
    assert intra["reason"].startswith("linearity 20.00 is above 1.5: N GPUs cannot train more than N times faster")


def test_a_linearity_a_little_above_one_still_passes(tmp_path: Path) -> None:
    """1.4 across nodes (3136 / 1120 / 2) and within a node (1120 / 100 / 8): below the ceiling, judged by the floor."""
    results = render(make_run(tmp_path, run_result(1, 1, 100.0), run_result(8, 1, 1120.0), run_result(16, 2, 3136.0),
                              ranks=8, floor=0.8))  # fmt: skip
    found = components(results)
    assert found["e2e"]["reason"] == "linearity 1.40 reaches 0.8"
    assert found["e2e intra-node"]["reason"] == "linearity 1.40 reaches 0.8" and results["verdict"] == "pass"


def test_replicas_that_ended_different_fail_the_e2e_whatever_the_linearity(tmp_path: Path) -> None:
    """Seed 003 asks for native DDP. ddp_train.py gives each rank its own seed and data and reports whether the ranks'
    parameter sums ended equal: only DistributedDataParallel keeps them so. A run whose replicas diverged trained
    N separate models: its throughput passed the linearity (0.8 here) and the verdict said pass."""
    single, multi = run_result(1, 1, 100.0), {**run_result(2, 2, 160.0), "replicas_in_sync": False}
    results = render(make_run(tmp_path, None, {**single, "replicas_in_sync": True}, multi, ranks=1, floor=0.75))
    e2e = components(results)["e2e"]
    assert e2e["status"] == "fail" and results["verdict"] == "fail", e2e
    assert "model replicas ended different in the multi run" in e2e["reason"], e2e
    (tmp_path / "in-sync").mkdir()
    kept = render(make_run(tmp_path / "in-sync", None, {**single, "replicas_in_sync": True},
                           {**multi, "replicas_in_sync": True}, ranks=1, floor=0.75))  # fmt: skip
    assert components(kept)["e2e"]["status"] == "pass" and kept["verdict"] == "pass", kept["reasons"]


@pytest.mark.parametrize(
    ("sums", "in_sync"),
    [([12.5, 12.5, 12.5], True), ([1e6, 1e6 * (1 + 1e-9)], True), ([12.5, 12.6], False), ([0.0, 1e-3], False),
     ([float("nan"), float("nan")], False), ([], False)],
)
def test_replicas_in_sync_allows_rounding_only(sums: list[float], in_sync: bool) -> None:
    assert replicas_in_sync(sums) is in_sync


def test_a_result_of_no_measured_step_is_refused_not_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Review round 34a: e2e.json runs with ``steps: 0`` and p50 throughputs (no step measured them) passed the
    linearity, with a note only, and went into a baseline. ddp_train.py never prints such a result (summarize refuses
    it), so the file was written by hand or damaged: refused on load, naming the key."""
    zero = {**run_result(1, 1, 100.0), "steps": 0}
    run_dir = make_run(tmp_path, None, zero, {**run_result(2, 2, 160.0), "steps": 0}, ranks=1, floor=0.75)
    assert main(["report", str(run_dir)]) == 64
    err = capsys.readouterr().err
    assert "e2e.json" in err and "single.steps: must be a count from 1" in err and "got 0" in err, err


def test_replicas_out_of_sync_on_one_node_fail_the_intra_node_linearity_too(tmp_path: Path) -> None:
    """Review round 35: with the 1-node run's replicas different, the across-node component failed but the
    within-node one still passed (0.8 over 8 GPUs)."""
    single = {**run_result(8, 1, 640.0), "replicas_in_sync": False}
    results = render(make_run(tmp_path, run_result(1, 1, 100.0), single, run_result(16, 2, 1024.0), ranks=8,
                              floor=0.75))  # fmt: skip
    intra = components(results)["e2e intra-node"]
    assert intra["status"] == "fail" and "model replicas ended different in the single run" in intra["reason"], intra


def test_a_linearity_not_judged_is_never_shown_bare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review round 41c: with the 2-node run at another per-rank batch (64, the 1-node run's 32) the across-node
    ratio, 1280 / 640 / 2 = 1.0, was not judged, yet summary.md, the plot's title and results.json printed
    "Linearity ...: 1.000" as if it had passed. So was the within-node ratio (640 / 100 / 8 = 0.8) without a floor."""
    axes = pytest.importorskip("matplotlib.axes")
    titles: list[str] = []
    set_title = axes.Axes.set_title

    def recording(self: object, label: str, *args: object, **kwargs: object) -> object:
        titles.append(label)
        return set_title(self, label, *args, **kwargs)

    monkeypatch.setattr(axes.Axes, "set_title", recording)
    multi = {**run_result(16, 2, 1280.0), "global_batch": 64 * 16}
    results = render(make_run(tmp_path, run_result(1, 1, 100.0), run_result(8, 1, 640.0), multi, ranks=8, floor=0.8,
                              intra_floor=""))  # fmt: skip
    found = components(results)
    assert found["e2e"]["status"] == found["e2e intra-node"]["status"] == "not_judged", found
    across, intra = found["e2e"]["reason"], found["e2e intra-node"]["reason"]
    assert "per-rank batch 32 in the 1-node run, 64 in the 2-node run" in across
    assert intra == "no threshold: benchmark_e2e_min_intra_node_linearity is empty"
    summary = (tmp_path / "summary.md").read_text()
    assert f"Linearity (N-node / (1-node x N), p50): 1.000 (not judged: {across})\n" in summary
    assert f"Linearity within one node (1-node / (1-GPU x 8), p50): 0.800 (not judged: {intra})\n" in summary
    stored = json.loads((tmp_path / "results.json").read_text())["e2e"]
    assert (stored["linearity"], stored["linearity_not_judged"]) == (pytest.approx(1.0), across)
    assert (stored["linearity_intra_node"], stored["linearity_intra_node_not_judged"]) == (pytest.approx(0.8), intra)
    assert [" ".join(title.split()) for title in titles] == [
        f"e2e DDP throughput (nccl), linearity 1.00 (not judged: {across})"]
    # A judged ratio is shown as it is, with nothing not judged beside it.
    (tmp_path / "judged").mkdir()
    judged = render(make_run(tmp_path / "judged", run_result(1, 1, 100.0), run_result(8, 1, 640.0),
                             run_result(16, 2, 1024.0), ranks=8, floor=0.8))  # fmt: skip
    assert judged["verdict"] == "pass"
    assert (judged["e2e"]["linearity_not_judged"], judged["e2e"]["linearity_intra_node_not_judged"]) == (None, None)
    assert "Linearity (N-node / (1-node x N), p50): 0.800\n" in (tmp_path / "judged" / "summary.md").read_text()
    assert " ".join(titles[-1].split()) == "e2e DDP throughput (nccl), linearity 0.80"


def test_a_linearity_whose_run_failed_is_not_shown_as_judged(tmp_path: Path) -> None:
    """Review round 42: with the training exited non-zero the component fails on that, not on the ratio, which
    was still printed bare ("Linearity ...: 0.800") beside the fail, as if it had been measured and judged."""
    make_run(tmp_path, run_result(1, 1, 100.0), run_result(8, 1, 640.0), run_result(16, 2, 1024.0), ranks=8,
             floor=0.75)  # fmt: skip
    e2e = json.loads((tmp_path / "e2e.json").read_text())
    (tmp_path / "e2e.json").write_text(json.dumps({**e2e, "error": "torchrun exited 1 on n2"}))
    results = render(tmp_path)
    found = components(results)
    failed = "e2e benchmark failed: torchrun exited 1 on n2"
    assert (found["e2e"]["status"], found["e2e"]["reason"]) == ("fail", failed)
    assert results["e2e"]["linearity_not_judged"] == failed
    summary = (tmp_path / "summary.md").read_text()
    assert f"Linearity (N-node / (1-node x N), p50): 0.800 (not judged: {failed})" in summary, summary
