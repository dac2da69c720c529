"""Read and edit kernel command lines: ``/proc/cmdline``, GRUB defaults files and ``grubby --info`` output.

The one implementation behind the ``kernel_cmdline`` Ansible module (shipped to targets as
``module_utils/rdmaforge_kernel_cmdline.py``, a symlink to this file), so it is standard-library only
and runs on Python 3.8: annotations are never evaluated at runtime.

Rules, the same everywhere:

* A token's *key* is the text before its first ``=``, with ``-`` read as ``_`` (the kernel's own
  ``parameq`` treats them alike, so ``default-hugepagesz`` and ``default_hugepagesz`` are one key).
  Tokens after a lone ``--`` belong to init, not the kernel: they are never matched, and new
  arguments are inserted before the ``--``.
* ``present`` manages each given key as exactly ONE occurrence. ``hugepages=50`` replaces
  ``hugepages=32`` in place; extra occurrences of a managed key are removed (and reported), so the
  result never holds two copies. Consequence: a cmdline that reserves several page sizes by
  repeating ``hugepagesz=.. hugepages=..`` pairs cannot be expressed; managing ``hugepagesz`` and
  ``hugepages`` collapses such a line to one pair.
* Managed arguments end up in the order given: the kernel reads some positionally (``hugepages=N``
  applies to the ``hugepagesz=`` before it). Existing occurrences are replaced in place when that
  keeps the given order; otherwise all managed arguments move, together and in order, to the end.
  Unmanaged arguments never move.
* ``absent`` with a bare key (``hugepages``) removes every occurrence with any value; with a value
  (``hugepages=32``) only occurrences with exactly that value.
* Values compare as spelt, except the huge page sizes (``hugepagesz``, ``default_hugepagesz``), which
  compare as the kernel reads them (memparse: ``1G``, ``1GB``, ``1g`` and ``1073741824`` are one size),
  so a line written by hand as seed 004 spells it (``1GB``) is no change from the role's ``1G``.

GRUB defaults files are shell: the variable's line is edited in place, keeping its quoting (double,
single; an unquoted value is rewritten double-quoted), its indentation, ``export`` and trailing
comment; every other line is kept byte for byte. Untouched tokens keep their exact spelling, so shell
references such as ``$GRUB_CMDLINE_LINUX`` or ``${GRUB_CMDLINE_LINUX_DEFAULT}`` survive. Values this
code cannot edit safely (spanning lines, concatenated quotes) raise ``CmdlineError`` naming the line.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only; never evaluated at runtime (Python 3.8 targets)
    from collections.abc import Iterable, Mapping, Sequence

PRESENT = "present"
ABSENT = "absent"
#: Separates kernel arguments from init's arguments on a command line.
INIT_SEPARATOR = "--"
#: Header of a drop-in file written by the module.
DROPIN_HEADER = (
    "# Managed by rdmaforge (kernel_cmdline module). Read by update-grub / grub-mkconfig after\n"
    "# /etc/default/grub; run update-grub after changing it.\n"
)

_VARIABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Characters that would end or change an unquoted shell word: such a value is not a plain word.
_UNQUOTED_STOP = set("\"'`;&|<>()")
_DOUBLE_ESCAPED = set('\\"$`')


class CmdlineError(ValueError):
    """Input that cannot be handled safely; the message says what and where, for a person to fix."""


class Arg:
    """One managed argument: its normalised ``key`` and the full ``token`` (``None``: any value, absent only)."""

    __slots__ = ("key", "token")

    def __init__(self, key: str, token: str | None) -> None:
        self.key = key
        self.token = token

    def __repr__(self) -> str:
        return f"Arg({self.key!r}, {self.token!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Arg) and (self.key, self.token) == (other.key, other.token)

    def __hash__(self) -> int:
        return hash((self.key, self.token))


# --- tokens ------------------------------------------------------------------------------------------


def _split(text: str, double_quoted: bool) -> list[str]:
    """Whitespace-separated tokens of ``text``, a whitespace inside a kernel quote (``"a b"``) kept.

    ``double_quoted``: ``text`` is the inside of a shell double-quoted string, where a backslash
    escapes the next character and the kernel's own quote is spelt ``\\"``. Otherwise (a real command
    line, or the inside of single quotes) a backslash is an ordinary character and ``"`` toggles.
    Tokens are returned exactly as spelt (escapes kept), so they can be written back unchanged.
    """
    tokens: list[str] = []
    current: list[str] = []
    in_quote = False
    i = 0
    while i < len(text):
        char = text[i]
        if double_quoted and char == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            if text[i + 1] == '"':
                in_quote = not in_quote
            i += 2
            continue
        if char == '"' and not double_quoted:
            in_quote = not in_quote
        if char.isspace() and not in_quote:
            if current:
                tokens.append("".join(current))
                current = []
        else:
            current.append(char)
        i += 1
    if current:
        tokens.append("".join(current))
    return tokens


def split_cmdline(text: str) -> list[str]:
    """Tokens of a kernel command line the way the kernel splits it (double quotes group words)."""
    return _split(text, double_quoted=False)


def join_cmdline(tokens: Iterable[str]) -> str:
    return " ".join(tokens)


def arg_key(token: str) -> str:
    """``"default-hugepagesz=1G"`` -> ``"default_hugepagesz"``; a leading kernel quote is ignored."""
    name = token.lstrip('"').split("=", 1)[0]
    return name.replace("-", "_")


def arg_value(token: str) -> str | None:
    """The text after the first ``=``, or ``None`` for a flag such as ``quiet``."""
    if "=" not in token:
        return None
    return token.split("=", 1)[1]


def _kernel_args_end(tokens: Sequence[str]) -> int:
    """Index of the ``--`` that hands the rest to init, or the length (no separator)."""
    for index, token in enumerate(tokens):
        if token == INIT_SEPARATOR:
            return index
    return len(tokens)


# --- the managed arguments -------------------------------------------------------------------------


def _check_key(key: str, where: str) -> str:
    if not key or any(c.isspace() or c in "\"'$`\\=" for c in key):
        raise CmdlineError(f"{where}: {key!r} is not a kernel parameter name (no spaces, quotes, $, ` or =)")
    return key


def _token_for(key: str, value: Any, where: str) -> str | None:
    """``key=value`` for a dict entry; ``None`` value means a flag (present) or any value (absent)."""
    if value is None:
        return None
    if isinstance(value, bool):
        # YAML reads on/off/yes/no/true/false as booleans: "intel_iommu: on" would arrive as True.
        raise CmdlineError(
            f"{where} is a boolean ({value}); YAML turns on/off/yes/no into booleans: quote the value "
            f"(for example '{key}: \"on\"'), or use null for a flag without a value"
        )
    if not isinstance(value, (str, int, float)):
        raise CmdlineError(f"{where} must be a string or a number, got {type(value).__name__}")
    text = str(value)
    if '"' in text or "\n" in text:
        raise CmdlineError(f"{where}={text!r}: values cannot contain double quotes or newlines")
    if any(c.isspace() for c in text):
        text = f'"{text}"'  # the kernel's own quoting for a value with spaces
    return f"{key}={text}"


def normalize_args(args: Mapping[str, Any] | Sequence[str] | str | None, state: str = PRESENT) -> list[Arg]:
    """The managed arguments from a dict (``{hugepages: 50, quiet: null}``) or a list/string of tokens.

    Raises ``CmdlineError`` for an empty set, a key given twice, or anything not a kernel argument.
    With ``state=present`` a ``None`` token means a flag (``quiet``); with ``absent`` it means any value.
    """
    parsed: list[Arg] = []
    if isinstance(args, dict):
        for raw_key, value in args.items():
            key = _check_key(str(raw_key), f"args key {raw_key!r}")
            if key == INIT_SEPARATOR:  # as for a list entry: every later argument would go to init
                raise CmdlineError("args key '--' cannot be managed: it separates init's arguments")
            token = _token_for(key, value, f"args.{key}")
            if token is None and state == PRESENT:
                token = key
            parsed.append(Arg(arg_key(key), token))
    elif isinstance(args, (list, tuple, str)):
        items = [args] if isinstance(args, str) else list(args)
        for item in items:
            if not isinstance(item, str):
                raise CmdlineError(f"args entries must be strings like 'name=value' or 'flag', got {item!r}")
            for token in split_cmdline(item):
                _check_key(token.lstrip('"').split("=", 1)[0], f"args entry {token!r}")
                if token == INIT_SEPARATOR:
                    raise CmdlineError("args entry '--' cannot be managed: it separates init's arguments")
                if token.count('"') % 2:
                    # The kernel reads to the next quote: every argument after this one would join its value.
                    raise CmdlineError(f"args entry {token!r} opens a double quote it does not close")
                value_given = "=" in token
                parsed.append(Arg(arg_key(token), token if value_given or state == PRESENT else None))
    else:
        raise CmdlineError("args must be a dict of name: value or a list of 'name=value' / 'flag' strings")
    if not parsed:
        raise CmdlineError("args is empty: give at least one kernel argument")
    seen: dict[str, Arg] = {}
    for arg in parsed:
        if arg.key in seen:
            raise CmdlineError(
                f"args names {arg.key} twice ({seen[arg.key].token or arg.key}, {arg.token or arg.key}): "
                "kernel_cmdline manages one occurrence per key"
            )
        seen[arg.key] = arg
    return parsed


#: Keys whose value is a size the kernel reads with memparse (mm/hugetlb.c: hugepagesz_setup,
#: default_hugepagesz_setup): a number, optionally 0x hex or 0 octal, then an optional K, M, G, T, P or E; the
#: kernel ignores what follows (the B of 1GB).
SIZE_KEYS = frozenset({"hugepagesz", "default_hugepagesz"})
_MEMPARSE_RE = re.compile(r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)([KkMmGgTtPpEe]?)")
_MEMPARSE_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50, "e": 60}


def memparse(text: str | None) -> int | None:
    """Bytes as the kernel's memparse reads ``text`` (``"1GB"`` -> 1073741824); None where it reads no number."""
    match = _MEMPARSE_RE.match(text or "")
    if match is None:
        return None
    digits = match.group(1)
    number = int(digits, 16) if digits[:2].lower() == "0x" else int(digits, 8) if digits[0] == "0" else int(digits)
    return number << _MEMPARSE_SHIFT[match.group(2).lower()]


