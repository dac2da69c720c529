"""Read variable files as Ansible would for the secret scrubber: ``!vault`` values and whole-file vaults.

A YAML file with an inline ``!vault`` value is not plain YAML: read with ``yaml.safe_load`` it gave nothing, so
even its plain secret-named values went unscrubbed. Here ``!vault`` and ``!unsafe`` are understood, and a vaulted
value (inline or a whole file) is decrypted with the run's own ``--vault-id`` / ``--vault-password-file``. Its
plaintext is a :class:`VaultPlaintext`: the scrubber treats it as a secret whatever the variable's name, since the
user encrypted it. Without the password a vaulted value is left out (Ansible then fails the run itself).

As Ansible's loader does, a file is read as JSON first (``{"__ansible_vault": ...}`` is a vaulted value there) and
as YAML when it is not JSON: JSON indented with tabs is not YAML. An inventory file that is not a YAML mapping is
read as an INI inventory (:mod:`rdmaforge.runner.ini_inventory`), as Ansible tries its yaml plugin, then its ini one.
An inventory script, a plugin's configuration or a TOML file is only marked (:class:`InventoryFile`): Ansible itself
lists what it supplies (:func:`rdmaforge.runner.execute.secret_values`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rdmaforge.runner import ini_inventory

#: Decrypts one vault text (``$ANSIBLE_VAULT;...``); None when it cannot.
Decrypt = Callable[[str], "str | None"]
VAULT_HEADER = "$ANSIBLE_VAULT;"


class VaultPlaintext(str):
    """A decrypted vault value: a secret whatever the name of the variable holding it."""


class _Undecrypted:
    """A ``!vault`` value the run has no password for (left out of the secrets: its plaintext is unknown)."""


def construct_unsafe(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """``!unsafe``: the value as written, untagged (a key ``!unsafe a`` is the key ``a`` to Ansible)."""
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


def _loader(decrypt: Decrypt | None) -> type[yaml.SafeLoader]:
    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        pass

    def vaulted(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
        text = loader.construct_scalar(node)
        plain = decrypt(str(text)) if decrypt is not None else None
        return _Undecrypted() if plain is None else VaultPlaintext(plain)

    Loader.add_constructor("!vault", vaulted)
    Loader.add_constructor("!unsafe", construct_unsafe)
    return Loader


def _marked(value: Any) -> Any:
    """Every leaf of a whole-file vault's data marked as vault plaintext."""
    if isinstance(value, dict):
        return {k: _marked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_marked(v) for v in value]
    if isinstance(value, str):
        return VaultPlaintext(value)
    if value is None or isinstance(value, bool):
        return value
    return VaultPlaintext(str(value))


def _json_object(decrypt: Decrypt | None) -> Callable[[dict[str, Any]], Any]:
    """JSON's forms of ``!vault`` and ``!unsafe``, as Ansible's JSON decoder reads them."""

    def hook(value: dict[str, Any]) -> Any:
        if len(value) == 1 and isinstance(value.get("__ansible_vault"), str):
            plain = decrypt(value["__ansible_vault"]) if decrypt is not None else None
            return _Undecrypted() if plain is None else VaultPlaintext(plain)
        if len(value) == 1 and "__ansible_unsafe" in value:
            return value["__ansible_unsafe"]
        return value

    return hook


def load_vars(text: str, decrypt: Decrypt | None = None) -> Any:
    """The data of a variables file (JSON or YAML), vaulted values decrypted where ``decrypt`` can."""
    if text.lstrip().startswith(VAULT_HEADER):
        plain = decrypt(text) if decrypt is not None else None
        return None if plain is None else _marked(load_vars(plain))
    try:
        return load_json(text, decrypt)
    except ValueError:  # not JSON: YAML, as Ansible's loader tries next
        pass
    return yaml.load(text, Loader=_loader(decrypt))  # noqa: S506 - a SafeLoader subclass


def load_json(text: str, decrypt: Decrypt | None = None) -> Any:
    """JSON with Ansible's forms of vaulted and unsafe values (ansible-inventory prints an inline vault so);
    ValueError when ``text`` is not JSON."""
    return json.loads(text, object_hook=_json_object(decrypt))


