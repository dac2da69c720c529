"""Which NCCL net-plugin API versions a built libnccl can load, and whether a plugin can be loaded by it.

The one implementation behind the ``nccl_net_api`` Ansible module (shipped to targets as
``module_utils/rdmaforge_nccl_net_api.py``): standard-library only, Python 3.8.

NCCL loads a net plugin with ``dlsym(lib, "ncclNetPlugin_vN")`` for each N it knows, newest first (2.16.5:
v6, v5, v4; 2.29.7: v11 down to v6). Those names are NUL-terminated strings in the library's read-only
data, so the versions a build accepts are read from the binary itself, not from a table that could be wrong
for a given build. A plugin exports one ``ncclNetPlugin_vN`` symbol per API it implements (``nm -D``:
``rdmaforge.parsers.nccl_env.plugin_api_versions``). NCCL uses the newest version both sides know.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:  # annotations only; never evaluated at runtime (Python 3.8 targets)
    from collections.abc import Iterable, Sequence

# A whole string: NUL before and after, so "... ncclNetPlugin_v6 symbol." log text never counts. The NULs are
# look-arounds, not consumed: the compiler packs the names back to back, sharing one NUL between two.
_LOADER_NAME_RE = re.compile(rb"(?<=\x00)ncclNetPlugin_v([0-9]{1,3})(?=\x00)")
_VERSION_RE = re.compile(rb"NCCL version ([0-9]+\.[0-9]+\.[0-9]+)")
_CHUNK = 8 << 20


class Compatibility(TypedDict):
    nccl: list[int]
    plugin: list[int]
    common: list[int]
    chosen: int | None


def loader_versions(data: bytes) -> list[int]:
    """The plugin API versions whose symbol names the library holds (what its loader can dlsym)."""
    return sorted({int(match.group(1)) for match in _LOADER_NAME_RE.finditer(data)})


def library_version(data: bytes) -> str | None:
    """NCCL's version as the library prints it at init (``NCCL version 2.29.7+cuda13.0``)."""
    match = _VERSION_RE.search(data)
    return match.group(1).decode("ascii") if match else None


def scan_library(path: str) -> tuple[list[int], str | None]:
    """``loader_versions`` and ``library_version`` of a file, read in chunks (a full build is hundreds of MB)."""
    versions: set[int] = set()
    version: str | None = None
    tail = b""
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(_CHUNK)
            if not chunk:
                break
            window = tail + chunk
            versions.update(loader_versions(window))
            if version is None:
                version = library_version(window)
            tail = window[-64:]  # longer than any name matched above, so none is cut in two
    return sorted(versions), version


def compatibility(nccl: Iterable[int], plugin: Iterable[int]) -> Compatibility:
    """The versions both sides know and the one NCCL will use (the newest common one), or None."""
    nccl_versions = sorted(set(nccl))
    plugin_versions = sorted(set(plugin))
    common = sorted(set(nccl_versions) & set(plugin_versions))
    return {
        "nccl": nccl_versions,
        "plugin": plugin_versions,
        "common": common,
        "chosen": common[-1] if common else None,
    }


def version_in_range(version: str, low: str, high: str) -> bool:
    """Whether ``version`` (2.29.7) lies within ``low``..``high``, each by its own precision (2.16 is 2.16.x)."""

    def parts(text: object) -> list[int]:
        # ASCII digits only: str.isdigit() takes '²', which int() refuses.
        return [int(p) for p in str(text if text is not None else "").split(".") if re.fullmatch("[0-9]+", p)]

    current = parts(version)
    return parts(low) <= current[: len(parts(low))] and current[: len(parts(high))] <= parts(high)


def format_versions(versions: Sequence[int]) -> str:
    return ", ".join(f"v{v}" for v in versions) or "none"
