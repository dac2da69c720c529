"""One converge at a time per inventory: a lock on the controller, held for the whole run.

Two `rdmaforge provision` runs against the same cluster would share the builder's directory, the build cache
and the reboot batches. The second one waits (saying who holds the lock) or, with --no-wait, exits 75 at once.
The lock is an flock on a file named after the inventory's real path, so it is released when the holder exits,
however it exits (kill -9 included): no stale lock to clean up.
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


def lock_path(inventory: Path, directory: Path = LOCK_DIR) -> Path:
    key = hashlib.sha256(str(inventory.resolve()).encode()).hexdigest()[:16]
    return directory / f"inventory-{key}.lock"


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
                raise Busy(f"{holder} holds {inventory.resolve()} (lock {path})") from None
            print(f"waiting: {holder} holds {inventory.resolve()}; this run starts when it ends", file=out, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"rdmaforge {command} (pid {os.getpid()}, since {started})\n".encode())
        yield
    finally:
        os.close(fd)
