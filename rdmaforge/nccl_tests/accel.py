"""The optional C accelerator of the text parser and the JSON writer (``_fastrows.c``, issue 17).

``fast`` is the extension module, or None when it was not built (no C compiler at install time), was built from
an older source (its VERSION is not this module's) or when the environment sets ``RDMAFORGE_NCCL_PURE_PYTHON=1``;
the parser and nccl-report then run their pure-Python code. Both give byte-identical results
(tests/unit/test_nccl_fastpath.py); the extension only handles the plain, common lines and hands every other one
back to the Python code. Callers read ``accel.fast`` at each use, so a test can switch it off with
``monkeypatch.setattr(accel, "fast", None)``.
"""

from __future__ import annotations

import os
from types import ModuleType

#: Set to 1 (or any value other than 0) to run without the C accelerator.
DISABLE_ENV = "RDMAFORGE_NCCL_PURE_PYTHON"
#: The extension's VERSION this code needs; an older build (an in-place .so left from before a change of the
#: source) is not used: 2 declines the rows that are no measurement (rowstore._no_measurement), which 1 stored
#: without counting them; 3 keeps the host each ``#  Rank`` line names (rank_hosts); 4 says what kind of line it
#: hands back (a failure line, or the first word of a handler's line: WORDS), for the parser to skip feed(); 5 hands
#: back ``# Reducing maxBytes`` lines (the sweep's end) and declines a negative ``#wrong``; 6 declines a fractional
#: one (the Python parser's wrong_count judges it); 7 hands back a launcher's failure line (parser._LAUNCH_WORDS); 8
#: hands back an NCCL line that does not start with its host:pid:tid [dev] prefix (a comment quoting one); 9 adds
#: first_unprintable (consistency.table_problem's row check); 10 hands back a ``#  Rank`` line of a group other than 0.
VERSION = 10


def load() -> ModuleType | None:
    """The extension module, or None (not built, built from an older source, or disabled by DISABLE_ENV)."""
    if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
        return None
    try:
        from rdmaforge.nccl_tests import _fastrows
    except ImportError:
        return None
    return _fastrows if getattr(_fastrows, "VERSION", 1) == VERSION else None


fast: ModuleType | None = load()
