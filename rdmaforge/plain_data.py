"""Ansible's values as plain Python data, for the code behind the filters, and the nesting depth an input read
from a user may have."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from ansible.module_utils.common.validation import check_type_bool, check_type_int

#: Levels of lists and mappings a document read from a user (-e, a stored JSON file) may nest. rdmaforge's own
#: files nest a handful; the code that walks a document (json.dumps, the secret scrubber, the schema check)
#: recurses once or twice a level, and Python stops at 1000 frames: a deeper input is refused where it is read.
MAX_DEPTH = 100
#: What a refusal says, after the input's name.
TOO_DEEP = f"nested too deeply (more than {MAX_DEPTH} levels of lists and mappings)"


#: Values (scalars, lists and mappings, each counted once per place it appears) a document read from a user may
#: expand to. YAML's aliases make a small file a huge document ("billion laughs": nine levels of nine aliases are
#: 387 million values in 1 KB): PyYAML builds it cheaply, shared, but every walk that copies or visits each place
#: (Ansible's templating and variable merging, rdmaforge's own checks) then runs for hours (review round 29b).
MAX_VALUES = 1_000_000
#: What a refusal says, after the input's name.
TOO_MANY = f"expands to more than {MAX_VALUES:,} values (YAML aliases included: *name repeating an &name)"


def _huge_integer_text() -> str:
    return f"an integer of more than {sys.get_int_max_str_digits()} digits, which Python (and Ansible) cannot read"


def huge_integer(exc: ValueError) -> str | None:
    """What a YAML or JSON reader's ValueError means when it is Python refusing a number too long to convert (its
    own wording names an interpreter setting, no help to a user); None for any other ValueError."""
    return _huge_integer_text() if "integer string conversion" in str(exc) else None


def holds_huge_integer(value: Any) -> str | None:
    """The same refusal for an integer already read: YAML reads its hexadecimal, octal, binary and sexagesimal forms
    (0x...) without Python's digit limit, and the value then failed Ansible on its first use with the interpreter's
    wording (review round 30). None when every integer of ``value`` has at most that many decimal digits. Each shared
    container is walked once."""
    most_bits = int(sys.get_int_max_str_digits() * math.log2(10))
    seen: set[int] = set()
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, int) and not isinstance(item, bool):
            if item.bit_length() > most_bits:
                return _huge_integer_text()
            continue
        children = _children(item)
        if children is None or id(item) in seen:
            continue
        seen.add(id(item))
        pending.extend(item.keys() if isinstance(item, Mapping) else ())
        pending.extend(children)
    return None


def _children(item: Any) -> Any:
    if isinstance(item, Mapping):
        return item.values()
    if isinstance(item, list | tuple):
        return item
    return None


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists/tuples and mappings more than ``limit`` levels (walked without recursion). A
    container shared through YAML aliases is walked again only when reached deeper than before: at most ``limit``
    times, never once per place it appears."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    deepest: dict[int, int] = {}
    while pending:
        item, depth = pending.pop()
        children = _children(item)
        if children is None or deepest.get(id(item), 0) >= depth:
            continue
        if depth > limit:
            return True
        deepest[id(item)] = depth
        pending.extend((child, depth + 1) for child in children)
    return False


def too_many_values(value: Any, limit: int = MAX_VALUES) -> bool:
    """Whether ``value`` expanded (every alias in place of what it names) holds more than ``limit`` values. Each
    container's expanded size is worked out once (by identity), so a billion-laughs document costs its own size."""
    sizes: dict[int, int] = {}
    started: set[int] = set()
    pending: list[tuple[Any, bool]] = [(value, False)]
    while pending:
        item, ready = pending.pop()
        children = _children(item)
        if children is None or id(item) in sizes:
            continue
        if ready:
            sizes[id(item)] = 1 + sum(sizes.get(id(child), 1) for child in children)
            if sizes[id(item)] > limit:
                return True
        elif id(item) in started:
            return True  # a container inside itself (&a [*a]): endless once expanded
        else:
            started.add(id(item))
            pending.append((item, True))
            pending.extend((child, False) for child in children if _children(child) is not None)
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
