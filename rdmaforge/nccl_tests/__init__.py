"""nccl-tests output: one parser for the text of every version, the ``-J`` JSON, and NCCL's transport.

Used by the ``rdmaforge nccl-report`` command, the Ansible plugin and the tests::

    from rdmaforge.nccl_tests import parse, parse_file, verdict
    report = parse_file("all_reduce.log", source="all_reduce.log")
    report.to_dict()          # {"runs": [...], "transport": {...}}
    verdict(report.transport, "infiniband").failed

Input is read incrementally (``stream_runs``): blocks of lines, one pass for runs, rows and transport, gzip
and the encodings of source.py. Unknown lines are skipped and what holds no run yields no runs; only input
that cannot be a log at all (binary, UTF-16 without a BOM, corrupt gzip, a -J document over MAX_JSON)
raises InputError, whose message names the input.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rdmaforge.nccl_tests.json_format import (
    foreign_json_first,
    looks_like_json,
    parse_json_documents,
    parse_json_output,
)
from rdmaforge.nccl_tests.model import NOT_VALIDATED, TIMEOUT_EXIT, Half, Row, Run, RunStatus, launch_problem
from rdmaforge.nccl_tests.parser import TextParser, parse_text
from rdmaforge.nccl_tests.source import InputError, open_text
from rdmaforge.nccl_tests.transport import (
    FABRIC_PROFILES,
    Hca,
    Transport,
    TransportVerdict,
    merge_transports,
    parse_transport,
    verdict,
)

__all__ = [
    "FABRIC_PROFILES",
    "Half",
    "Hca",
    "InputError",
    "Report",
    "Row",
    "NOT_VALIDATED",
    "Run",
    "RunStatus",
    "TIMEOUT_EXIT",
    "Transport",
    "TransportVerdict",
    "check_input",
    "launch_problem",
    "merge_reports",
    "parse",
    "parse_file",
    "parse_json_output",
    "parse_text",
    "parse_transport",
    "stream_runs",
    "verdict",
]

#: A ``-J`` document is one run (60k records take about 27 MB, far more than any real sweep). A larger one is
#: refused: reading one whole (text, parsed records, rows) then stays under 300 MB of memory.
MAX_JSON = 32 << 20


@dataclass
class Report:
    """The runs of one or more outputs and the transport evidence found in them."""

    runs: list[Run] = field(default_factory=list)
    transport: Transport = field(default_factory=Transport)

    @property
    def ok(self) -> bool:
        """True when there is at least one run and every run is ok."""
        return bool(self.runs) and all(run.status == "ok" for run in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [run.to_dict() for run in self.runs], "transport": self.transport.to_dict()}


class RunStream:
    """The runs of one input, yielded as each one ends; ``transport`` is complete once they are all taken."""

    def __init__(self, blocks: Iterable[str], source: str | None) -> None:
        self._blocks = blocks
        self.source = source
        self.transport = Transport()

    def __iter__(self) -> Iterator[Run]:
        blocks = iter(self._blocks)
        first = ""
        for block in blocks:
            first = block
            if block.strip():
                break
        if looks_like_json(first):
            whole = self._whole(first, blocks)
            if isinstance(whole, list):  # a text log whose first line is some other JSON: read as text, streamed
                whole, blocks = "", _chain("".join(whole), blocks)
            text = whole
            several = parse_json_documents(text) if text else None
            if several is not None:
                runs, rest = several
                yield from self._tagged(runs)
                if not rest.strip():
                    return
                text = rest  # a text log after the documents: read as one
            elif text:
                runs = parse_json_output(text)
                if runs:  # the JSON holds no NCCL INFO lines
                    yield from self._tagged(runs)
                    return
            if text:
                blocks = iter((text,))
        elif first:
            blocks = _chain(first, blocks)
        parser = TextParser()
        for block in blocks:
            parser.feed_block(block)
            yield from self._tagged(parser.take_finished())
        yield from self._tagged(parser.close())
        self.transport = parser.transport

    def _whole(self, first: str, blocks: Iterator[str]) -> str | list[str]:
        """The input whole, for a -J document; the parts read so far (a list) where, past MAX_JSON, it is a text log
        whose first line is another JSON object (a launcher's log line): that one is streamed as text (review round
        25b: such a log over 32 MiB was refused as an oversized -J document)."""
        parts, size = [first], len(first)
        for block in blocks:
            size += len(block)
            parts.append(block)
            if size > MAX_JSON:
                if foreign_json_first("".join(parts)):
                    return parts
                raise InputError(
                    f"{self.source or 'input'}: a -J JSON document larger than {MAX_JSON >> 20} MiB; nccl-tests writes "
                    f"one run per -J file (tens of MB at most): split it or pass the text log instead"
                )
        return "".join(parts)

    def _tagged(self, runs: list[Run]) -> Iterator[Run]:
        for run in runs:
            run.source = self.source
            yield run


def _chain(first: str, rest: Iterator[str]) -> Iterator[str]:
    yield first
    yield from rest


def stream_runs(path: str | Path, source: str | None = None) -> tuple[RunStream, io.BufferedIOBase]:
    """A RunStream over a file (``-`` for stdin) and the open file to close (OSError when it cannot be opened)."""
    name = str(path) if source is None else source
    if str(path) == "-" and sys.stdin is None:  # started with file descriptor 0 closed (``<&-``)
        raise InputError(f"{name}: standard input is closed: pipe a log in, or name the file instead of '-'")
    raw: Any = sys.stdin.buffer if str(path) == "-" else open(path, "rb")  # noqa: SIM115 - the caller closes
    return RunStream(open_text(raw, name), name), raw


def check_input(path: str | Path) -> None:
    """OSError or InputError unless ``path`` opens and its first block reads as a possible log.

    Only regular files are sniffed: reading a pipe (``<(zcat log.gz)``) here would lose what was read.
    """
    if not stat.S_ISREG(os.stat(path).st_mode):
        return
    with open(path, "rb") as raw:
        next(open_text(raw, str(path)), None)


def parse(output: str | bytes, source: str | None = None) -> Report:
    """Parse one output of nccl-tests, text or ``-J`` JSON (detected from the content)."""
    if isinstance(output, bytes):
        blocks: Iterable[str] = open_text(io.BytesIO(output), source or "input")
    else:
        blocks = (output,)
    stream = RunStream(blocks, source)
    runs = list(stream)
    return Report(runs=runs, transport=stream.transport)


def parse_file(path: str | Path, source: str | None = None) -> Report:
    """Parse a file (OSError when it cannot be read); ``source`` defaults to the path as given."""
    stream, raw = stream_runs(path, source)
    try:
        runs = list(stream)
    finally:
        if sys.stdin is None or raw is not sys.stdin.buffer:
            raw.close()
    return Report(runs=runs, transport=stream.transport)


def merge_reports(reports: Iterable[Report]) -> Report:
    """All runs concatenated in order, and one transport holding the evidence of every report."""
    items = list(reports)
    return Report(
        runs=[run for report in items for run in report.runs],
        transport=merge_transports(report.transport for report in items),
    )
