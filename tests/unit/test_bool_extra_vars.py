"""A boolean role variable given on the command line (`-e name=false`) is the string 'false', which Jinja reads as
true: every role must read such a variable through `| bool`, as it reads its own defaults."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge.paths import PROJECT_ROOT

ROLES = PROJECT_ROOT / "roles"
#: Task keys whose text is for a person (a message, a name), not an expression Ansible evaluates as a condition or
#: hands to a filter.
PROSE_KEYS = {"name", "msg", "fail_msg", "success_msg", "description", "short_description"}


def bool_options() -> set[str]:
    """Every option any role's argument spec declares as a bool (what -e can hand over as a string)."""
    names: set[str] = set()
    for path in ROLES.glob("*/meta/argument_specs.yml"):
        for entry in (yaml.safe_load(path.read_text())["argument_specs"] or {}).values():
            names |= {name for name, option in (entry.get("options") or {}).items() if option.get("type") == "bool"}
    return names


def expressions(node: Any, key: str = "") -> Iterator[str]:
    """The strings of a task file that Ansible evaluates: `when` (and its list), and the Jinja of other values."""
    if isinstance(node, dict):
        for name, value in node.items():
            if name not in PROSE_KEYS:
                yield from expressions(value, str(name))
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item, key)
    elif isinstance(node, str):
        if key in ("when", "changed_when", "failed_when", "that", "until"):
            yield node
        else:
            yield from re.findall(r"\{\{(.*?)\}\}", node, re.DOTALL)


def test_every_bool_option_is_read_through_the_bool_filter() -> None:
    names = bool_options()
    assert "cluster_summary_from_this_run" in names and "eni_jumbo_frames" in names  # the spec is read
    alternatives = "|".join(sorted(names, key=len, reverse=True))
    # `is defined` / `is not defined` asks whether the variable is set, never reads its value
    bare = re.compile(rf"\b({alternatives})\b(?!\s*\|\s*bool\b)(?!\s+is\s+(?:not\s+)?defined\b)")
    found = []
    for path in sorted([*ROLES.glob("*/tasks/*.yml"), *ROLES.glob("*/vars/*.yml"), *ROLES.glob("*/handlers/*.yml")]):
        for text in expressions(yaml.safe_load(path.read_text())):
            # a quoted string is text, not the variable; `default(x) | bool` reads the variable through bool too
            code = re.sub(r"'[^']*'|\"[^\"]*\"", "''", text)
            for match in bare.finditer(re.sub(r"\|\s*default\([^()]*\)\s*(?=\|\s*bool\b)", "", code)):
                found.append(f"{path.relative_to(PROJECT_ROOT)}: {match.group(1)} in {' '.join(text.split())[:120]}")
    assert found == []


def run_conditions(tmp_path: Path, tasks_file: Path, extra: str) -> dict[str, bool]:
    """Each task of ``tasks_file`` as a debug task with the task's own `when`, run with ``-e extra``
    (key=value: a string, as a person types it): task name -> whether it ran."""
    tasks = [task for task in yaml.safe_load(tasks_file.read_text()) if "when" in task]
    play = [{"name": "conditions", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": f"task {i}", "ansible.builtin.debug": {"msg": f"RAN {i}"}, "when": task["when"]}
                       for i, task in enumerate(tasks)]}]  # fmt: skip
    playbook = tmp_path / "conditions.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    env = {**os.environ, "ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg"), "ANSIBLE_CACHE_PLUGIN": "memory",
           "ANSIBLE_NOCOLOR": "1"}  # fmt: skip
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}", "-e", extra, str(playbook)]  # fmt: skip
    proc = subprocess.run(argv, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {task["name"]: f"RAN {i}" in proc.stdout for i, task in enumerate(tasks)}


@pytest.mark.parametrize("given", ["false", "no", "False"])
def test_cluster_summary_from_this_run_false_on_the_command_line_is_false(tmp_path: Path, given: str) -> None:
    ran = run_conditions(tmp_path, ROLES / "cluster_summary" / "tasks" / "main.yml",
                         f"cluster_summary_from_this_run={given}")  # fmt: skip
    # false: summary.yml on its own (defaults/main.yml): the converge check and the recorded summary, no assembly
    assert ran == {
        "Compare each node with its last complete converge (summary.yml on its own; read-only)": True,
        "Take the summary recorded by the last complete converge, or mark a node whose record does not hold": True,
        "Assemble the summary of a node this run converged": False,
    }


def test_cluster_summary_from_this_run_true_on_the_command_line_is_true(tmp_path: Path) -> None:
    tasks_file = ROLES / "cluster_summary" / "tasks" / "main.yml"
    ran = run_conditions(tmp_path, tasks_file, "cluster_summary_from_this_run=true")
    assert list(ran.values()) == [False, False, True]
