"""`rdmaforge verify -v` shows the suite's output on screen and keeps one copy of it in pytest.log.

The suite is a real child process (this interpreter printing two lines), as verify's pytest is."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from rdmaforge.commands.verify import run_suite

CHILD = [sys.executable, "-c", "print('first line'); print('second line')"]


def test_echoed_lines_reach_the_screen_and_the_log_once(tmp_path: Path) -> None:
    screen = io.StringIO()
    log = tmp_path / "pytest.log"
    assert run_suite(CHILD, log, echo=True, out=screen) == 0
    assert screen.getvalue() == "first line\nsecond line\n"
    assert log.read_text() == "first line\nsecond line\n"


def test_without_echo_only_the_log_has_them(tmp_path: Path) -> None:
    screen = io.StringIO()
    log = tmp_path / "pytest.log"
    assert run_suite(CHILD, log, echo=False, out=screen) == 0
    assert screen.getvalue() == "" and log.read_text() == "first line\nsecond line\n"
