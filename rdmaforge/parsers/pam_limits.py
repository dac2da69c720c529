"""pam_limits' configuration (``/etc/security/limits.conf`` and ``/etc/security/limits.d/*.conf``), read as
pam_limits reads it, and the effective limit a domain gets from it.

What pam_limits does (Linux-PAM ``modules/pam_limits/pam_limits.c``; ``limits.conf(5)``, ``pam_limits(8)``):

- it reads ``/etc/security/limits.conf``, then every ``/etc/security/limits.d/*.conf`` sorted by file name in C
  (``strcmp``) order; a name starting with ``.`` is not matched by the glob;
- a ``#`` anywhere on a line starts a comment; fields are split on spaces and tabs; a line is ``DOMAIN TYPE ITEM
  VALUE`` (the value is the rest of the line), anything else is skipped, except a two-field ``DOMAIN -``, which makes
  pam_limits set no limit at all for a login it applies to;
- type, item and value are lower-cased; the type is ``soft``, ``hard`` or ``-`` (both); ``-1``, ``-``,
  ``unlimited`` and ``infinity`` mean no limit; a number is read up to its first non-digit, and a value without
  leading digits is ignored;
- a domain is a user name, ``@group``, ``*`` (the default), a uid range ``MIN:MAX`` (ranks as a user line), a gid
  range ``@MIN:MAX`` (ranks as a group line) or ``%...`` (maxlogins only). A user line outranks a group line, which
  outranks ``*``; among lines of the same rank, the later one (in the order above) wins.

Standard library only, Python 3.8 (the same rule as the other parsers here). Nothing here raises on odd input.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # annotations only; never evaluated at runtime (Python 3.8 targets)
    from collections.abc import Iterable, Sequence

LIMITS_CONF = "/etc/security/limits.conf"
LIMITS_D = "/etc/security/limits.d"
#: What pam_limits reads as "no limit".
UNLIMITED = ("-1", "-", "unlimited", "infinity")
_UID_RANGE = re.compile(r"^@?(\d*):(\d*)$")
_LEADING_NUMBER = re.compile(r"^(\d+)")
#: Ranks: the lower wins (pam_limits' LIMITS_DEF_USER, _GROUP, _DEFAULT).
USER, GROUP, DEFAULT = 0, 1, 4


class LimitLine(NamedTuple):
    """One line pam_limits acts on. ``kind`` is soft, hard or - (both); for a two-field ``DOMAIN -`` line it is
    ``none`` (no limits for that domain) and item and value are empty. ``value`` is ``unlimited`` or the number as
    written (KiB for memlock)."""

    path: str
    line: int
    domain: str
    kind: str
    item: str
    value: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def limits_d_order(names: Iterable[str]) -> list[str]:
    """The ``*.conf`` names of limits.d in the order pam_limits reads them: C order of the names (``strcmp``, which
    for UTF-8 names is the order of their code points), those starting with ``.`` left out as the glob leaves them."""
    return sorted(n for n in names if n.endswith(".conf") and not n.startswith(".") and "/" not in n)


def _value(text: str) -> str | None:
    if text in UNLIMITED:
        return "unlimited"
    match = _LEADING_NUMBER.match(text)
    return match.group(1) if match else None


def parse_limits(text: str, path: str) -> list[LimitLine]:
    """The lines of one limits file that pam_limits acts on, in file order."""
    found: list[LimitLine] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip(" \t\r\v\f")
        if not line:
            continue
        fields = line.replace("\t", " ").split(" ")
        fields = [f for f in fields if f]
        if len(fields) == 2 and fields[1] == "-":
            found.append(LimitLine(path, number, fields[0], "none", "", ""))
            continue
        if len(fields) < 4:
            continue  # pam_limits: "invalid line - skipped"
        domain, kind, item = fields[0], fields[1].lower(), fields[2].lower()
        value = _value(" ".join(fields[3:]).lower())
        if kind not in ("soft", "hard", "-") or value is None:
            continue  # an unknown type, or a value pam_limits would not read
        found.append(LimitLine(path, number, domain, kind, item, value))
    return found


def read_limits(files: Sequence[tuple[str, str]]) -> list[LimitLine]:
    """Every line of ``files`` ((path, text) in pam_limits' order: limits.conf, then limits.d by limits_d_order)."""
    return [entry for path, text in files for entry in parse_limits(text, path)]


def rank(domain: str) -> int | None:
    """pam_limits' rank of a domain: USER (a name, a uid range), GROUP (@group, a gid range) or DEFAULT (*);
    None for %... (maxlogins only)."""
    if domain == "*":
        return DEFAULT
    if domain.startswith("%"):
        return None
    return GROUP if domain.startswith("@") else USER


def _may_cover(other: str, domain: str) -> bool:
    """Whether a line of ``other`` may apply to a login that ``domain`` (as the role writes it) covers, going by
    the files alone: '*' covers anyone, a group or a uid range some unknown logins; root is uid 0."""
    if other == domain:
        return False
    if domain == "root":
        match = _UID_RANGE.match(other)
        if match and not other.startswith("@"):
            low, high = match.groups()
            if not low:  # ":N" is exactly uid N
                return high == "0"
            return int(low) <= 0 and (not high or int(high) >= 0)
        return False  # a user line for root outranks every group and * line
    other_rank, own_rank = rank(other), rank(domain)
    return other_rank is not None and own_rank is not None and other_rank < own_rank


def effective(lines: Iterable[LimitLine], domain: str, item: str) -> dict[str, LimitLine | None]:
    """The line that sets ``item``'s soft and hard limit for ``domain`` at its own rank: the last of the domain's
    own lines (``-`` counts for both), None where none does."""
    found: dict[str, LimitLine | None] = {"soft": None, "hard": None}
    for entry in lines:
        if entry.domain == domain and entry.item == item.lower():
            for kind in ("soft", "hard"):
                if entry.kind in (kind, "-"):
                    found[kind] = entry
    return found


def unlimited_problems(lines: Sequence[LimitLine], domain: str, item: str = "memlock") -> list[str]:
    """Why a login ``domain`` covers may not get ``item`` unlimited, soft and hard, from these lines; empty when it
    does. Named: a limit the domain's own lines do not set, or set to a number; a ``DOMAIN -`` line (no limits at
    all); and a line of a higher rank (a user or group line over ``*``, a user line over ``@group``, a uid range
    over root) that sets a number or no limits, for the logins it covers."""
    problems = []
    for kind, entry in effective(lines, domain, item).items():
        if entry is None:
            problems.append(f"no line sets {domain}'s {kind} {item}")
        elif entry.value != "unlimited":
            problems.append(f"{domain}'s {kind} {item} is {entry.value} ({entry.where})")
    for entry in lines:
        if entry.kind == "none" and (entry.domain == domain or _may_cover(entry.domain, domain)):
            problems.append(f"'{entry.domain} -' ({entry.where}): pam_limits sets no limit at all for "
                            f"{'these logins' if entry.domain != domain else domain}")  # fmt: skip
        elif entry.item == item.lower() and entry.value != "unlimited" and _may_cover(entry.domain, domain):
            problems.append(f"{entry.domain}'s {entry.kind} {item} is {entry.value} ({entry.where}), over "
                            f"{domain}'s for the logins it covers")  # fmt: skip
    return problems