def load_file(path: Path, decrypt: Decrypt | None = None) -> Any:
    """:func:`load_vars` of a file; None when it cannot be read or is neither JSON nor YAML."""
    try:
        return load_vars(path.read_text(), decrypt)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return None


@dataclass(frozen=True)
class InventoryFile:
    """What the static readers found in one inventory file."""

    variables: list[dict[str, Any]]
    #: Ansible reads the file with a plugin whose hosts and variables only Ansible knows: a file the script plugin
    #: runs (an executable script or program: :func:`runs`), a plugin's configuration (a YAML mapping with
    #: ``plugin:``: aws_ec2, constructed, ...), TOML. ``variables`` then holds only what the file itself says (a
    #: plugin's credentials).
    dynamic: bool = False


def load_inventory(path: Path, decrypt: Decrypt | None = None) -> InventoryFile:
    """The variables an inventory file sets: a YAML (or JSON) inventory's mapping, or, when the file is not one,
    one mapping per line of an INI inventory that sets any. A whole-file vault is decrypted where ``decrypt`` can
    (all its values are then secrets), else nothing is read from it."""
    if path.suffix == ".toml" or runs(path):  # a script's text is code, not variables; TOML not INI
        return InventoryFile([], dynamic=True)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return InventoryFile([])
    vaulted = text.lstrip().startswith(VAULT_HEADER)
    if vaulted:
        plain = decrypt(text) if decrypt is not None else None
        if plain is None:
            return InventoryFile([])
        text = plain
    try:
        data = load_vars(text, decrypt)
    except (yaml.YAMLError, RecursionError):
        data = None
    found = [data] if isinstance(data, dict) else ini_inventory.variables(text)
    return InventoryFile([_marked(d) for d in found] if vaulted else found, isinstance(data, dict) and "plugin" in data)


def runs(path: Path) -> bool:
    """Whether Ansible's script plugin runs the inventory file: the plugin takes every executable file and execs
    it, which starts a script with a #! line or a program (not text). An executable text file without a #! line
    fails to start (ENOEXEC: no shell steps in), and Ansible reads it with its next plugin (yaml, ini): a static
    inventory whose x bit is set."""
    if not os.access(path, os.X_OK):
        return False
    try:
        content = path.read_bytes()
    except OSError:
        return False
    try:
        return content.startswith(b"#!") or "\0" in content.decode()
    except UnicodeDecodeError:
        return True


def split_vault_id(identity: str) -> tuple[str, str]:
    """--vault-id's (label, source), split at the first '@' as Ansible does ("default" without a label)."""
    label, at, source = identity.partition("@")
    return (label or "default", source) if at else ("default", identity)


def decryptor(vault_ids: Sequence[str], password_files: Sequence[Path | str]) -> Decrypt | None:
    """Decrypts with the run's vault identities ([LABEL@]FILE or script) and password files; None without any."""
    if not vault_ids and not password_files:
        return None
    from ansible.parsing.dataloader import DataLoader  # ansible is imported only by runs that use vault
    from ansible.parsing.vault import VaultLib, get_file_vault_secret

    loader = DataLoader()
    identities: list[tuple[str, Any]] = []
    sources = [split_vault_id(i) for i in vault_ids]
    sources += [("default", str(p)) for p in password_files]
    for label, source in sources:
        try:
            secret = get_file_vault_secret(filename=str(Path(source).expanduser()), vault_id=label, loader=loader)
            secret.load()
        except Exception:  # noqa: BLE001 - Ansible itself reports a bad vault source; the scrubber goes on
            continue
        identities.append((label, secret))
    if not identities:
        return None
    lib = VaultLib(identities)

    def decrypt(text: str) -> str | None:
        try:
            plain: bytes = lib.decrypt(text.strip())
            return plain.decode("utf-8", errors="replace")
        except Exception:  # noqa: BLE001 - wrong password or not a vault: this value stays unknown
            return None

    return decrypt
