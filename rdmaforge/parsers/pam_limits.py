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

Standard library only, Python 3.8 (the same rule as the other parsers here). Nothing here raises on odd input.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:  # annotations only; never evaluated at runtime (Python 3.8 targets)
    from collections.abc import Iterable, Sequence

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


def _problems(lines: Sequence[LimitLine], login: Login, item: str, debian_root_rule: bool) -> list[str]:
    stop, found = login_limit(lines, login, item, debian_root_rule=debian_root_rule)
    if stop is not None:
        return [f"'{stop.domain} -' ({stop.where}): pam_limits sets no limit at all for {login.name}"]
    problems = []
    for kind, entry in found.items():
        if entry is None:
            problems.append(f"no line sets {login.name}'s {kind} {item}")
        elif entry.value != "unlimited":
            problems.append(f"{login.name}'s {kind} {item} is {entry.value} ({entry.where}: {entry.domain} "
                            f"{entry.kind} {entry.item})")  # fmt: skip
    return problems


def judge_unlimited(
    files: Sequence[tuple[str, str]],
    login: Login,
    debian_root_rule: bool,
    vendor_files: Sequence[tuple[str, str]] = (),
    item: str = "memlock",
) -> LimitVerdict:
    """Whether pam_limits gives ``login`` no ``item`` limit, soft and hard, from ``files`` (the /etc ones in its
    order). ``debian_root_rule``: the node's pam_limits carries Debian's patch (Debian, Ubuntu). ``vendor_files``
    (those that exist under /usr/etc/security): judged with and without them; a verdict only where both agree."""
    variants = [list(files)] + ([with_vendor_files(files, vendor_files)] if vendor_files else [])
    found = []
    for chosen in variants:
        lines = read_limits(chosen)
        unknown = sorted({e.domain for e in lines if (e.kind == "none" or e.item == item.lower())
                          and _group_key(e.domain) in login.unknown})  # fmt: skip
        if unknown:
            return LimitVerdict("not_checked", f"whether {login.name} is in {', '.join(unknown)} cannot be looked "
                                "up (getent takes a number for a gid)")  # fmt: skip
        found.append("; ".join(_problems(lines, login, item, debian_root_rule)))
    paths = ", ".join(path for path, _ in vendor_files)
    vendor = f" (with or without the vendor files {paths})" if vendor_files else ""
    if not any(found):
        return LimitVerdict("ok", f"pam_limits gives {login.name} no {item} limit, soft and hard{vendor}")
    if all(found):
        both = found[0] if found[0] == found[-1] else f"{found[0]}; with the vendor files: {found[1]}"
        return LimitVerdict("problem", both + vendor)
    return LimitVerdict("not_checked", f"pam_limits reads {paths} only where "
                        "Linux-PAM was built with a vendor directory (not known here); without them: "
                        f"{found[0] or 'unlimited'}; with them: {found[1] or 'unlimited'}")  # fmt: skip
