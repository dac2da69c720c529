"""What a user pastes into a ticket says what was judged (review round 27c): a failed collective's row in
summary.md read "ok" (its table's parse status) and 79.99% of the line rate printed as 80% beside a threshold of
80%; a fail printed as "320.0 GB/s against 320.0 GB/s" and "linearity 0.80 is below 0.8"."""

from __future__ import annotations

from rdmaforge.bench.report import judge_linearity, summary_markdown
from rdmaforge.bench.verdict import Component, describe


def test_a_fail_never_reads_as_its_own_threshold() -> None:
    component = {"name": "nccl-tests all_reduce", "status": "fail", "required": True, "value": 319.96,
                 "threshold": 320.0, "unit": "GB/s"}  # fmt: skip
    assert "319.96 GB/s against 320 GB/s" in describe(component)
    passed = {**component, "status": "pass", "value": 350.0}
    assert "350.0 GB/s against 320.0 GB/s" in describe(passed)  # as before where the two already differ
    linearity = Component("e2e", "e2e", "fail", "", unit="linearity")
    judge_linearity(linearity, 0.7996, 0.8, "benchmark_e2e_min_linearity", "no throughput", "implausible")
    assert linearity.status == "fail" and linearity.reason == "linearity 0.7996 is below 0.8"
    assert linearity.threshold == 0.8


def test_the_summary_table_shows_each_collectives_verdict_and_a_precise_efficiency() -> None:
    results = {"fabric": "roce", "nodes": ["node1", "node2"], "verdict": "fail", "reasons": ["below"],
               "components": [{"name": "nccl-tests all_reduce", "status": "fail", "required": True,
                               "value": 319.96, "threshold": 320.0, "unit": "GB/s"},
                              {"name": "nccl-tests all_gather", "status": "not_judged", "required": False}],
               "nccl": {"status": "ran", "expected_busbw_gbs": 400.0, "collectives": {
                   "all_reduce": {"status": "ok", "avg_busbw": 309.98, "peak_busbw": 319.96, "efficiency": 0.7999},
                   "all_gather": {"status": "ok", "avg_busbw": 10.0, "peak_busbw": 12.0, "efficiency": None}}}}
    text = summary_markdown(results, [])
    assert "| collective | verdict | run | avg busbw GB/s | peak busbw GB/s | efficiency |" in text
    # Cut, not rounded, to one decimal: what is shown is never more than what was measured.
    assert "| all_reduce | fail | ok | 309.98 | 319.96 | 79.9% |" in text
    assert "| all_gather | not judged | ok | 10.0 | 12.0 | - |" in text
