"""The testinfra suite's JUnit XML as a per-node table, for `rdmaforge verify`.

testinfra runs each test once per host, and the suite records the node of each run as a JUnit property
(``rdmaforge_node``, tests/infra/conftest.py). Results written without it (an older suite) have the host read
back from pytest's id, ``test_x[ansible://node1]``, matched against the hosts the suite was given: a host name may
contain '-', the character pytest also uses to join parameter ids, so that reading can be ambiguous.
"""

from __future__ import annotations

import codecs
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rdmaforge.runner.exit_codes import ExitCode
from rdmaforge.runner.recap import first_line, render_table

#: The JUnit property tests/infra/conftest.py records on each per-node test: the node's inventory name.
NODE_PROPERTY = "rdmaforge_node"
PARAMS = re.compile(r"^(?P<name>[^\[]+)(?:\[(?P<params>.*)\])?$")
#: What follows "ansible://" (or "ssh://", "local://"), up to the next host spec or the end.
HOST_SPEC = re.compile(r"[a-z]+://(.+?)(?=-[a-z]+://|$)")


@dataclass(frozen=True)
class TestOutcome:
    test: str  # test function name without the host parameter
    host: str | None  # None: not a per-host test (a collection error, a plain test)
    status: str  # passed | failed | error | skipped
    message: str = ""


@dataclass
class NodeResult:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[TestOutcome] = field(default_factory=list)

    @property
    def result(self) -> str:
        """FAIL, pass, or "not judged": a node whose every test was skipped proved nothing, so it is not a pass."""
        if self.failed:
            return "FAIL"
        return "pass" if self.passed else "not judged"


def _unescaped(text: str) -> str:
    """A test id as pytest wrote it, its ASCII escapes undone: pytest writes a non-ASCII host name (``nœud``) as
    ``n\\u0153ud`` in the id."""
    if "\\" not in text or not text.isascii():
        return text
    try:
        return codecs.decode(text, "unicode_escape")
    except UnicodeDecodeError:
        return text


def host_of(params: str, hosts: Sequence[str]) -> str | None:
    """The host in a parameter id such as ``ansible://node1`` or ``ansible://node-1-erdma``."""
    for name in HOST_SPEC.findall(_unescaped(params)):
        known = [h for h in hosts if name == h or name.startswith(f"{h}-")]
        if known:
            return max(known, key=len)
        if not hosts:
            return str(name)
    return None


def _status(case: ET.Element) -> tuple[str, str]:
    for tag, status in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        child = case.find(tag)
        if child is not None:
            return status, child.get("message") or (child.text or "").strip()
    return "passed", ""


def parse_junit(path: Path, hosts: Sequence[str] = ()) -> list[TestOutcome]:
    outcomes = []
    for case in ET.parse(path).getroot().iter("testcase"):
        match = PARAMS.match(case.get("name", ""))
        name = match.group("name") if match else case.get("name", "")
        params = match.group("params") if match and match.group("params") else ""
        status, message = _status(case)
        recorded = [p.get("value") for p in case.iter("property") if p.get("name") == NODE_PROPERTY]
        if recorded and recorded[0] and (not hosts or recorded[0] in hosts):
            host: str | None = recorded[0]
        else:
            host = host_of(params, hosts) if params else None
        outcomes.append(TestOutcome(name, host, status, message))
    return outcomes


def read_junit(path: Path, hosts: Sequence[str] = ()) -> tuple[list[TestOutcome], str]:
    """parse_junit, and why nothing could be read: no file (pytest stopped before writing it), or one that is no
    complete XML (pytest killed while writing it, a full disk). Either way no node has a result: not judged."""
    if not path.is_file():
        return [], f"{path}: pytest wrote no results"
    try:
        return parse_junit(path, hosts), ""
    except (ET.ParseError, OSError) as exc:
        return [], f"{path}: the suite's results cannot be read ({exc})"


