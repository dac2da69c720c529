"""What rdmaforge writes to stdout and stderr.

A stream that cannot encode a character (``PYTHONIOENCODING=ascii``, a C locale without UTF-8) gets it as a
backslash escape (``\\u0153``) instead of failing the command with UnicodeEncodeError.
"""

from __future__ import annotations

import sys
from typing import TextIO


def install() -> tuple[TextIO, TextIO]:
    """The process's stdout and stderr degraded (``_degrade``); returns them, to put back."""
    saved = sys.stdout, sys.stderr
    for stream in saved:
        _degrade(stream)
    return saved


#: Error handlers with which a stream fails on a character its encoding lacks.
_FAILING = ("strict", "surrogateescape")


def _degrade(stream: TextIO) -> None:
    """The process's own stdout and stderr write what they cannot encode as backslash escapes."""
    # strict, or surrogateescape (a C locale's): both fail on a character the encoding lacks.
    if stream not in (sys.__stdout__, sys.__stderr__) or getattr(stream, "errors", None) not in _FAILING:
        return
    try:
        stream.reconfigure(errors="backslashreplace")
    except (AttributeError, ValueError, OSError):
        pass  # not a TextIOWrapper, or closed
