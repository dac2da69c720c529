"""The files of an inventory as Ansible will read them, checked before any run starts: YAML syntax (file and line),
variables files that are links to nothing (Ansible skips them without a word), ``!!binary`` values
(ansible-inventory cannot list them), host names no host can have, and a role's own variables set there (which the
role's value outranks or overwrites). One check for every command: render runs it
before rendering, and the commands that run against hosts (rdmaforge.runner.command.check_arguments) before Ansible.
"""

from __future__ import annotations

import difflib
import errno
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rdmaforge import paths
from rdmaforge.hostnames import not_a_string
from rdmaforge.inventory_checks import (
    LOCALHOST_NAMES,
    expand_host_range,
    ini_inventory_hosts,
    ini_inventory_settings,
    long_name_problems,
    role_own_variable_problem,
    role_own_variables,
    yaml_inventory_hosts,
)
from rdmaforge.plain_data import TOO_DEEP, TOO_MANY, holds_huge_integer, huge_integer, too_deep, too_many_values
from rdmaforge.runner.vault import construct_unsafe


class DuplicateKey(yaml.constructor.ConstructorError):  # type: ignore[misc]
    """A mapping that names one key twice. Ansible's default keeps the last value (with a warning a long run scrolls
    away): a host listed twice under ``hosts:`` becomes one node, a variable set twice in one file takes its second
    value (review round 29b)."""


#: YAML: ansible.cfg's duplicate_dict_key = error makes Ansible stop on it too. JSON: Ansible keeps the last value.
_YAML_DUPLICATE = ("rdmaforge's ansible.cfg (duplicate_dict_key = error) makes Ansible stop on it, and its default "
                   "keeps the last value; allowed: each key once per mapping")  # fmt: skip
_JSON_DUPLICATE = "Ansible would keep the last value without a word; allowed: each key once per object"


class _LenientLoader(yaml.SafeLoader):  # type: ignore[misc]
    """Safe YAML that accepts Ansible's tags (!vault, !unsafe): the file read as Ansible reads it, a key given twice
    keeping its last value (for the checks of what the file sets: a duplicate is yaml_problems' to name)."""


def _vault(loader: yaml.SafeLoader, node: yaml.Node) -> object:
    """``!vault``: its ciphertext, a string (not decrypted here)."""
    return loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else None


_LenientLoader.add_constructor("!unsafe", construct_unsafe)
for _tag in ("!vault", "!vault-encrypted"):
    _LenientLoader.add_constructor(_tag, _vault)
_LenientLoader.add_multi_constructor("!", lambda loader, suffix, node: None)  # another tag: yaml_problems names it


class _AnyTagLoader(_LenientLoader):
    """_LenientLoader that refuses a key given twice in one mapping, as Ansible 2.19 counts them: after a ``<<``
    merge, so a key that overrides a merged one counts too (review round 31a)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        written = {id(key_node) for key_node, _value in node.value}
        self.flatten_mapping(node)  # what Ansible's check sees: the merged keys first, then the mapping's own
        first: dict[Any, yaml.Node] = {}
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                earlier = first.get(key)
            except TypeError:  # an unhashable key: SafeConstructor names it below
                continue
            if earlier is not None and key == key:  # (NaN is no key twice)
                line = earlier.start_mark.line + 1
                where = (f"first on line {line}" if id(earlier) in written
                         else f"it overrides the value a '<<' merge brought from line {line}")  # fmt: skip
                found = DuplicateKey(None, None, f"the key {key!r} is given twice in one mapping ({where}); "
                                     f"{_YAML_DUPLICATE}", key_node.start_mark)  # fmt: skip
                found.key = key
                raise found
            first.setdefault(key, key_node)
        return super().construct_mapping(node, deep)  # type: ignore[no-any-return]


def _unknown_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> object:
    raise yaml.constructor.ConstructorError(
        None, None, f"the tag !{suffix} is not one Ansible reads, so it stops on this file; allowed: !unsafe, !vault, "
        "or no tag", node.start_mark)  # fmt: skip


_AnyTagLoader.add_multi_constructor("!", _unknown_tag)


def _json_duplicate(key: object, mark: yaml.Mark | None = None) -> DuplicateKey:
    return DuplicateKey(None, None, f"the key {key!r} is given twice in one JSON object; {_JSON_DUPLICATE}", mark)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads' object_pairs_hook: a JSON object that names one key twice is refused as YAML refuses it."""
    mapping: dict[str, Any] = {}
    for key, value in pairs:
        if key in mapping:
            raise _json_duplicate(key)
        mapping[key] = value
    return mapping


