"""How the lab finds and stops its own processes (supervisors, the mirror): real processes, no lab needed.

Regression: `lab down` once killed every process on the machine (CI included). A supervisor that had exited was
still a zombie child of the test session, so it looked alive; the fallback then ran `kill -KILL -<pgid>`,
which procps-ng 4.0.2 turns into kill(-1, SIGKILL)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rdmaforge.lab.shell import pid_alive, process_state, signal_group, signal_process
from tests.processes import sleeper


def write_pid(tmp_path: Path, pid: int) -> Path:
    pidfile = tmp_path / "x.pid"
    pidfile.write_text(f"{pid}\n")
    return pidfile


def test_a_running_process_is_alive_and_an_owner_must_match(tmp_path: Path) -> None:
    proc = sleeper("rf-test-owner")
    try:
        pidfile = write_pid(tmp_path, proc.pid)
        assert pid_alive(pidfile) == proc.pid
        assert pid_alive(pidfile, owner="rf-test-owner") == proc.pid
        # The same pid, but a command line that is not ours: a recycled pid must never be signalled.
        assert pid_alive(pidfile, owner="rdmaforge.lab.supervisor") is None
    finally:
        proc.kill()
        proc.wait()


def test_an_exited_child_is_not_alive_and_gets_reaped(tmp_path: Path) -> None:
    proc = sleeper("rf-test-zombie")
    pidfile = write_pid(tmp_path, proc.pid)
    signal_process(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 120  # a hang guard: the loop ends as soon as the child has exited
    while process_state(proc.pid) not in ("Z", None) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_state(proc.pid) == "Z"  # exited, not yet reaped: os.kill(pid, 0) would still succeed
    assert pid_alive(pidfile) is None
    assert process_state(proc.pid) is None  # reaped by pid_alive


@pytest.mark.parametrize("content", ["", "garbage", "0", "1", "-1"])
def test_pid_files_that_name_no_process_of_ours(tmp_path: Path, content: str) -> None:
    pidfile = tmp_path / "x.pid"
    pidfile.write_text(content)
    assert pid_alive(pidfile) is None
    assert pid_alive(tmp_path / "missing.pid") is None


@pytest.mark.parametrize("pid", [-1, 0, 1])
def test_signalling_everything_or_init_is_refused(pid: int) -> None:
    with pytest.raises(ValueError, match="refusing"):
        signal_group(pid, signal.SIGKILL)
    with pytest.raises(ValueError, match="refusing"):
        signal_process(pid, signal.SIGKILL)


def test_signal_group_kills_that_group_and_nothing_else() -> None:
    target = sleeper("rf-test-target")
    bystander = sleeper("rf-test-bystander")
    try:
        signal_group(target.pid, signal.SIGKILL)
        assert target.wait(timeout=120) == -signal.SIGKILL
        assert bystander.poll() is None
        signal_group(target.pid, signal.SIGKILL)  # the group is gone: a no-op, not an error
    finally:
        bystander.kill()
        bystander.wait()


def test_stopping_the_mirror_returns_once_its_server_has_exited_and_freed_the_port(tmp_path: Path) -> None:
    import socket

    from rdmaforge.lab import mirror

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A real http.server, started as the lab's mirror runs: a session of its own, "http.server" in its argv, and
    # not a child of this process (the `lab up` that started it has exited), so nothing here reaps it.
    argv = [sys.executable, "-m", mirror.SERVER, str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)]
    launcher = (
        "import subprocess, sys; "
        f"p = subprocess.Popen({argv!r}, start_new_session=True, "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid)"
    )
    pid = int(subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, check=True).stdout)
    try:
        deadline = time.monotonic() + 120  # a hang guard: the loop ends as soon as the server listens
        # Listening, read from the kernel's table: a test connection would leave a TIME_WAIT on the port.
        listening = f"0100007F:{port:04X} 00000000:0000 0A"
        while listening not in Path("/proc/net/tcp").read_text():
            assert time.monotonic() < deadline, "the server never listened"
            time.sleep(0.1)
        pidfile = write_pid(tmp_path, pid)
        mirror.stop(pidfile)
        assert not pidfile.exists()
        with socket.socket() as again:  # no wait here: the port is free as soon as stop returns
            again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            again.bind(("127.0.0.1", port))
    finally:
        if process_state(pid) not in (None, "Z", "X"):
            signal_process(pid, signal.SIGKILL)
