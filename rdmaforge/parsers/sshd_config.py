"""sshd's own configuration (``/etc/ssh/sshd_config`` and what it includes), read as sshd reads it when it starts,
for the settings rdmaforge judges: whether sshd runs PAM at all (``UsePAM``). Without PAM an SSH login runs no PAM
session stack, so pam_limits and the limits files (rdmaforge.parsers.pam_limits) do not apply to it: it keeps the
limits of the sshd that forked it.

How sshd reads it (OpenSSH ``servconf.c`` and ``misc.c`` @ V_9_2_P1 6dfb65de949cdd0a5d198edee9a118f265924f33, Debian
12's 9.2p1; RHEL 9's 8.7p1 reads it the same way, ``argv_split`` included; ``sshd_config(5)`` of Debian's
openssh-server 1:9.2p1-2+deb12u10):

- lines end at ``\\n`` (``strsep``); spaces, tabs and ``\\r`` are stripped from the start of each line
  (``load_server_config``), white space and ``\\f`` from its end;
- the keyword is the first word, ended by white space, a ``"`` or one ``=`` (``strdelim``), and matched ignoring
  case (``parse_token``: ``strcasecmp``); a keyword starting with ``#`` makes the line a comment; a keyword with
  nothing after it is an error sshd refuses to start with;
- the arguments are split as ``argv_split`` splits them: spaces and tabs end a word outside ``"..."`` or ``'...'``
  quotes, a ``\\`` before a quote, a ``\\`` or (outside quotes) a space is that character, a word starting with
  ``#`` ends the line; an unclosed quote is an error;
- "For each keyword, the first obtained value will be used" (``sshd_config(5)``; ``if (*activep && *intptr == -1)
  *intptr = value``): the first line that sets a keyword wins, later ones are ignored;
- ``Include PATTERN...`` reads the files each pattern matches, in place, as ``glob(3)`` (flags 0) lists them:
  sorted by name, a name starting with ``.`` only where the pattern spells that ``.``; a pattern that is not an
  absolute path is under ``/etc/ssh``; a pattern matching nothing is skipped; includes nested deeper than 16 are an
  error (``SERVCONF_MAX_DEPTH``). Debian and RHEL put ``Include /etc/ssh/sshd_config.d/*.conf`` first, so a drop-in
  there wins over ``sshd_config``'s own lines;
- ``Match`` starts a block that lasts until the next ``Match`` or the end of the file (an included file's block
  ends with that file: ``*activep = oactive``); an ``Include`` inside one makes the included lines part of it.
  ``UsePAM`` is ``SSHCFG_GLOBAL`` (not allowed in a Match block): at startup sshd refuses it inside a Match block
  unless the block is ``Match all``. A UsePAM inside a Match block is therefore not judged here;
- ``UsePAM`` takes ``yes`` or ``no`` (``multistate_flag``, ignoring case); anything else, or a further argument, is
  an error. With no UsePAM line at all sshd uses its compiled default, ``no`` (``fill_default_server_options``:
  ``use_pam = 0``; ``sshd_config(5)``: "The default is no"). Debian's and RHEL's packages turn PAM on in the files
  they ship (Debian's ``/etc/ssh/sshd_config``, RHEL's ``/etc/ssh/sshd_config.d/50-redhat.conf``: ``UsePAM yes``),
  not in sshd: a node whose files lost that line runs no PAM.

Not read here: ``sshd -o UsePAM=...`` or ``-f FILE`` on sshd's command line (a unit's ExecStart, RHEL's
``/etc/sysconfig/sshd``), which would win over the files; and whether the running sshd was started before the
files last changed (sshd reads them when it starts).

Standard library only, Python 3.8 (the rule of this package). Nothing here raises on odd input.
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # annotations only; never evaluated at runtime (Python 3.8 targets)
    from collections.abc import Callable, Sequence

SSHD_CONFIG = "/etc/ssh/sshd_config"
#: Where a relative Include pattern points (servconf.c: SSHDIR).
SSH_DIR = "/etc/ssh"
#: servconf.c SERVCONF_MAX_DEPTH: an include nested deeper is a fatal error.
MAX_DEPTH = 16
_WHITESPACE = " \t\r\n"
_GLOB_MAGIC = "*?["


class Unreadable(Exception):
    """Raised by a ``read`` or ``listdir`` given to this module where a file or directory exists but cannot be read
    (sshd, as root, reads it): the message says why."""


class Line(NamedTuple):
    """One setting line as sshd reads it: the keyword as written, its arguments, where it is, and whether it is
    inside a Match block."""

    path: str
    line: int
    keyword: str
    args: tuple[str, ...]
    in_match: bool

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


class Config(NamedTuple):
    """What sshd reads: its setting lines in order, and the files they came from (those read, in order)."""

    lines: list[Line]
    files: list[str]


class UsePam(NamedTuple):
    """Whether sshd runs PAM for a login: ``on`` True or False, or None where that cannot be told from the files;
    ``where`` the line that decides it (``path:line``; the files read where no line does); ``reason`` what was
    read, or why it cannot be told."""

    on: bool | None
    where: str
    reason: str


def _strdelim(text: str) -> tuple[str | None, str | None]:
    """misc.c strdelim: (the first word, the rest after it and the white space and one ``=`` that follow), or
    (None, None) for an unclosed quote; the rest is None where nothing follows the word."""
    at = next((i for i, char in enumerate(text) if char in _WHITESPACE + '"='), None)
    if at is None:
        return text, None
    if text[at] == '"':
        text = text[:at] + text[at + 1 :]
        close = text.find('"', at)
        if close < 0:
            return None, None
        return text[:close], text[close + 1 :].lstrip(_WHITESPACE)
    word, rest = text[:at], text[at + 1 :].lstrip(_WHITESPACE)
    if text[at] != "=" and rest.startswith("="):
        rest = rest[1:].lstrip(_WHITESPACE)
    return word, rest


def _argv_split(text: str) -> list[str] | None:
    """misc.c argv_split(s, ..., terminate_on_comment=1): the words, or None for an unclosed quote."""
    words: list[str] = []
    at = 0
    while at < len(text):
        if text[at] in " \t":
            at += 1
            continue
        if text[at] == "#":
            break
        word, quote = [], ""
        while at < len(text):
            char = text[at]
            if char == "\\" and at + 1 < len(text) and (text[at + 1] in "'\"\\" or not quote and text[at + 1] == " "):
                at += 1
                word.append(text[at])
            elif not quote and char in " \t":
                break
            elif not quote and char in "'\"":
                quote = char
            elif quote and char == quote:
                quote = ""
            else:
                word.append(char)
            at += 1
        if quote:
            return None
        words.append("".join(word))
    return words


def parse_line(raw: str) -> tuple[str, tuple[str, ...]] | str | None:
    """(keyword, arguments) of one line as servconf.c reads it; None for a comment or blank line; a reason (str)
    where sshd reports an error for it (no argument, an unclosed quote)."""
    line = raw.lstrip(" \t\r").rstrip(_WHITESPACE + "\f")
    keyword, rest = _strdelim(line)
    if keyword == "":  # a line starting with a delimiter: servconf.c takes the next word
        keyword, rest = _strdelim(rest or "")
    if keyword is None or not keyword or keyword.startswith("#"):
        return None
    if not rest:
        return f"no argument after keyword {keyword!r}"
    args = _argv_split(rest)
    if args is None:
        return "invalid quotes"
    return keyword, tuple(args)


def _expand(pattern: str, listdir: Callable[[str], Sequence[str] | None]) -> list[str] | str:
    """The files an Include pattern names, in glob(3)'s order, or why that cannot be told here. Where the pattern
    has no wildcard it names one file (whether it exists is up to ``read``). A wildcard is followed in the last
    path component only; ``listdir`` gives a directory's entries that are not directories (None: there is none)."""
    if pattern.startswith("~"):
        return f"Include {pattern}: a ~ path is not followed here"
    path = pattern if pattern.startswith("/") else f"{SSH_DIR}/{pattern}"
    directory, _, name = path.rpartition("/")
    if not any(char in path for char in _GLOB_MAGIC + "\\"):
        return [path]
    if any(char in directory for char in _GLOB_MAGIC + "\\") or "\\" in name or "[^" in name or "[[:" in name:
        return f"Include {pattern}: a wildcard in a directory, an escape, a [^...] or [[:class:]] is not read here"
    names = listdir(directory or "/")
    matched = [n for n in names or () if fnmatch.fnmatchcase(n, name) and (name[:1] == "." or n[:1] != ".")]
    return [f"{directory}/{n}" for n in sorted(matched)]  # glob(3) sorts; sshd sets no locale: C order


