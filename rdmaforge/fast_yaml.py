"""YAML parsing for the project's own files on the hot path of a run (role specs, task files).

PyYAML's pure-Python loader takes about ten times as long as libyaml's: parsing the 16 role argument specs
cost 0.17 s, and preflight did it for every node. Files a user wrote keep ``yaml.safe_load``, whose errors
show the offending line.
"""

from __future__ import annotations

from typing import Any

import yaml

#: libyaml's safe loader when PyYAML was built with it (the wheels are), else the pure-Python one: same results.
LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str) -> Any:
    """``yaml.safe_load(text)``, through libyaml when available; raises yaml.YAMLError alike."""
    return yaml.load(text, Loader=LOADER)  # noqa: S506 - a safe loader (CSafeLoader or SafeLoader)
