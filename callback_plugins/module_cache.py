"""Keep Ansible's assembled module payloads (AnsiballZ) from one run to the next.

Before a module first runs in a playbook run, Ansible walks its imports through every module_utils file it needs
(parsing each one) and zips the result into a cache directory that lives only as long as the run. That walk was a
quarter of the controller's CPU in a short playbook here (py-spy), and every run paid it again for every module.

This callback points that directory at a persistent one whose name is a digest of everything a payload is built
from: the Ansible and Python versions, and the size and modification time of every file under Ansible's own
package, the module and module_utils directories of every collection on the collections path, the configured
module paths, and the library/ and module_utils/ directories next to the playbook and in its roles. Change any of
those and the digest, so the directory, changes: a stale payload is never used. Without a directory, payloads last
one run, as in Ansible itself.

It also puts compiled bytecode in every payload it builds (option ``bytecode``, on by default). A node runs each
module in a fresh Python that imports the payload from a zip, and zipimport compiles every .py in it each time: about
a third of the CPU a module run costs a node before the module does anything. With an unchecked hash-based .pyc
(PEP 552) beside each .py, compiled by the controller's Python, a node whose Python is the same version loads the
bytecode; any other version finds a foreign magic number, skips the .pyc and compiles the source as before.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.util
import io
import marshal
import os
import shutil
import sys
import time
import warnings
import zipfile
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
  - Puts bytecode in the payloads it builds (I(bytecode)), which a node with the controller's Python version runs
    instead of compiling the payload's sources on every module run.
options:
  dir:
    description: The persistent cache directory; empty keeps each run's payloads for that run only, as Ansible does.
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
  bytecode:
    description:
      - Put bytecode compiled by the controller's Python beside every source file of each payload built, so that a
        node with the same Python version skips compiling the payload on every module run. Nodes with another
        version ignore it. Payloads built for a debugger or coverage extension are left as they are.
    default: true
    type: bool
    env:
      - name: RDMAFORGE_MODULE_BYTECODE
    ini:
      - section: callback_module_cache
        key: bytecode
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


#: In the digest of a cache whose payloads carry bytecode: payloads with and without it never share a directory.
BYTECODE_FORMAT = "bytecode: unchecked-hash pyc beside each py, v1"


def digest(roots: Iterable[Path], variant: str = "") -> str:
    """The digest that names the cache directory: versions, the payload variant, then path, size and mtime of every
    file. A root that is not there holds no file a payload is built from, so it is left out: playbooks in different
    directories without a library/ or module_utils/ of their own share one cache (each had a directory of its own,
    its payloads built again, and the test suite's temporary playbooks left hundreds of them behind)."""
    hasher = hashlib.sha256(f"{release.__version__}\0{sys.version}\0{variant}\n".encode())
    for root in roots:
        if not root.is_dir():
            continue
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


def compiled(source: bytes, filename: str) -> bytes | None:
    """An unchecked hash-based .pyc of ``source`` for this Python; None when this Python cannot compile it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings are the node's Python's to print, if it compiles the source
        try:
            # optimize=0: asserts and docstrings kept, whatever -O the controller runs with (the node decides).
            code = compile(source, filename, "exec", dont_inherit=True, optimize=0)
        except (SyntaxError, ValueError):
            return None
    unchecked_hash_based = (1).to_bytes(4, "little")
    return importlib.util.MAGIC_NUMBER + unchecked_hash_based + importlib.util.source_hash(source) + marshal.dumps(code)


def with_bytecode(zip_data: bytes) -> bytes:
    """The payload zip with a .pyc beside each .py (one this Python cannot compile keeps its source only)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(zip_data)) as payload, zipfile.ZipFile(out, "w") as target:
        names = set(payload.namelist())
        for info in payload.infolist():
            source = payload.read(info)
            target.writestr(info, source)
            if not info.filename.endswith(".py") or f"{info.filename}c" in names:
                continue
            pyc = compiled(source, info.filename)
            if pyc is not None:
                pyc_info = zipfile.ZipInfo(f"{info.filename}c", info.date_time)
                pyc_info.compress_type = info.compress_type
                target.writestr(pyc_info, pyc)
    return out.getvalue()


def ship_bytecode() -> bool:
    """Make the payloads this process and its workers build carry bytecode; False when Ansible's payload cache is
    not the one this was written for (ansible-core 2.19's ``module_common._CachedModule``)."""
    from ansible.executor import module_common

    cached_module: Any = getattr(module_common, "_CachedModule", None)
    original = getattr(cached_module, "dump", None)
    if original is None or not hasattr(cached_module, "__dataclass_fields__"):  # dataclasses.replace needs one
        return False
    if getattr(original, "rdmaforge_bytecode", False):
        return True

    def dump(self: Any, path: str) -> None:
        # The cache file's name ends with the payload's extensions; a debugger or coverage extension maps source
        # files, so only plain payloads ("-none") get bytecode.
        if path.endswith("-none"):
            try:
                zip_data = base64.b64encode(with_bytecode(base64.b64decode(self.zip_data)))
                self = dataclasses.replace(self, zip_data=zip_data)
            except Exception as exc:  # a payload without bytecode costs speed, never the run
                display.warning(f"module_cache: payload kept without bytecode ({exc})")
        original(self, path)

    dump.rdmaforge_bytecode = True  # type: ignore[attr-defined]
    cached_module.dump = dump
    return True


class CallbackModule(CallbackBase):  # type: ignore[misc]  # ansible-core ships no type information
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "module_cache"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook: Any) -> None:
        # Before the first worker forks: the workers build the payloads, with the patched cache.
        wanted = bool(self.get_option("bytecode"))
        bytecode = wanted and ship_bytecode()
        if wanted and not bytecode:
            display.vvv("module_cache: this ansible-core builds payloads another way; they carry no bytecode")
        configured = self.get_option("dir")
        if not configured:
            return
        basedir = getattr(playbook, "_basedir", None)
        try:
            roots = source_roots(Path(basedir).resolve() if basedir else None)
            key = digest(roots, BYTECODE_FORMAT if bytecode else "")
            store = attach(Path(C.DEFAULT_LOCAL_TMP), Path(configured).expanduser(), key,
                           int(self.get_option("max_age_days")))  # fmt: skip
        except OSError as exc:  # an unusable cache directory costs speed, never the run
            display.warning(f"module_cache: not used ({exc})")
            return
        if store is not None:
            display.vvv(f"module_cache: module payloads from {store}")
