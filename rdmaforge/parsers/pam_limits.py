"""pam_limits' configuration (``/etc/security/limits.conf`` and ``/etc/security/limits.d/*.conf``), read as
pam_limits reads it, and the limit it gives one login (a user looked up on the node: ``Login``).

What pam_limits does (Linux-PAM ``modules/pam_limits/pam_limits.c`` @ ddab692c: ``parse_config_file``,
``parse_uid_range``, ``process_limit``, ``read_limits_dir``; ``libpam/pam_modutil_ingroup.c``; ``limits.conf(5)``).
Debian 12's ``pam_limits.so`` was run on the cases below (tests/data/limits/SOURCES.md).

Files:

- ``/etc/security/limits.conf``, then every ``/etc/security/limits.d/*.conf`` sorted by file name in C (``strcmp``)
  order; a name starting with ``.`` is not matched by the glob;
- Linux-PAM 1.5.3+ built with a vendor directory (openSUSE's ``/usr/etc``) reads ``/usr/etc/security/limits.conf``
  when ``/etc/security/limits.conf`` does not exist, and ``/usr/etc/security/limits.d/*.conf`` except a name
  ``/etc/security/limits.d`` also has, sorted with the others by file name. Debian's and RHEL's builds have none.
  Which build a node has is not read here: ``judge_unlimited`` judges with and without the vendor files it is given
  and gives a verdict only where both agree.

Lines:

- a ``#`` anywhere starts a comment; fields are split on spaces and tabs; ``DOMAIN TYPE ITEM VALUE`` (the value is
  the rest of the line), or two fields whose type starts with ``-`` (no limits at all); anything else is skipped,
  and so is a line whose domain has a ``:`` that is not a valid range;
- type, item and value are lower-cased, the domain is not; the type is ``soft``, ``hard`` or ``-`` (both);
  ``-1``, ``-``, ``unlimited`` and ``infinity`` mean no limit; otherwise the value is read as ``strtoul`` reads it
  (a sign, then digits up to the first non-digit; none: the line is ignored), and a size of 2**54 KiB or more
  saturates to no limit. Before 1.6 a line was split on any white space and the value was the fourth field alone,
  so ``unlimited now`` or a CRLF line's ``unlimited\\r`` meant no limit there and is ignored since; it is ignored
  here: leaving out a line that sets no limit can only make a verdict stricter, never a false pass.

Which lines apply to a login (``parse_config_file``):

- its own name, or a uid range ``MIN:MAX``, ``MIN:``, ``:UID``: rank USER; ``*``: rank DEFAULT;
- ``@group`` and ``@:GID``: rank GROUP when the login is in that group (its primary group, the group's member list,
  or ``getgrouplist``); ``@MIN:MAX`` and ``@MIN:`` look at the primary group only; ``%...`` is for maxlogins only;
- Debian and Ubuntu patch pam_limits (``027_pam_limits_better_init_allow_explicit_root``; their limits.conf: "group
  and wildcard limits are not applied to root"): ``*`` and ``@group`` lines do not apply to uid 0, uid and gid
  ranges still do. Upstream pam_limits (RHEL) has no such rule;
- ``DOMAIN -`` applies to the login's name, a group as above, or a uid range (``%...`` is read as one there);
  ``* -`` does nothing. pam_limits then stops reading and sets no limit at all.

A line sets a soft or hard limit unless one of a better rank (USER, then GROUP, then DEFAULT) already did; among
equal ranks the later line wins. A ``-`` line whose soft limit a better rank set sets neither (``process_limit``
returns early).

Which files apply at all (``ssh_limits_runs``): pam_limits sets limits only where the PAM session stack of the
login runs it, and each ``pam_limits.so`` line of that stack is one run with its own arguments:

- sshd runs a PAM session only with ``UsePAM yes`` (rdmaforge.parsers.sshd_config reads it; OpenSSH's compiled
  default is no). Without it no limits file applies to an SSH login, which keeps the limits of the sshd that forked
  it (systemd's ``LimitMEMLOCK=`` of its unit): ``without_pam``;
- sshd's stack is ``/etc/pam.d/sshd`` (OpenSSH's PAM service name), read as libpam reads it (Linux-PAM
  ``libpam/pam_handlers.c``, ``pam_misc.c``, ``libpam_internal/pam_line.c`` @ ddab692c): a ``#`` anywhere ends the
  line, a ``\\`` at its end joins the next one, fields are split on spaces, tabs and newlines, and ``[...]`` is one
  field (``\\]`` in it a ``]``). ``session`` lines count (``-session`` too; the type is matched ignoring case);
  ``session include FILE`` puts FILE's session lines in place, ``session substack FILE`` too but as a substack (a
  jump or ``done`` inside it ends at its end), Debian's ``@include FILE`` (patch 031_pam_include) puts FILE's lines
  in place as include does. FILE is a path, or a name in /etc/pam.d. A service with no session line gets
  /etc/pam.d/other's (libpam). A file missing, or only in a vendor directory (/usr/lib/pam.d, read by Linux-PAM
  1.4+ where /etc/pam.d lacks it), or includes nested 16 deep (a loop): not judged;
- a line's control word (``required``, ``requisite``, ``optional``, ``sufficient``) or ``[value=action ...]`` says
  what each module answer does (``pam_dispatch.c``): go on, end the stack (``done``; ``die``, which fails the session
  and so the login), or jump N lines (a substack counting as one). Which answer a module gives is not known here:
  a ``pam_limits.so`` line (matched by file name) that every way through the stack to a login passes runs; one no way
  reaches does not; one some ways skip (a jump over it, a ``sufficient`` or ``done`` before it) is not judged;
- a run reads its ``conf=FILE`` argument (the last one) alone: no limits.d, no vendor files (``pam_limits.c``
  ``pam_sm_open_session``: "skip reading limits.d if config file explicitly specified"; ``pam_limits(8)``); a
  ``conf=`` file that does not exist makes that run fail before it sets anything. Without ``conf=``: limits.conf and
  limits.d as above. No ``pam_limits.so`` in the stack at all: the limits files do not apply to an SSH login, which
  gets sshd's own limit;
- each run starts from the limits the one before it set, and sets only what its files give (``setup_limits`` skips
  an item no line set): where several run, the last one that set a limit decides it.

Standard library only, Python 3.8 (the same rule as the other parsers here). Nothing here raises on odd input.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:  # annotations only; never evaluated at runtime (Python 3.8 targets)
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from rdmaforge.parsers.sshd_config import UsePam

LIMITS_CONF = "/etc/security/limits.conf"
LIMITS_D = "/etc/security/limits.d"
VENDOR_LIMITS_CONF = "/usr/etc/security/limits.conf"
VENDOR_LIMITS_D = "/usr/etc/security/limits.d"
#: What pam_limits reads as "no limit".
UNLIMITED = ("-1", "-", "unlimited", "infinity")
#: Items pam_limits reads in KiB (process_limit multiplies by 1024, saturating at RLIM_INFINITY).
KIB_ITEMS = ("fsize", "data", "stack", "core", "rss", "memlock", "as")
_ULONG_MAX = 2**64 - 1
_UID_MAX = 2**32 - 1
_STRTOUL = re.compile(r"^[ \t\n\v\f\r]*([+-]?)([0-9]+)")
#: Ranks: the lower wins (pam_limits' LIMITS_DEF_USER, _GROUP, _DEFAULT, _NONE).
USER, GROUP, DEFAULT, NONE = 0, 1, 4, 6
#: parse_uid_range's answers: no range, ":N", "N:", "N:M".
_NO_RANGE, _ONE, _MIN, _MIN_MAX = "none", "one", "min", "min_max"


class LimitLine(NamedTuple):
    """One line pam_limits acts on. ``kind`` is soft, hard or - (both); for a two-field ``DOMAIN -`` line it is
    ``none`` (no limits for that domain) and item and value are empty. ``value`` is ``unlimited`` or the number
    pam_limits reads (KiB for memlock)."""

    path: str
    line: int
    domain: str
    kind: str
    item: str
    value: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


class Login(NamedTuple):
    """The user a login is for, as pam_limits looks it up on the node: ``getpwnam``'s name, uid and primary gid;
    ``groups`` the ``@`` domains of the files (``group_keys``) whose group the user is in; ``unknown`` those whose
    membership could not be looked up."""

    name: str
    uid: int
    gid: int
    groups: frozenset[str] = frozenset()
    unknown: frozenset[str] = frozenset()


class LimitVerdict(NamedTuple):
    """``judge_unlimited``'s finding: ok (the files give the login no limit, soft and hard), problem, or
    not_checked (what pam_limits does cannot be told from what was read: the reason says why)."""

    status: Literal["ok", "problem", "not_checked"]
    reason: str


def limits_d_order(names: Iterable[str]) -> list[str]:
    """The ``*.conf`` names of limits.d in the order pam_limits reads them: C order of the names (``strcmp``, which
    for UTF-8 names is the order of their code points), those starting with ``.`` left out as the glob leaves them."""
    return sorted(n for n in names if n.endswith(".conf") and not n.startswith(".") and "/" not in n)


def _strtoul(text: str) -> int | None:
    """What C's strtoul reads from ``text``: None where it reads no digit; a negative number wraps around."""
    match = _STRTOUL.match(text)
    if not match:
        return None
    number = min(int(match.group(2)), _ULONG_MAX)
    return (-number) % (_ULONG_MAX + 1) if match.group(1) == "-" else number


