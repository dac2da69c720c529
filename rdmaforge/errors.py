"""The one exception type for errors a user caused (a bad file, value or path): ``rdmaforge.cli`` prints its
message on one line and exits BAD_INPUT (64) instead of showing a traceback."""

from __future__ import annotations

import os


class UserError(ValueError):
    """A problem with the user's input; the message names the file/key/value and what is allowed."""


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
