"""Well-known locations: the project checkout and the machine-wide caches."""

from __future__ import annotations

import os
from pathlib import Path

#: The checkout that holds playbooks/, roles/ and inventories/ (rdmaforge is installed editable from it).
PROJECT_ROOT = Path(os.environ.get("RDMAFORGE_ROOT", Path(__file__).resolve().parent.parent))

#: Machine-wide cache for things that are expensive to build and safe to share between checkouts:
#: the lab's base root filesystem and its package mirror.
CACHE_DIR = Path(os.environ.get("RDMAFORGE_CACHE", "/var/cache/rdmaforge"))

#: Controller-side cache for per-cluster artefacts (NCCL builds, SSH trust keys); outside the repo.
CONTROLLER_CACHE = Path(os.environ.get("RDMAFORGE_CONTROLLER_CACHE", str(Path.home() / ".cache" / "rdmaforge")))


def playbook(name: str) -> Path:
    """Path of a playbook shipped with the project, e.g. ``playbook("site.yml")``."""
    return PROJECT_ROOT / "playbooks" / name
