"""The exception types ``rdmaforge.cli`` reports as one line instead of a traceback: errors a user caused (a bad
file, value or path; exit BAD_INPUT, 64), and what stops a run before Ansible starts (exit ERROR, 1)."""

from __future__ import annotations

import os


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
        return f"{what} {path} does not exist"
    except OSError as exc:
        return f"{what} {path} cannot be read: {exc.strerror or exc}"
    return None
