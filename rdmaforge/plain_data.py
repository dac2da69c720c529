"""Ansible's values as plain Python data, for the code behind the filters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def plain(value: Any) -> Any:
    """Ansible's values (tagged strings, lazy containers, HostVars) as plain Python data. A lazy container carries
    its host's whole template context: code that copies one (a deep copy, as Ansible's argument validator makes)
    copies that context too."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value