def same_value(key: str, value: str | None, wanted: str | None) -> bool:
    """Whether ``value`` is ``wanted`` for ``key``: as spelt, or as the kernel reads a size (SIZE_KEYS)."""
    if value == wanted:
        return True
    if key not in SIZE_KEYS:
        return False
    size = memparse(value)
    return size is not None and size == memparse(wanted)


def _same_arg(token: str, arg: Arg) -> bool:
    """Whether ``token`` is ``arg`` (key compared normalised, value as spelt or, for a size, as the kernel reads it)."""
    return (arg.token is not None and arg_key(token) == arg.key
            and same_value(arg.key, arg_value(token), arg_value(arg.token)))  # fmt: skip


def _matches_absent(token: str, args: Sequence[Arg]) -> bool:
    for arg in args:
        if arg_key(token) == arg.key and (
            arg.token is None or same_value(arg.key, arg_value(token), arg_value(arg.token))
        ):
            return True
    return False


# --- the edit itself -------------------------------------------------------------------------------


def plan_tokens(texts: Sequence[str], args: Sequence[Arg], state: str) -> tuple[list[int | str], list[str]]:
    """How to turn the tokens ``texts`` into the desired ones.

    Returns ``(plan, dropped_duplicates)``: ``plan`` lists, in order, indexes of ``texts`` kept as
    they are and strings for new tokens; ``dropped_duplicates`` are extra occurrences of managed keys
    removed by ``present`` (the caller reports them).
    """
    end = _kernel_args_end(texts)
    tail: list[int | str] = list(range(end, len(texts)))
    if state == ABSENT:
        kept: list[int | str] = [i for i in range(end) if not _matches_absent(texts[i], args)]
        return kept + tail, []

    wanted = {arg.key: arg for arg in args}
    plan: list[int | str] = []
    placed: set[str] = set()
    dropped: list[str] = []
    for index in range(end):
        key = arg_key(texts[index])
        arg = wanted.get(key)
        if arg is None:
            plan.append(index)
        elif key in placed:
            dropped.append(texts[index])
        else:
            placed.add(key)
            assert arg.token is not None  # present: normalize_args gives every Arg a token
            plan.append(index if _same_arg(texts[index], arg) else arg.token)
    plan.extend(arg.token for arg in args if arg.key not in placed and arg.token is not None)

    def key_of(item: int | str) -> str:
        return arg_key(texts[item] if isinstance(item, int) else item)

    if [key_of(item) for item in plan if key_of(item) in wanted] != [arg.key for arg in args]:
        # In-place replacement would break the given order: move all managed arguments to the end.
        plan = [item for item in plan if key_of(item) not in wanted]
        plan.extend(arg.token for arg in args if arg.token is not None)
    return plan + tail, dropped


