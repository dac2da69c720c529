"""Every task has a deadline: ansible.cfg's task_timeout for all of them, and a longer one of its own for each task
that runs longer by design.

A command that hangs while sshd answers (modprobe on a wedged device, a read on a stale NFS mount) is never caught by
SSH keepalives; before task_timeout it held the run and the inventory's lock for ever (issue 18). A task whose own
bound (timeout(1) in its argv, the reboot module's reboot_timeout) may exceed the backstop must set a longer
``timeout`` from the same variable, or the backstop would kill a benchmark or a reboot that was within its own bound.
"""

from __future__ import annotations

import configparser
from collections.abc import Iterator
from typing import Any

import jinja2
import pytest
import yaml

from rdmaforge.paths import PROJECT_ROOT

#: The role variables that bound a task's own run, each well over any backstop (the ranges preflight allows reach it).
LONG = {"benchmark_timeout": 86400, "hugepages_reboot_timeout": 86400, "pairwise_timeout": 86400,
        "mpi_launch_timeout": 3600}  # fmt: skip


def backstop() -> int:
    config = configparser.ConfigParser()
    config.read(PROJECT_ROOT / "ansible.cfg")
    return config.getint("defaults", "task_timeout")


def tasks(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, list):
        for item in node:
            yield from tasks(item)
    elif isinstance(node, dict):
        if any(key.startswith(("ansible.builtin.", "rdmaforge.cluster.")) for key in node):
            yield node
        for key in ("block", "rescue", "always"):
            yield from tasks(node.get(key))


def self_bounded() -> list[tuple[str, dict[str, Any], str]]:
    """(file, task, the variable bounding it) for each role task bounded by one of LONG's variables."""
    found = []
    for path in sorted((PROJECT_ROOT / "roles").glob("*/tasks/*.yml")):
        for task in tasks(yaml.safe_load(path.read_text())):
            text = yaml.safe_dump(task.get("ansible.builtin.command") or task.get("ansible.builtin.reboot") or {})
            bound = "benchmark_timeout" if "benchmark_e2e_timeout" in text else None
            for name in LONG:
                if "'timeout'" in text and name in text or f"reboot_timeout: '{{{{ {name} }}}}'" in text:
                    bound = name
            if bound:
                found.append((str(path.relative_to(PROJECT_ROOT)), task, bound))
    return found


def test_every_task_has_the_backstop() -> None:
    assert backstop() > 0


def test_the_tasks_bounded_by_their_own_variables_are_found() -> None:
    """The scan sees the tasks this file is about (a scan that finds nothing would pass the test below)."""
    names = {task["name"] for _, task, _ in self_bounded()}
    assert {"Train on one GPU (the reference for linearity within a node)",
            "Train on one node (the reference for linearity across nodes)",
            "Run each collective across the benchmark's nodes (seed 000's flags)",
            "Reboot for the new kernel arguments", "Run sendrecv_perf across the pair on each rail",
            "Start one process on every node with mpirun"} <= names  # fmt: skip


@pytest.mark.parametrize("where, task, bound", self_bounded(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_task_that_may_run_past_the_backstop_outlasts_its_own_bound(where: str, task: dict, bound: str) -> None:
    own = task.get("timeout")
    if LONG[bound] <= backstop():
        return  # within the backstop at the longest value its variable may take
    assert own is not None, f"{where}: {task['name']!r} runs up to {bound} but has no timeout of its own"
    deadline = int(jinja2.Environment().from_string(str(own)).render({bound: LONG[bound]}))
    assert deadline > LONG[bound], f"{where}: {task['name']!r}: timeout {own} is not longer than {bound}"
