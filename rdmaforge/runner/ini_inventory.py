"""The variables of an INI inventory (``hosts.ini``, ``hosts``), read by the rules of Ansible's ``ini`` inventory
plugin (ansible-core 2.19, plugins/inventory/ini.py), for the secret scrubber.

- A line whose first character (after blanks) is ``#`` or ``;`` is a comment; ``[name]``, ``[name:vars]`` and
  ``[name:children]`` start a section (the first lines are in ``[ungrouped]``).
- A host line (``[name]``) is split as a shell splits words, ``#`` starting a comment: the host pattern, then
  ``key=value`` words, each split at its first ``=``. Quotes group and are removed: ``pw="a b"`` is ``a b``.
- A ``[name:vars]`` line is split at its first ``=`` and both sides stripped: no shell splitting and no comment,
  the rest of the line is the value (``pw = a b # x`` is ``a b # x``).
- Each value is then read as a Python literal when it is one (``'a b'`` -> ``a b``, ``"x"`` -> ``x``,
  ``123`` -> 123, ``{'password': 'x'}`` a mapping); otherwise it stays the string written.

Lines Ansible would refuse (a host word without ``=``, unbalanced quotes) are read as far as they can be: the run
fails in Ansible then, but what the file holds is still kept out of the artifacts.
"""

from __future__ import annotations

import ast
import re
import shlex
import warnings
from typing import Any

from rdmaforge.plain_data import too_deep

#: ``[group]``, ``[group:vars]``, ``[group:children]``, optionally followed by a comment (the plugin's pattern).
SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
COMMENT_MARKERS = ("#", ";")


def variables(text: str) -> list[dict[str, Any]]:
    """The variables the inventory sets, one mapping per host line and per ``[group:vars]`` line, in file order
    (a later line may set a name again: every value is kept)."""
    found: list[dict[str, Any]] = []
    state = "hosts"
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in COMMENT_MARKERS:
            continue
        section = SECTION.match(line)
        if section:
            state = section.group(2) or "hosts"
            continue
        if state == "hosts":
            pairs = _host_variables(line)
        elif state == "vars" and "=" in line:
            name, value = (part.strip() for part in line.split("=", 1))
            pairs = {name: parse_value(value)}
        else:  # [x:children] names groups; an unknown section type is refused by Ansible
            continue
        if pairs:
            found.append(pairs)
    return found


def _host_variables(line: str) -> dict[str, Any]:
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # unbalanced quotes: Ansible refuses the file, the words are still kept out
        words = line.split()
    return {name: parse_value(value) for name, _, value in (w.partition("=") for w in words[1:] if "=" in w)}


def parse_value(text: str) -> Any:
    """A value as the ini plugin reads it: a Python literal when it is one (tuples and sets as lists, bytes as
    text, ``...`` and complex numbers as strings), else the text itself."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text
    return text if too_deep(value) else _coerced(value)


def _coerced(value: Any) -> Any:
    if isinstance(value, list | tuple | set | frozenset):
        return [_coerced(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _coerced(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if value is ... or isinstance(value, complex):
        return "..." if value is ... else str(value)
    return value