def apply_args(tokens: Sequence[str], args: Sequence[Arg], state: str) -> tuple[list[str], list[str]]:
    """``(new_tokens, dropped_duplicates)`` for plain tokens (a /proc/cmdline or grubby ``args`` line)."""
    plan, dropped = plan_tokens(tokens, args, state)
    return [tokens[item] if isinstance(item, int) else item for item in plan], dropped


def update_cmdline(cmdline: str, args: Sequence[Arg], state: str) -> str:
    """The command line ``cmdline`` with ``args`` applied (whitespace normalised only when it changes)."""
    tokens = split_cmdline(cmdline)
    new_tokens, _ = apply_args(tokens, args, state)
    return cmdline if new_tokens == tokens else join_cmdline(new_tokens)


def running_mismatches(proc_cmdline: str, args: Sequence[Arg], state: str) -> list[str]:
    """What the running kernel's command line lacks (or still has), one phrase per argument.

    Empty means ``args`` are already in effect: no reboot is needed for them.
    """
    tokens = split_cmdline(proc_cmdline)
    tokens = tokens[: _kernel_args_end(tokens)]
    problems: list[str] = []
    for arg in args:
        found = [t for t in tokens if arg_key(t) == arg.key]
        if state == ABSENT:
            matching = [t for t in found if _matches_absent(t, [arg])]
            if matching:
                problems.append("running kernel still has " + " ".join(matching))
        elif not (len(found) == 1 and _same_arg(found[0], arg)):
            have = " ".join(found) if found else "nothing"
            problems.append(f"{arg.token} (running kernel has {have})")
    return problems


