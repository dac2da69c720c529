"""`make test`: the unit tests on two processes while the lab boots and converges, and then beside the lab tests.

The suite is CPU-bound on 2 cores. One pytest process leaves a core idle for much of the unit tests (each waits on
its own ansible-playbook), so the unit tests run under pytest-xdist (``-n 2``) while a separate process brings the
lab up and runs its first converge. The lab tests start as soon as that is done, in one process, in LAB_ORDER
(tests/conftest.py): their session finds the lab up and converged, and its own first converge takes the fast path.
The unit tests go on beside them at a lower CPU priority (UNITS_NICENESS): the lab's bring-up and tests are the
longer path, and they leave about a third of the CPU idle (a single-threaded controller, reboots, SSH timeouts,
rate-limited links; vmstat during the reset module), time the unit tests use instead of a phase of their own (stop
28's fresh clone: the lab sat ready for 5 minutes while the unit tests finished). The priority is set on the unit
tests' own session: with the kernel's autogroup scheduling (Debian's default) a process's nice value counts only
against the processes of its session, and the lab nodes run in sessions of their own, so a plain nice(1) did not
keep the unit tests from slowing the lab tests (fresh clone e6c6c6c: the first lab module took 8 minutes instead of
5). Measured on this machine (README, Tests).

The unit tests' output goes to UNITS_LOG and is printed once both runs have ended, so the two never interleave.

``python -m tests.suite [PYTEST_ARGS...]``: the arguments go to both pytest runs. The exit status is the first
failing run's (a run that selects no test counts as passed). ``RDMAFORGE_TEST_PHASES=0`` runs one plain pytest
instead. ``python -m tests.suite prestart`` is the background step on its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
#: pytest's exit status when the arguments select no test in a run (e.g. only unit tests were named).
NO_TESTS_COLLECTED = 5
PRESTART_LOG = ROOT / "artifacts" / "lab-prestart.log"
UNITS_LOG = ROOT / "artifacts" / "unit-tests.log"
#: Each run's JUnit XML (every test's duration): where a fresh clone's time went, test by test.
UNITS_JUNIT = ROOT / "artifacts" / "unit-tests.xml"
LAB_JUNIT = ROOT / "artifacts" / "lab-tests.xml"
#: The unit tests' nice value (their processes' and their session's autogroup's): the lab's bring-up and tests,
#: the suite's longer path, come first.
UNITS_NICENESS = 19
#: tests/installed.py reads it (the name is repeated there: this module imports nothing of the tests at start).
SHARED_DIR_VARIABLE = "RDMAFORGE_TEST_SHARED_DIR"


def pytest_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", *args]


def passed(status: int) -> int:
    return 0 if status == NO_TESTS_COLLECTED else status


def pytest(*args: str) -> int:
    return passed(subprocess.call(pytest_argv(*args), cwd=ROOT))


def lower_priority() -> None:
    """In the unit tests' process before it starts, in a session of its own (start_new_session): its workers and
    their ansible-playbook runs inherit the nice value and the session's autogroup."""
    os.nice(UNITS_NICENESS)
    try:
        Path("/proc/self/autogroup").write_text(str(UNITS_NICENESS))
    except OSError:
        pass  # a kernel without autogroup scheduling: the nice value alone then orders the processes
    # SCHED_IDLE as well: a lab process that wakes up (an SSH round trip, an Ansible fork) then preempts a unit
    # test at once instead of waiting for its time slice to end, which a nice value alone does not give.
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass


def lab_priority() -> None:
    """Undoes lower_priority in a child of a unit test (with start_new_session, for an autogroup of its own): for the
    few unit tests whose runs are coordinated by time (one run must be seen waiting on another's lock while it holds
    it): at SCHED_IDLE behind the lab such runs were starved for seconds to minutes, which widened a race in one of
    them into CI's failure of stop 58 (the race itself is mended in its test)."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except (AttributeError, OSError):
        pass  # not root (a lower nice value needs CAP_SYS_NICE): the run keeps the unit tests' priority


#: subprocess arguments for a unit test's child that runs at the lab's priority: lab_priority in a session of its own.
AT_LAB_PRIORITY: dict[str, Any] = {"start_new_session": True, "preexec_fn": lab_priority}


def end_session(proc: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """Stop ``proc``, started with start_new_session, and every process of its session: its pytest-xdist workers
    and their ansible-playbook runs. terminate() reached the unit tests' pytest alone, and its session went on
    (SIGTERM to make test left them running beside the next run)."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sent)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def stop_on_signals() -> None:
    """SIGTERM and SIGHUP (a CI job's timeout, a closed terminal) end this process through an exception, so that the
    runs it started are stopped as on Ctrl-C; by default they killed it alone."""

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    for number in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(number) is not signal.SIG_IGN:  # nohup make test: a closed terminal stops nothing
            signal.signal(number, stop)