def read_lines(read: Callable[[str], str | None], listdir: Callable[[str], Sequence[str] | None],
               path: str = SSHD_CONFIG) -> Config | str:  # fmt: skip
    """Every setting line of ``path`` and what it includes, in the order sshd reads them, or why they cannot be
    read as sshd reads them. ``read`` gives a file's text (None where there is no such file), ``listdir`` the
    names of a directory's entries that are not directories (None where there is no such directory); either may
    raise Unreadable."""
    try:
        text = read(path)
    except Unreadable as error:
        return f"{path} cannot be read: {error}"
    if text is None:
        return f"{path} does not exist (sshd does not start without it)"
    config = Config([], [])
    problem = _read_file(path, text, read, listdir, False, 0, config)
    return problem if problem is not None else config


def _read_file(path: str, text: str, read: Callable[[str], str | None],
               listdir: Callable[[str], Sequence[str] | None], in_match: bool, depth: int,
               config: Config) -> str | None:  # fmt: skip
    if depth > MAX_DEPTH:
        return f"the Includes nest deeper than {MAX_DEPTH} at {path} (a loop?): sshd refuses to start"
    config.files.append(path)
    for number, raw in enumerate(text.split("\n"), start=1):
        parsed = parse_line(raw)
        if parsed is None:
            continue
        if isinstance(parsed, str):
            return f"{path}:{number}: {parsed}: sshd refuses to start with this file"
        keyword, args = parsed
        if keyword.lower() == "match":
            in_match = True
        elif keyword.lower() == "include":
            problem = _include(f"{path}:{number}", args, read, listdir, in_match, depth, config)
            if problem is not None:
                return problem
        else:
            config.lines.append(Line(path, number, keyword, args, in_match))
    return None


