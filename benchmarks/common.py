"""Result type and reporting shared by the benchmarks."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rdmaforge.paths import PROJECT_ROOT


@dataclass
class Result:
    name: str
    value: float
    unit: str
    target: str  # human-readable, e.g. "< 30 s"
    passed: bool
    detail: str = ""


def write_report(results: list[Result]) -> Path:
    out = PROJECT_ROOT / "artifacts" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps([asdict(r) for r in results], indent=2))
    return path
