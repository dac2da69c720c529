"""`rdmaforge bench` refuses bad input before anything runs: an unknown --require component, a missing or
malformed baseline and a threshold of 0 or less given with -e exit 64, name what is wrong, and create no run
directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmaforge.cli import main
from rdmaforge.runner.exit_codes import ExitCode


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  children:\n    cluster:\n      hosts:\n        node1: {ansible_host: 127.0.0.1}\n")
    return path


def bench(inventory: Path, runs: Path, *extra: str) -> int:
    return main(["bench", "-i", str(inventory), "--runs-dir", str(runs), *extra])


def test_an_unknown_required_component_is_refused(
    inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench(inventory, tmp_path / "runs", "--require", "nccl-tests,gpus") == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "--require 'nccl-tests,gpus': unknown component(s) gpus; allowed: nccl-tests, transport, e2e, " in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("content", "why"), [(None, "cannot read it"), ("[1, 2]", "not an rdmaforge baseline")])
def test_a_missing_or_malformed_baseline_is_refused_with_its_path(
    inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, why: str
) -> None:
    baseline = tmp_path / "prod-baseline.json"
    if content is not None:
        baseline.write_text(content)
    assert bench(inventory, tmp_path / "runs", "-e", f"benchmark_baseline={baseline}") == ExitCode.BAD_INPUT
    assert f"benchmark baseline {baseline}: {why}" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("given", "allowed"), [
    ("benchmark_min_efficiency=0", "a number above 0 and at most 1"),
    ("benchmark_e2e_min_linearity=-0.5", "a number above 0,"),
    ("benchmark_e2e_min_intra_node_linearity=high", "a number above 0,"),
])  # fmt: skip
def test_a_threshold_of_0_or_less_is_refused(
    inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, allowed: str
) -> None:
    """A threshold of 0 passes anything (0 GB/s included); empty is how a run is reported without being judged."""
    variable, value = given.split("=")
    assert bench(inventory, tmp_path / "runs", "-e", given) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"rdmaforge bench: {variable}={value!r} (from -e): must be {allowed}" in err
    assert 'or empty (null or "": reported, not judged)' in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("value", ["5", "-1", "abc", "1", "nan"])
def test_a_regression_tolerance_that_is_no_fraction_is_refused_before_anything_runs(
    inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """It was accepted, the whole benchmark ran, and only its report (run.json's schema) refused 5; 'abc' became 0."""
    assert bench(inventory, tmp_path / "runs", "-e", f"benchmark_regression_tolerance={value}") == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"benchmark_regression_tolerance={value!r} (from -e): must be a fraction from 0 to below 1" in err, err
    assert not (tmp_path / "runs").exists()
