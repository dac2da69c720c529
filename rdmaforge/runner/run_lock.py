"""One converge at a time per inventory: a lock on the controller, held for the whole run.

Two `rdmaforge provision` runs against the same cluster would share the builder's directory, the build cache
and the reboot batches. The second one waits (saying who holds the lock) or, with --no-wait, exits 75 at once.
The lock is an flock on a file named after the inventory's real path (lock_key: one lock however -i names the
inventory), so it is released when the holder exits, however it exits (kill -9 included): no stale lock to clean up.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from rdmaforge.paths import CONTROLLER_CACHE

LOCK_DIR = CONTROLLER_CACHE / "locks"


class Busy(Exception):
    """Another run holds the inventory's lock and the caller asked not to wait."""


#: Names in an inventory directory that Ansible does not read as inventory sources (its INVENTORY_IGNORE_EXTS
#: default, and the variable directories).
NOT_INVENTORY_SUFFIXES = (".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".cfg",
                          ".retry")  # fmt: skip
VARIABLE_DIRS = ("group_vars", "host_vars")


def _inventory_sources(directory: Path) -> list[Path] | None:
    """The files of ``directory`` Ansible would read as inventory sources given the directory (hidden files, the
    ignored suffixes and the variable directories left out); None when it cannot be listed."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return None
    return [p for p in entries if not p.name.startswith(".") and not p.name.endswith(NOT_INVENTORY_SUFFIXES)
            and p.name not in VARIABLE_DIRS and (p.is_file() or p.is_dir())]  # fmt: skip


def lock_key(inventory: Path) -> Path:
    """What the lock of ``inventory`` is named after: the same for every spelling of one inventory, so that
    ``-i c1`` and ``-i c1/hosts.yml`` (or ``-i ./c1/``, a symbolic link to either) take one lock.

    The rule: the real path (symbolic links resolved) of a directory is its own key. A file's key is its directory
    when that directory holds group_vars/ or host_vars/ (Ansible reads them for the file too: the directory is that
    inventory) or when the file is the only inventory source in it; otherwise (several inventories side by side with
    no shared variables, inventories/c1.yml and inventories/c2.yml) the file itself, so that separate clusters do not
    wait for each other."""
    path = inventory.resolve()
    if not path.is_file():
        return path
    directory = path.parent
    if any((directory / name).is_dir() for name in VARIABLE_DIRS):
        return directory
    sources = _inventory_sources(directory)
    if sources is None or all(source == path for source in sources):  # not listable: the safer, shared key
        return directory
    return path


def lock_path(inventory: Path, directory: Path = LOCK_DIR) -> Path:
    """The lock file of ``inventory`` in ``directory``: named after its lock_key."""
    key = hashlib.sha256(str(lock_key(inventory)).encode()).hexdigest()[:16]
    return directory / f"inventory-{key}.lock"


def _shown(inventory: Path) -> str:
    """The inventory as the lock's messages name it: its real path, and the directory whose lock it takes."""
    path, key = inventory.resolve(), lock_key(inventory)
    return str(path) if key == path else f"{path} (the inventory {key})"


def _holder(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 4096).decode("utf-8", "replace").strip()
    return text or "another rdmaforge run"


@contextmanager
def inventory_lock(
    inventory: Path, command: str, wait: bool, out: TextIO, directory: Path = LOCK_DIR
) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = lock_path(inventory, directory)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            if not wait:
                raise Busy(f"{holder} holds {_shown(inventory)} (lock {path})") from None
            print(f"waiting: {holder} holds {_shown(inventory)}; this run starts when it ends", file=out, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"rdmaforge {command} (pid {os.getpid()}, since {started})\n".encode())
        yield
    finally:
        os.close(fd)
