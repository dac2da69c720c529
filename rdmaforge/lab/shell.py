"""Running host commands for the lab, with errors that say what failed."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path


class LabError(RuntimeError):
    """A lab operation failed; the message says which step and why."""


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    input_text: str | None = None,
    timeout: float | None = 600,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, input=input_text, timeout=timeout, cwd=cwd)
    if check and proc.returncode != 0:
        raise LabError(f"command failed (rc={proc.returncode}): {' '.join(argv)}\n{proc.stderr.strip()[-2000:]}")
    return proc


def quiet(argv: Sequence[str]) -> bool:
    """Run a best-effort cleanup command; True when it succeeded."""
    return subprocess.run(list(argv), capture_output=True, text=True).returncode == 0


def mount_overlay(lower: Path, directory: Path, target: Path) -> None:
    """Mount an overlay of ``lower`` on ``target``, its writes kept in ``directory``/upper (work dir beside it)."""
    upper, work = directory / "upper", directory / "work"
    for d in (upper, work, target):
        d.mkdir(parents=True, exist_ok=True)
    options = f"lowerdir={lower},upperdir={upper},workdir={work}"
    run(["mount", "-t", "overlay", "overlay", "-o", options, str(target)])


def process_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` from /proc (R, S, Z, ...), None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0]


def pid_alive(pidfile: Path, owner: str | None = None) -> int | None:
    """The pid recorded in ``pidfile`` when that process still runs, else None.

    A zombie is not alive: the lab's supervisors are children of whoever ran `lab up` (a test session, say) and
    stay zombies until reaped, which this does when they are ours. With ``owner``, the process's command line
    must contain it, so a pid that the kernel has since given to another program is never taken for ours."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    if pid <= 1:
        return None
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: its own parent (or init) reaps it
    if process_state(pid) in (None, "Z", "X"):
        return None
    if owner is not None:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        if owner.encode() not in cmdline:
            return None
    return pid


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the process group that ``pid`` leads (started with a new session).

    os.killpg, never the kill(1) program: procps-ng 4.0.2 reads `kill -KILL -<pgid>` as options and calls
    kill(-1, SIGKILL), which kills every process on the machine."""
    if pid <= 1:
        raise ValueError(f"refusing to signal process group {pid}")
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def signal_process(pid: int, sig: int) -> None:
    if pid <= 1 or pid == os.getpid():
        raise ValueError(f"refusing to signal process {pid}")
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