def by_node(outcomes: Iterable[TestOutcome], hosts: Sequence[str] = ()) -> dict[str | None, NodeResult]:
    """Counts per node; each of ``hosts`` (the nodes the suite was run on) is there even with no result at all,
    which makes it "not judged" (a -k or a collection that selected none of its tests proved nothing there)."""
    nodes: dict[str | None, NodeResult] = {host: NodeResult() for host in hosts}
    for outcome in outcomes:
        node = nodes.setdefault(outcome.host, NodeResult())
        if outcome.status == "passed":
            node.passed += 1
        elif outcome.status == "skipped":
            node.skipped += 1
        else:
            node.failed += 1
            node.failures.append(outcome)
    return nodes


#: pytest's exit status when its selection (-k) left no test to run (pytest.ExitCode.NO_TESTS_COLLECTED).
NO_TESTS_COLLECTED = 5


def exit_code(outcomes: Sequence[TestOutcome], unreachable: Sequence[str], pytest_rc: int,
              hosts: Sequence[str] = (), keyword: bool = False) -> ExitCode:  # fmt: skip
    """3 a host unreachable, 2 a test failed on a host, 1 the suite could not run (pytest's 2-5), 5 a node of
    ``hosts`` with no result or on which every test was skipped (nothing judged there), else 0."""
    if unreachable:
        return ExitCode.UNREACHABLE
    if any(o.status in ("failed", "error") and o.host is not None for o in outcomes):
        return ExitCode.HOST_FAILED
    if any(o.status in ("failed", "error") for o in outcomes):
        return ExitCode.ERROR  # the suite itself (a collection error): no node's test failed, none was judged
    if pytest_rc == NO_TESTS_COLLECTED and not outcomes and hosts and keyword:
        return ExitCode.INCOMPLETE  # a -k that selects no test on any node: no node was judged, none failed
    if pytest_rc != 0 or not outcomes:
        return ExitCode.ERROR
    if any(result.result == "not judged" for host, result in by_node(outcomes, hosts).items() if host is not None):
        return ExitCode.INCOMPLETE
    return ExitCode.OK


def skipped_lines(outcomes: Iterable[TestOutcome]) -> list[str]:
    """Each skipped test once, with the nodes it was skipped on and pytest's reason: what the table's skipped
    column counts, named (the same test skipped for different reasons gets a line per reason)."""
    nodes: dict[tuple[str, str], list[str]] = {}
    for outcome in outcomes:
        if outcome.status == "skipped":
            reason = first_line(" ".join(outcome.message.split()), 200).removeprefix("Skipped: ")
            nodes.setdefault((outcome.test, reason), []).append(outcome.host or "(suite)")
    return [f"  {test} on {', '.join(hosts)}: {reason or 'no reason given'}" for (test, reason), hosts in nodes.items()]


def render(outcomes: Sequence[TestOutcome], unreachable: Sequence[str] = (), hosts: Sequence[str] = ()) -> str:
    """One row per node (each of ``hosts`` too, when no test reported on it): passed, failed, skipped, verdict;
    then each failing test with its message, each skipped test with its nodes and reason, and the nodes no test
    reported on."""
    nodes = by_node(outcomes, hosts)
    rows = [[host or "(suite)", str(r.passed), str(r.failed), str(r.skipped), r.result] for host, r in nodes.items()]
    rows += [[host, "-", "-", "-", "UNREACHABLE"] for host in unreachable]
    lines = [render_table(rows, ["node", "passed", "failed", "skipped", "result"]) if rows else "no test ran"]
    failures = [f for r in nodes.values() for f in r.failures]
    if failures:
        lines.append("")
        # pytest's assertion messages span lines ("assert (False)" then "+ where False = <file ...>.exists").
        lines += [f"  {f.host or '(suite)'}: {f.test}: {first_line(' '.join(f.message.split()), 200)}"
                  for f in failures]  # fmt: skip
    skipped = skipped_lines(outcomes)
    if skipped:
        lines += ["", "skipped (not judged):", *skipped]
    silent = [host for host, r in nodes.items() if host is not None and not (r.passed or r.failed or r.skipped)]
    if silent:
        lines += ["", f"no test result (not judged): {', '.join(silent)}"]
    return "\n".join(lines)
