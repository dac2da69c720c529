"""The builder lock (issue 18: one run at a time per build directory, across controllers).

Role build_once for real on this machine (connection local, builder = localhost), three runs of one toy build:
run A compiles and holds the lock until the test lets its make finish (a GO file); run B, started meanwhile with a
2-second wait, fails naming A as the holder and leaves A's make alone (without the lock it would stop that make and
empty A's tree); run C, with the default wait, waits for A and then builds. Each run has its own controller cache,
as two controllers would. A lock left by a killed run of this controller is passed over: that is
tests/unit/test_build_once_interrupted.py's second and third runs.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from conftest import recap
from test_build_once_interrupted import ENV, QUICK_MAKEFILE, playbook_argv, scratch_processes, write_run

from rdmaforge.paths import PROJECT_ROOT
from tests.suite import AT_LAB_PRIORITY

#: The make waits for the test's GO file, so run A holds the lock for exactly as long as the test needs.
MAKEFILE = """\
all:
\twhile [ ! -e $(GO) ]; do sleep 0.2; done
\tmkdir -p build
\techo built > build/out.txt
"""


def start(inventory: Path, playbook: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """ansible-playbook in the background, its output in a file the test can read while it runs. The runs are
    coordinated by time (B's 2-second wait, C seen waiting while A holds the lock), so they run at the lab's
    priority, not at the unit tests' SCHED_IDLE (tests/suite.py)."""
    log = playbook.with_suffix(".log")
    with log.open("wb") as out:
        proc = subprocess.Popen(playbook_argv(inventory, playbook), cwd=PROJECT_ROOT, stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, **ENV}, **AT_LAB_PRIORITY)  # fmt: skip
    return proc, log


def makes(scratch: Path) -> set[int]:
    """The make processes working in the scratch tree. Other processes pass through it before make starts (the
    module preparing the tree), and the loop's shell and sleeps come and go, so only make itself is compared."""
    found = set()
    for pid in scratch_processes(scratch):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "make":
                found.add(pid)
        except OSError:
            continue
    return found


def wait_for(condition: Callable[[], bool], what: str, runs: dict[str, tuple[subprocess.Popen[bytes], Path]],
             seconds: float = 600) -> None:  # fmt: skip
    """Until ``condition()``; fails at once, with its output, when one of ``runs`` ends meanwhile (it can then no
    longer bring the condition about), and after ``seconds`` (a hang guard) with every run's output."""
    deadline = time.monotonic() + seconds
    while not condition():
        for name, (proc, log) in runs.items():
            assert proc.poll() is None, f"run {name} ended (exit {proc.returncode}) before {what}:\n{tail(log)}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n" + "\n".join(
            f"run {name}: {tail(log)}" for name, (_, log) in runs.items())  # fmt: skip
        time.sleep(0.2)


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]


def test_a_second_run_waits_for_the_builder_lock_or_fails_naming_its_holder(tmp_path: Path) -> None:
    build_id = f"lock{os.getpid()}"
    go = tmp_path / "go"
    make = (f"GO={go}",)
    scratch = tmp_path / "scratch" / f"toy-{build_id}"
    lock = tmp_path / "scratch" / f"toy-{build_id}.lock"
    # Built and cached, not installed: the lock is taken and released around the build. A's make runs while B and C
    # start, and each look at whether it ended is a module run: A looks every 5 s, not every second.
    inventory, run_a = write_run(tmp_path, build_id, MAKEFILE, make, "a.yml", build_once_lock_poll=1,
                                 build_once_poll=5, build_once_install=False)  # fmt: skip
    _, run_b = write_run(tmp_path, build_id, MAKEFILE, make, "b.yml", build_once_controller_cache=str(tmp_path / "b"),
                         build_once_lock_wait=2, build_once_lock_poll=1, build_once_install=False)  # fmt: skip
    _, run_c = write_run(tmp_path, build_id, MAKEFILE, make, "c.yml", build_once_controller_cache=str(tmp_path / "c"),
                         build_once_lock_poll=1, build_once_install=False)  # fmt: skip

    a, a_log = start(inventory, run_a)
    c = None
    try:
        wait_for(lambda: bool(makes(scratch / "src")), "run A's make", {"A": (a, a_log)})
        holder = (lock / "owner").read_text().strip()
        assert holder == f"{socket.gethostname()} ansible-playbook pid {a.pid}"
        make_pids = makes(scratch / "src")

        b = subprocess.run(playbook_argv(inventory, run_b), cwd=PROJECT_ROOT, capture_output=True, text=True,
                           env={**os.environ, **ENV}, timeout=300, **AT_LAB_PRIORITY)  # fmt: skip
        assert b.returncode == 2, b.stdout[-4000:]
        assert (
            f"localhost is building toy {build_id} for another run (held by: {holder} (for "
        ) in " ".join(b.stdout.split()), b.stdout[-4000:]
        assert "waited 2 s (build_once_lock_wait)" in " ".join(b.stdout.split())
        assert "build_once : Stop a compile" not in b.stdout  # never got past the lock
        assert makes(scratch / "src") == make_pids, "run B touched run A's make"
        assert (lock / "owner").read_text().strip() == holder  # B's failure left A's lock alone

        c, c_log = start(inventory, run_c)
        retrying = re.compile(r"FAILED - RETRYING: \[localhost\]: Take the builder lock")
        wait_for(lambda: bool(retrying.search(c_log.read_text())), "run C to wait on the lock",
                 {"A": (a, a_log), "C": (c, c_log)})  # fmt: skip
        assert c.poll() is None and a.poll() is None
        go.touch()  # A's make ends, A packages, installs and releases the lock; C then takes it and builds
        a.wait(timeout=300)
        c.wait(timeout=300)
    finally:
        go.touch()
        for proc in (a, c):
            if proc is not None and proc.poll() is None:
                proc.kill()
    a_out, c_out = a_log.read_text(), c_log.read_text()
    assert a.returncode == 0, a_out[-4000:]
    assert c.returncode == 0, c_out[-4000:]
    assert (tmp_path / "cache" / f"toy-{build_id}.json").exists() and (tmp_path / "c" / f"toy-{build_id}.json").exists()
    assert recap(c_out)["localhost"]["failed"] == 0
    assert not lock.exists(), "the last run released the lock"


