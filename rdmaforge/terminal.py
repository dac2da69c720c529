"""What rdmaforge writes to stdout and stderr: text read from files shown, never acted on by the terminal.

Host names, reasons and NCCL INFO lines come from logs, run.json, summary.json and inventories, which a corrupt or
forged file can fill with escape sequences (``ESC [2J`` erases the screen), a right-to-left override (U+202E), a
carriage return that overwrites a line, or NUL. rdmaforge.cli puts ``EscapingStream`` in front of stdout and
stderr for every command, so each such character is printed as its escape (``\\x1b[2J``, ``\\u202e``); newlines
and tabs, the only control characters rdmaforge's own text uses, pass. JSON output is unchanged: json.dumps writes
ASCII only, with every control character already escaped.

A stream that cannot encode a character (``PYTHONIOENCODING=ascii``, a C locale without UTF-8) gets it as a
backslash escape (``\\u0153``) instead of failing the command with UnicodeEncodeError.
"""

from __future__ import annotations

import codecs
import os
import re
import select
import sys
import unicodedata
from typing import Any, TextIO, cast

#: Characters in ASCII text a terminal acts on: C0 controls but tab and newline, and DEL.
_ASCII_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: The same, and every non-ASCII character, for text that has some: each is checked by its category.
_CANDIDATES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\U0010ffff]")
#: Controls (C1 included: U+009B is a one-character CSI), format characters (bidi overrides, zero-width ones),
#: line and paragraph separators, and lone surrogates (undecodable bytes that no encoder takes).
_ESCAPED = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code >= 0x80 and unicodedata.category(char) not in _ESCAPED:
        return char
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escaped(text: str, one_line: bool = False) -> str:
    """``text`` with every character a terminal would act on (but newline and tab) written as its escape; with
    ``one_line`` the newline too (``\\x0a``), for a line of output that a name must not split in two."""
    if text.isascii():
        shown = _ASCII_CONTROLS.sub(_escape, text) if _ASCII_CONTROLS.search(text) else text
    else:
        shown = _CANDIDATES.sub(_escape, text)
    return shown.replace("\n", "\\x0a") if one_line else shown


class EscapingStream:
    """A text stream that writes through to ``raw`` what ``escaped`` makes of it; everything else is ``raw``'s."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        shown = escaped(text)
        try:
            self.raw.write(shown)
        except UnicodeEncodeError:
            # A TextIOWrapper encodes the whole text before it buffers any of it: nothing was written yet.
            encoding = getattr(self.raw, "encoding", None) or "ascii"
            self.raw.write(shown.encode(encoding, "backslashreplace").decode(encoding))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def unwrapped(stream: TextIO) -> TextIO:
    """The stream under an EscapingStream (``stream`` itself otherwise): for the live progress line, whose own
    escape sequences redraw it on a terminal (it passes each text it shows through ``escaped`` itself)."""
    return stream.raw if isinstance(stream, EscapingStream) else stream


def install() -> tuple[TextIO, TextIO]:
    """EscapingStream in front of sys.stdout and sys.stderr; returns the streams it replaced, to put back."""
    saved = sys.stdout, sys.stderr
    for stream in saved:
        _degrade(stream)
    sys.stdout = cast(TextIO, EscapingStream(saved[0]))
    sys.stderr = cast(TextIO, EscapingStream(saved[1]))
    return saved


def write_all(stream: TextIO, text: str) -> None:
    """Write ``text`` to ``stream`` (escaped as EscapingStream would) and make sure all of it went: a large write to
    a pipe whose reader goes away mid-write (``| head -1``) is cut short by the kernel, and Python's text stream
    took the short count for success, so a command exited 0 with most of its output lost (review round 29a).
    On a stream with a file descriptor the text goes out through os.write until every byte is written; the next
    write then fails with BrokenPipeError, as it should. Other streams (a test's capture) get a plain write."""
    target = stream
    if isinstance(target, EscapingStream):
        text, target = escaped(text), target.raw
    encoding = getattr(target, "encoding", None) or "utf-8"
    try:
        descriptor = target.fileno()
    except (AttributeError, OSError, ValueError):
        stream.write(text)
        return
    target.flush()  # what is already buffered goes first
    # One encoder per descriptor and encoding: an encoding with a byte-order mark (utf-16, utf-8-sig) writes it
    # once, before the first text, as the stream itself would (a plain encode() put one before every block).
    encoder = _ENCODERS.get((descriptor, encoding))
    if encoder is None:
        encoder = _ENCODERS[(descriptor, encoding)] = codecs.getincrementalencoder(encoding)("backslashreplace")
    data = memoryview(encoder.encode(text))
    while data:
        try:
            data = data[os.write(descriptor, data) :]
        except BlockingIOError:  # a non-blocking stdout whose reader is slower: wait until it can take more
            select.select([], [descriptor], [])


#: write_all's encoder of each (descriptor, encoding) it wrote to.
_ENCODERS: dict[tuple[int, str], codecs.IncrementalEncoder] = {}


#: Error handlers with which a stream fails on a character its encoding lacks.
_FAILING = ("strict", "surrogateescape")


def _degrade(stream: TextIO) -> None:
    """The process's own stdout and stderr write what they cannot encode as backslash escapes: also what reaches
    them around EscapingStream (the progress line on a terminal)."""
    # strict, or surrogateescape (a C locale's): both fail on a character the encoding lacks.
    if stream not in (sys.__stdout__, sys.__stderr__) or getattr(stream, "errors", None) not in _FAILING:
        return
    try:
        stream.reconfigure(errors="backslashreplace")
    except (AttributeError, ValueError, OSError):
        pass  # not a TextIOWrapper, or closed: EscapingStream still degrades what goes through it
