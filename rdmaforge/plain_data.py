"""Ansible's values as plain Python data, for the code behind the filters, and the nesting depth an input read
from a user may have."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ansible.module_utils.common.validation import check_type_bool, check_type_int

#: Levels of lists and mappings a document read from a user (-e, a stored JSON file) may nest. rdmaforge's own
#: files nest a handful; the code that walks a document (json.dumps, the secret scrubber, the schema check)
#: recurses once or twice a level, and Python stops at 1000 frames: a deeper input is refused where it is read.
MAX_DEPTH = 100
#: What a refusal says, after the input's name.
TOO_DEEP = f"nested too deeply (more than {MAX_DEPTH} levels of lists and mappings)"


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists/tuples and mappings more than ``limit`` levels (walked without recursion)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def plain(value: Any) -> Any:
    """Ansible's values (tagged strings, lazy containers, HostVars) as plain Python data. A lazy container carries
    its host's whole template context: code that copies one (a deep copy, as Ansible's argument validator makes)
    copies that context too."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


#: The strings (any case) Ansible's ``bool`` filter reads as true (ansible-core 2.19, plugins/filter/core.py).
_ANSIBLE_TRUE = frozenset(("yes", "on", "true", "1"))


def ansible_bool(value: Any) -> bool:
    """What ``value | bool`` gives in a role: true for True, 1, and yes/on/true/1 in any case; false for anything
    else (Ansible warns there and answers ``value == 1``). The code that predicts a role's choice reads a variable
    the way the role does."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.lower() in _ANSIBLE_TRUE
    try:
        return bool(value == 1)
    except TypeError:
        return False


def whole_number(value: object) -> int | None:
    """An integer as a role argument spec's ``type: int`` takes it (Ansible's check_type_int): an int, or a float or
    a string that is a whole number (8.0, "40.0", "-5", as YAML, -e or a template give them); None for anything
    else (a bool, 8.5, a word, inf). One reading for every check and consumer of a count, so a value the argument
    spec accepts is never skipped by a range check nor taken as unknown by the role that uses it."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return int(check_type_int(value))
    except (TypeError, ValueError, OverflowError):
        return None


def spec_bool(value: object) -> bool | None:
    """A boolean as a role argument spec's ``type: bool`` takes it (Ansible's check_type_bool): True/False, and
    'yes', 'off', 'false', 1, 0 and the like, as an INI inventory's ``[group:vars]`` gives them (text); None for
    anything else ('maybe', 2, a list). So a value the argument spec accepts is read, not refused."""
    if isinstance(value, bool):
        return value
    if not isinstance(value, int | float | str):
        return None
    try:
        return bool(check_type_bool(value))
    except (TypeError, ValueError):
        return None


def show(value: object) -> str:
    """A value as a person would write it in YAML: strings quoted, booleans lower-case."""
    if isinstance(value, str):
        return repr(str(value))
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."