def test_a_lock_that_cannot_be_made_fails_at_once_with_its_cause(tmp_path: Path) -> None:
    """Review round 27b: the wait retried any failure of the lock script (a workdir that cannot be created, a full
    disk) for build_once_lock_wait (an hour by default), then blamed "another run" with an empty holder. Here the
    scratch directory's parent is a file, which no one, root included, can make a directory under."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    inventory, playbook = write_run(tmp_path, f"nolock{os.getpid()}", build_once_workdir=str(blocker / "scratch"),
                                    build_once_lock_wait=60, build_once_lock_poll=20)  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(playbook_argv(inventory, playbook), cwd=PROJECT_ROOT, capture_output=True, text=True,
                          env={**os.environ, **ENV}, timeout=600, check=False)  # fmt: skip
    assert proc.returncode != 0
    assert "could not be taken: mkdir: cannot create directory" in proc.stdout, proc.stdout[-3000:]
    assert f"builder_lock.sh: cannot create {blocker / 'scratch'}" in proc.stdout
    assert "for another run" not in proc.stdout
    assert time.monotonic() - started < 40, "the failure was retried as if another run held the lock"


def test_a_holder_of_this_controller_killed_while_a_run_waits_is_passed_over_at_once(tmp_path: Path) -> None:
    """Review round 27b: whether the holder's ansible-playbook was gone was asked once, before the wait (a task's
    arguments are templated once), so a run that started waiting on a live holder that was then killed waited all of
    build_once_lock_wait and failed telling the user to remove the lock by hand. The holder here is a process of
    this controller that the test kills while the run waits; the run then takes the lock over and builds."""
    build_id = f"killed{os.getpid()}"
    lock = tmp_path / "scratch" / f"toy-{build_id}.lock"
    inventory, playbook = write_run(tmp_path, build_id, QUICK_MAKEFILE, build_once_lock_wait=240,
                                    build_once_lock_poll=1, build_once_install=False)  # fmt: skip
    holder_process = subprocess.Popen(["sleep", "600"])  # stands for the ansible-playbook of a run that holds it
    holder = f"{socket.gethostname()} ansible-playbook pid {holder_process.pid}"
    lock.mkdir(parents=True)
    (lock / "owner").write_text(holder + "\n")
    run, log = start(inventory, playbook)
    try:
        retrying = re.compile(r"FAILED - RETRYING: \[localhost\]: Take the builder lock")
        wait_for(lambda: bool(retrying.search(log.read_text())), "the run to wait on the lock", {"run": (run, log)})
        holder_process.kill()
        holder_process.wait()  # reaped: its /proc entry goes
        killed = time.monotonic()
        run.wait(timeout=300)
    finally:
        for proc in (holder_process, run):
            if proc.poll() is None:
                proc.kill()
    out = log.read_text()
    assert run.returncode == 0, out[-4000:]
    assert time.monotonic() - killed < 90, "the run waited on after its holder was gone"  # its wait was 240 s
    assert re.search(r"TASK \[[\w.]+ : Take over the builder lock of a run of this controller that ended while this "
                     r"one waited\] \**\nchanged: \[localhost\]", out), out[-4000:]  # fmt: skip
    assert (tmp_path / "cache" / f"toy-{build_id}.json").exists()
    assert not lock.exists(), "the run released the lock it took over"
