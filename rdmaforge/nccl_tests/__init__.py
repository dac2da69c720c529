"""nccl-tests output: one parser for the text of every version, the ``-J`` JSON, and NCCL's transport.

Used by the ``rdmaforge nccl-report`` command, the Ansible plugin and the tests::

    from rdmaforge.nccl_tests import parse, parse_file, verdict
    report = parse_file("all_reduce.log", source="all_reduce.log")
    report.to_dict()          # {"runs": [...], "transport": {...}}
    verdict(report.transport, "infiniband").failed

Nothing here raises on odd input: unknown lines are skipped, and what cannot be read simply yields no runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rdmaforge.nccl_tests.json_format import looks_like_json, parse_json_output
from rdmaforge.nccl_tests.lines import decode
from rdmaforge.nccl_tests.model import Half, Row, Run, RunStatus
from rdmaforge.nccl_tests.parser import parse_text
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
    "Report",
    "Row",
    "Run",
    "RunStatus",
    "Transport",
    "TransportVerdict",
    "merge_reports",
    "parse",
    "parse_file",
    "parse_json_output",
    "parse_text",
    "parse_transport",
    "verdict",
]


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


def parse(output: str | bytes, source: str | None = None) -> Report:
    """Parse one output of nccl-tests, text or ``-J`` JSON (detected from the content)."""
    text = decode(output) if isinstance(output, bytes) else output
    runs = parse_json_output(text) if looks_like_json(text) else []
    if runs:
        transport = Transport()  # the JSON holds no NCCL INFO lines
    else:
        runs, transport = parse_text(text), parse_transport(text)
    for run in runs:
        run.source = source
    return Report(runs=runs, transport=transport)


def parse_file(path: str | Path, source: str | None = None) -> Report:
    """Parse a file (OSError when it cannot be read); ``source`` defaults to the path as given."""
    return parse(Path(path).read_bytes(), source=str(path) if source is None else source)


def merge_reports(reports: Iterable[Report]) -> Report:
    """All runs concatenated in order, and one transport holding the evidence of every report."""
    items = list(reports)
    return Report(
        runs=[run for report in items for run in report.runs],
        transport=merge_transports(report.transport for report in items),
    )