def _value(item: str, text: str) -> str | None:
    if text in UNLIMITED:
        return "unlimited"
    number = _strtoul(text)
    if number is None:
        return None
    if item in KIB_ITEMS and number >= _ULONG_MAX // 1024:
        return "unlimited"  # process_limit: "rlimit_value >= RLIM_INFINITY/1024" becomes RLIM_INFINITY
    return str(number)


def _uid_range(domain: str) -> tuple[str, int, int] | None:
    """parse_uid_range: (kind, min, max) of a uid range, or of a gid range after ``@`` (``%`` too); None for a
    ``:`` that is not a valid range (pam_limits skips that line)."""
    if ":" not in domain:
        return (_NO_RANGE, 0, 0)
    low, _, high = (domain[1:] if domain[:1] in ("@", "%") else domain).partition(":")
    exact = _STRTOUL.fullmatch(high) if high else None
    if low and not _STRTOUL.fullmatch(low) or high and not exact:
        return None
    low_id, high_id = (_strtoul(low) or 0) & _UID_MAX, (_strtoul(high) or 0) & _UID_MAX  # uid_t is 32 bits
    if not low:
        return (_ONE, high_id, high_id) if high else None
    return (_MIN_MAX, low_id, high_id) if high else (_MIN, low_id, 0)


