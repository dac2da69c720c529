"""The exception types ``rdmaforge.cli`` reports as one line instead of a traceback: errors a user caused (a bad
file, value or path; exit BAD_INPUT, 64), and what stops a run before Ansible starts (exit ERROR, 1)."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from pathlib import Path


class UserError(ValueError):
    """A problem with the user's input; the message names the file/key/value and what is allowed."""


class CannotRun(Exception):
    """What the run needs is missing (mitogen, testinfra, the variables of a dynamic inventory that the secret
    scrubber must know): reported on stderr, exit 1, before Ansible runs. A wrong argument is a UserError instead."""


def install_hint(package: str) -> str:
    """How to install ``package``, a Python package rdmaforge declares (a dependency or an extra's): ``pip install``
    with the version range rdmaforge's metadata gives it, and the extra that carries it. rdmaforge itself is not on
    PyPI (its wheel is built from the repository), so a hint of ``pip install rdmaforge[...]`` failed there, or would
    fetch whatever someone published under that name."""
    import importlib.metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    extra = ""
    try:
        requirements = importlib.metadata.requires("rdmaforge") or []
    except importlib.metadata.PackageNotFoundError:
        requirements = []
    for line in requirements:
        requirement = Requirement(line)
        if canonicalize_name(requirement.name) != canonicalize_name(package) or requirement.name == "rdmaforge":
            continue
        found = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", str(requirement.marker or ""))
        if found and found.group(1) == "test":
            continue  # the test extra repeats the others
        extra = f" (rdmaforge's [{found.group(1)}] extra)" if found else " (a dependency of rdmaforge)"
        package = f"{requirement.name}{requirement.specifier}"
        break
    return f"pip install '{package}'{extra}"


def missing_path(path: object, what: str) -> str | None:
    """Why ``path`` cannot be used, or None when it can be stat'ed: "does not exist" only when it does not, the
    system's own words otherwise (a symbolic link loop, a directory without search permission)."""
    try:
        os.stat(str(path))
    except FileNotFoundError:
        if os.path.islink(str(path)):  # ls lists it: "does not exist" alone would send the user looking elsewhere
            return f"{what} {path} is a symbolic link to {os.readlink(str(path))}, which does not exist"
        return f"{what} {path} does not exist"
    except OSError as exc:
        return f"{what} {path} cannot be read: {exc.strerror or exc}"
    return None


def output_path(allowed: str) -> Callable[[str], Path]:
    """argparse type of an output path (-o/--output): any path but the empty one, refused as a usage error (exit 64)
    naming ``allowed``. Path("") is Path("."), so an empty -o (an unset shell variable) would silently write into
    the current directory. Shared by every command's -o, and light to import (no command module)."""

    def parse(text: str) -> Path:
        if not text:
            raise argparse.ArgumentTypeError(f"'': an empty path (it would stand for the current directory); "
                                             f"allowed: {allowed}")  # fmt: skip
        return Path(text)

    return parse


def input_path(allowed: str) -> Callable[[str], Path]:
    """argparse type of a path a command reads (a run directory, a summary file): refused as a usage error (exit 64)
    when empty or blank, naming ``allowed``. Path("") is Path("."): an unset shell variable had the current
    directory read as the run."""

    def parse(text: str) -> Path:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{text!r}: an empty path (it would stand for the current directory); "
                                             f"allowed: {allowed}")  # fmt: skip
        return Path(text)

    return parse


def non_empty(what: str, allowed: str) -> Callable[[str], str]:
    """argparse type of a name or pattern that an unset shell variable would leave empty (or blank): refused as a
    usage error (exit 64) saying ``what`` it is and what is ``allowed``."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{text!r}: {what}; allowed: {allowed}")
        return text

    return parse


#: What --limit may be: shown by every refusal of one.
HOST_PATTERN_ALLOWED = ("host or group names, or patterns such as node[1:4], 'cluster:!node3' or @FILE (a file of "
                        "host names, one a line)")  # fmt: skip

#: One term of a pattern without commas, as Ansible's split_host_pattern finds them: a run of characters other than
#: whitespace, ':' and brackets, or a whole bracketed range (node[1:3] is one term, node1:&gpu two).
_PATTERN_TERM = re.compile(r"(?:[^\s:\[\]]|\[[^\]]*\])+")


def split_host_pattern(pattern: str) -> list[str]:
    """The terms of a host pattern, as ansible.inventory.manager.split_host_pattern finds them: split on ',' when
    there is one, else on ':' outside [ranges]; each term stripped, empty ones dropped. (Ansible first keeps a
    pattern without commas whole when it reads as an address, IPv6 ones included: rdmaforge does not look for
    addresses, so '::' has no term here; a pattern with any name in it has one either way.)"""
    if "," in pattern:
        terms = pattern.split(",")
    else:
        terms = _PATTERN_TERM.findall(pattern)
    return [term.strip() for term in terms if term.strip()]


def _limit_file_lines(name: str) -> list[str] | None:
    """The non-blank lines of an --limit @FILE, as Ansible reads them (stripped); None when the file cannot be
    read here (Ansible then stops on it with its own message: "Unable to find limit file")."""
    try:
        text = Path(name).read_text(errors="replace")
    except (OSError, ValueError):
        return None
    return [line.strip() for line in text.split("\n") if line.strip()]


def host_pattern(text: str) -> str:
    """argparse type of --limit: refused (a usage error, exit 64) when Ansible would read it as no limit at all, so
    that every host runs: an empty or blank pattern (an unset $NODES), one with no term left once split as Ansible
    splits it (',', ':', ' , ', a list built from empty variables), or only @FILEs with no host in them (an empty
    failed-hosts file)."""
    terms = split_host_pattern(text)
    if not terms:
        raise argparse.ArgumentTypeError(
            f"{text!r}: an empty pattern, no host or group in it once split on ',' and ':' (Ansible would take it "
            "for every host); "
            f"allowed: {HOST_PATTERN_ALLOWED}"
        )
    empty_files = []
    for term in terms:
        if not term.startswith("@"):
            return text
        lines = _limit_file_lines(term[1:])
        if lines is None or lines:
            return text
        empty_files.append(term[1:])
    raise argparse.ArgumentTypeError(
        f"{text!r}: the limit file {', '.join(empty_files)} holds no host name (Ansible would take it for every "
        f"host); allowed: {HOST_PATTERN_ALLOWED}, with at least one name"
    )


def inventory_path(text: str) -> Path:
    """argparse type of -i/--inventory: refused (a usage error, exit 64) when empty or blank. Path("") is Path("."),
    so an unset $INVENTORY had the current directory walked as the inventory (its executable files run as
    inventory scripts by Ansible)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: an empty inventory path (it would stand for the current "
                                         "directory); allowed: an inventory file or directory")  # fmt: skip
    return Path(text)
