"""Child processes for tests that read what /proc says about them."""

from __future__ import annotations

import subprocess
import sys


def sleeper(tag: str, *, new_session: bool = True, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A child that sleeps two minutes, whose command line carries ``tag`` (as the lab supervisor's carries its
    module name) and whose environment is ``env`` (this process's when None).

    Returns once the child says it runs: Popen returns when exec has begun, and until the kernel has set up the new
    program /proc/PID/cmdline and /proc/PID/environ can read empty (CI on two busy cores caught that window)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(120)", tag],
        start_new_session=new_session,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    proc.stdout.close()  # the child writes nothing more
    return proc
