"""Every task has a deadline: ansible.cfg's task_timeout for all of them, and a longer one of its own for each task
that runs longer by design.

A command that hangs while sshd answers (modprobe on a wedged device, a read on a stale NFS mount) is never caught by
SSH keepalives; before task_timeout it held the run and the inventory's lock for ever (issue 18). A task whose own
bound (timeout(1) in its argv, the reboot module's reboot_timeout, a module's own timeout option) may exceed the
backstop must set a longer ``timeout`` from the same variable, or the backstop would kill a benchmark or a reboot
that was within its own bound; and a backstop's kill fails the host outright (a TaskTimeoutError bypasses
failed_when), where timeout(1)'s own exit is judged from the output.
"""

from __future__ import annotations

import configparser
import re
from collections.abc import Iterator
from typing import Any

import jinja2
import pytest
import yaml

from rdmaforge.paths import PROJECT_ROOT

#: The role variables that bound a task's own run, at the longest value preflight allows (or well over any
#: backstop where it allows any).
LONG = {"benchmark_timeout": 86400, "hugepages_reboot_timeout": 86400, "pairwise_timeout": 86400,
        "mpi_launch_timeout": 3600}  # fmt: skip
#: How many times a module given the variable as an option waits it in a row (timeout(1) in an argv: once): the
#: reboot module reboot_timeout twice (the boot id, then its test command: ansible/modules/reboot.py), pairwise_iperf
#: pairwise_timeout twice (both directions of a pair, in turn).
OPTION_WAITS = 2
#: What the task's deadline must add to its bound: timeout(1)'s --kill-after grace and a minute of connection.
MARGIN = 30


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


def action(task: dict[str, Any]) -> str:
    return next(key for key in task if key.startswith(("ansible.builtin.", "rdmaforge.cluster.")))


def self_bounded() -> list[tuple[str, dict[str, Any], str, int]]:
    """(file, task, the variable bounding it, how many times in a row) for each role task bounded by one of LONG's
    variables: timeout(1) in a command's argv, the reboot module's reboot_timeout, or a module's own timeout option."""
    found = []
    for path in sorted((PROJECT_ROOT / "roles").glob("*/tasks/*.yml")):
        for task in tasks(yaml.safe_load(path.read_text())):
            arguments = task[action(task)]
            text = yaml.safe_dump(arguments)
            bound = "benchmark_timeout" if "benchmark_e2e_timeout" in text else None
            times = 1
            for name in LONG:
                timed_argv = "'timeout'" in text and name in text
                own_option = isinstance(arguments, dict) and any(
                    key in ("timeout", "reboot_timeout") and name in str(value) for key, value in arguments.items()
                )
                if timed_argv or own_option:
                    bound, times = name, 1 if timed_argv else OPTION_WAITS
            if bound:
                found.append((str(path.relative_to(PROJECT_ROOT)), task, bound, times))
    return found


def test_every_task_has_the_backstop() -> None:
    assert backstop() > 0


def test_the_tasks_bounded_by_their_own_variables_are_found() -> None:
    """The scan sees the tasks this file is about (a scan that finds nothing would pass the test below)."""
    names = {task["name"] for _, task, _, _ in self_bounded()}
    assert {"Train on one GPU (the reference for linearity within a node)",
            "Train on one node (the reference for linearity across nodes)",
            "Run each collective across the benchmark's nodes (seed 000's flags)",
            "Reboot for the new kernel arguments", "Run sendrecv_perf across the pair on each rail",
            "Start one process on every node with mpirun", "Measure the pairs with iperf3"} <= names  # fmt: skip


@pytest.mark.parametrize("where, task, bound, times", self_bounded(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_task_that_may_run_past_the_backstop_outlasts_its_own_bound(
    where: str, task: dict, bound: str, times: int
) -> None:
    longest = LONG[bound]
    argv = yaml.safe_dump(task[action(task)])
    kill_after = int(re.search(r"--kill-after=(\d+)", argv).group(1)) if "--kill-after=" in argv else 0
    needed = longest * times + kill_after + MARGIN
    own = task.get("timeout")
    if own is None:
        assert needed <= backstop(), f"{where}: {task['name']!r} runs up to {needed} s but has no timeout of its own"
        return
    # one measurement job per pairwise task: the role's own deadline multiplies by the jobs it has
    context = {bound: longest, "pairwise_jobs": {"measure": [None]}}
    deadline = int(jinja2.Environment().from_string(str(own)).render(context))
    assert deadline >= needed, f"{where}: {task['name']!r}: timeout {own} is {deadline} s, under {needed} s"
