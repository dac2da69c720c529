"""One artifacts directory per run, `artifacts/runs/<UTC timestamp>-<command>/`, and rotation of old ones.

A run directory holds ansible-runner's own artifacts under `ansible/` (job_events/, stdout, stderr, command,
rc, status), then `recap.json`, `junit.xml` and what the command adds (`benchmark/`, `doctor/`, `verify/`).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import re
import shutil
from pathlib import Path

from rdmaforge.paths import WORKSPACE

#: An empty RDMAFORGE_RUNS_DIR (an unset variable exported) is the default, as an empty RDMAFORGE_WORKSPACE is:
#: Path("") would put run directories, and their rotation, in the current directory.
RUNS_DIR = Path(os.environ.get("RDMAFORGE_RUNS_DIR") or WORKSPACE / "artifacts" / "runs")
#: Runs kept by default (the newest); `--keep` overrides it.
DEFAULT_KEEP = 20
#: Only directories with this shape are ever rotated away: nothing else under the runs directory is touched.
#: Commands are named with hyphens too (remove-node, upgrade-nccl): their runs were never rotated.
RUN_NAME = re.compile(r"^\d{8}T\d{6}Z-(?P<command>[a-z][a-z0-9_]*(?:-[a-z][a-z0-9_]*)*)(?:-\d+)?$")
#: A file each run holds locked (flock) while its process lives: rotation by another run leaves such a directory
#: alone. Runs with their own inventories may share a runs directory, and one's rotation deleted another's live run.
IN_USE = ".in-use"
#: The locks this process holds: run directory -> the open lock file (kept open until rotated or the process ends).
_HELD: dict[Path, int] = {}


def run_name(command: str, now: dt.datetime | None = None) -> str:
    moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return f"{moment:%Y%m%dT%H%M%SZ}-{command}"


def new_run_dir(root: Path, command: str, now: dt.datetime | None = None) -> Path:
    """Create the run's directory (0700: events may hold host details); a second run in the same second gets -2."""
    root.mkdir(parents=True, exist_ok=True)
    base = run_name(command, now)
    for attempt in range(1, 1000):
        path = root / (base if attempt == 1 else f"{base}-{attempt}")
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        hold = os.open(path / IN_USE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(hold, fcntl.LOCK_EX)
        _HELD[path.resolve()] = hold
        return path
    raise RuntimeError(f"cannot create a run directory under {root}")


def run_dirs(root: Path) -> list[Path]:
    """Run directories under ``root``, oldest first (names start with their UTC timestamp)."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and RUN_NAME.match(p.name)]
    return sorted(found, key=_sort_key)


def _sort_key(path: Path) -> tuple[str, int]:
    stamp, _, rest = path.name.partition("-")
    suffix = rest.rsplit("-", 1)
    return stamp, int(suffix[1]) if len(suffix) == 2 and suffix[1].isdigit() else 1


def rotate(root: Path, keep: int, current: Path | None = None) -> list[Path]:
    """Remove all but the newest ``keep`` runs (never ``current``); returns what was removed."""
    if keep < 1:
        raise ValueError("keep must be at least 1")
    runs = run_dirs(root)
    removed = []
    for path in runs[: max(0, len(runs) - keep)]:
        if current is not None and path.resolve() == current.resolve():
            continue
        held = _HELD.pop(path.resolve(), None)
        if held is not None:
            os.close(held)  # this process's own earlier run: it has ended, this process runs one at a time
        elif in_use(path):
            continue  # another process's live run: rotated by a later run, once it has ended
        shutil.rmtree(path)
        removed.append(path)
    return removed


def in_use(path: Path) -> bool:
    """Whether a live process holds ``path``'s IN_USE lock (a run directory of a run that has not ended)."""
    try:
        fd = os.open(path / IN_USE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False  # a run from before the lock file, or one whose file is gone: not in use
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def latest(root: Path, command: str | None = None) -> Path | None:
    """The newest run directory, of one command when given."""
    runs = [p for p in run_dirs(root) if command is None or _command_of(p) == command]
    return runs[-1] if runs else None


def _command_of(path: Path) -> str | None:
    match = RUN_NAME.match(path.name)
    return match["command"] if match else None