def _include(where: str, patterns: Sequence[str], read: Callable[[str], str | None],
             listdir: Callable[[str], Sequence[str] | None], in_match: bool, depth: int,
             config: Config) -> str | None:  # fmt: skip
    for pattern in patterns:
        try:
            files = _expand(pattern, listdir)
        except Unreadable as error:
            return f"{where}: Include {pattern}: {error}"
        if isinstance(files, str):
            return f"{where}: {files}"
        for included in files:
            try:
                text = read(included)
            except Unreadable as error:
                return f"{where}: Include {pattern}: {included} cannot be read: {error}"
            if text is None:
                continue  # a pattern matching no file is skipped (glob: GLOB_NOMATCH)
            problem = _read_file(included, text, read, listdir, in_match, depth + 1, config)
            if problem is not None:
                return problem
    return None


def use_pam(read: Callable[[str], str | None], listdir: Callable[[str], Sequence[str] | None],
            path: str = SSHD_CONFIG) -> UsePam:  # fmt: skip
    """Whether sshd runs PAM (``UsePAM``) as the files ``read`` and ``listdir`` give decide it (see read_lines):
    the first UsePAM line outside a Match block, else sshd's compiled default, no. A UsePAM inside a Match block,
    a value sshd does not take, or files that cannot be read as sshd reads them: not told (``on`` None)."""
    config = read_lines(read, listdir, path)
    if isinstance(config, str):
        return UsePam(None, path, config)
    settings = [line for line in config.lines if line.keyword.lower() == "usepam"]
    in_match = [line.where for line in settings if line.in_match]
    if in_match:
        return UsePam(None, in_match[0], f"UsePAM at {', '.join(in_match)} is inside a Match block, where sshd "
                      "refuses it at startup unless the block is 'Match all'")  # fmt: skip
    if not settings:
        files = ", ".join(dict.fromkeys(config.files))
        return UsePam(False, files, f"no UsePAM line in {files}: sshd's compiled default is no (sshd_config(5))")
    first = settings[0]
    value = first.args[0].lower() if len(first.args) == 1 else ""
    if value not in ("yes", "no"):
        return UsePam(None, first.where, f"{first.where}: UsePAM {' '.join(first.args)}: sshd takes yes or no "
                      "alone there and refuses to start otherwise")  # fmt: skip
    later = [line.where for line in settings[1:]]
    ignored = f" (the first value wins: {', '.join(later)} ignored)" if later else ""
    return UsePam(value == "yes", first.where, f"UsePAM {first.args[0]} at {first.where}{ignored}")


def proc_memlock(text: str) -> tuple[str, str] | None:
    """The soft and hard locked-memory limit of a process from its ``/proc/PID/limits`` (the kernel's
    ``proc_pid_limits``: "Max locked memory", in bytes) as ``ulimit -l`` prints them: KiB, or ``unlimited``;
    None where the line is not there."""
    for line in text.splitlines():
        if line.startswith("Max locked memory"):
            fields = line[len("Max locked memory") :].split()[:2]
            if len(fields) == 2 and all(field == "unlimited" or field.isdigit() for field in fields):
                soft, hard = (field if field == "unlimited" else str(int(field) // 1024) for field in fields)
                return soft, hard
    return None