def _in_range(found: tuple[str, int, int], number: int) -> bool:
    kind, low, high = found
    return number >= low and (kind == _MIN or number <= high)


def _group_key(domain: str) -> str | None:
    """What a ``@group`` or ``@:GID`` domain asks the group database for (``:GID`` for a gid); None otherwise."""
    found = _uid_range(domain)
    if not domain.startswith("@") or found is None or found[0] not in (_NO_RANGE, _ONE):
        return None
    return domain[1:] if found[0] == _NO_RANGE else f":{found[2]}"


def _fields(line: str) -> list[str]:
    """split(): three fields separated by spaces and tabs, then the rest of the line, trimmed, as the fourth."""
    fields: list[str] = []
    rest = line
    for _ in range(3):
        rest = rest.lstrip(" \t")
        end = next((at for at, char in enumerate(rest) if char in " \t"), len(rest))
        if not end:
            return fields
        fields.append(rest[:end])
        rest = rest[end + 1 :]
    value = rest.strip(" \t")
    return fields + [value] if value else fields


def parse_limits(text: str, path: str) -> list[LimitLine]:
    """The lines of one limits file that pam_limits acts on, in file order."""
    found: list[LimitLine] = []
    for number, raw in enumerate(text.split("\n"), start=1):  # getline: lines end at \n only
        line = raw.lstrip(" \t\n\v\f\r").split("#", 1)[0]
        fields = _fields(line)
        if not fields or _uid_range(fields[0]) is None:
            continue  # pam_limits: "invalid uid range - skipped"
        if len(fields) == 2 and fields[1].startswith("-"):
            found.append(LimitLine(path, number, fields[0], "none", "", ""))
            continue
        if len(fields) < 4:
            continue  # pam_limits: "invalid line - skipped"
        domain, kind, item = fields[0], fields[1].lower(), fields[2].lower()
        value = _value(item, fields[3].lower())
        if kind not in ("soft", "hard", "-") or value is None:
            continue  # an unknown type, or a value pam_limits would not read
        found.append(LimitLine(path, number, domain, kind, item, value))
    return found


def read_limits(files: Sequence[tuple[str, str]]) -> list[LimitLine]:
    """Every line of ``files`` ((path, text) in pam_limits' order: limits.conf, then limits.d by limits_d_order)."""
    return [entry for path, text in files for entry in parse_limits(text, path)]


