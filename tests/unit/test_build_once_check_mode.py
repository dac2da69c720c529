"""`--check` where the build is not in the controller cache yet (a first provision, a new NCCL version, archs or
pin): role build_once for real on this machine (connection local, builder localhost). Check mode skipped the
checkout and then failed at the compile ("Unable to change directory ... src"), or, with a tree an earlier failed
build left, at the check of what the build made (review round 19b). Now the build and the install are reported
as the changes a real run makes, nothing is compiled, written or installed, and after the real run a check run
changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import recap, run_playbook
from test_build_once_git_pin import upstream
from test_build_once_interrupted import ENV, QUICK_MAKEFILE, write_run


def written(tmp: Path) -> list[str]:
    """What the runs left in the prefix, the scratch directory and the controller cache."""
    return sorted(str(p.relative_to(tmp)) for d in ("opt", "scratch", "cache") if (tmp / d).exists()
                  for p in (tmp / d).rglob("*"))  # fmt: skip


@pytest.mark.parametrize("source", ["tarball", "git"])
def test_check_mode_reports_a_build_not_yet_cached_and_makes_nothing(tmp_path: Path, source: str) -> None:
    overrides: dict[str, object] = {}
    if source == "git":
        repo, first, _second = upstream(tmp_path)
        overrides = {"build_once_source": "git", "build_once_git_url": f"file://{repo}", "build_once_git_ref": "v1.0",
                     "build_once_git_commit": first, "build_once_git_commit_variable": "nccl_build_git_commit"}
    inventory, playbook = write_run(tmp_path, "1", QUICK_MAKEFILE, **overrides)
    (tmp_path / "scratch" / "toy-1" / "src").mkdir(parents=True)  # a tree an earlier failed build left
    before = written(tmp_path)
    check = run_playbook(str(playbook), "--check", "--diff", inventory=inventory, env=ENV, timeout=300)
    assert check.returncode == 0, check.stdout[-4000:]
    assert recap(check.stdout)["localhost"]["changed"] >= 1
    said = " ".join(check.stdout.split())
    assert "check mode: toy 1 is not in the controller cache" in said and "Nothing is compiled under --check" in said
    assert written(tmp_path) == before
    real = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert real.returncode == 0, real.stdout[-4000:]
    assert (tmp_path / "opt" / "current").exists()
    again = run_playbook(str(playbook), "--check", "--diff", inventory=inventory, env=ENV, timeout=300)
    assert again.returncode == 0 and recap(again.stdout)["localhost"]["changed"] == 0, again.stdout[-4000:]
