"""The one exception type for errors a user caused (a bad file, value or path): ``rdmaforge.cli`` prints its
message on one line and exits BAD_INPUT (64) instead of showing a traceback."""

from __future__ import annotations


class UserError(ValueError):
    """A problem with the user's input; the message names the file/key/value and what is allowed."""