def with_vendor_files(
    files: Sequence[tuple[str, str]], vendor_files: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The files a Linux-PAM built with a vendor directory reads, in its order (read_limits_dir): ``files`` (the
    /etc ones, as read_limits takes them) and ``vendor_files`` (VENDOR_LIMITS_CONF, VENDOR_LIMITS_D/*.conf)."""
    main = [f for f in files if f[0] == LIMITS_CONF] or [f for f in vendor_files if f[0] == VENDOR_LIMITS_CONF]
    drop_ins = {path.rsplit("/", 1)[1]: (path, text) for path, text in vendor_files if path != VENDOR_LIMITS_CONF}
    drop_ins.update({path.rsplit("/", 1)[1]: (path, text) for path, text in files if path != LIMITS_CONF})
    return main + [drop_ins[name] for name in sorted(drop_ins)]


def group_keys(lines: Iterable[LimitLine]) -> list[str]:
    """The groups the lines name (``@group``, ``@:GID`` as ``:GID``): what to look up for ``parse_login``."""
    return sorted({key for key in (_group_key(entry.domain) for entry in lines) if key})


def parse_login(name: str, passwd: str, gids: str, group_entries: str, keys: Iterable[str]) -> Login | str:
    """``name``'s Login from the node's ``getent passwd NAME`` (getpwnam), ``id -G NAME`` (getgrouplist) and
    ``getent group KEY...`` for ``keys`` (group_keys, ``:GID`` asked as GID): in a group when the group exists and
    is the primary group, lists the user or is among its groups, as pam_modutil_user_in_group_nam_* decide. A
    reason (str) where the user or their groups cannot be read."""
    entry = passwd.split("\n", 1)[0].split(":")
    if len(entry) < 4 or not entry[2].isdigit() or not entry[3].isdigit():
        return f"no passwd entry for {name} ({passwd.strip()!r})"
    member_of = gids.split()
    if not member_of or not all(gid.isdigit() for gid in member_of):
        return f"the groups of {name} are unreadable (id -G: {gids.strip()!r})"
    user, uid, gid = entry[0], int(entry[2]), int(entry[3])
    by_name: dict[str, tuple[int, list[str]]] = {}
    by_gid: dict[int, tuple[int, list[str]]] = {}
    for line in group_entries.splitlines():
        group = line.split(":")
        if len(group) >= 4 and group[2].isdigit():
            found = (int(group[2]), group[3].split(","))
            by_name.setdefault(group[0], found)
            by_gid.setdefault(found[0], found)
    user_gids = {gid, *map(int, member_of)}
    groups, unknown = set(), set()
    for key in keys:
        if key[:1] != ":" and key.isdigit():
            unknown.add(key)  # getent reads a number as a gid: a group named so cannot be asked for by name
            continue
        group_found = by_gid.get(int(key[1:])) if key[:1] == ":" else by_name.get(key)
        if group_found and (group_found[0] in user_gids or user in group_found[1]):
            groups.add(key)
    return Login(user, uid, gid, frozenset(groups), frozenset(unknown))


def _rank(domain: str, login: Login, debian_root_rule: bool) -> int | None:
    """The rank a ``DOMAIN TYPE ITEM VALUE`` line of ``domain`` applies to ``login`` at; None where it does not."""
    if domain == login.name:
        return USER
    found = _uid_range(domain)
    if found is None or domain.startswith("%"):
        return None  # an invalid range; % is for maxlogins only
    exempt = debian_root_rule and login.uid == 0  # Debian's patch: no * or @group line for uid 0
    if domain.startswith("@"):
        if found[0] in (_NO_RANGE, _ONE):
            key = _group_key(domain)
            applies = key in login.groups and not (exempt and found[0] == _NO_RANGE)
        else:
            applies = _in_range(found, login.gid)  # ranges: the primary group only (limits.conf(5))
        return GROUP if applies else None
    if found[0] == _NO_RANGE:
        return DEFAULT if domain == "*" and not exempt else None
    return USER if _in_range(found, login.uid) else None


def _no_limits(domain: str, login: Login) -> bool:
    """Whether a two-field ``DOMAIN -`` line applies to ``login`` (no Debian exception for root here)."""
    found = _uid_range(domain)
    if domain == login.name:
        return True
    if found is None:
        return False
    if domain.startswith("@"):
        return _group_key(domain) in login.groups if found[0] in (_NO_RANGE, _ONE) else _in_range(found, login.gid)
    return found[0] != _NO_RANGE and _in_range(found, login.uid)


def login_limit(
    lines: Iterable[LimitLine], login: Login, item: str, *, debian_root_rule: bool
) -> tuple[LimitLine | None, dict[str, LimitLine | None]]:
    """What pam_limits does for ``login`` with ``item``: the ``DOMAIN -`` line that made it set no limit at all
    (or None), and the line that set the soft and the hard limit (None where none did). ``debian_root_rule``: the
    node's pam_limits carries Debian's patch (Debian, Ubuntu)."""
    source = {"soft": NONE, "hard": NONE}
    found: dict[str, LimitLine | None] = {"soft": None, "hard": None}
    for entry in lines:
        if entry.kind == "none":
            if _no_limits(entry.domain, login):
                return entry, found
            continue
        rank = _rank(entry.domain, login, debian_root_rule) if entry.item == item.lower() else None
        for kind in ("soft", "hard"):
            if rank is None or entry.kind not in (kind, "-"):
                continue
            if source[kind] < rank:
                break  # process_limit returns: a "-" line stopped at soft sets no hard limit either
            source[kind], found[kind] = rank, entry
    return None, found


def _problems(runs: Sequence[Sequence[LimitLine]], login: Login, item: str, debian_root_rule: bool) -> list[str]:
    """What keeps ``item`` of ``login`` from being unlimited after pam_limits ran once per entry of ``runs`` (the
    lines each run reads): a run sets what its lines give and a later run replaces it (setup_limits)."""
    stops: list[LimitLine] = []
    found: dict[str, LimitLine | None] = {"soft": None, "hard": None}
    for lines in runs:
        stop, setting = login_limit(lines, login, item, debian_root_rule=debian_root_rule)
        if stop is not None:
            stops.append(stop)
        else:
            found.update({kind: entry for kind, entry in setting.items() if entry is not None})
    if stops and not any(found.values()):
        return [f"'{stop.domain} -' ({stop.where}): pam_limits sets no limit at all for {login.name}" for stop in stops]
    problems = []
    for kind, entry in found.items():
        if entry is None:
            problems.append(f"no line sets {login.name}'s {kind} {item}")
        elif entry.value != "unlimited":
            problems.append(f"{login.name}'s {kind} {item} is {entry.value} ({entry.where}: {entry.domain} "
                            f"{entry.kind} {entry.item})")  # fmt: skip
    return problems


def _runs_text(runs: Sequence[LimitsRun], conf_files: Mapping[str, str]) -> str:
    said = [
        f"{PAM_LIMITS_MODULE} at {run.where}"
        + ("" if run.conf is None else f" reads only {run.conf}")
        + ("" if run.conf is None or run.conf in conf_files else ", which does not exist: it sets no limit")
        for run in runs
    ]
    return f" ({'; '.join(said)})" if said else ""


def judge_unlimited(
    files: Sequence[tuple[str, str]],
    login: Login,
    debian_root_rule: bool,
    vendor_files: Sequence[tuple[str, str]] = (),
    item: str = "memlock",
    runs: Sequence[LimitsRun] = (),
    conf_files: Mapping[str, str] | None = None,
) -> LimitVerdict:
    """Whether pam_limits gives ``login`` no ``item`` limit, soft and hard, from ``files`` (the /etc ones in its
    order). ``debian_root_rule``: the node's pam_limits carries Debian's patch (Debian, Ubuntu). ``vendor_files``
    (those that exist under /usr/etc/security): judged with and without them; a verdict only where both agree.
    ``runs``: the pam_limits runs of the login (ssh_limits_runs), each reading ``files`` or its conf= file alone
    (the text of those that exist in ``conf_files``); none given: one run without conf=."""
    confs = dict(conf_files or {})
    chosen_runs = list(runs) or [LimitsRun("", None)]
    vendor_files = vendor_files if any(run.conf is None for run in chosen_runs) else ()  # conf=: no vendor files
    variants = [list(files)] + ([with_vendor_files(files, vendor_files)] if vendor_files else [])
    found = []
    for chosen in variants:
        per_run = [read_limits(chosen if run.conf is None else [(run.conf, confs[run.conf])] if run.conf in confs
                               else []) for run in chosen_runs]  # fmt: skip
        unknown = sorted({e.domain for lines in per_run for e in lines if (e.kind == "none" or e.item == item.lower())
                          and _group_key(e.domain) in login.unknown})  # fmt: skip
        if unknown:
            return LimitVerdict("not_checked", f"whether {login.name} is in {', '.join(unknown)} cannot be looked "
                                "up (getent takes a number for a gid)")  # fmt: skip
        found.append("; ".join(_problems(per_run, login, item, debian_root_rule)))
    paths = ", ".join(path for path, _ in vendor_files)
    vendor = f" (with or without the vendor files {paths})" if vendor_files else ""
    stack = _runs_text(runs, confs)
    if not any(found):
        return LimitVerdict("ok", f"pam_limits gives {login.name} no {item} limit, soft and hard{vendor}{stack}")
    if all(found):
        both = found[0] if found[0] == found[-1] else f"{found[0]}; with the vendor files: {found[1]}"
        return LimitVerdict("problem", both + vendor + stack)
    return LimitVerdict("not_checked", f"pam_limits reads {paths} only where "
                        "Linux-PAM was built with a vendor directory (not known here); without them: "
                        f"{found[0] or 'unlimited'}; with them: {found[1] or 'unlimited'}{stack}")  # fmt: skip


# The PAM session stack of an SSH login: which pam_limits runs it gets (see the module's docstring).

PAM_D = "/etc/pam.d"
#: OpenSSH's PAM service name, and the stack libpam uses for a service that has no session lines.
SSHD_SERVICE, OTHER_SERVICE = "sshd", "other"
#: libpam's PAM_SUBSTACK_MAX_LEVEL: includes nested deeper are refused.
_MAX_INCLUDE = 16
#: libpam's return values in _pam_token_returns' order (pam_tokens.h); "default" stands for every one not named.
_RETURNS = (
    "success", "open_err", "symbol_err", "service_err", "system_err", "buf_err", "perm_denied", "auth_err",
    "cred_insufficient", "authinfo_unavail", "user_unknown", "maxtries", "new_authtok_reqd", "acct_expired",
    "session_err", "cred_unavail", "cred_expired", "cred_err", "no_module_data", "conv_err", "authtok_err",
    "authtok_recover_err", "authtok_lock_busy", "authtok_disable_aging", "try_again", "ignore", "abort",
    "authtok_expired", "module_unknown", "bad_item", "conv_again", "incomplete",
)  # fmt: skip
_SPACE = " \t\n\v\f\r"  # C's isspace
_CONTROL = re.compile(rf"[{_SPACE}]*([a-z_]+)[{_SPACE}]*=[{_SPACE}]*(ignore|ok|done|bad|die|reset|[0-9]+)")
#: The control words (pam_handlers.c): success and new_authtok_reqd, ignore, then every other answer.
_KEYWORDS = {
    "required": ("ok", "ignore", "bad"),
    "requisite": ("ok", "ignore", "die"),
    "optional": ("ok", "ignore", "ignore"),
    "sufficient": ("done", "ignore", "ignore"),
}
PAM_LIMITS_MODULE = "pam_limits.so"


class PamLine(NamedTuple):
    """One entry of a session stack as libpam lays it out: a module line (``module`` and its ``args``), or the
    entry that opens a substack (``module`` empty; its lines follow at ``level`` + 1). ``actions``: what the line
    may do, whatever its module answers: ok, done, bad, die, ignore, reset, or a jump (a number)."""

    path: str
    line: int
    level: int
    module: str
    args: tuple[str, ...]
    actions: frozenset[str | int]

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


class LimitsRun(NamedTuple):
    """One pam_limits.so line every SSH login runs: where it is, and its ``conf=`` file (None: limits.conf and
    limits.d)."""

    where: str
    conf: str | None


def _pam_lines(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, fields) of each line libpam assembles from ``text`` (_pam_line_assemble,
    _pam_tokenize)."""
    found: list[tuple[int, list[str]]] = []
    joined, first = "", 0
    for number, raw in enumerate(text.split("\n"), start=1):  # getline: lines end at \n only
        continued = raw.rstrip(" \t").endswith("\\") and "#" not in raw
        piece = raw.rstrip(" \t")[:-1] + " " if continued else raw
        joined, first = joined + piece.lstrip(" \t").split("#", 1)[0], first or number
        if not continued:
            fields = _fields_of(joined)
            if fields:
                found.append((first, fields))
            joined, first = "", 0
    return found


def _fields_of(line: str) -> list[str]:
    fields: list[str] = []
    at = 0
    while True:
        while at < len(line) and line[at] in " \t\n":
            at += 1
        if at >= len(line):
            return fields
        if line[at] == "[":  # one field up to the first ]; \] is a ] inside it
            chars, at = [], at + 1
            while at < len(line) and line[at] != "]":
                at += 1 if line[at] == "\\" and line[at + 1 : at + 2] == "]" else 0
                chars.append(line[at])
                at += 1
            fields.append("".join(chars))
            at += 1
        else:
            end = at
            while end < len(line) and line[end] not in " \t\n":
                end += 1
            fields.append(line[at:end])
            at = end


def _actions(control: str) -> frozenset[str | int]:
    """What a line with this control field may do (_pam_parse_control; a field it cannot parse: bad)."""
    if control.lower() in _KEYWORDS:  # matched ignoring case, even written [required]
        good, ignore, other = _KEYWORDS[control.lower()]
        return frozenset({good, ignore, other})
    chosen: list[str | int | None] = [None] * len(_RETURNS)
    at = 0
    while control[at:].strip(_SPACE):
        match = _CONTROL.match(control, at)
        name = match.group(1) if match else ""
        if not match or name not in (*_RETURNS, "default") or match.group(2) == "0" or len(match.group(2)) > 9:
            return frozenset({"bad"})  # libpam: "treat everything as bad"
        action: str | int = int(match.group(2)) if match.group(2).isdigit() else match.group(2)
        if name == "default":
            chosen = [action if c is None else c for c in chosen]
        else:
            chosen[_RETURNS.index(name)] = action
        at = match.end()
    return frozenset("bad" if c is None else c for c in chosen)


def _session_lines(name: str, read: Callable[[str], str | None], level: int, depth: int,
                   only_session: bool) -> list[PamLine] | str:  # fmt: skip
    """The session stack entries of pam.d file ``name`` (a path, or a name in /etc/pam.d) in libpam's order, or
    why they cannot be told. ``only_session``: the file is included for session lines (libpam then takes a line
    of an unknown type for a session line that fails)."""
    if depth >= _MAX_INCLUDE:
        return f"the pam.d includes nest {_MAX_INCLUDE} deep at {name} (a loop?): libpam refuses them"
    path = name if name.startswith("/") else f"{PAM_D}/{name}"
    text = read(path)
    if text is None:
        return f"{path} does not exist"
    stack: list[PamLine] = []
    for number, fields in _pam_lines(text):
        kind = (fields[0][1:] if fields[0].startswith("-") else fields[0]).lower()  # -session: no load error logged
        rest, control = fields[1:], (fields[1].lower() if len(fields) > 1 else "")
        found: list[PamLine] | str
        if kind == "@include":  # Debian: FILE's lines in place, of the type the including file is read for
            found = (
                _session_lines(rest[0], read, level, depth + 1, only_session) if rest else f"{path}:{number}: @include"
            )
        elif kind in ("auth", "account", "password") or kind != "session" and not only_session:
            continue
        elif control not in ("include", "substack"):  # a line of an unknown type fails: its module is not run
            module = rest[1] if len(rest) > 1 and kind == "session" else ""
            found = [PamLine(path, number, level, module, tuple(rest[2:]), _actions(rest[0] if rest else ""))]
        elif len(rest) < 2:
            found = f"{path}:{number}: session {control} names no file"
        elif control == "include":
            found = _session_lines(rest[1], read, level, depth + 1, True)
        else:
            inner = _session_lines(rest[1], read, level + 1, depth + 1, True)
            found = inner if isinstance(inner, str) else [PamLine(path, number, level, "", (), frozenset()), *inner]
        if isinstance(found, str):
            return found
        stack += found
    return stack


def session_stack(read: Callable[[str], str | None], service: str = SSHD_SERVICE) -> list[PamLine] | str:
    """The session stack of PAM service ``service`` (sshd's by default) as libpam lays it out from the files
    ``read`` gives (path: text, None where there is no such file), or why it cannot be told."""
    stack = _session_lines(service, read, 0, 0, False)
    if isinstance(stack, list) and not stack:  # libpam uses other's session lines then
        stack = _session_lines(OTHER_SERVICE, read, 0, 0, False)
    return stack


def _after(stack: Sequence[PamLine], at: int, jump: int | None) -> int:
    """Where libpam goes on after entry ``at`` jumps ``jump`` entries (a substack counts as one) or, for None, ends
    its level (``done`` or ``die``: the rest of the substack, or of the whole stack at level 0)."""
    level, here = stack[at].level, at
    left = len(stack) if jump is None else jump
    while here + 1 < len(stack) and stack[here + 1].level >= level and left > 0:
        here += 1
        while jump is not None and here + 1 < len(stack) and stack[here + 1].level > level:
            here += 1
        left -= 1
    return here + 1


def _next(stack: Sequence[PamLine], at: int) -> set[int]:
    """The entries libpam may run after entry ``at`` (len(stack): the stack's end, the login goes on); a ``die`` at
    level 0 fails the session and with it the login, so it leads nowhere."""
    found = set()
    for action in stack[at].actions or {"ok"}:
        if isinstance(action, int):
            found.add(_after(stack, at, action))
        elif action == "done":  # ends the level only where nothing before it failed: both may happen
            found |= {at + 1, _after(stack, at, None)}
        elif action == "die":
            found |= {_after(stack, at, None)} if stack[at].level > 0 else set()
        else:
            found.add(at + 1)
    return found


def _walk(stack: Sequence[PamLine], avoiding: int | None = None) -> tuple[set[int], bool]:
    """The entries some way through the stack runs without running entry ``avoiding``, and whether one of those
    ways ends the session (a login)."""
    if not stack or avoiding == 0:
        return set(), not stack
    seen, todo, ends = {0}, [0], False
    while todo:
        for following in _next(stack, todo.pop()):
            if following == len(stack):
                ends = True
            elif following not in seen and following != avoiding:
                seen.add(following)
                todo.append(following)
    return seen, ends


def ssh_limits_runs(read: Callable[[str], str | None], service: str = SSHD_SERVICE) -> list[LimitsRun] | LimitVerdict:
    """The pam_limits runs every login of PAM service ``service`` (sshd) gets, in order, from the pam.d files
    ``read`` gives (path: text; None where there is no such file); a LimitVerdict where none does (problem) or what
    runs cannot be told from the files (not_checked)."""
    stack = session_stack(read, service)
    if isinstance(stack, str):
        return LimitVerdict("not_checked", f"the PAM session stack of {service} cannot be read: {stack}")
    reached, _ = _walk(stack)
    runs, unsure = [], []
    for at, entry in enumerate(stack):
        if entry.module.rsplit("/", 1)[-1] != PAM_LIMITS_MODULE or at not in reached:
            continue
        if _walk(stack, avoiding=at)[1]:  # a login that skips it
            unsure.append(entry.where)
            continue
        confs = [arg[len("conf=") :] for arg in entry.args if arg.startswith("conf=")]
        runs.append(LimitsRun(entry.where, confs[-1] if confs else None))
    files = ", ".join(dict.fromkeys(entry.path for entry in stack))
    if unsure:
        return LimitVerdict("not_checked", f"{PAM_LIMITS_MODULE} at {', '.join(unsure)} runs or not depending on "
                            f"what a module before it answers (a jump or done over it; {files})")  # fmt: skip
    if not runs:
        return LimitVerdict("problem", f"no {PAM_LIMITS_MODULE} runs in the PAM session stack of {service} ({files}): "
                            "the limits files do not apply to an SSH login, which keeps sshd's own limits")  # fmt: skip
    return runs


#: The systemd units sshd runs as: Debian's ssh.service (sshd.service an alias of it), RHEL's sshd.service.
SSH_UNITS = ("ssh.service", "sshd.service")


def without_pam(node: str, use_pam: UsePam, sshd_memlock: tuple[str, str, str] | str | None) -> LimitVerdict | None:
    """The memlock verdict of an SSH login to ``node`` where sshd may run no PAM (``use_pam``: sshd_config.use_pam):
    None where it runs PAM (the session stack decides: ssh_limits_runs). Without PAM no limits file applies and the
    login keeps sshd's own limit, ``sshd_memlock`` (soft and hard as ``ulimit -l`` prints them, and where they were
    read; or why they were not): a problem where that is not unlimited, else not judged, never ok (the limits files
    give the login nothing). Where the files do not tell whether sshd runs PAM: not judged."""
    if use_pam.on:
        return None
    if use_pam.on is None:
        return LimitVerdict("not_checked", f"{node}: whether sshd runs PAM, and so pam_limits, for an SSH login "
                            f"cannot be told from its configuration: {use_pam.reason}")  # fmt: skip
    fix = (f"set UsePAM yes ({use_pam.where}) and restart sshd, or raise LimitMEMLOCK= of the ssh service "
           f"({' or '.join(SSH_UNITS)}) to infinity")  # fmt: skip
    off = (f"{node}: sshd runs no PAM ({use_pam.reason}), so pam_limits and the limits files, rdma_core's drop-in "
           "among them, do not apply to an SSH login, which keeps sshd's own memlock")  # fmt: skip
    if isinstance(sshd_memlock, str) or sshd_memlock is None:
        return LimitVerdict("not_checked", f"{off}, not read here ({sshd_memlock or 'not asked'}); {fix}")
    soft, hard, source = sshd_memlock
    if soft == hard == "unlimited":
        return LimitVerdict("not_checked", f"{off}: unlimited ({source}), not the limits files' doing")
    return LimitVerdict("problem", f"{off}: soft {soft}, hard {hard} KiB ({source}); {fix}")
