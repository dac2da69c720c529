"""`python -m rdmaforge.collection build|dev` needs a checkout to assemble the collection from. Run from an installed
wheel it ended in a traceback (FileNotFoundError: not a complete rdmaforge checkout); it now says so in one line,
names where the wheel's collection is, and exits 64 (a usage error)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaforge import collection
from rdmaforge.paths import PACKAGE_DIR
from rdmaforge.runner.exit_codes import ExitCode


def wheel_like_site(root: Path) -> Path:
    """A site-packages as the wheel leaves it: the rdmaforge package and the collection beside it, no checkout."""
    site = root / "site-packages"
    shutil.copytree(PACKAGE_DIR, site / "rdmaforge", ignore=shutil.ignore_patterns("__pycache__"))
    collection.collection_dir(site).mkdir(parents=True)
    return site


@pytest.mark.parametrize("action", [["build", "-o", "out"], ["dev"]])
def test_main_outside_a_checkout_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], action: list[str]
) -> None:
    site = tmp_path / "site-packages"
    collection.collection_dir(site).mkdir(parents=True)
    monkeypatch.setattr(collection, "checkout_root", lambda: site)
    monkeypatch.chdir(tmp_path)
    assert collection.main(action) == ExitCode.BAD_INPUT
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"python -m rdmaforge.collection: needs an rdmaforge checkout (missing in {site}: "
                           "collection/galaxy.yml.in, "), line  # fmt: skip
    assert "library" in line and "roles" in line and "playbooks" in line, line
    assert line.endswith(f"; the installed collection is at {collection.collection_dir(site)}"), line
    assert not (tmp_path / "out").exists() and not (site / "build").exists()


def test_the_installed_package_run_as_a_module_exits_64_without_a_traceback(tmp_path: Path) -> None:
    """The package as the wheel installs it (a copy on PYTHONPATH, run from another directory)."""
    site = wheel_like_site(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    for action in (["build"], ["dev"]):
        proc = subprocess.run([sys.executable, "-m", "rdmaforge.collection", *action], cwd=work,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)}, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert proc.returncode == ExitCode.BAD_INPUT, proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert f"needs an rdmaforge checkout (missing in {site}: " in proc.stderr, proc.stderr
        assert f"the installed collection is at {collection.collection_dir(site)}" in proc.stderr, proc.stderr
        assert proc.stdout == "" and not (work / "build").exists() and not (site / "build").exists()
