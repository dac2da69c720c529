"""The roles' documented values, read from ``roles/<role>/defaults/main.yml`` (or ``vars/main.yml``): the one
reader the Python side uses, so that no module keeps a copy of a value a role's file sets.

The files are read as written: a default that is a Jinja template stays the template's text, unless it is read
through evaluated_default, which renders it for one host's variables as the role would (the role's own
variables it names evaluated first, as Ansible does). Parsed once per
process (fast_yaml: libyaml's safe loader, the same values as ``yaml.safe_load``); every caller gets its own
copy, so no caller can change what another reads. No Ansible imports (the filter plugins load it, through
rdmaforge.inventory_checks, in the controller); only a default that uses a collection filter loads the filter
files, and Ansible with them.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta

from rdmaforge import fast_yaml, paths
from rdmaforge.collection import FQCN


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


def evaluated_value_of(values: Mapping[str, Any], variable: str, role: str | None = None) -> Any:
    """value_of, with the default evaluated for ``values`` (evaluated_default)."""
    return values[variable] if variable in values else evaluated_default(variable, values, role)


def evaluated_default(variable: str, values: Mapping[str, Any], role: str | None = None) -> Any:
    """The documented default of ``variable`` as the role computes it for a host whose variables are ``values``, so
    Python follows the role's default instead of restating it: a Jinja template is rendered with Jinja's filters
    and the collection's (filter_plugins/), a whole-template expression keeping its type; other values as they
    are. The role is the one the name starts with (default_of), or ``role`` for a name without its prefix
    (rdma_require_active_ports: rdma_core). A variable of that role the template names is evaluated first, as
    Ansible does when the template uses it: its vars/main.yml above ``values``, ``values`` above its other
    defaults. ValueError names the variable when the template needs a variable no one sets or a filter only
    Ansible has; KeyError when the role's defaults do not set it."""
    roles_dir = str(paths.ROLES_DIR)
    owner = role or _owner_of(roles_dir, variable)
    own = _role_variables(roles_dir, owner, "defaults")
    if variable not in own:
        raise KeyError(f"{variable}: roles/{owner}/defaults/main.yml does not set it")
    return _evaluated(variable, own[variable], values, owner, "default", frozenset())


def _evaluated(name: str, value: Any, values: Mapping[str, Any], role: str, what: str, pending: frozenset[str]) -> Any:
    if not (isinstance(value, str) and "{{" in value):
        return copy.deepcopy(value)
    try:
        return _render(value, _with_role_variables(value, values, role, pending | {name}))
    except jinja2.TemplateError as exc:
        raise ValueError(f"{name}: its role {what} {value!r} cannot be evaluated here: {exc}") from exc


def _with_role_variables(
    template: str, values: Mapping[str, Any], role: str, pending: frozenset[str]
) -> dict[str, Any]:
    """``values`` with the role's variables ``template`` names, evaluated (one being evaluated is left out: a cycle
    stays undefined, an error)."""
    roles_dir = str(paths.ROLES_DIR)
    found = dict(values)
    for name in sorted(_names(template) - pending):
        role_vars, role_defaults = (_role_variables(roles_dir, role, kind) for kind in ("vars", "defaults"))
        if name in role_vars:
            found[name] = _evaluated(name, role_vars[name], values, role, "variable", pending)
        elif name not in values and name in role_defaults:
            found[name] = _evaluated(name, role_defaults[name], values, role, "default", pending)
    return found


@functools.lru_cache(maxsize=64)
def _names(template: str) -> frozenset[str]:
    """The variables ``template`` reads (its own, such as a loop's, left out)."""
    environment = _environment(f"{FQCN}." in template)  # the analysis checks that each filter it names exists
    return frozenset(jinja2.meta.find_undeclared_variables(environment.parse(template)))


# One expression and nothing around it: Ansible keeps its value's type ("{{ [] }}" is a list, not "[]").
_WHOLE_EXPRESSION = re.compile(r"^\{\{(?P<expression>(?:(?!\{\{|\}\}).)*)\}\}$", re.DOTALL)


def _render(template: str, values: Mapping[str, Any]) -> Any:
    return _compiled(template)(dict(values))


@functools.lru_cache(maxsize=64)
def _compiled(template: str) -> Callable[[dict[str, Any]], Any]:
    """The template compiled once per process (a render of a large cluster evaluates it for every host)."""
    # The collection's filters are loaded (every filter file, Ansible with them) only for a default that uses one.
    environment = _environment(f"{FQCN}." in template)
    whole = _WHOLE_EXPRESSION.match(template.strip())
    if whole is not None:
        return environment.compile_expression(whole.group("expression"), undefined_to_none=False)
    return environment.from_string(template).render


@functools.lru_cache(maxsize=2)
def _environment(with_collection_filters: bool) -> jinja2.Environment:
    # StrictUndefined: a variable the default needs and the host lacks is an error, never an empty value.
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    if with_collection_filters:
        environment.filters.update({f"{FQCN}.{name}": function for name, function in collection_filters().items()})
    return environment


def collection_filters() -> dict[str, Callable[..., Any]]:
    """The collection's filters by their short names, from every filter plugin file (paths.FILTERS_DIR), as
    Ansible loads them; ValueError for a name two files define."""
    found: dict[str, Callable[..., Any]] = {}
    for path in sorted(paths.FILTERS_DIR.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"_rdmaforge_filters_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ValueError(f"{path}: not a loadable filter plugin")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        filters: dict[str, Callable[..., Any]] = module.FilterModule().filters()
        clash = sorted(set(found) & set(filters))
        if clash:
            raise ValueError(f"{path.name} defines filters another file defines too: {', '.join(clash)}")
        found.update(filters)
    return found


@functools.lru_cache(maxsize=256)
def _default_of(roles_dir: str, variable: str) -> Any:
    return _parsed(roles_dir, _owner_of(roles_dir, variable), "defaults")[variable]


@functools.lru_cache(maxsize=256)
def _owner_of(roles_dir: str, variable: str) -> str:
    """The longest role name ``variable`` starts with whose defaults set it."""
    parts = variable.split("_")
    for length in range(len(parts) - 1, 0, -1):
        role = "_".join(parts[:length])
        if variable in _role_variables(roles_dir, role, "defaults"):
            return role
    raise KeyError(f"{variable}: no role whose name it starts with sets it in defaults/main.yml")


def _role_variables(roles_dir: str, role: str, kind: str) -> dict[str, Any]:
    """``roles/<role>/<kind>/main.yml`` as parsed (shared: callers copy what they hand out); {} without one."""
    return _parsed(roles_dir, role, kind) if (Path(roles_dir) / role / kind / "main.yml").is_file() else {}


@functools.lru_cache(maxsize=256)
def _parsed(roles_dir: str, role: str, kind: str) -> dict[str, Any]:
    data = fast_yaml.load((Path(roles_dir) / role / kind / "main.yml").read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{roles_dir}/{role}/{kind}/main.yml is not a mapping of variables")
    return data
