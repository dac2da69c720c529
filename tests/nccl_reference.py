"""tests/data/nccl-reference/reference.json, the parser's results at commit 1e5750b for every corpus file and JSON
sample, with what the parser has learnt to read since, taken from each sample's own text (not from the parser):

- ``validated`` (nccl-tests' ``-c``: each run's ``validation: 1`` or ``0`` on its nThread line, or a -J document's
  ``config.validation``; None where the sample says neither).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_FILE = ROOT / "tests" / "data" / "nccl-reference" / "reference.json"
SAMPLES = ROOT / "tests" / "data" / "nccl-json"
CORPUS = ROOT.parent / "shared" / "corpus" / "nccl-tests"
_VALIDATION = re.compile(r"nThread\s[^\n]*?validation:\s*([01])")


def sample_path(name: str) -> Path:
    return SAMPLES / name if name.endswith(".json") else CORPUS / name


def load() -> dict[str, Any]:
    reference: dict[str, Any] = json.loads(REFERENCE_FILE.read_text())
    for name, document in reference.items():
        path = sample_path(name)
        text = path.read_text(errors="replace") if path.is_file() else ""
        said = _VALIDATION.findall(text) or re.findall(r'"validation"\s*:\s*([01])\b', text)
        runs = document["runs"]
        if said and len(said) != len(runs):
            raise AssertionError(f"{name}: {len(said)} nThread lines say validation:, for {len(runs)} runs")
        for index, run in enumerate(runs):
            run["validated"] = (said[index] == "1") if said else None
    return reference
