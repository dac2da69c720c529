"""The e2e benchmark's torch needs a recent Python (review round 27a): torch 2.13.0 has wheels for Python 3.10 and
later only, while python3 is 3.8 on Ubuntu 20.04 (seeds 000 and 001), 3.9 on Debian 11 and EL9. pip found no
distribution, retried as if the index were down, and the benchmark ended with no verdict. The role now compares the
interpreter with benchmark_e2e_python_min before anything is installed. For real: the role's own check run by
Ansible on this machine against a real Python 3.8 and the project's own Python."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rdmaforge.paths import PROJECT_ROOT
from tests.unit.adhoc import PY38


def check(tmp_path: Path, python: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"node1": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}))  # fmt: skip
    play = {"name": "check", "hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Check", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.benchmark",
                                                           "tasks_from": "e2e_python_check"},
         "vars": {"benchmark_e2e_python": python, "benchmark_e2e_venv": str(tmp_path / "no-venv-yet")}}]}
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play]))
    return subprocess.run([str(PROJECT_ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
                           str(tmp_path / "play.yml")], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ANSIBLE_NOCOLOR": "1"}, check=False)  # fmt: skip


@pytest.mark.skipif(not PY38.exists(), reason=f"no Python 3.8 at {PY38} (RDMAFORGE_PY38)")
def test_an_interpreter_older_than_torch_needs_is_refused_naming_both(tmp_path: Path) -> None:
    result = check(tmp_path, str(PY38))
    assert result.returncode != 0
    assert (f"node1: {PY38} is Python 3.8.18, and torch==2.13.0 (benchmark_e2e_torch) has wheels for Python 3.10 and "
            "later (benchmark_e2e_python_min)") in result.stdout, result.stdout[-3000:]


def test_a_recent_interpreter_passes_and_a_missing_one_is_named(tmp_path: Path) -> None:
    assert sys.version_info >= (3, 10)
    passed = check(tmp_path, sys.executable)
    assert passed.returncode == 0, passed.stdout[-3000:]
    missing = check(tmp_path, "python3.99")
    assert missing.returncode != 0 and "node1: python3.99 (benchmark_e2e_python) cannot be run" in missing.stdout


@pytest.mark.skipif(not PY38.exists(), reason=f"no Python 3.8 at {PY38} (RDMAFORGE_PY38)")
def test_an_existing_environment_on_an_old_python_is_named_with_what_helps(tmp_path: Path) -> None:
    """Review round 28: with the environment already there, its own interpreter is judged, and the advice to set
    benchmark_e2e_python could not help."""
    venv = tmp_path / "no-venv-yet"
    subprocess.run([str(PY38), "-m", "venv", "--without-pip", str(venv)], check=True)
    result = check(tmp_path, sys.executable)
    assert result.returncode != 0
    assert f"node1: {venv}/bin/python is Python 3.8.18" in result.stdout, result.stdout[-3000:]
    assert f"the environment {venv} (benchmark_e2e_venv) was made with it: remove it" in result.stdout
