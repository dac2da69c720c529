"""The exception types ``rdmaforge.cli`` reports as one line instead of a traceback: errors a user caused (a bad
file, value or path; exit BAD_INPUT, 64), and what stops a run before Ansible starts (exit ERROR, 1)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path


class UserError(ValueError):
    """A problem with the user's input; the message names the file/key/value and what is allowed."""


class CannotRun(Exception):
    """What the run needs is missing (mitogen, testinfra, the variables of a dynamic inventory that the secret
    scrubber must know): reported on stderr, exit 1, before Ansible runs. A wrong argument is a UserError instead."""


def missing_path(path: object, what: str) -> str | None:
    """Why ``path`` cannot be used, or None when it can be stat'ed: "does not exist" only when it does not, the
    system's own words otherwise (a symbolic link loop, a directory without search permission)."""
    try:
        os.stat(str(path))
    except FileNotFoundError:
        if os.path.islink(str(path)):  # ls lists it: "does not exist" alone would send the user looking elsewhere
            return f"{what} {path} is a symbolic link to {os.readlink(str(path))}, which does not exist"
        return f"{what} {path} does not exist"
    except OSError as exc:
        return f"{what} {path} cannot be read: {exc.strerror or exc}"
    return None


def output_path(allowed: str) -> Callable[[str], Path]:
    """argparse type of an output path (-o/--output): any path but the empty one, refused as a usage error (exit 64)
    naming ``allowed``. Path("") is Path("."), so an empty -o (an unset shell variable) would silently write into
    the current directory. Shared by every command's -o, and light to import (no command module)."""

    def parse(text: str) -> Path:
        if not text:
            raise argparse.ArgumentTypeError(f"'': an empty path (it would stand for the current directory); "
                                             f"allowed: {allowed}")  # fmt: skip
        return Path(text)

    return parse


def non_empty(what: str, allowed: str) -> Callable[[str], str]:
    """argparse type of a name or pattern that an unset shell variable would leave empty (or blank): refused as a
    usage error (exit 64) saying ``what`` it is and what is ``allowed``."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{text!r}: {what}; allowed: {allowed}")
        return text

    return parse


#: --limit: Ansible reads ``--limit ""`` as no limit at all, so a script passing an unset $NODES ran against every
#: node (a reset of the whole cluster).
host_pattern = non_empty("an empty pattern (Ansible would take it for every host)",
                         "host or group names, or patterns such as node[1:4] or 'cluster:!node3'")  # fmt: skip