def _load(path: Path, strict: bool = True) -> object:
    """A vars or inventory file as Ansible's loader reads it: JSON first, then YAML (a tab-indented JSON file is no
    YAML, and Ansible reads it: review round 28). Raises yaml.YAMLError (with the YAML reading's mark) or OSError;
    ``strict``: DuplicateKey for a key given twice (in a JSON file with the line where YAML can read it), and
    UnicodeDecodeError for a file that is not UTF-8 (Ansible cannot read it either)."""
    raw = path.read_bytes()
    text = raw.decode("utf-8") if strict else raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys if strict else None)
    except DuplicateKey:
        try:
            yaml.load(text, Loader=_AnyTagLoader)  # noqa: S506 - SafeLoader's; only for the duplicate's line
        except DuplicateKey as marked:  # the first duplicate of the file, as YAML reads it in order
            raise _json_duplicate(getattr(marked, "key", "?"), marked.problem_mark) from None
        except yaml.YAMLError:
            pass
        raise
    except ValueError:
        return yaml.load(text, Loader=_AnyTagLoader if strict else _LenientLoader)  # noqa: S506 - SafeLoader's


def yaml_problems(inventory: Path, listing: bool = True) -> list[str]:
    """Syntax errors of the inventory's YAML files and its group_vars/host_vars, each naming file and line, and host
    names too long for Ansible to read the inventory (inventory_checks.long_name_problems). ``listing``: also the
    ``!!binary`` values ansible-inventory --list cannot print (render lists the inventory; a run need not)."""
    own, candidates = _yaml_files(inventory)
    found = []
    for path in candidates:
        try:
            data = _load(path)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            kind = "duplicate key" if isinstance(exc, DuplicateKey) else "YAML syntax error"
            found.append(f"{path}:{where}: {kind}: {problem}" if where else f"{path}: {kind}: {problem}")
        except OSError as exc:
            found.append(_unreadable(path, exc))
        except RecursionError:
            found.append(f"{path}: {TOO_DEEP}")
        except UnicodeDecodeError as exc:  # Ansible's message named no file (review round 34a)
            found.append(_not_utf8(path, exc))
        except ValueError as exc:  # a number too long for Python: Ansible stops on it with a traceback
            found.append(f"{path}: {huge_integer(exc) or exc}")
        else:
            # before anything walks it: a document too deep or too large (YAML aliases) for the checks below, and
            # for Ansible, which stops with "Unexpected Exception" or runs for hours on it
            shape = TOO_DEEP if too_deep(data) else TOO_MANY if too_many_values(data) else holds_huge_integer(data)
            if shape is not None:
                found.append(f"{path}: {shape}")
                continue
            # A list of values where Ansible needs a mapping of variables ("expected dicts but got a dict and a
            # _AnsibleTaggedList"). Only a list that holds something: a whole-file vault (ansible-vault encrypt) reads
            # as one string here, and Ansible ignores an empty value.
            if path not in own and isinstance(data, list) and data:
                found.append(f"{path}: holds a list, not a mapping: a group_vars or host_vars file maps variable names "
                             "to values")  # fmt: skip
                continue
            binary = _binary_keys(data) if listing else []
            found += [f"{path}: {key} is a !!binary value (bytes), which ansible-inventory cannot list; allowed: text, "
                      "numbers, booleans, lists and mappings (base64 text without the tag, decoded where it is used "
                      "with the b64decode filter)" for key in binary]  # fmt: skip
            # Once per name and file (a name on several hosts of hosts.yml is one line here; preflight names each).
            settings = _settings(data, path, path in own)
            found += list(dict.fromkeys(f.line for f in _own_variable_findings(settings, path)))
            hosts = yaml_inventory_hosts(data) if path in own else []
            found += [p.message for host in hosts if isinstance(host, str) for p in long_name_problems(host)]
            # YAML reads 0x7f000001 or 12 as a number: Ansible then warns about "host pattern" noise and the run
            # stops with exit 1, the name as written lost.
            found += [f"{path}: {not_a_string(str(host))}" for host in hosts if not isinstance(host, str)]
    for path in _ini_files(inventory):
        try:
            text = path.read_bytes().decode("utf-8")
        except OSError as exc:
            found.append(_unreadable(path, exc))
            continue
        except UnicodeDecodeError as exc:  # Ansible reads on, each such byte a "?" or a lone surrogate in a value
            found.append(_not_utf8(path, exc))
            continue
        found += [p.message for name in ini_inventory_hosts(text) for p in long_name_problems(name)]
        found += list(dict.fromkeys(f.line for f in _own_variable_findings(_ini_settings(text), path)))
    return found


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> str:
    return (f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}): Ansible reads "
            "inventory and variable files as UTF-8; save it as UTF-8")  # fmt: skip