def reboot_required(proc_cmdline: str, args: Sequence[Arg], state: str) -> bool:
    return bool(running_mismatches(proc_cmdline, args, state))


# --- GRUB defaults files (shell) -------------------------------------------------------------------


class Assignment:
    """One ``VAR=value`` line of a GRUB defaults file, split so the value can be replaced alone."""

    __slots__ = ("line", "prefix", "quote", "raw", "suffix")

    def __init__(self, line: int, prefix: str, quote: str, raw: str, suffix: str) -> None:
        self.line = line  # 0-based index into the file's lines
        self.prefix = prefix  # indentation, "export ", "VAR="
        self.quote = quote  # '"', "'" or "" (unquoted)
        self.raw = raw  # the text between the quotes, exactly as written
        self.suffix = suffix  # after the closing quote: spaces, a comment, the line ending

    def raw_tokens(self) -> list[str]:
        return _split(self.raw, double_quoted=self.quote != "'")

    def texts(self) -> list[str]:
        """The tokens as the shell sees them (escapes resolved, ``$VAR`` left as written)."""
        return [_decode(token, self.quote) for token in self.raw_tokens()]

    def value(self) -> str:
        return join_cmdline(self.texts())

    def references(self, variable: str) -> bool:
        """Whether the value expands ``$variable`` (a drop-in appending to the main file's value)."""
        return self.quote != "'" and _reference_re(variable).search(self.raw) is not None


def _reference_re(variable: str) -> re.Pattern[str]:
    """``$variable`` or ``${variable}`` in shell text."""
    name = re.escape(variable)
    return re.compile(r"\$(\{" + name + r"\}|" + name + r"\b)")