def prestart() -> int:
    """Bring the lab up, run its first converge and install the benchmark's torch on the nodes, then exit (releasing
    the lab lock for the lab tests' session).
    A failure is left to the lab tests' session, which tries again and fails or skips exactly as it would alone."""
    sys.path.insert(0, str(TESTS))
    import conftest  # the tests' own bring-up, so both paths start the same lab

    if conftest.lab_unavailable_reason() is not None:
        return 0
    # Under CI, a lab an earlier run left (stopped before test_zz_lab_down) would carry that run's changes into this
    # one: a node's network namespace outlives its reboots, and with it rules a test put back differently (one way to
    # the CI failure of 2026-12-03). CI starts from fresh nodes; a developer's run reuses them.
    handle, session_lock = conftest.bring_up_lab(fresh=conftest.under_ci())
    try:
        proc = handle.playbook("site.yml")
        print(proc.stdout[-20000:])
        if proc.returncode != 0:
            return proc.returncode
        # The first lab benchmark would install torch on every node (about a minute, the lab tests' alone).
        ready = handle.playbook(str(TESTS / "playbooks" / "prepare_bench_env.yml"))
        print(ready.stdout[-4000:])
        return ready.returncode
    finally:
        session_lock.close()


def main(argv: list[str]) -> int:
    if argv[:1] == ["prestart"]:
        return prestart()
    if os.environ.get("RDMAFORGE_TEST_PHASES") == "0":
        return pytest(*argv)
    from rdmaforge.collection import ensure_dev_tree

    stop_on_signals()
    ensure_dev_tree()  # once, before three processes would each make build/collections
    shared = tempfile.mkdtemp(prefix="rdmaforge-tests-")
    os.environ[SHARED_DIR_VARIABLE] = shared  # the wheel venv, built once for both runs (tests/installed.py)
    try:
        return phases(argv)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def phases(argv: list[str]) -> int:
    PRESTART_LOG.parent.mkdir(parents=True, exist_ok=True)
    with PRESTART_LOG.open("w") as lab_log, UNITS_LOG.open("w") as units_log:
        lab = subprocess.Popen([sys.executable, "-m", "tests.suite", "prestart"], cwd=ROOT, stdout=lab_log,
                               stderr=subprocess.STDOUT)  # fmt: skip
        units = subprocess.Popen(pytest_argv("-m", "not lab", "-n", "2", "--dist", "loadfile",
                                             f"--junitxml={UNITS_JUNIT}", *argv), cwd=ROOT,
                                 stdout=units_log, stderr=subprocess.STDOUT, start_new_session=True,
                                 preexec_fn=lower_priority)  # fmt: skip
        try:
            lab.wait()
            print(f"lab bring-up and first converge: exit {lab.returncode} (log: {PRESTART_LOG}); the unit tests "
                  f"go on beside the lab tests (log: {UNITS_LOG})", flush=True)  # fmt: skip
            labs = pytest("-m", "lab", f"--junitxml={LAB_JUNIT}", *argv)
        except BaseException:
            lab.terminate()  # the bring-up, if it still runs: its own lab lock and cleanup end it
            end_session(units)  # a session of its own: Ctrl-C or SIGTERM reaches only this process
            raise
        finally:
            units_status = passed(units.wait())
    print(f"\n==== unit tests (run beside the lab tests): exit {units_status}, log {UNITS_LOG}", flush=True)
    print(UNITS_LOG.read_text(errors="replace"), flush=True)
    return units_status or labs


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
