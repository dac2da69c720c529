"""`-e` the way ansible-playbook reads it: `k=v` pairs, `@file` (YAML or JSON) and inline `{json}`.

Inline values are handed to Ansible through a 0600 file outside the artifacts (`-e @file`), never on its
command line: ansible-runner records the command line in the run's artifacts, and `ps` shows it to every user.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rdmaforge.errors import UserError
from rdmaforge.plain_data import TOO_DEEP, TOO_MANY, holds_huge_integer, huge_integer, too_deep, too_many_values
from rdmaforge.runner.vault import VAULT_HEADER, Decrypt, load_vars

VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ExtraVarsError(UserError):
    """An `-e` argument rdmaforge cannot read; the message names the argument (exit 64, a bad command line)."""


@dataclass(frozen=True)
class ExtraVars:
    """One `-e` argument: either a file Ansible reads itself, or variables given inline."""

    file: Path | None = None
    inline: dict[str, Any] = field(default_factory=dict)

    def variables(self, decrypt: Decrypt | None = None) -> dict[str, Any]:
        """The variables, read from the file when there is one (an unreadable file gives none). Vaulted values,
        inline or the whole file, are decrypted with ``decrypt`` when it can (else left out)."""
        if self.file is None:
            return self.inline
        try:
            data = load_vars(self.file.read_text(), decrypt)
        except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError, ValueError):
            return {}
        return data if isinstance(data, dict) and not too_deep(data) and not too_many_values(data) else {}


def parse_one(argument: str) -> ExtraVars:
    text = argument.strip()
    if text.startswith("@"):
        path = Path(text[1:]).expanduser()
        if not path.is_file():
            raise ExtraVarsError(f"-e {_shown(argument)}: no such file {path}")
        _check_file(argument, path)
        return ExtraVars(file=path.resolve())
    if text.startswith(("{", "[")):
        return ExtraVars(inline=_parse_mapping(argument, text))
    return ExtraVars(inline=_parse_pairs(argument, text))


FILE_ALLOWED = "a YAML or JSON mapping of variable names to values"


def _check_file(argument: str, path: Path) -> None:
    """Refuse an `-e @FILE` Ansible would not take: a YAML error, or data that is not a mapping (a list, a scalar, an
    empty file). Ansible reported either as a failure to parse the inventory (exit 1, the -e file named only in a
    warning); the same text inline was already a usage error. A whole-file vault is left to Ansible, which has the
    run's passwords (a value that is a ``!vault`` is not decrypted here: it needs none to be a mapping's value)."""
    shown = _shown(argument)
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise ExtraVarsError(f"-e {shown}: {path} is not text (UTF-8); allowed: {FILE_ALLOWED}") from None
    except OSError as exc:
        raise ExtraVarsError(f"-e {shown}: cannot read {path}: {exc.strerror or exc}") from None
    if text.lstrip().startswith(VAULT_HEADER):
        return
    try:
        data = load_vars(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or exc.__class__.__name__
        raise ExtraVarsError(
            f"-e {shown}: {where}: not valid JSON or YAML ({problem}); allowed: {FILE_ALLOWED}"
        ) from None
    except RecursionError:
        raise ExtraVarsError(f"-e {shown}: {path}: {TOO_DEEP}") from None
    except ValueError as exc:
        raise ExtraVarsError(f"-e {shown}: {path}: {huge_integer(exc) or exc}; allowed: {FILE_ALLOWED}") from None
    if not isinstance(data, dict):
        held = "nothing" if data is None else f"a {_kind(data)}"
        raise ExtraVarsError(f"-e {shown}: {path} holds {held}; allowed: {FILE_ALLOWED}")
    if too_deep(data):
        raise ExtraVarsError(f"-e {shown}: {path}: {TOO_DEEP}")
    if too_many_values(data):
        raise ExtraVarsError(f"-e {shown}: {path}: {TOO_MANY}")
    huge = holds_huge_integer(data)
    if huge:
        raise ExtraVarsError(f"-e {shown}: {path}: {huge}; allowed: {FILE_ALLOWED}")


def _kind(data: Any) -> str:
    """What YAML data is, as a message names it."""
    if isinstance(data, list):
        return "list"
    if isinstance(data, bool):
        return "boolean"
    if isinstance(data, (int, float)):
        return "number"
    if isinstance(data, str):
        return "string"
    return type(data).__name__


def parse(arguments: Iterable[str]) -> list[ExtraVars]:
    """Every `-e`, in order: Ansible lets a later one override an earlier one, and so does rdmaforge."""
    return [parse_one(argument) for argument in arguments]


def _parse_mapping(argument: str, text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)  # JSON first, then YAML, as Ansible's loader reads it (JSON with tabs is not YAML)
    except ValueError:
        data = _parse_yaml(argument, text)
    except RecursionError as exc:
        raise ExtraVarsError(f"-e {_shown(argument)}: {TOO_DEEP}") from exc
    if too_deep(data):
        raise ExtraVarsError(f"-e {_shown(argument)}: {TOO_DEEP}")
    if too_many_values(data):
        raise ExtraVarsError(f"-e {_shown(argument)}: {TOO_MANY}")
    huge = holds_huge_integer(data)
    if huge:
        raise ExtraVarsError(f"-e {_shown(argument)}: {huge}")
    if not isinstance(data, dict):
        raise ExtraVarsError(f"-e {_shown(argument)}: must be a mapping of variable names to values")
    for name in data:
        _check_name(argument, str(name))
    return {str(k): v for k, v in data.items()}


def _parse_yaml(argument: str, text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ExtraVarsError(f"-e {_shown(argument)}: not valid JSON or YAML ({exc.__class__.__name__})") from exc
    except RecursionError as exc:
        raise ExtraVarsError(f"-e {_shown(argument)}: {TOO_DEEP}") from exc
    except ValueError as exc:
        raise ExtraVarsError(f"-e {_shown(argument)}: {huge_integer(exc) or exc}") from exc


def _shown(argument: str, limit: int = 80) -> str:
    """The argument as a message names it: its start, when it is long (a message stays one readable line)."""
    return argument if len(argument) <= limit else argument[: limit - 3] + "..."


def _parse_pairs(argument: str, text: str) -> dict[str, Any]:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ExtraVarsError(f"-e {_shown(argument)}: {exc}") from exc
    if not words:
        raise ExtraVarsError("-e needs KEY=VALUE, @FILE or a JSON mapping")
    pairs: dict[str, Any] = {}
    for word in words:
        name, sep, value = word.partition("=")
        if not sep:
            raise ExtraVarsError(f"-e {_shown(argument)}: {word!r} is not KEY=VALUE (nor @FILE or a JSON mapping)")
        _check_name(argument, name)
        pairs[name] = value  # Ansible keeps k=v values as strings too
    return pairs


def _check_name(argument: str, name: str) -> None:
    if not VAR_NAME.match(name):
        raise ExtraVarsError(f"-e {_shown(argument)}: {name!r} is not a valid variable name")


def merged(sources: Sequence[ExtraVars], decrypt: Decrypt | None = None) -> dict[str, Any]:
    """All variables, later sources winning (what the playbook will see, for the run's own use)."""
    result: dict[str, Any] = {}
    for source in sources:
        result.update(source.variables(decrypt))
    return result


def to_cmdline(sources: Sequence[ExtraVars], private_dir: Path) -> list[str]:
    """`-e @FILE` arguments in the given order; inline variables are written to 0600 files in ``private_dir``."""
    args: list[str] = []
    for index, source in enumerate(sources):
        if source.file is not None:
            args += ["-e", f"@{source.file}"]
            continue
        path = private_dir / f"extravars-{index}.json"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            json.dump(source.inline, out)
        args += ["-e", f"@{path}"]
    return args