def _expand(text: str, pattern: re.Pattern[str], value: str) -> str:
    return pattern.sub(lambda _match: value, text)


def _decode(raw: str, quote: str) -> str:
    if quote == "'":
        return raw
    return re.sub(r'\\([\\"$`])', r"\1", raw)


def _encode(text: str, quote: str, where: str) -> str:
    """``text`` spelt for the inside of ``quote`` quotes."""
    if quote == "'":
        if "'" in text:
            raise CmdlineError(f"{where}: {text!r} contains a single quote and the value is single-quoted")
        return text
    return "".join("\\" + c if c in _DOUBLE_ESCAPED else c for c in text)


def _unquoted_to_double(raw: str) -> str:
    """An unquoted shell word re-spelt for double quotes, meaning unchanged (``$VAR`` still expands)."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw):
            char = raw[i + 1]
            out.append("\\" + char if char in _DOUBLE_ESCAPED else char)
            i += 2
            continue
        out.append(raw[i])
        i += 1
    return "".join(out)


def _parse_assignment(line: str, index: int, variable: str, where: str) -> Assignment | None:
    match = re.match(r"^([ \t]*(?:export[ \t]+)?" + re.escape(variable) + "=)", line)
    if match is None:
        return None
    prefix = match.group(1)
    rest = line[match.end() :]
    body = rest.rstrip("\r\n")
    ending = rest[len(body) :]
    place = f"{where} line {index + 1}"
    if body[:1] in ('"', "'"):
        quote = body[0]
        close = _closing_quote(body, quote)
        if close is None:
            raise CmdlineError(
                f"{place}: the value of {variable} does not end on this line; kernel_cmdline edits "
                "single-line assignments only: join it onto one line"
            )
        raw, after = body[1:close], body[close + 1 :]
    else:
        quote = ""
        word = re.match(r"[^\s#]*", body)
        raw = word.group(0) if word else ""
        after = body[len(raw) :]
        if raw.endswith("\\") or any(c in _UNQUOTED_STOP for c in raw):
            raise CmdlineError(f"{place}: {variable}={raw} is not a plain word; quote the whole value in double quotes")
    if after and not re.match(r"^\s*(#.*)?$", after):
        raise CmdlineError(
            f"{place}: unexpected {after.strip()!r} after the value of {variable}; kernel_cmdline edits "
            f"a single quoted value (VAR=\"...\" or VAR='...'), optionally followed by a # comment"
        )
    return Assignment(index, prefix, quote, raw, after + ending)


def _closing_quote(body: str, quote: str) -> int | None:
    i = 1
    while i < len(body):
        if quote == '"' and body[i] == "\\":
            i += 2
            continue
        if body[i] == quote:
            return i
        i += 1
    return None


def find_assignments(text: str, variable: str, where: str = "file") -> list[Assignment]:
    """Every ``variable=...`` line of a defaults file (commented-out lines are not assignments)."""
    if not _VARIABLE_RE.match(variable):
        raise CmdlineError(f"variable={variable!r} is not a shell variable name")
    found = []
    appending = re.compile(r"^[ \t]*(?:export[ \t]+)?" + re.escape(variable) + r"\+=")
    for index, line in enumerate(text.splitlines(keepends=True)):
        if appending.match(line):
            # bash appends to the value: the kernel would get those words besides the edited value, unseen.
            raise CmdlineError(
                f"{where} line {index + 1}: {variable}+= appends to the value, which kernel_cmdline cannot edit "
                f"safely: write it into the {variable}=\"...\" assignment"
            )
        assignment = _parse_assignment(line, index, variable, where)
        if assignment is not None:
            found.append(assignment)
    return found


def read_variable(text: str, variable: str, where: str = "file") -> str | None:
    """The value of the last assignment of ``variable`` (``$VAR`` references left as written)."""
    assignments = find_assignments(text, variable, where)
    return assignments[-1].value() if assignments else None


def _live(assignments: Sequence[Assignment], variable: str) -> list[Assignment]:
    """The assignments whose value reaches the end of the file: the last one, and each earlier one
    whose every later assignment expands ``$variable`` (``X="$X more"``). Others are overwritten."""
    live: list[Assignment] = []
    for assignment in reversed(assignments):
        live.append(assignment)
        if not assignment.references(variable):
            break
    return list(reversed(live))


class FileEdit:
    """Result of editing one defaults file: its new text and the variable's value before and after."""

    __slots__ = ("after", "before", "dropped", "text")

    def __init__(self, text: str, before: str | None, after: str | None, dropped: list[str]) -> None:
        self.text = text
        self.before = before
        self.after = after
        self.dropped = dropped