#: The files other inventory plugins read (YAML, JSON, TOML).
_OTHER_PLUGINS = (".yml", ".yaml", ".json", ".toml")
#: What Ansible leaves out when it reads an inventory directory (INVENTORY_IGNORE_EXTS: INI files named .ini too).
_IGNORED_IN_DIRECTORY = (".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".ini", ".cfg",
                         ".retry")  # fmt: skip


def _yaml_files(inventory: Path) -> tuple[list[Path], list[Path]]:
    """The inventory's own YAML files, and those with its group_vars/host_vars files as Ansible's host_group_vars
    plugin reads them: YAML, JSON (YAML reads it too) or no suffix, and a file named for a host whose name has dots
    (host_vars/node1.example.com)."""
    base = inventory if inventory.is_dir() else inventory.parent
    if inventory.is_file():  # (an INI file is _ini_files')
        own = [inventory] if inventory.suffix in (".yml", ".yaml", ".json") else []
    else:
        own = sorted(inventory.glob("*.y*ml"))
    candidates = list(own)
    dotted: set[str] | None = None
    for sub in ("group_vars", "host_vars"):
        folder = base / sub
        if not folder.is_dir():
            continue
        # A link that leads nowhere is listed too: Ansible would skip it without a word (_unreadable). Not a name
        # Ansible skips anyway (hidden, a backup~): an editor's lock file (.#fabric.yml) is such a link.
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder).parts
            if any(part.startswith(".") or part.endswith("~") for part in relative):
                continue
            if not (path.is_file() or path.is_symlink()):
                continue
            if path.suffix not in VARS_SUFFIXES:
                if len(relative) > 1:
                    continue
                dotted = _listed_hosts(own, inventory) if dotted is None else dotted
                if path.name not in dotted:
                    continue
            candidates.append(path)
    return own, candidates


def _listed_hosts(own: list[Path], inventory: Path) -> set[str]:
    """The host names the inventory's own files list (YAML and INI), ranges expanded."""
    names: set[str] = set()
    for path in own:
        try:
            data = _load(path, strict=False)
        except (yaml.YAMLError, OSError):
            continue
        names.update(name for host in yaml_inventory_hosts(data) for name in expand_host_range(str(host)))
    for path in _ini_files(inventory):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        names.update(name for host in ini_inventory_hosts(text) for name in expand_host_range(host))
    return names


