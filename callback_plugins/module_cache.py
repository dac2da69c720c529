"""Keep Ansible's assembled module payloads (AnsiballZ) from one run to the next.

Before a module first runs in a playbook run, Ansible walks its imports through every module_utils file it needs
(parsing each one) and zips the result into a cache directory that lives only as long as the run. That walk was a
quarter of the controller's CPU in a short playbook here (py-spy), and every run paid it again for every module.

This callback points that directory at a persistent one whose name is a digest of everything a payload is built
from: the Ansible and Python versions, and the size and modification time of every file under Ansible's own
package, the module and module_utils directories of every collection on the collections path, the configured
module paths, and the library/ and module_utils/ directories next to the playbook and in its roles. Change any of
those and the digest, so the directory, changes: a stale payload is never used. Off unless a directory is given.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ansible import constants as C
from ansible import release
from ansible.plugins.callback import CallbackBase
from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible.utils.display import Display

DOCUMENTATION = r"""
name: module_cache
type: aggregate
short_description: keep Ansible's assembled module payloads across runs, keyed by everything they are built from
description:
  - Points the run's AnsiballZ cache at a persistent directory named by a digest of the Ansible and Python versions
    and of the size and modification time of every file under Ansible's package, the collections' modules and
    module_utils, the configured module paths and the playbook's and its roles' library/ and module_utils/.
  - Any change to those files gives a new directory, so a payload is reused only while what it was built from is
    unchanged. Directories not used for I(max_age_days) are removed. Prints nothing.
options:
  dir:
    description: The persistent cache directory; empty turns the callback off.
    default: ""
    type: path
    env:
      - name: RDMAFORGE_MODULE_CACHE
    ini:
      - section: callback_module_cache
        key: dir
  max_age_days:
    description: Cache directories unused for longer than this are removed.
    default: 14
    type: int
    env:
      - name: RDMAFORGE_MODULE_CACHE_MAX_AGE_DAYS
"""

display = Display()

#: The name Ansible gives the run's payload cache inside its local temporary directory (module_common).
ANSIBALLZ_CACHE = "ansiballz_cache"


def _files(root: Path) -> Iterator[Path]:
    for directory, subdirectories, names in os.walk(root, followlinks=True):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
        for name in sorted(names):
            yield Path(directory) / name


def source_roots(playbook_dir: Path | None) -> list[Path]:
    """Every directory a module or module_utils file of this run can come from."""
    roots = [Path(release.__file__).parent]
    for collections_path in AnsibleCollectionConfig.collection_paths:
        for kind in ("modules", "module_utils"):
            roots += sorted(Path(collections_path).glob(f"ansible_collections/*/*/plugins/{kind}"))
    for configured in (C.DEFAULT_MODULE_PATH, C.DEFAULT_MODULE_UTILS_PATH):
        roots += [Path(p) for p in configured or []]
    role_dirs = [Path(p) for p in C.DEFAULT_ROLES_PATH or []]
    if playbook_dir is not None:
        roots += [playbook_dir / "library", playbook_dir / "module_utils"]
        role_dirs += [playbook_dir / "roles", playbook_dir.parent / "roles"]
    for role_dir in role_dirs:
        for kind in ("library", "module_utils"):
            roots += sorted(role_dir.glob(f"*/{kind}"))
    return roots


def digest(roots: Iterable[Path]) -> str:
    """The digest that names the cache directory: versions, then path, size and mtime of every file."""
    hasher = hashlib.sha256(f"{release.__version__}\0{sys.version}\n".encode())
    for root in roots:
        hasher.update(f"root {root}\n".encode())
        for path in _files(root):
            try:
                stat = path.stat()
            except OSError:
                continue
            hasher.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return hasher.hexdigest()[:24]


def prune(cache_root: Path, keep: Path, max_age_days: int) -> None:
    """Remove the cache directories nobody used for ``max_age_days`` (each use touches its directory)."""
    limit = time.time() - max_age_days * 86400
    for entry in cache_root.iterdir():
        if entry != keep and entry.is_dir() and entry.stat().st_mtime < limit:
            shutil.rmtree(entry, ignore_errors=True)


def attach(run_tmp: Path, cache_root: Path, key: str, max_age_days: int) -> Path | None:
    """Make ``run_tmp``/ansiballz_cache a link to ``cache_root``/``key``; None when the run already has one."""
    link = run_tmp / ANSIBALLZ_CACHE
    if link.exists() or link.is_symlink():
        return None
    store = cache_root / key
    store.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.utime(store)
    link.symlink_to(store, target_is_directory=True)
    prune(cache_root, store, max_age_days)
    return store


class CallbackModule(CallbackBase):  # type: ignore[misc]  # ansible-core ships no type information
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "module_cache"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook: Any) -> None:
        configured = self.get_option("dir")
        if not configured:
            return
        basedir = getattr(playbook, "_basedir", None)
        try:
            key = digest(source_roots(Path(basedir).resolve() if basedir else None))
            store = attach(Path(C.DEFAULT_LOCAL_TMP), Path(configured).expanduser(), key,
                           int(self.get_option("max_age_days")))  # fmt: skip
        except OSError as exc:  # an unusable cache directory costs speed, never the run
            display.warning(f"module_cache: not used ({exc})")
            return
        if store is not None:
            display.vvv(f"module_cache: module payloads from {store}")