def _rewrite(assignment: Assignment, plan: Sequence[int | str], where: str) -> str:
    raw_tokens = assignment.raw_tokens()
    quote = assignment.quote or '"'
    if assignment.quote == "":
        raw_tokens = [_unquoted_to_double(token) for token in raw_tokens]
    spelt = [raw_tokens[item] if isinstance(item, int) else _encode(item, quote, where) for item in plan]
    return f"{assignment.prefix}{quote}{join_cmdline(spelt)}{quote}{assignment.suffix}"


def edit_defaults(
    text: str,
    variable: str,
    args: Sequence[Arg],
    state: str,
    *,
    where: str = "file",
    append_to_existing: bool = False,
) -> FileEdit:
    """The defaults file ``text`` with ``args`` applied to ``variable``.

    ``present`` puts the arguments into the last assignment and removes their keys from earlier
    assignments that still reach the result (``X="$X ..."`` chains), so the final value has each key
    once. With no assignment, one is appended at the end of the file; ``append_to_existing`` (drop-in
    files) starts it with ``$variable`` so it extends the value set before the file is sourced.
    """
    lines = text.splitlines(keepends=True)
    assignments = find_assignments(text, variable, where)
    before = assignments[-1].value() if assignments else None
    dropped: list[str] = []
    if not assignments:
        if state == ABSENT:
            return FileEdit(text, None, None, [])
        reference = [f"${variable}"] if append_to_existing else []  # written as is: it must expand
        wanted = [a.token for a in args if a.token is not None]
        tokens = reference + wanted
        spelt = reference + [_encode(t, '"', where) for t in wanted]
        separator = "" if not text or text.endswith("\n") else "\n"
        new_text = f'{text}{separator}{variable}="{join_cmdline(spelt)}"\n'
        return FileEdit(new_text, None, join_cmdline(tokens), [])

    live = _live(assignments, variable)
    # Earlier live assignments lose the managed keys (any value); the last one gets the real edit.
    strip = [Arg(arg.key, None) for arg in args] if state == PRESENT else list(args)
    for assignment in live[:-1]:
        plan, _ = plan_tokens(assignment.texts(), strip, ABSENT)
        if len(plan) != len(assignment.texts()):
            if state == PRESENT:  # a second, older occurrence of a managed key: reported like a duplicate
                dropped.extend(t for i, t in enumerate(assignment.texts()) if i not in plan)
            lines[assignment.line] = _rewrite(assignment, plan, where)
    last = live[-1]
    plan, duplicates = plan_tokens(last.texts(), args, state)
    dropped.extend(duplicates)
    if plan != list(range(len(last.texts()))):  # anything but "keep every token": rewrite the line
        lines[last.line] = _rewrite(last, plan, where)
    new_text = "".join(lines)
    after_assignments = find_assignments(new_text, variable, where)
    return FileEdit(new_text, before, after_assignments[-1].value(), dropped)


def new_dropin_text(variable: str, args: Sequence[Arg]) -> str:
    """A drop-in file that appends ``args`` to ``variable``: ``VAR="$VAR a=1 b"``."""
    return DROPIN_HEADER + edit_defaults("", variable, args, PRESENT, append_to_existing=True).text


def effective_value(texts: Sequence[str], variable: str) -> str:
    """The value of ``variable`` after sourcing ``texts`` in order (main file, then drop-ins).

    Only ``$variable`` / ``${variable}`` are expanded; other references stay as written.
    """
    value = ""
    pattern = _reference_re(variable)
    for text in texts:
        for assignment in find_assignments(text, variable):
            expanded = assignment.value()
            if assignment.quote != "'":  # single quotes do not expand
                expanded = _expand(expanded, pattern, value)
            value = join_cmdline(split_cmdline(expanded))
    return value


