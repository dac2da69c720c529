"""Read the result line that rdmaforge/bench/ddp_train.py prints on rank 0."""

from __future__ import annotations

import json
from collections.abc import Mapping
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


def percentile(run: Mapping[str, Any], name: str) -> float | None:
    """A training run's throughput at percentile ``name`` (samples/s), as e2e.json holds the result line; None where
    it has none (null or missing): the report shows "-", and what needs it is not judged."""
    percentiles = run.get("percentiles")
    point = percentiles.get(name) if isinstance(percentiles, Mapping) else None
    value = point.get("samples_per_s") if isinstance(point, Mapping) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def count(run: Mapping[str, Any], key: str) -> int | None:
    """A training run's ``nodes`` or ``world_size``; None where the result has none."""
    value = run.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