@dataclass(frozen=True)
class Setting:
    """A variable an inventory's file sets, and for whom: a group's (``group``) or a host's (``host``)."""

    name: str
    group: str | None = None
    host: str | None = None


@dataclass(frozen=True)
class OwnVariableFinding:
    """A role's own variable (role_own_variable_problem's ``line``) that ``path`` sets for ``setting``'s group or
    host."""

    path: Path
    line: str
    setting: Setting


def role_own_variable_findings(inventory: Path) -> list[OwnVariableFinding]:
    """Each role's own variable the inventory's files set (role_own_variable_problem): its YAML inventory, its INI
    inventory (``[group:vars]``, a host line's ``name=value``), its group_vars/host_vars files (YAML, JSON, no
    suffix), with the group or host it is set for: what preflight reports per node for a run of ansible-playbook
    itself, where no rdmaforge command read the files first. Files that cannot be read or parsed are yaml_problems'
    to name."""
    own, candidates = _yaml_files(inventory)
    found = []
    for path in candidates:
        try:
            data = _load(path, strict=False)  # as Ansible reads it: a duplicate is yaml_problems' to name
        except (yaml.YAMLError, OSError):
            continue
        found += _own_variable_findings(_settings(data, path, path in own), path)
    for path in _ini_files(inventory):
        try:
            found += _own_variable_findings(_ini_settings(path.read_text(errors="replace")), path)
        except OSError:
            continue
    return found


def _own_variable_findings(settings: list[Setting], path: Path) -> list[OwnVariableFinding]:
    """The role's own variables among what one file sets: what yaml_problems and role_own_variable_findings
    report."""
    own_variables = role_own_variables(str(paths.ROLES_DIR))
    found = []
    for setting in settings:
        line = role_own_variable_problem(str(path), setting.name, own_variables)
        if line:
            found.append(OwnVariableFinding(path, line, setting))
    return found


def _ini_settings(text: str) -> list[Setting]:
    """What an INI inventory sets, for each group or host (inventory_checks.ini_inventory_settings)."""
    return [Setting(name, group, host) for name, group, host in ini_inventory_settings(text)]


def _settings(data: object, path: Path, inventory: bool) -> list[Setting]:
    """What a vars file sets for the group or host its path names (group_vars/<group>.yml, group_vars/<group>/...),
    or a YAML inventory for each group (its vars) and each host (its entry)."""
    if not inventory:
        parts = path.parts
        kind = next((i for i, part in enumerate(parts) if part in ("group_vars", "host_vars")), None)
        owner = None
        if kind is not None and kind + 1 < len(parts):
            top = Path(parts[kind + 1])  # host_vars/node1.example.com is node1.example.com's
            owner = top.name if kind + 2 < len(parts) or top.suffix not in VARS_SUFFIXES else top.stem
        group = owner if kind is not None and parts[kind] == "group_vars" else None
        host = owner if kind is not None and parts[kind] == "host_vars" else None
        names = [name for name in data if isinstance(name, str)] if isinstance(data, dict) else []
        return [Setting(name, group, host) for name in names]
    found: list[Setting] = []
    seen: set[int] = set()

    def walk(name: str, group: object) -> None:
        if not isinstance(group, dict) or id(group) in seen:
            return
        seen.add(id(group))
        values, hosts, children = group.get("vars"), group.get("hosts"), group.get("children")
        found.extend(Setting(v, group=name) for v in (values if isinstance(values, dict) else ()) if isinstance(v, str))
        for host, entry in hosts.items() if isinstance(hosts, dict) else ():
            found.extend(Setting(v, host=str(host)) for v in (entry if isinstance(entry, dict) else ())
                         if isinstance(v, str))  # fmt: skip
        for child, entry in children.items() if isinstance(children, dict) else ():
            walk(str(child), entry)

    if isinstance(data, dict) and "plugin" not in data:
        for name, group in data.items():
            walk(str(name), group)
    return found


