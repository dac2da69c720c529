"""Files rdmaforge writes under fixed names into a directory it may not have made itself (a run directory copied
from a node, a CI artifact, a colleague's tarball). A path the user names (a baseline's ``-o``) is written through
instead, as the shell's ``>`` does: a link to a versioned file, /dev/stdout or a pipe a reader holds are the user's.

Each is written under a new temporary name beside it and renamed over its path. Opened by name, a symbolic link
there was written through: a run directory holding ``results.csv -> ~/.ssh/authorized_keys`` made ``rdmaforge
report`` overwrite that file (review round 29b), and a named pipe there hung the command. The rename replaces a
link or a pipe instead, and a reader of the old file never sees a half-written one.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


@contextmanager
def replaced(path: Path) -> Iterator[Path]:
    """A new, empty file beside ``path`` (made with O_EXCL, under a name no one could have planted) for the caller
    to write; renamed over ``path`` when the block ends without an error, removed otherwise. The file keeps the mode
    of the regular file it replaces (one the user restricted stays so), else gets the one a new file of the user's
    umask gets (mkstemp's own is 0600)."""
    try:
        before = os.lstat(path)
        mode = stat.S_IMODE(before.st_mode) if stat.S_ISREG(before.st_mode) else 0o666 & ~_umask()
    except OSError:
        mode = 0o666 & ~_umask()
    try:
        handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix or ".tmp", dir=path.parent)
    except OSError as exc:  # it named a random name that never existed (review round 34a): name the file
        raise OSError(exc.errno, f"cannot write it here ({exc.strerror})", str(path)) from exc
    os.close(handle)
    temporary = Path(name)
    try:
        os.chmod(temporary, mode)
        yield temporary
        os.replace(temporary, path)
    except OSError as exc:
        # an error about the temporary, or about no file (a write on a full disk): it is about ``path``
        if exc.filename not in (None, name) and name != exc.filename2:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    finally:
        if temporary.exists():
            temporary.unlink()


def write_text(path: Path, text: str) -> None:
    """``text`` (UTF-8) as the new content of ``path``, never written through a link or into a pipe at it."""
    with replaced(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def make_parents(path: Path) -> None:
    """The directories above ``path``, made where missing. A file on the way is named (mkdir says only "File exists"
    or "Not a directory", review round 34a): an OSError whose strerror says which one is not a directory."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        for above in reversed([path.parent, *path.parent.parents]):
            if above.exists() and not above.is_dir():
                raise OSError(errno.ENOTDIR, f"{above} is not a directory", str(path)) from exc
        raise
