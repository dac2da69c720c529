"""The resources a converge record lists, and the one rule for combining two lists of them.

Used on the controller by the converge_ledger callback (what a run's tasks managed) and on the nodes by the
converge_state module (a node that skipped its own roles keeps what its last record lists beside what this run
saw). Shipped to targets as the collection's ``module_utils/converge_resources.py``: standard library only,
Python 3.8.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

#: Kinds that are names, listed sorted and once each: files and directories (paths), directories whose entries
#: are watched (listings), systemd units (services), Python venvs whose installed packages are watched (venvs).
NAME_KINDS = ("paths", "listings", "services", "venvs")
#: Kinds kept in the order first seen, each item once: argv lists of read-only commands, effects that cannot be
#: observed, and why something could not be verified.
ORDERED_KINDS = ("commands", "effects", "unverifiable")
#: {package manager: package names}, names sorted and once each.
PACKAGES = "packages"
KINDS = NAME_KINDS + (PACKAGES,) + ORDERED_KINDS


def _ordered_union(parts: Iterable[Iterable[Any]]) -> list[Any]:
    out: list[Any] = []
    for part in parts:
        out += [item for item in part or [] if item not in out]
    return out


def merge(*lists: Mapping[str, Any]) -> dict[str, Any]:
    """Everything any of ``lists`` names, each kind in its record form (see the kinds above); earlier lists' ordered
    items come first. With one list, that list in record form."""
    out: dict[str, Any] = {}
    for kind in NAME_KINDS:
        out[kind] = sorted({str(name) for resources in lists for name in resources.get(kind) or []})
    managers: dict[str, set[str]] = {}
    for resources in lists:
        for manager, names in (resources.get(PACKAGES) or {}).items():
            managers.setdefault(manager, set()).update(names or [])
    out[PACKAGES] = {manager: sorted(names) for manager, names in sorted(managers.items())}
    for kind in ORDERED_KINDS:
        out[kind] = _ordered_union(resources.get(kind) or [] for resources in lists)
    return out
