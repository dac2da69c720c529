"""The end-of-run table per host (ok / changed / failed / unreachable / ...), from ansible-runner's stats."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

from rdmaforge.runner.events import ARGUMENT_SPEC_ACTIONS, ASSERT_ACTIONS, FAIL_ACTIONS, HostChange, HostProblem

#: ansible-runner's stats keys -> the recap's column names (the PLAY RECAP line's words).
STAT_COLUMNS = {
    "ok": "ok",
    "changed": "changed",
    "failures": "failed",
    "dark": "unreachable",
    "skipped": "skipped",
    "rescued": "rescued",
    "ignored": "ignored",
}


@dataclass(frozen=True)
class HostRecap:
    host: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0
    #: Ansible stopped this host before the end of the playbook ("NO MORE HOSTS LEFT"): without a failure of
    #: its own, it did not run the rest of the playbook either.
    stopped: bool = False
    #: A --check run: its changes are what a run would change; nothing changed.
    check: bool = False

    @property
    def status(self) -> str:
        """UNREACHABLE, FAILED, NOT_RUN (no task result), STOPPED (the run ended early for it), changed (a check
        run: would_change, one word like recap.json's list) or ok."""
        if self.unreachable:
            return "UNREACHABLE"
        if self.failed:
            return "FAILED"
        if not (self.ok or self.changed or self.skipped or self.rescued or self.ignored):
            return "NOT_RUN"
        if self.stopped:
            return "STOPPED"
        if self.changed:
            return "would_change" if self.check else "changed"
        return "ok"

    def to_dict(self) -> dict[str, int | str]:
        counts = {k: v for k, v in asdict(self).items() if k not in ("stopped", "check")}
        return {**counts, "status": self.status}


def from_stats(
    stats: Mapping[str, Mapping[str, int]] | None,
    hosts: Iterable[str] = (),
    stopped: Iterable[str] = (),
    check: bool = False,
) -> dict[str, HostRecap]:
    """Per-host counters from ``runner.stats`` (or a playbook_on_stats event); ``hosts`` adds hosts with none.

    ``stopped``: hosts Ansible stopped before the end of the playbook (every host after "NO MORE HOSTS LEFT",
    playbook_on_no_hosts_remaining); one with no failure of its own is STOPPED, not ok. any_errors_fatal stops
    the others silently (no event, and ansible-runner turns retry files off): rdmaforge's playbooks therefore
    give each stopped host a failure of its own that says why (roles/preflight/tasks/main.yml). ``check``: the
    stats of a --check run, whose changed hosts would change.
    """
    stopped = set(stopped)
    stats = stats or {}
    names: list[str] = []
    for host in [*hosts, *(h for key in STAT_COLUMNS for h in stats.get(key, {})), *stats.get("processed", {})]:
        if host not in names:
            names.append(host)
    return {
        host: HostRecap(
            host,
            **{column: int(stats.get(key, {}).get(host, 0)) for key, column in STAT_COLUMNS.items()},
            stopped=host in stopped,
            check=check,
        )
        for host in sorted(names, key=_natural)
    }


def _natural(name: str) -> tuple[str, int, str]:
    """node2 before node10."""
    stem = name.rstrip("0123456789")
    digits = name[len(stem) :]
    return stem, int(digits) if digits else -1, name


def failed_hosts(recaps: Mapping[str, HostRecap]) -> list[str]:
    return [h for h, r in recaps.items() if r.failed]


def unreachable_hosts(recaps: Mapping[str, HostRecap]) -> list[str]:
    return [h for h, r in recaps.items() if r.unreachable]


def render_table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """A plain aligned text table (CI logs have no box-drawing guarantees)."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=False)).rstrip()
             for line in [header, *rows]]  # fmt: skip
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


#: How many of a host's changes a check run lists under the recap; ansible/stdout (--diff) has them all.
CHANGES_SHOWN = 10


def render(
    recaps: Mapping[str, HostRecap],
    problems: Sequence[HostProblem] = (),
    warnings: Sequence[str] = (),
    would_change: Sequence[HostChange] = (),
) -> str:
    """The recap table, then each failed task (host, task and message: message_lines, the lines after the first
    indented), then, for a check run, what a run would change (up to CHANGES_SHOWN a host), then the run's WARNING
    lines."""
    header = ["host", *STAT_COLUMNS.values(), "status"]
    rows = [[r.host, *(str(getattr(r, c)) for c in STAT_COLUMNS.values()), r.status] for r in recaps.values()]
    text = render_table(rows, header) if rows else "no host was run"
    details: list[str] = []
    for p in problems:
        first, *rest = message_lines(p.message, p.action)
        details.append(f"  {p.host}: {'unreachable' if p.unreachable else 'failed'}: {p.task}: {first}")
        details += [f"    {line}" for line in rest]
    return "\n".join([text, *details, *would_change_lines(would_change), *(f"  {line}" for line in warnings)])


def would_change_lines(changes: Sequence[HostChange]) -> list[str]:
    """``  HOST: would change: TASK: WHAT`` per change, host by host (node2 before node10) in run order, up to
    CHANGES_SHOWN a host, then a count of the rest."""
    by_host: dict[str, list[HostChange]] = {}
    for change in changes:
        by_host.setdefault(change.host, []).append(change)
    lines: list[str] = []
    for host in sorted(by_host, key=_natural):
        for change in by_host[host][:CHANGES_SHOWN]:
            what = f": {first_line(change.message)}" if change.message else ""
            lines.append(f"  {host}: would change: {change.task}{what}")
        if len(by_host[host]) > CHANGES_SHOWN:
            lines.append(f"  {host}: would change {len(by_host[host]) - CHANGES_SHOWN} more"
                         " (ansible/stdout of the run directory)")  # fmt: skip
    return lines


def first_line(message: str, limit: int = 300) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


#: How many lines of a failure's message the screen shows (preflight lists every problem of a node, one a line);
#: recap.json has them all.
MESSAGE_LINES = 10

#: The actions whose message is a list written on the controller, a line per problem: rdmaforge's fail and assert
#: tasks (preflight's inventory checks) and a role's argument spec (a line per bad argument).
LISTING_ACTIONS = FAIL_ACTIONS | ASSERT_ACTIONS | ARGUMENT_SPEC_ACTIONS


def message_lines(message: str, action: str = "", limit: int = MESSAGE_LINES) -> list[str]:
    """The lines of a failure's message the screen shows (at least one, each cut as first_line cuts it).

    A module's message shows its first line, unless that line is a header ending in ':' ("Validation of arguments
    failed:"): then the lines after it, which say what failed, too. The message of a fail, assert or argument spec
    (LISTING_ACTIONS) shows every line. Either way up to ``limit`` lines, then how many more recap.json has.
    """
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()] or [""]
    if action not in LISTING_ACTIONS and not lines[0].endswith(":"):
        return [first_line(lines[0])]
    shown = [first_line(line) for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"and {len(lines) - limit} more (recap.json)")
    return shown


def one_line(message: str, action: str = "") -> str:
    """message_lines in one line (a doctor finding): a header and the line after it joined by a space, the other
    lines by '; '."""
    first, *rest = message_lines(message, action)
    for line in rest:
        first += (" " if first.endswith(":") else "; ") + line
    return first
