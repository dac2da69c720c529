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


def pid_alive(pidfile: Path) -> int | None:
    """The pid recorded in ``pidfile`` when that process is still alive, else None."""
    try:
        pid = int(pidfile.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid
