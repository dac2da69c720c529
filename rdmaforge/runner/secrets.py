"""Keep secrets out of a run's artifacts.

Three leaks are closed: ansible-runner writes `env/extravars`, `env/passwords` and `env/ssh_key` into its
private data directory (prevented with ``suppress_env_files`` and checked by :func:`env_files`); it records
the whole environment of the run in `command` (a CI job's tokens included, rewritten by :func:`scrub_command`);
and a task may print a secret variable (replaced everywhere by :func:`scrub_tree`). Secrets are the values of
secret-named variables and every vault-encrypted value (:mod:`rdmaforge.runner.vault`), from every -e (inline or a
JSON/YAML file), the inventory (YAML, or INI: :mod:`rdmaforge.runner.ini_inventory`; a dynamic one as
``ansible-inventory --list`` lists it) and the group_vars/host_vars beside it and the playbook
(:func:`rdmaforge.runner.execute.secret_values`), and of the secret-named variables of the environment the run
inherits (:func:`environment_secrets`); and, whatever variable they came from, private keys (PEM blocks) and the
password of a URL (``https://user:PASSWORD@host``, as pip index, git and mirror URLs carry tokens), found by their
form. Each line of a multi-line secret is one too (:func:`pieces`).
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AnyStr, Generic

from rdmaforge.runner.vault import VaultPlaintext

#: Variable and environment names whose values are secrets: ansible_password, ansible_become_pass,
#: vault_password_file's content, *_token, *_secret, api keys, private keys, credentials, and a name ending in
#: _key (ENCRYPTION_KEY, ssh_key).
SECRET_NAME = re.compile(
    r"(?:^|_)pass(?:$|_)|passw(?:or)?d|passphrase|secret|token|credential|api_?key|private_?key|auth_?key"
    r"|(?:^|_)key$",
    re.IGNORECASE,
)
REDACTED = "********"
#: Shorter values are not replaced: a 1-3 character "secret" would mangle every number in the events.
MIN_SECRET_LENGTH = 4
#: A line of a multi-line secret shorter than this is hidden only inside the whole secret: a vaulted file's `true`,
#: `---` or `}` on its own line is common text, and hiding it everywhere would mangle every file of the run.
MIN_LINE_PIECE_LENGTH = 8
#: Files larger than this are raw logs or archives, not text Ansible wrote; they are left alone.
MAX_SCRUB_BYTES = 64 * 1024 * 1024
#: A PEM private key's first and last lines (OpenSSH, PKCS#8, RSA, EC, ...); between them, raw or JSON-escaped
#: (``\n``) as events hold them, is what is redacted.
KEY_BEGIN = re.compile(rb"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
KEY_END = re.compile(rb"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")
#: The password of a URL's user information: scheme://user:PASSWORD@host. The scheme starts where a run of scheme
#: characters starts and is 32 at most: without both, every position of a long run of letters (a task's output)
#: would rescan the rest of it, quadratic in the run's length.
URL_PASSWORD = re.compile(
    rb"(?<![a-z0-9+.-])([a-z][a-z0-9+.-]{0,31}://[^/\s:@\"'\\]+:)[^/\s@\"'\\]+@", re.IGNORECASE
)


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def secret_values(variables: Mapping[str, Any]) -> set[str]:
    """Values of secret-named variables, nested ones included (``{"db": {"password": ...}}``)."""
    found: set[str] = set()
    for name, value in variables.items():
        if is_secret_name(str(name)):
            found |= _leaves(value)
        elif isinstance(value, Mapping):
            found |= secret_values(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Mapping):
                    found |= secret_values(item)
        found |= _vaulted(value)
    return {value for value in found if len(value) >= MIN_SECRET_LENGTH}


#: A number or a boolean word is a setting, not a secret, in the environment: a process's environment is not chosen
#: for the run, and its secret-named settings (MAX_TOKENS=4096, TOKENIZERS_PARALLELISM=false) hidden everywhere
#: would mangle every such number and every JSON true/false in the artifacts.
SETTING = re.compile(r"[+-]?[0-9][0-9_.]*|true|false|yes|no|on|off|null|none", re.IGNORECASE)


def environment_secrets(env: Mapping[str, str]) -> set[str]:
    """The values of an environment's secret-named variables (a CI job's GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY): the
    run inherits them, and a task (``lookup('env', ...)``, a gathered ``ansible_env``) or a test may print them."""
    return {
        value
        for name, value in env.items()
        if is_secret_name(name) and len(value.strip()) >= MIN_SECRET_LENGTH and not SETTING.fullmatch(value.strip())
    }


def _vaulted(value: Any) -> set[str]:
    """Decrypted vault values anywhere in ``value``: the user encrypted them, whatever their name."""
    if isinstance(value, VaultPlaintext):
        return {str(value)}
    if isinstance(value, Mapping):
        return set().union(*(_vaulted(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_vaulted(v) for v in value)) if value else set()
    return set()


def _leaves(value: Any) -> set[str]:
    if isinstance(value, Mapping):
        return set().union(*(_leaves(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_leaves(v) for v in value)) if value else set()
    if value is None or isinstance(value, bool):
        return set()
    return {str(value)}


def scrub_env(env: Mapping[str, str], secrets: Iterable[str] = ()) -> dict[str, str]:
    """The environment with secret-named variables, and any value holding a known secret, redacted."""
    known = [s for s in secrets if s]
    return {
        key: REDACTED if is_secret_name(key) or any(s in value for s in known) else _by_form(value.encode()).decode()
        for key, value in env.items()
    }


def scrub_command(path: Path, secrets: Iterable[str] = ()) -> None:
    """Rewrite ansible-runner's `command` artifact: it records the run's whole environment."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if isinstance(data.get("env"), dict):
        data["env"] = scrub_env(data["env"], secrets)
    path.write_text(json.dumps(data))


def pieces(secret: str) -> set[str]:
    """What of a secret is hidden: all of it, and each of its lines, without the whitespace around it, that is long
    enough (MIN_LINE_PIECE_LENGTH) to be secret on its own. Output read or shown line by line (verify's pytest
    output), a diff's ``+`` lines and a YAML block's indented ones hold a multi-line secret (a PEM key, a vaulted
    file) only line by line."""
    lines = (line.strip() for line in secret.splitlines())
    return {secret, *(line for line in lines if len(line) >= MIN_LINE_PIECE_LENGTH)}


def forms(secret: str) -> set[str]:
    """How a secret appears in a file: as it is, JSON-escaped (events, recap.json) and XML-escaped, in text and in
    an attribute (JUnit XML: testinfra's failure messages)."""
    in_xml = html.escape(secret, quote=False)  # & < >, as ElementTree writes them
    return {secret, json.dumps(secret)[1:-1], in_xml, in_xml.replace('"', "&quot;")}


def redact(data: bytes, secrets: Iterable[str] | Redactor) -> bytes:
    """``data`` with every secret (its :func:`pieces` in each of their :func:`forms`), private key and URL password
    replaced by :data:`REDACTED`."""
    return (secrets if isinstance(secrets, Redactor) else Redactor(secrets)).binary(data)


class Redactor:
    """Hides secrets from text (every event of a run) and from bytes (the files of a run directory): each secret's
    :func:`pieces` in each of their :func:`forms`, a piece hidden whole where another lies inside it (one secret
    containing another, a multi-line secret's lines), in one rewrite of the data. Their pattern is compiled once."""

    def __init__(self, secrets: Iterable[str]) -> None:
        every = {
            form
            for secret in set(secrets)
            if len(secret) >= MIN_SECRET_LENGTH
            for piece in pieces(secret)
            for form in forms(piece)
        }
        ordered = sorted(every, key=lambda form: (-len(form), form))
        self._text = _Alternation(ordered, "|")
        self._binary = _Alternation([form.encode() for form in ordered], b"|")

    def text(self, text: str) -> str:
        text = self._text.hide(text, REDACTED)
        if "PRIVATE KEY-----" in text or "://" in text:  # found by their form, whatever variable held them
            return _by_form(text.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")
        return text

    def binary(self, data: bytes) -> bytes:
        """:meth:`text` of a file's bytes, as they are (the secrets UTF-8 encoded)."""
        return _by_form(self._binary.hide(data, REDACTED.encode()))


#: Data longer than this (a file) is searched for each form in turn: ``find`` skips ahead in C, far faster per byte
#: than the pattern, which tries every form's first character at every position. Shorter data (each string of an
#: event) is scanned once with the pattern: one call, where each form's search would be one.
SEARCH_EACH_LENGTH = 64 * 1024


class _Alternation(Generic[AnyStr]):
    """Forms, longest first, and the pattern of their alternation (``separator`` is ``|`` in their type)."""

    def __init__(self, forms: Sequence[AnyStr], separator: AnyStr) -> None:
        self.forms: tuple[AnyStr, ...] = tuple(forms)
        self.pattern: re.Pattern[AnyStr] | None = re.compile(separator.join(map(re.escape, forms))) if forms else None

    def hide(self, data: AnyStr, hidden: AnyStr) -> AnyStr:
        """``data`` with each span where a form lies replaced by ``hidden``; spans that overlap are hidden as one
        (one secret ending where another starts: no part of either shows), as the longest form at a position hides
        the shorter ones inside it."""
        if self.pattern is None:
            return data
        spans = sorted(self._each(data)) if len(data) > SEARCH_EACH_LENGTH else list(self._scan(data, self.pattern))
        if not spans:
            return data
        parts: list[AnyStr] = []
        copied = 0
        start, end = spans[0]
        for first, last in spans[1:]:
            if first < end:  # overlaps the span being hidden: widens it
                end = max(end, last)
                continue
            parts += [data[copied:start], hidden]
            copied, start, end = end, first, last
        parts += [data[copied:start], hidden, data[end:]]
        return data[:0].join(parts)

    def _each(self, data: AnyStr) -> Iterator[tuple[int, int]]:
        """Where each form lies in ``data``: every occurrence, overlapping ones too."""
        for form in self.forms:
            at = data.find(form)
            while at >= 0:
                yield at, at + len(form)
                at = data.find(form, at + 1)

    @staticmethod
    def _scan(data: AnyStr, pattern: re.Pattern[AnyStr]) -> Iterator[tuple[int, int]]:
        """The longest form at each position where one starts, in order: the next search starts one past the last
        match's start, so one overlapping it is seen too."""
        match = pattern.search(data)
        while match is not None:
            yield match.span()
            match = pattern.search(data, match.start() + 1)


def _by_form(data: bytes) -> bytes:
    """Private keys and URL passwords hidden, found by their form, whatever variable held them."""
    hidden = REDACTED.encode()
    if b"PRIVATE KEY-----" in data:
        data = _redact_private_keys(data, hidden)
    return URL_PASSWORD.sub(rb"\1" + hidden + b"@", data) if b"://" in data else data


def redact_text(text: str, secrets: Iterable[str] | Redactor) -> str:
    """:func:`redact` of one string."""
    return (secrets if isinstance(secrets, Redactor) else Redactor(secrets)).text(text)


def redact_data(value: Any, secrets: Iterable[str] | Redactor) -> Any:
    """``value`` (an event: JSON's types) with every string in it, keys too, redacted as :func:`redact` does. Pass a
    :class:`Redactor` when redacting many values with the same secrets."""
    redactor = secrets if isinstance(secrets, Redactor) else Redactor(secrets)
    pending: list[Any] = []

    def clean(item: Any) -> Any:
        if isinstance(item, str):
            return redactor.text(item)
        if isinstance(item, Mapping):
            copy: dict[Any, Any] = {}
            pending.append((item, copy))
            return copy
        if isinstance(item, list | tuple):
            items: list[Any] = []
            pending.append((item, items))
            return items
        return item

    # Walked without recursion: an event nests as deep as a module's result does.
    top = clean(value)
    while pending:
        source, target = pending.pop()
        if isinstance(target, dict):
            for key, item in source.items():
                target[clean(key) if isinstance(key, str) else key] = clean(item)
        else:
            target.extend(clean(item) for item in source)
    return top


def _redact_private_keys(data: bytes, hidden: bytes) -> bytes:
    """Each BEGIN ... END private key block with its body replaced by ``hidden``, in one pass: a BEGIN with no END
    after it ends the search (no later BEGIN has one either), so no input makes this quadratic."""
    parts, position = [], 0
    while begin := KEY_BEGIN.search(data, position):
        end = KEY_END.search(data, begin.end())
        if end is None:
            break
        parts += [data[position : begin.end()], hidden, end.group()]
        position = end.end()
    return b"".join([*parts, data[position:]])


@dataclass(frozen=True)
class Scrubbed:
    """A file as a scrub left it (:func:`stamp`) and the secrets it was scrubbed of."""

    stamp: tuple[int, int, int, int]
    secrets: frozenset[str]


def stamp(status: os.stat_result) -> tuple[int, int, int, int]:
    """What changes when a file is written: its inode (a new file), size, modification and change times (the
    change time cannot be set back, as a copy sets the modification time)."""
    return (status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


def scrub_tree(root: Path, secrets: Iterable[str], scrubbed: dict[Path, Scrubbed] | None = None) -> list[Path]:
    """Replace every secret value in the files under ``root``; returns the files that held one.

    ``scrubbed`` records each file this scrub read (it is updated here): a later scrub given the same record skips a
    file still as an earlier scrub left it, when that scrub hid every secret this one hides; it reads only what was
    written since (a command's files after its Ansible run) or holds other secrets."""
    values = frozenset(s for s in secrets if len(s) >= MIN_SECRET_LENGTH)
    redactor = Redactor(values)
    record: dict[Path, Scrubbed] = {} if scrubbed is None else scrubbed
    changed: list[Path] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        status = path.stat()
        if status.st_size > MAX_SCRUB_BYTES:
            continue
        seen = record.get(path)
        unchanged = seen is not None and seen.stamp == stamp(status)
        if seen is not None and unchanged and values <= seen.secrets:
            continue
        # Clean of an earlier scrub's secrets while unchanged since; this scrub adds its own.
        earlier = seen.secrets if seen is not None and unchanged else frozenset()
        data = path.read_bytes()
        clean = redactor.binary(data)
        if clean != data:
            path.write_bytes(clean)
            changed.append(path)
            status = path.stat()
        record[path] = Scrubbed(stamp(status), values | earlier)
    return changed


def env_files(private_data_dir: Path) -> list[Path]:
    """Files in ansible-runner's `env/` directory; rdmaforge keeps it empty (it would hold extravars, passwords)."""
    env = private_data_dir / "env"
    return sorted(p for p in env.rglob("*") if p.is_file()) if env.is_dir() else []
