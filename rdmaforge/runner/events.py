"""What rdmaforge keeps from ansible-runner's event stream: failures with their messages, unreachable hosts,
facts a play published (the benchmark's run directory), and the final stats.

An event is the dict ansible-runner hands to ``event_handler`` (and writes to job_events/): ``event`` is the
callback name (runner_on_ok, runner_on_failed, runner_on_unreachable, playbook_on_task_start, ...) and
``event_data`` holds ``host``, ``task``, ``task_action`` and the module result ``res``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypeVar

from rdmaforge.runner.secrets import Redactor, redact_text

#: The action names of ansible.builtin.fail / assert as a task result reports them (short, FQCN, legacy).
FAIL_ACTIONS = frozenset({"fail", "ansible.builtin.fail", "ansible.legacy.fail"})
ASSERT_ACTIONS = frozenset({"assert", "ansible.builtin.assert", "ansible.legacy.assert"})


DEBUG_ACTIONS = frozenset({"debug", "ansible.builtin.debug", "ansible.legacy.debug"})
#: A role's argument spec checked before its tasks (Ansible's "Validating arguments against arg spec ..." task):
#: its message is the header "Validation of arguments failed:" and a line per bad argument.
ARGUMENT_SPEC_ACTIONS = frozenset(
    {"validate_argument_spec", "ansible.builtin.validate_argument_spec", "ansible.legacy.validate_argument_spec"}
)


def _forms(*names: str) -> frozenset[str]:
    return frozenset(f"{prefix}{name}" for name in names for prefix in ("", "ansible.builtin.", "ansible.legacy."))


#: Actions that run on the controller alone and reach no node (a task result of theirs says nothing of a
#: connection): checks of the inventory and the arguments, facts set from variables, includes.
CONTROLLER_ACTIONS = (
    FAIL_ACTIONS | ASSERT_ACTIONS | DEBUG_ACTIONS | ARGUMENT_SPEC_ACTIONS
    | _forms("set_fact", "meta", "include_tasks", "include_role", "import_tasks", "import_role", "include_vars",
             "set_stats", "add_host", "group_by")
)  # fmt: skip

#: The message Ansible gives a loop task's result in place of its items' own ones.
LOOP_SUMMARIES = frozenset({"All items completed", "One or more items failed"})


def warning_lines(msg: Any) -> list[str]:
    """The lines of a debug message (a string or a list of them) that start with WARNING."""
    lines = msg if isinstance(msg, list) else [msg]
    return [" ".join(line.split()) for line in lines if isinstance(line, str) and line.lstrip().startswith("WARNING")]


@dataclass(frozen=True)
class HostProblem:
    """A task that failed on a host (or could not reach it)."""

    host: str
    task: str
    action: str
    message: str
    unreachable: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HostChange:
    """A task that reported a change on a host; kept for check runs, where it is what a run would change."""

    host: str
    task: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_Entry = TypeVar("_Entry", HostProblem, HostChange)


def change_message(res: Mapping[str, Any]) -> str:
    """What a changed task changed, in a line: its message, after the file it edits where the message does not name
    it (blockinfile's "Block removed", lineinfile's "line added"); else the file (or package) it names in its result
    or its arguments (a check run's copy reports no path of its own); else its changed loop items."""
    invocation = res.get("invocation")
    arguments = invocation.get("module_args") if isinstance(invocation, Mapping) else None
    sources = (res, arguments if isinstance(arguments, Mapping) else {})
    message = res.get("msg")
    if isinstance(message, str) and message.strip() and message != "All items completed":
        files = [v for source in sources for k in ("dest", "path") if isinstance(v := source.get(k), str) and v]
        return message.strip() if not files or files[0] in message else f"{files[0]}: {message.strip()}"
    for source in sources:
        for key in ("dest", "path", "name"):
            value = source.get(key)
            if isinstance(value, str) and value:
                return value
            if isinstance(value, list) and value and key == "name":
                return ", ".join(str(v) for v in value)
    items = [r.get("item") for r in res.get("results") or [] if isinstance(r, Mapping) and r.get("changed")]
    return ", ".join(str(i.get("name", i.get("path", i)) if isinstance(i, Mapping) else i) for i in items)


def result_message(res: Mapping[str, Any]) -> str:
    """What a person needs from a module result: msg, else stderr, else the failed loop items' messages. A loop's
    summary ("All items completed" of a node that could not be reached) gives way to its items: the first
    unreachable item's message (the SSH error), else those of the failed items, each once."""
    items = [r for r in res.get("results") or [] if isinstance(r, Mapping)]
    if res.get("msg") in LOOP_SUMMARIES and items:
        unreachable = [r for r in items if r.get("unreachable")]
        if unreachable:
            return result_message(unreachable[0])
        if any(r.get("failed") for r in items):
            return "; ".join(dict.fromkeys(result_message(r) for r in items if r.get("failed")))
    for key in ("msg", "stderr", "reason"):
        value = res.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, list) and value:
            return "; ".join(str(v) for v in value)
    failed = [r for r in items if r.get("failed")]
    if failed:
        return "; ".join(result_message(item) for item in failed)
    if res.get("rc") not in (None, 0):
        return f"exit status {res['rc']}"
    return "failed"


#: How many of Ansible's own warning and error lines a run keeps (EventLog.messages), and how much of each.
MAX_MESSAGES = 200
MAX_MESSAGE_CHARS = 4000


