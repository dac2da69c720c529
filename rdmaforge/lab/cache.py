"""Housekeeping of the machine-wide lab cache (/var/cache/rdmaforge)."""

from __future__ import annotations

import shutil
from pathlib import Path


def remove_other_builds(current: Path, keep: set[str]) -> None:
    """Delete the siblings of ``current`` (builds for older package lists or recipes, never used again and
    hundreds of MB each), except the names in ``keep``."""
    for sibling in current.parent.iterdir():
        if sibling != current and sibling.name not in keep and sibling.is_dir():
            shutil.rmtree(sibling, ignore_errors=True)
