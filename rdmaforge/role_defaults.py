"""The roles' documented values, read from ``roles/<role>/defaults/main.yml`` (or ``vars/main.yml``): the one
reader the Python side uses, so that no module keeps a copy of a value a role's file sets.

The files are read as written: a default that is a Jinja template stays the template's text. Parsed once per
process (fast_yaml: libyaml's safe loader, the same values as ``yaml.safe_load``); every caller gets its own
copy, so no caller can change what another reads. No Ansible imports: the filter plugins load it, through
rdmaforge.inventory_checks, in the controller.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rdmaforge import fast_yaml, paths


def defaults(role: str, kind: str = "defaults", roles_dir: str | Path | None = None) -> dict[str, Any]:
    """``roles/<role>/<kind>/main.yml`` as a mapping ({} for an empty file), from rdmaforge.paths.ROLES_DIR (a
    checkout's roles, or the installed collection's) unless ``roles_dir`` names another roles directory."""
    return copy.deepcopy(_parsed(str(roles_dir or paths.ROLES_DIR), role, kind))


def default_of(variable: str) -> Any:
    """The documented default of a role's variable, from the role its name starts with: a role prefixes its
    variables with its name (ansible-lint's var-naming[no-role-prefix]), the longest such role owns it. Raises
    KeyError when no role's defaults set it (a variable renamed in the YAML, not in the Python naming it)."""
    return copy.deepcopy(_default_of(str(paths.ROLES_DIR), variable))


def value_of(values: Mapping[str, Any], variable: str) -> Any:
    """``values[variable]`` where the mapping sets it (null included), else the variable's documented default
    (default_of): for mappings that hold none of the roles' defaults, such as an inventory's host variables."""
    return values[variable] if variable in values else default_of(variable)


@functools.lru_cache(maxsize=256)
def _default_of(roles_dir: str, variable: str) -> Any:
    parts = variable.split("_")
    for length in range(len(parts) - 1, 0, -1):
        role = "_".join(parts[:length])
        if (Path(roles_dir) / role / "defaults" / "main.yml").is_file():
            values = _parsed(roles_dir, role, "defaults")
            if variable in values:
                return values[variable]
    raise KeyError(f"{variable}: no role whose name it starts with sets it in defaults/main.yml")


@functools.lru_cache(maxsize=256)
def _parsed(roles_dir: str, role: str, kind: str) -> dict[str, Any]:
    data = fast_yaml.load((Path(roles_dir) / role / kind / "main.yml").read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{roles_dir}/{role}/{kind}/main.yml is not a mapping of variables")
    return data