@dataclass
class EventLog:
    """Accumulates what the recap, the JUnit report and the commands need from one run's events."""

    problems: list[HostProblem] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)  # host -> facts set by set_fact/modules
    stats: dict[str, dict[str, int]] | None = None
    #: Ansible ended the playbook early: every host of a play failed, was unreachable or was stopped by
    #: any_errors_fatal ("NO MORE HOSTS LEFT"); the later plays did not run for anyone.
    stopped_early: bool = False
    #: Lines of debug messages that start with "WARNING" (a check that left nodes out, a fabric without devices),
    #: once each: printed under the recap, where a person reads the run's outcome.
    warnings: list[str] = field(default_factory=list)
    #: Keep the changed tasks (``changes``): set for check runs, whose changes are the drift a run would repair.
    #: A first converge changes a hundred tasks a node, too many to keep for every run.
    keep_changes: bool = False
    changes: list[HostChange] = field(default_factory=list)
    #: Hosts a task result came from that may have reached them (unreachable ones too: a connection was tried);
    #: empty when the run stopped on the controller (an argument spec, preflight's checks of the inventory)
    #: before any task went to a node.
    contacted: list[str] = field(default_factory=list)
    #: Ansible's own "[WARNING]"/"[ERROR]" lines outside any task (its verbose events), the first MAX_MESSAGES: what
    #: it says when no host ran (a pattern that matched none, an inventory it cannot parse). The artifacts' stdout
    #: file can lack them: ansible-runner writes only an event's own text to it, so verbose lines that reach it in
    #: the same read as the next event's marker (a loaded machine reads larger chunks) are emitted as events and
    #: never written there.
    messages: list[str] = field(default_factory=list)
    count: int = 0

    def handle(self, event: Mapping[str, Any]) -> None:
        self.count += 1
        name = event.get("event", "")
        data: Mapping[str, Any] = event.get("event_data") or {}
        host = data.get("host")
        if host and host not in self.hosts and name.startswith("runner_on_"):
            self.hosts.append(str(host))
        res: Mapping[str, Any] = data.get("res") or {}
        if (
            host
            and host not in self.contacted
            and name in _RESULTS
            and (name == "runner_on_unreachable" or data.get("task_action") not in CONTROLLER_ACTIONS)
        ):
            self.contacted.append(str(host))
        if self.keep_changes and name == "runner_on_ok" and res.get("changed"):
            role = f"{data['role']} : " if data.get("role") else ""
            self.changes.append(HostChange(str(host), role + str(data.get("task") or ""), change_message(res)))
        if name == "runner_on_failed" and not data.get("ignore_errors"):
            self.problems.append(self._problem(data, res))
        elif name == "runner_on_unreachable":
            self.problems.append(self._problem(data, res, unreachable=True))
        elif name == "runner_on_ok" and data.get("task_action") in DEBUG_ACTIONS:
            for line in warning_lines(res.get("msg")):
                if line not in self.warnings:
                    self.warnings.append(line)
        elif name == "runner_on_ok" and isinstance(res.get("ansible_facts"), Mapping):
            # Facts that plays publish; gathered ansible_* facts are large and already in the fact cache.
            published = {k: v for k, v in res["ansible_facts"].items() if not str(k).startswith("ansible_")}
            self.facts.setdefault(str(host), {}).update(published)
        elif name == "playbook_on_no_hosts_remaining":
            self.stopped_early = True
        elif name == "playbook_on_stats":
            self.stats = {key: dict(data.get(key) or {}) for key in _STAT_KEYS}
        elif name == "verbose" and len(self.messages) < MAX_MESSAGES:
            text = str(event.get("stdout") or "")
            if text.startswith(("[WARNING]", "[ERROR]")):
                self.messages.append(text[:MAX_MESSAGE_CHARS])

    @staticmethod
    def _problem(data: Mapping[str, Any], res: Mapping[str, Any], unreachable: bool = False) -> HostProblem:
        return HostProblem(
            host=str(data.get("host")),
            task=str(data.get("task") or ""),
            action=str(data.get("task_action") or data.get("resolved_action") or ""),
            message=result_message(res),
            unreachable=unreachable,
        )

    def redact(self, known: Redactor) -> None:
        """Secrets out of the failure messages and warnings (what the recap, recap.json and the JUnit reports show);
        the published facts stay as the play set them: commands read them (a benchmark's run directory)."""
        self.problems = [_redacted(p, known) for p in self.problems]
        self.warnings = [redact_text(line, known) for line in self.warnings]
        self.changes = [_redacted(c, known) for c in self.changes]
        self.messages = [redact_text(line, known) for line in self.messages]

    def failures(self, host: str | None = None) -> list[HostProblem]:
        return [p for p in self.problems if not p.unreachable and (host is None or p.host == host)]

    def unreachable(self, host: str | None = None) -> list[HostProblem]:
        return [p for p in self.problems if p.unreachable and (host is None or p.host == host)]

    def fact(self, name: str) -> Any:
        """A fact any host published, e.g. the benchmark's ``benchmark_artifacts`` (set once, run_once)."""
        for facts in self.facts.values():
            if name in facts:
                return facts[name]
        return None


def _redacted(entry: _Entry, known: Redactor) -> _Entry:
    """A failure or a change with the secrets out of its task name and message."""
    return replace(entry, task=redact_text(entry.task, known), message=redact_text(entry.message, known))


_RESULTS = ("runner_on_ok", "runner_on_failed", "runner_on_unreachable")
_STAT_KEYS = ("ok", "changed", "dark", "failures", "skipped", "rescued", "ignored", "processed")
