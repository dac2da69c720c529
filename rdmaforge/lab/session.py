"""One owner of the lab at a time: a pytest session or `make bench` holds this lock while it uses the nodes, so that
neither converges or tears down nodes under the other (the lab is machine-wide)."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO

SESSION_LOCK = Path("/var/lib/rdmaforge/lab-test-session.lock")


class LabSession:
    """``with hold_lab():`` holds the lock for the block."""

    def __init__(self, lock: IO[str]) -> None:
        self.lock = lock

    def __enter__(self) -> LabSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.close()

    def close(self) -> None:
        self.lock.close()


def hold_lab(path: Path = SESSION_LOCK) -> LabSession:
    """Take the lock, waiting (and saying so) while another session holds it; closing the file releases it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"\nwaiting for another session to release the lab ({path})", flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    return LabSession(lock)
