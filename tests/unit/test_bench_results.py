"""The benchmark harness's verdicts (benchmarks/common.py): a result is PASS or FAIL only when it was judged
against its target; a reference figure and a target the run could not judge print as such and are never a pass.
The nccl-report benchmark's targets hold only for a run that ended with the exit code its input calls for (the
corpus' INDEX.md: the concatenated corpus holds failed runs, file 02's runs none). Figures are made up to sit on
either side of the targets; nothing here runs a benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import common, nccl_build, nccl_parser
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


@pytest.mark.parametrize(
    ("label", "rc"),
    [(nccl_parser.CORPUS_LABEL, 4), (nccl_parser.SINGLE_LABEL, 0)],
)
def test_a_parse_that_ended_as_its_input_calls_for_is_judged_on_its_figures(label: str, rc: int) -> None:
    fast = nccl_parser.judge(label, 1 << 30, 5.0, 120.0, rc, 4.5, "0.5 before / 1.0 after")
    assert [r.verdict for r in fast] == ["PASS", "PASS"]  # 215 MB/s, 120 MiB
    slow = nccl_parser.judge(label, 1 << 30, 20.0, 400.0, rc, 19.0, "0.5 before / 1.0 after")
    assert [r.verdict for r in slow] == ["FAIL", "FAIL"]  # 54 MB/s, 400 MiB


@pytest.mark.parametrize(
    ("label", "rc", "said"),
    [
        (nccl_parser.CORPUS_LABEL, 70, "nccl-report exited 70 (internal error (traceback saved)), not 4 (benchmark "
                                       "verdict fail"),
        (nccl_parser.CORPUS_LABEL, 0, "nccl-report exited 0 (success), not 4"),
        (nccl_parser.SINGLE_LABEL, 64, "nccl-report exited 64 (bad command line or input file), not 0 (success)"),
        (nccl_parser.SINGLE_LABEL, -9, "nccl-report exited -9 (unknown), not 0"),
    ],
)  # fmt: skip
def test_a_crashed_parse_fails_both_targets_naming_its_exit_code(label: str, rc: int, said: str) -> None:
    """A crash can be fast and small: its figures measure no parse."""
    results = nccl_parser.judge(label, 1 << 30, 2.0, 50.0, rc, 1.9, "0.5 before / 1.0 after")
    assert [r.verdict for r in results] == ["FAIL", "FAIL"]
    for result in results:
        assert result.detail.startswith(said), result.detail
