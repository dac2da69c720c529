"""The roles' helper commands run ``python -m rdmaforge...`` on the controller with ``chdir`` set to the workspace:
without ``-P`` (Python 3.11+: the current directory is not put on sys.path) a directory named ``rdmaforge/`` there,
such as a source checkout of another version, is imported instead of the installed package."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

import rdmaforge
from rdmaforge.paths import PROJECT_ROOT


def command_lines(node: Any) -> Iterator[list[str]]:
    """Every command of a parsed YAML document as a list of words: argv lists as they are, strings (``cmd``,
    free-form command/shell, templated lines) split as a shell would."""
    if isinstance(node, dict):
        for value in node.values():
            yield from command_lines(value)
    elif isinstance(node, list):
        if node and all(isinstance(item, str | int | float) for item in node):
            yield [str(item) for item in node]
        else:
            for item in node:
                yield from command_lines(item)
    elif isinstance(node, str) and "rdmaforge" in node:
        try:
            yield shlex.split(node)
        except ValueError:  # not shell words (an unbalanced quote in prose): no command
            yield node.split()


def runs_rdmaforge(words: list[str]) -> bool:
    return any(word == "-m" and nxt.startswith("rdmaforge") and not nxt.startswith("rdmaforge.cluster.")
               for word, nxt in zip(words, words[1:], strict=False))  # fmt: skip


def test_every_role_command_that_runs_rdmaforge_as_a_module_passes_minus_p() -> None:
    found = []
    for path in sorted((PROJECT_ROOT / "roles").rglob("*.yml")):
        for document in yaml.safe_load_all(path.read_text()):
            for words in command_lines(document):
                if runs_rdmaforge(words):
                    found.append((path.relative_to(PROJECT_ROOT), words))
    # The three known callers at least (a walk that finds nothing would pass anything).
    assert {str(path) for path, _ in found} >= {"roles/benchmark/tasks/main.yml", "roles/benchmark/tasks/report.yml",
                                                "roles/pairwise/tasks/report.yml"}, found  # fmt: skip
    for path, words in found:
        module = words.index("-m")
        assert "-P" in words[1:module], f"{path}: {words}: -P must come before -m (after the interpreter)"


def test_minus_p_keeps_a_rdmaforge_directory_in_the_working_directory_from_shadowing_the_package(
    tmp_path: Path,
) -> None:
    fake = tmp_path / "rdmaforge"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise SystemExit('the rdmaforge/ of the working directory was imported')\n")
    shadowed = subprocess.run([sys.executable, "-m", "rdmaforge.cli", "--version"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "the rdmaforge/ of the working directory was imported" in shadowed.stderr, shadowed  # the hazard is real
    isolated = subprocess.run([sys.executable, "-P", "-m", "rdmaforge.cli", "--version"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert isolated.returncode == 0, isolated.stderr
    assert isolated.stdout.strip() == f"rdmaforge {rdmaforge.__version__}", isolated.stdout
