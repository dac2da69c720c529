"""Module runs the tests of one file share: one ansible-playbook run per step, not one Ansible start per module call.

A test decorated with :func:`shared_runs` is a generator. Where a test would call ``run_module`` it yields the task
(or a list of tasks, run in that order) and gets back its :class:`TaskRun` (or the list), then goes on with its
assertions as before. Its first argument is ``case``, a directory of its own (in place of ``tmp_path``); the others
are its parameters. The first such test of a file that pytest runs steps all of that file's selected ones together:
every test's first tasks in one ansible-playbook run, then every test's second ones, and so on. A file then costs as
many Ansible starts as its longest test has steps, instead of one per module call (a start costs about 2 s of CPU
here, a task about 0.5 s). Each test's outcome (passed, its own assertion error, a skip) is kept and reported when
pytest runs that test. A failing assertion stops only its own test: the others' tasks go on in the next runs.

Everything is as real as with ``ansible localhost -m`` (tests/unit/adhoc.py): the rdmaforge.cluster collection from
ansible.cfg, AnsiballZ, argument validation, the JSON result; check and diff mode are the tasks' own keywords, the
interpreter a task variable. Every task runs with ignore_errors, so one that fails does not stop the next. The ad-hoc
command's stdout callback (minimal) prints each task's diff, its warnings and its result, one task after the other.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from rdmaforge.paths import PROJECT_ROOT
from tests.unit.adhoc import HOST_RESULT

PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
Task = dict[str, Any]
Step = Task | Sequence[Task]
Steps = Generator[Step, Any, None]


class TaskRun(NamedTuple):
    """One task's run; unpacks as ``failed, result, printed``."""

    failed: bool  # the host's status was FAILED! (what makes ``ansible -m`` exit non-zero)
    result: dict[str, Any]
    printed: str  # what Ansible printed for the task before its result: the diff in diff mode, warnings, errors


def module_task(module: str, args: dict[str, Any], *, check: bool = False, diff: bool = False,
                python: Path | None = None) -> Task:  # fmt: skip
    """The task ``ansible localhost -m <module> -a <args> [--check] [--diff]`` runs; a short name is
    rdmaforge.cluster's. ``python``: the target's interpreter, when not the one running the tests."""
    task: Task = {"name": module, module if "." in module else f"rdmaforge.cluster.{module}": args}
    if check:
        task["check_mode"] = True
    if diff:
        task["diff"] = True
    if python is not None:
        task["vars"] = {"ansible_python_interpreter": str(python)}
    return task


def run_tasks(tasks: Sequence[Task], directory: Path) -> list[TaskRun]:
    """Run ``tasks`` in one ansible-playbook run on localhost (written to ``directory``); their runs, in order."""
    directory.mkdir(parents=True, exist_ok=True)
    playbook = directory / "play.yml"
    # The interpreter is a play variable, which a task's own (module_task's python) overrides: given with -e, as
    # ``ansible -m`` has it, it would override every task's.
    play = {"hosts": "localhost", "gather_facts": False, "vars": {"ansible_python_interpreter": sys.executable},
            "tasks": [{**task, "ignore_errors": True} for task in tasks]}  # fmt: skip
    playbook.write_text(yaml.safe_dump([play], sort_keys=False))  # in the order given: kernel arguments keep theirs
    argv = [str(PLAYBOOK), "-i", "localhost,", "-c", "local", str(playbook)]
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg"),
        "ANSIBLE_CACHE_PLUGIN": "memory",  # facts a module returns stay out of the shared .cache/facts
        "ANSIBLE_STDOUT_CALLBACK": "minimal",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
    }
    # Warnings and errors (stderr) in the same stream as the results, so each lands with its task. The limit is a
    # hang guard, not a speed check: at SCHED_IDLE behind the lab a 3 s module run once took over 180 s.
    proc = subprocess.run(argv, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=1800)  # fmt: skip
    runs = []
    position = 0
    decoder = json.JSONDecoder()
    while (match := HOST_RESULT.search(proc.stdout, position)) is not None:
        result, end = decoder.raw_decode(proc.stdout, match.end())
        failed = match["status"] not in ("SUCCESS", "CHANGED")
        runs.append(TaskRun(failed, result, proc.stdout[position : match.start()]))
        position = end
    assert proc.returncode == 0 and len(runs) == len(tasks), (
        f"ansible-playbook exited {proc.returncode} with {len(runs)} results for {len(tasks)} tasks:\n{proc.stdout}"
    )
    return runs


