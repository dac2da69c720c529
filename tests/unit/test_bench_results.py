"""The benchmark harness's verdicts (benchmarks/common.py): a result is PASS or FAIL only when it was judged
against its target; a reference figure and a target the run could not judge print as such and are never a pass.
Figures are made up to sit on either side of the targets; nothing here runs a benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import common, nccl_build
from benchmarks.common import Result, exit_code, table_line
from rdmaforge.runner.exit_codes import ExitCode


def test_a_reference_is_measured_not_passed() -> None:
    rows = nccl_build.results({"1-node": 600.0, "3-node": 630.0, "node added later": 20.0},
                              {"1-node": 540.0, "3-node": 545.0})  # fmt: skip
    reference, three, added = rows
    assert reference.name == "full NCCL build, 1-node lab"
    assert (reference.kind, reference.passed, reference.target) == ("reference", False, "reference")
    assert reference.verdict == "measured (reference, not judged)"
    line = table_line(reference, 45)
    assert "PASS" not in line and "measured (reference, not judged)  compile 540 s" in line
    assert (three.verdict, added.verdict) == ("PASS", "PASS")  # 1.05x; 20 s < 60 s
    assert exit_code(rows) == 0  # a reference is no target: it fails nothing, and leaves nothing unjudged


def test_a_result_without_a_verdict_is_never_a_pass() -> None:
    assert Result("x", 1.0, "s", "reference", True, kind="reference").passed is False
    unjudged = common.not_judged("ratio", "x", "<= 3", "size 16 not in this run")
    assert (unjudged.passed, unjudged.value, unjudged.verdict) == (False, None, "not judged (size 16 not in this run)")
    line = table_line(unjudged, 10)
    assert line == "ratio                - x   target <= 3         not judged (size 16 not in this run)"
    passed, failed = Result("a", 1.0, "s", "< 2 s", True), Result("b", 3.0, "s", "< 2 s", False)
    assert exit_code([passed]) == 0
    assert exit_code([passed, unjudged]) == ExitCode.INCOMPLETE
    assert exit_code([passed, unjudged, failed]) == 1


def test_the_report_file_carries_each_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "PROJECT_ROOT", tmp_path)
    rows = [Result("a", 1.0, "s", "< 2 s", True), common.reference("b", 5.0, "s"),
            common.not_judged("c", "x", "<= 3", "sizes 1 and 16 not in this run")]  # fmt: skip
    written = json.loads(common.write_report(rows).read_text())
    assert [(r["name"], r["passed"], r["verdict"]) for r in written] == [
        ("a", True, "PASS"), ("b", False, "measured (reference, not judged)"),
        ("c", False, "not judged (sizes 1 and 16 not in this run)"),
    ]  # fmt: skip

