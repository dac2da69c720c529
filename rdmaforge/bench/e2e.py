"""Read the result line that rdmaforge/bench/ddp_train.py prints on rank 0."""

from __future__ import annotations

import json
from typing import Any

MARKER = "RDMAFORGE_E2E "


def parse_output(text: str) -> dict[str, Any] | None:
    """The last result line's JSON, or None when the run printed none (it failed or was cut short)."""
    result = None
    for line in text.splitlines():
        _, found, payload = line.partition(MARKER)
        if found:
            try:
                result = json.loads(payload)
            except ValueError:
                continue
    return result