def _ini_files(inventory: Path) -> list[Path]:
    """The INI inventory files Ansible reads from ``inventory``: the file itself, or a directory's files, those of
    other plugins and executable ones (the script plugin's) left out."""
    if inventory.is_dir():
        candidates = sorted(p for p in inventory.iterdir() if p.is_file() and not p.name.startswith(".")
                            and not p.name.endswith(_IGNORED_IN_DIRECTORY))  # fmt: skip
    else:
        candidates = [inventory] if inventory.is_file() else []
    return [p for p in candidates if not p.name.endswith(_OTHER_PLUGINS) and not os.access(p, os.X_OK)]


def _unreadable(path: Path, exc: OSError) -> str:
    """Why a variables file cannot be read. Ansible reads only what is a file there: a link to nothing (or a link
    loop) it skips without a word, so the file's variables would silently not apply; rdmaforge refuses it instead."""
    if not path.is_symlink() or path.exists():
        return f"{path}: cannot read: {exc.strerror or exc}"
    target = os.readlink(path)
    why = f"it links to {target}, which does not exist" if exc.errno == errno.ENOENT else f"{exc.strerror or exc}"
    return (f"{path}: cannot read: a symbolic link that leads to no file ({why}); Ansible would skip it without a "
            "word, leaving its variables unset; allowed: a link to a readable file, or no link")


def _binary_keys(data: Any, where: str = "") -> list[str]:
    """The keys (``a.b[2]``) whose value YAML's ``!!binary`` made bytes: ansible-inventory --list stops with a
    traceback on them ("not JSON serializable"), naming neither the file nor the key."""
    if isinstance(data, bytes):
        return [where or "the document"]
    if isinstance(data, dict):
        return [k for key, value in data.items() for k in _binary_keys(value, f"{where}.{key}" if where else str(key))]
    if isinstance(data, list):
        return [k for i, value in enumerate(data) for k in _binary_keys(value, f"{where}[{i}]")]
    return []


#: What Ansible's host_group_vars plugin reads as a group's or host's variables: a file named for it with one of
#: these suffixes, or a directory named for it (its files read in turn).
VARS_SUFFIXES = ("", ".yml", ".yaml", ".json")


def unmatched_vars_files(directories: list[Path], groups: list[str], hosts: list[str]) -> list[str]:
    """Each group_vars/host_vars entry of the inventory directories that names no group or host of the inventory:
    Ansible reads a vars file only for the host or group its name is, so the values of host_vars/172.20.20.145.yml
    (an address, not the host's name), host_vars/node9.yml (a node renamed or removed) or group_vars/gpu.yml (no
    such group) are dropped without a word, and the nodes keep the defaults (review round 23b). Warnings, not
    errors: Ansible's own layout of a production and a staging inventory beside one shared group_vars/ and
    host_vars/ holds the other inventory's files (review round 24). The controller's implicit localhost has a
    host_vars file of its own. Hidden files and editors' backups (~) are Ansible's to skip."""
    found = []
    for directory in dict.fromkeys(directories):
        for sub, names, kind, also in (("group_vars", set(groups) | {"all"}, "group", set()),
                                       ("host_vars", set(hosts), "host", set(LOCALHOST_NAMES))):  # fmt: skip
            folder = directory / sub
            if not folder.is_dir():
                continue
            for entry in sorted(folder.iterdir()):
                if entry.name.startswith(".") or entry.name.endswith("~"):
                    continue
                stem, suffix = (entry.name, "") if entry.is_dir() else (entry.stem, entry.suffix)
                if suffix not in VARS_SUFFIXES or stem in names or stem in also:
                    continue
                close = difflib.get_close_matches(stem, sorted(names), n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]}?)" if close else ""
                found.append(f"{entry} names no {kind} of this inventory{hint}: Ansible reads none of its variables "
                             f"(a {kind}'s file is {sub}/<{kind} name>.yml; fine where another inventory sharing the "
                             "directory has it)")  # fmt: skip
    return found
