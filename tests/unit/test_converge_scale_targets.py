"""The converge_scale benchmark's verdicts (benchmarks/converge_scale.py): a target is judged only from the
figures measured for it, and the --mitogen rows are judged against the issue's own bounds (16/1 <= 3x) and
against the plain strategy's figure of the same run. The figures below are made up to sit on either side."""

from __future__ import annotations

from typing import Any

from benchmarks.common import Result, exit_code, table_line
from benchmarks.converge_scale import targets
from rdmaforge.runner.exit_codes import ExitCode


def row(nodes: int, first: float, mitogen_first: float | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {"nodes": nodes, "first_converge_s": first, "noop_s": 4.0, "noop_fast_path": True,
                         "check_diff_s": 4.0, "check_diff_fast_path": True}  # fmt: skip
    if mitogen_first is not None:
        r.update(mitogen_first_converge_s=mitogen_first, mitogen_noop_s=4.5, mitogen_noop_fast_path=True)
    return r


def verdicts(rows: list[dict[str, Any]]) -> dict[str, bool]:
    return {result.name: result.passed for result in targets(rows)}


def test_mitogen_ratio_judged_on_its_own_runs() -> None:
    within = verdicts([row(1, 80, 40), row(16, 600, 119)])
    assert within["first converge 16 nodes / 1 node"] is False  # 7.5x
    assert within["first converge 16 nodes / 1 node, --mitogen"] is True  # 2.98x
    beyond = verdicts([row(1, 80, 40), row(16, 600, 121)])
    assert beyond["first converge 16 nodes / 1 node, --mitogen"] is False  # 3.03x


def test_mitogen_must_beat_the_plain_strategy_and_is_not_judged_when_not_measured() -> None:
    judged = verdicts([row(1, 80, 80.5), row(4, 190, 95)])
    assert judged["first converge with --mitogen, 1 node(s)"] is False
    assert judged["first converge with --mitogen, 4 node(s)"] is True
    unmeasured = verdicts([row(1, 80), row(16, 600)])
    assert not [name for name in unmeasured if "mitogen" in name]


def by_name(rows: list[dict[str, Any]]) -> dict[str, Result]:
    return {result.name: result for result in targets(rows)}


def test_ratio_targets_are_not_judged_when_the_run_leaves_out_1_or_16() -> None:
    """RDMAFORGE_BENCH_SCALE="1,4" (or "4,16") measures no 16/1 ratio: the targets stay in the table, unjudged."""
    for rows, why in (([row(1, 80), row(4, 190)], "size 16 not in this run"),
                      ([row(4, 190), row(16, 600)], "size 1 not in this run"),
                      ([row(4, 190)], "sizes 1 and 16 not in this run")):  # fmt: skip
        found = by_name(rows)
        for name, target in (("no-op 16 nodes / 1 node", "<= 2.5"), ("first converge 16 nodes / 1 node", "<= 3")):
            result = found[name]
            assert (result.kind, result.passed, result.value, result.target) == ("not_judged", False, None, target)
            assert result.verdict == f"not judged ({why})"
            assert table_line(result, 40).endswith(f"target {target:12} not judged ({why})")
    assert exit_code(targets([row(1, 80), row(4, 190)])) == ExitCode.INCOMPLETE


def test_the_4_node_targets_are_not_judged_without_4_nodes() -> None:
    found = by_name([row(1, 80), row(16, 600)])
    assert found["no-op provision, 4 nodes"].verdict == "not judged (size 4 not in this run)"
    assert found["site.yml with Ansible's defaults / no-op provision, 4 nodes"].kind == "not_judged"
    judged = by_name([row(1, 80), row(4, 190), row(16, 600)])
    assert judged["no-op provision, 4 nodes"].verdict == "PASS"  # 4.0 s < 20 s
    assert judged["no-op 16 nodes / 1 node"].verdict == "PASS"  # 4.0 / 4.0
    assert judged["first converge 16 nodes / 1 node"].verdict == "FAIL"  # 7.5x