# --- grubby (BLS entries on RHEL 8+, Fedora) --------------------------------------------------------


class GrubbyEntry:
    """One boot entry from ``grubby --info=ALL``: its index, kernel path and arguments."""

    __slots__ = ("args", "index", "kernel")

    def __init__(self, index: int, kernel: str | None, args: str) -> None:
        self.index = index
        self.kernel = kernel
        self.args = args

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "kernel": self.kernel, "args": self.args}


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def parse_grubby_info(output: str) -> list[GrubbyEntry]:
    """Entries of ``grubby --info=ALL``: ``index=N`` starts one; ``kernel=".."`` and ``args=".."`` fill it.

    grubby prints ``root=`` apart from ``args``; non-Linux entries (no ``args``) are skipped.
    """
    entries: list[GrubbyEntry] = []
    index: int | None = None
    fields: dict[str, str] = {}

    def flush() -> None:
        if index is not None and "args" in fields:
            entries.append(GrubbyEntry(index, fields.get("kernel"), fields["args"]))

    for line in output.splitlines():
        match = re.match(r"^\s*([A-Za-z_]+)=(.*)$", line)
        if match is None:
            continue
        key, value = match.group(1), _unquote(match.group(2))
        if key == "index":
            flush()
            index = int(value) if value.lstrip("-").isdigit() else None
            fields = {}
        else:
            fields.setdefault(key, value)
    flush()
    return entries


def grubby_arguments(entries: Sequence[GrubbyEntry], args: Sequence[Arg], state: str) -> tuple[list[str], list[str]]:
    """``(remove_args, add_args)`` for one ``grubby --update-kernel=ALL`` call, both empty when every
    entry is already right.

    grubby's ``--args=k=v`` first drops every ``k``/``k=*`` then appends ``k=v``, so ``present`` only
    adds. ``--remove-args=k`` drops every ``k``/``k=*``; ``--remove-args=k=v`` drops ONE ``k=v``, so an
    exact token is repeated as often as an entry holds it.
    """
    changed = [e for e in entries if apply_args(split_cmdline(e.args), args, state)[0] != split_cmdline(e.args)]
    if not changed:
        return [], []
    if state == PRESENT:
        return [], [arg.token for arg in args if arg.token is not None]
    remove: list[str] = []
    for arg in args:
        if arg.token is None:
            remove.append(arg.key)
            continue
        most = max(sum(1 for t in split_cmdline(e.args) if _same_arg(t, arg)) for e in entries)
        remove.extend([arg.token] * most)
    return remove, []


def simulate_grubby(args_line: str, remove_args: Sequence[str], add_args: Sequence[str]) -> str:
    """What grubby-bls's ``update_args`` makes of ``args_line`` (for check mode and diffs)."""
    tokens = split_cmdline(args_line)
    for removal in remove_args:
        if "=" in removal:
            if removal in tokens:
                tokens.remove(removal)  # grubby's sed without /g: one occurrence
        else:
            tokens = [t for t in tokens if arg_key(t) != arg_key(removal)]
    for addition in add_args:
        tokens = [t for t in tokens if arg_key(t) != arg_key(addition)]
    return join_cmdline(tokens + list(add_args))


__all__ = [
    "ABSENT",
    "DROPIN_HEADER",
    "INIT_SEPARATOR",
    "PRESENT",
    "Arg",
    "Assignment",
    "CmdlineError",
    "FileEdit",
    "GrubbyEntry",
    "apply_args",
    "arg_key",
    "arg_value",
    "edit_defaults",
    "effective_value",
    "find_assignments",
    "grubby_arguments",
    "join_cmdline",
    "new_dropin_text",
    "normalize_args",
    "parse_grubby_info",
    "plan_tokens",
    "read_variable",
    "reboot_required",
    "running_mismatches",
    "simulate_grubby",
    "split_cmdline",
    "update_cmdline",
]
