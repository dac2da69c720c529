"""tests/suite.py (make test) stopped by SIGTERM: the unit tests' session it started is stopped with it.

Before, SIGTERM killed the suite's own process alone, and the unit tests' pytest, started in a session of its own
(for its scheduling priority), went on running beside whatever came next: the next fresh clone's tests among them.
Real processes: a stand-in for the suite (this module's helpers, as phases() uses them) and a session of sleeping
children standing in for pytest-xdist's workers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rdmaforge.paths import PROJECT_ROOT

SUITE = f"""
import subprocess, sys, time
sys.path.insert(0, {str(PROJECT_ROOT)!r})
from tests.suite import end_session, stop_on_signals
stop_on_signals()
units = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300 & wait"], start_new_session=True)
print(units.pid, flush=True)
try:
    time.sleep(300)
except BaseException:
    end_session(units, grace=5)
    raise
"""


def session_members(session: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == session:
                    members.append(int(entry.name))
            except OSError:
                continue  # ended meanwhile
    return members


def test_sigterm_stops_the_unit_tests_session_too() -> None:
    suite = subprocess.Popen([sys.executable, "-c", SUITE], stdout=subprocess.PIPE, text=True)
    try:
        assert suite.stdout is not None
        session = int(suite.stdout.readline())
        deadline = time.monotonic() + 30
        while len(session_members(session)) < 3 and time.monotonic() < deadline:  # sh and its two sleeps
            time.sleep(0.1)
        assert len(session_members(session)) == 3
        suite.send_signal(signal.SIGTERM)
        assert suite.wait(timeout=60) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 30
        while session_members(session) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert session_members(session) == []
    finally:
        suite.kill()
        for pid in session_members(session) if "session" in locals() else []:
            os.kill(pid, signal.SIGKILL)