def shared_runs(steps: Callable[..., Steps]) -> Callable[..., None]:
    """The pytest test for the generator ``steps`` (see the module's documentation); marks such as parametrize go
    above this decorator."""
    parameters = [p for p in inspect.signature(steps).parameters.values() if p.name != "case"]

    def test(request: pytest.FixtureRequest, **_params: object) -> None:
        outcome = _outcomes(request)[request.node.nodeid]
        if outcome is not None:
            raise outcome

    test.__name__, test.__qualname__, test.__doc__ = steps.__name__, steps.__qualname__, steps.__doc__
    test.__module__ = steps.__module__
    request = inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    test.__signature__ = inspect.Signature([request, *parameters])  # type: ignore[attr-defined]
    test.shared_steps = steps  # type: ignore[attr-defined]
    return test


#: Each test file's outcomes, by test id: None for a test that passed, else what it raised.
OUTCOMES = pytest.StashKey[dict[str, dict[str, BaseException | None]]]()
#: What a test's steps may raise that is its own outcome: an assertion, an error, pytest.skip/fail/xfail.
TEST_OUTCOMES = (Exception, pytest.skip.Exception, pytest.fail.Exception, pytest.xfail.Exception)


def _outcomes(request: pytest.FixtureRequest) -> dict[str, BaseException | None]:
    by_file = request.session.stash.setdefault(OUTCOMES, {})
    name = request.module.__name__
    if name not in by_file:
        items = [item for item in request.session.items if isinstance(item, pytest.Function)
                 and item.module is request.module and hasattr(item.function, "shared_steps")
                 and not _skipped(item)]  # fmt: skip
        root = request.getfixturevalue("tmp_path_factory").mktemp(name.rsplit(".", 1)[-1])
        by_file[name] = _step_all(items, root)
    return by_file[name]


def _skipped(item: pytest.Function) -> bool:
    """Marked skip, or skipif with a condition that is True (a condition given as a string is left to pytest)."""
    for mark in item.iter_markers():
        if mark.name == "skip" or (mark.name == "skipif" and any(c is True for c in mark.args)):
            return True
    return False


def _step_all(items: Sequence[pytest.Function], root: Path) -> dict[str, BaseException | None]:
    outcomes: dict[str, BaseException | None] = {}
    pending: dict[str, tuple[Steps, Step]] = {}

    def advance(nodeid: str, steps: Steps, sent: TaskRun | list[TaskRun] | None) -> None:
        try:
            pending[nodeid] = (steps, steps.send(sent))
        except StopIteration:
            outcomes[nodeid] = None
        except TEST_OUTCOMES as error:
            outcomes[nodeid] = error

    for number, item in enumerate(items):
        case = root / f"{number:02d}-{item.originalname}"[:60]
        case.mkdir()
        params = item.callspec.params if hasattr(item, "callspec") else {}
        try:
            advance(item.nodeid, item.function.shared_steps(case, **params), None)
        except TEST_OUTCOMES as error:  # the generator could not even be made (a wrong parameter)
            outcomes[item.nodeid] = error
    step = 0
    while pending:
        step += 1
        stepping, pending = pending, {}
        tasks: list[Task] = []
        slots = []
        for nodeid, (steps, wanted) in stepping.items():
            single = isinstance(wanted, dict)
            batch = [wanted] if single else list(wanted)
            slots.append((nodeid, steps, single, len(tasks), len(batch)))
            tasks += batch
        try:
            runs = run_tasks(tasks, root / f"step-{step}")
        except TEST_OUTCOMES as error:  # the run itself broke: every test in it fails with the reason
            outcomes.update((nodeid, error) for nodeid in stepping)
            break
        for nodeid, steps, single, start, count in slots:
            advance(nodeid, steps, runs[start] if single else runs[start : start + count])
    return outcomes
