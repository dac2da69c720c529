"""The resources a converge record lists, and the one rule for combining two lists of them.

Used on the controller by the converge_ledger callback (what a run's tasks managed) and on the nodes by the
converge_state module (a node that skipped its own roles keeps what its last record lists beside what this run
saw). Shipped to targets as the collection's ``module_utils/converge_resources.py``: standard library only,
Python 3.8.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from typing import Any, Iterable, Mapping

#: Kinds that are names, listed sorted and once each: files and directories (paths), directories whose entries
#: are watched (listings, in listing_entry's form), systemd units (services), Python venvs whose installed
#: packages are watched (venvs).
NAME_KINDS = ("paths", "listings", "services", "venvs")
#: Kinds kept in the order first seen, each item once: argv lists of read-only commands, effects that cannot be
#: observed, and why something could not be verified.
ORDERED_KINDS = ("commands", "effects", "unverifiable")
#: {package manager: package names}, names sorted and once each.
PACKAGES = "packages"
KINDS = NAME_KINDS + (PACKAGES,) + ORDERED_KINDS


def file_sha256(path: str) -> str:
    """A file's sha256, read in 1 MiB blocks (a library of hundreds of MiB is never held in memory): the one digest
    of a file's content that the converge record (converge_state) and a build's record (build_tree) keep. Raises
    OSError when the file cannot be read."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


#: A listing of the entries a find task with patterns sees: "DIR matching P1,P2", and with recurse
#: "DIR matching P1,P2 to depth N" (N levels down at most, as find counts them; "any": every level).
_MATCHING = re.compile(r"^(?P<directory>/.*?) matching (?P<patterns>[^ ]+?)(?: to depth (?P<depth>[1-9][0-9]*|any))?$")


def listing_entry(directory: str, patterns: Iterable[str] = (), depth: int | None = 1) -> str:
    """The listings entry for ``directory`` as a find task sees it: only the names matching one of ``patterns``
    (shell patterns on the name, as find matches them), ``depth`` levels down (1: its own entries; None: every
    level). Without patterns, or with one this form cannot carry (empty, or with a comma or a space), the plain
    directory: every name in it, which watches more, never less."""
    names = [str(pattern) for pattern in patterns]
    if not names or any(not name or "," in name or " " in name for name in names):
        return directory
    entry = f"{directory} matching {','.join(names)}"
    if depth != 1:
        entry += f" to depth {'any' if depth is None else int(depth)}"
    return entry


def observe_listing(entry: str) -> Any:
    """What a listings entry watches now: the sorted names (relative paths below the directory when it recurses),
    "absent" when the directory is not there, or "error: ..." when it cannot be read. Hidden names count too (more
    than find returns by default: a superset only makes the check stricter)."""
    match = _MATCHING.match(entry)
    directory = entry if match is None else match.group("directory")
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return "error: %s" % (exc.strerror or exc)
    if match is None:
        return sorted(names)
    patterns = match.group("patterns").split(",")
    depth_text = match.group("depth")
    depth = None if depth_text == "any" else int(depth_text or 1)
    found = []
    for root, dirs, files in os.walk(directory):
        below = os.path.relpath(root, directory)
        level = 1 if below == "." else below.count(os.sep) + 2  # the level of root's entries (find's depth)
        for name in dirs + files:
            if any(fnmatch.fnmatch(name, pattern) for pattern in patterns):
                found.append(name if below == "." else os.path.join(below, name))
        if depth is not None and level >= depth:
            dirs[:] = []  # their entries would be deeper than find looks
    return sorted(found)


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def shape_problem(resources: Any) -> str | None:
    """Why ``resources`` (the converge_state module's option) is not a record's resources, or None: text where a
    list belongs was read one character at a time (``paths: /etc/hosts`` observed ``/``, ``e``, ...), and an empty
    argv raised IndexError (review round 37c)."""
    if resources is None:
        return None
    for key, value in resources.items():
        if key in NAME_KINDS + ("effects", "unverifiable") and not _texts(value):
            return f"{key}={value!r} is not allowed; allowed: a list of text"
        if key == "commands" and not (isinstance(value, list) and all(_texts(argv) and argv for argv in value)):
            return f"commands={value!r} is not allowed; allowed: a list of non-empty argv lists of text"
        if key == PACKAGES and not (isinstance(value, dict) and all(_texts(names) for names in value.values())):
            return f"packages={value!r} is not allowed; allowed: a mapping of a package manager to a list of names"
        if key not in KINDS:
            return f"{key!r} is not a kind of resource; allowed: {', '.join(KINDS)}"
    return None
