"""tests/unit/shared_runs.py: tests that share ansible-playbook runs get what ``ansible -m`` gave each of them. A task
runs its module with the interpreter it names (else the one running the tests), a task that fails stops no other,
and what Ansible prints for a task (its diff) comes back with that task alone."""

from __future__ import annotations

import sys

import pytest

from tests.unit.adhoc import PY38
from tests.unit.shared_runs import module_task, shared_runs

PYTHON_FACTS = {"gather_subset": ["!all", "!min", "python"]}


@pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} not installed (set RDMAFORGE_PY38)")
@shared_runs
def test_each_task_keeps_its_interpreter_its_failure_and_its_diff(case):
    dest = case / "f"
    dest.write_text("old\n")
    old_python, refused, changed, default_python = yield [
        module_task("ansible.builtin.setup", PYTHON_FACTS, python=PY38),
        module_task("text_file", {"dest": str(case / "nowhere" / "f"), "content": "x\n"}),
        module_task("text_file", {"dest": str(dest), "content": "new\n"}, diff=True),
        module_task("ansible.builtin.setup", PYTHON_FACTS),
    ]
    assert old_python.result["ansible_facts"]["ansible_python"]["executable"] == str(PY38)
    assert default_python.result["ansible_facts"]["ansible_python"]["executable"] == sys.executable
    assert refused.failed and "does not exist" in refused.result["msg"], refused
    assert not changed.failed and changed.result["changed"] is True and dest.read_text() == "new\n"
    assert "-old" in changed.printed and "+new" in changed.printed
    assert "+new" not in refused.printed + default_python.printed
