"""A run that reached no host is judged from what Ansible said, even where the stdout file lost it.

A fresh-clone `make test` saw `rdmaforge verify` on an inventory without group 'cluster' exit 1 ("no host matched the
--limit") instead of 64 (bad input), twice, under load. The run's stdout file held one line, "[WARNING]: No hosts
matched, nothing to do"; its job events held all four ("Could not match supplied host pattern, ignoring: cluster"
among them). ansible-runner writes to that file only the last of the verbose lines that reach it in the same read as
the next event's marker (the first test shows it with ansible-runner's own filter); a loaded machine reads larger
chunks. So the commands read Ansible's warning and error lines from the events (EventLog.messages), and where those
say nothing either, list the inventory again (execute.Relisting).

Ansible really runs here; the loss is simulated by two doubles: ``runner_losing_the_file_lines`` cuts the stdout
file at its first warning or error line (what ansible-runner did), ``runner_losing_everything`` drops those lines'
events too (nothing of what Ansible said arrives: the relisting decides).
"""

from __future__ import annotations

import base64
import io
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_runner.utils import OutputEventFilter

from rdmaforge.runner import command, execute, inventory_list
from rdmaforge.runner.exit_codes import ExitCode

#: What every command says of an inventory without group 'cluster' (tests/unit/test_lifecycle_cli.py).
MISSING_CLUSTER = "no host was run: the inventory has no host in 'cluster', the group the playbook runs on"
#: Ansible's lines of the failed verify run, in order (its job events).
SAID = [
    "[WARNING]: Could not match supplied host pattern, ignoring: cluster",
    "[WARNING]: No hosts matched, nothing to do",
]


def test_ansible_runner_writes_only_the_last_verbose_line_before_an_event() -> None:
    """ansible-runner's OutputEventFilter, given Ansible's two warnings and the next event's marker in one read: both
    lines become events, only the second reaches the stdout file."""
    stdout = io.StringIO()
    events: list[str] = []
    data = base64.b64encode(json.dumps({"event": "playbook_on_start", "uuid": "u1"}).encode()).decode()
    marker = f"\x1b[K{data}\x1b[{len(data)}D\x1b[K"
    output = OutputEventFilter(stdout, lambda event: events.append(str(event.get("stdout"))))  # type: ignore[arg-type]
    output.write("".join(f"{line}\r\n" for line in SAID) + marker)
    assert events == SAID
    assert stdout.getvalue() == f"{SAID[-1]}\n"


def cut_stdout(kwargs: dict[str, Any], lost: list[str]) -> None:
    stdout = Path(kwargs["artifact_dir"]) / kwargs["ident"] / "stdout"
    lines = stdout.read_text().splitlines(keepends=True)
    cut = next((i for i, line in enumerate(lines) if line.startswith(("[WARNING]", "[ERROR]"))), len(lines))
    lost.extend(lines[cut:])
    stdout.write_text("".join(lines[:cut]))


@pytest.fixture
def runner_losing_the_file_lines(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """ansible_runner.run, then its stdout file cut at the first [WARNING] or [ERROR] line; the events are whole.
    Returns what was cut, so a test can see that something was lost."""
    real_run = execute.ansible_runner.run
    lost: list[str] = []

    def run(**kwargs: Any) -> Any:
        result = real_run(**kwargs)
        cut_stdout(kwargs, lost)
        return result

    monkeypatch.setattr(execute.ansible_runner, "run", run)
    return lost


@pytest.fixture
def runner_losing_everything(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """As runner_losing_the_file_lines, and Ansible's [WARNING]/[ERROR] lines' events never reach rdmaforge."""
    real_run = execute.ansible_runner.run
    lost: list[str] = []

    def run(**kwargs: Any) -> Any:
        handler = kwargs.pop("event_handler")

        def without_ansibles_lines(event: dict[str, Any]) -> Any:
            said = str(event.get("stdout") or "")
            if event.get("event") == "verbose" and said.startswith(("[WARNING]", "[ERROR]")):
                return True
            return handler(event)

        result = real_run(**kwargs, event_handler=without_ansibles_lines)
        cut_stdout(kwargs, lost)
        return result

    monkeypatch.setattr(execute.ansible_runner, "run", run)
    return lost


def stdout_of(outcome: execute.Outcome) -> str:
    """The run's stdout file as the commands read it."""
    return (outcome.artifacts / "stdout").read_text()


def ping(inventory: Path, pattern: str, run_dir: Path) -> execute.Outcome:
    """verify's first run: ping on the pattern (its --limit, 'cluster' by default)."""
    run_dir.mkdir()
    request = execute.Request(inventory=inventory, module="ansible.builtin.ping", host_pattern=pattern)
    return execute.run(request, run_dir)


def yaml_inventory(path: Path, group: str) -> Path:
    path.write_text(yaml.safe_dump({"all": {"children": {group: {"hosts": {"node1": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "no-such-connection"}}}}}}))
    return path


def broken_ini(path: Path) -> Path:
    path.write_text(textwrap.dedent("""\
        [cluster]
        node1 ansible_host=127.0.0.1
        [cluster:vars
        """))
    return path


def test_an_inventory_without_group_cluster_is_bad_input_when_the_file_lost_the_warning(
    tmp_path: Path, runner_losing_the_file_lines: list[str]
) -> None:
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "gpu_nodes"), "cluster", tmp_path / "run")
    # The file lacks the warning (cut by the double, or lost by ansible-runner itself on a loaded machine).
    assert "ignoring: cluster" not in stdout_of(outcome), stdout_of(outcome)
    assert not outcome.ran and outcome.relisted is None  # the events said why: no second reading
    assert command.inventory_unusable(outcome).startswith(MISSING_CLUSTER)
    assert command.playbook_exit(outcome) == ExitCode.BAD_INPUT


def test_an_inventory_ansible_cannot_parse_is_bad_input_when_the_file_lost_the_error(
    tmp_path: Path, runner_losing_the_file_lines: list[str]
) -> None:
    inventory = broken_ini(tmp_path / "hosts.ini")
    outcome = ping(inventory, "cluster", tmp_path / "run")
    assert "Completely failed to parse" not in stdout_of(outcome) and not outcome.ran and outcome.relisted is None
    said = command.inventory_unusable(outcome)
    assert said.startswith(f"no host was run: Ansible cannot parse the inventory {inventory}"), said
    assert "Failed to parse inventory with 'ini' plugin" in said, said  # Ansible's reason, from its warning
    assert command.playbook_exit(outcome) == ExitCode.BAD_INPUT


def test_an_inventory_without_group_cluster_is_bad_input_when_nothing_ansible_said_arrived(
    tmp_path: Path, runner_losing_everything: list[str]
) -> None:
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "gpu_nodes"), "cluster", tmp_path / "run")
    assert not outcome.events.messages and not outcome.ran  # nothing of what Ansible said arrived
    assert outcome.relisted == execute.Relisting(0)
    assert command.inventory_unusable(outcome).startswith(MISSING_CLUSTER)
    assert command.playbook_exit(outcome) == ExitCode.BAD_INPUT


def test_an_inventory_ansible_cannot_parse_is_bad_input_when_nothing_ansible_said_arrived(
    tmp_path: Path, runner_losing_everything: list[str]
) -> None:
    inventory = broken_ini(tmp_path / "hosts.ini")
    outcome = ping(inventory, "cluster", tmp_path / "run")
    assert not outcome.events.messages and not outcome.ran  # nothing of what Ansible said arrived
    said = command.inventory_unusable(outcome)
    assert said.startswith("no host was run: Ansible cannot read the inventory"), said
    assert f"Completely failed to parse inventory source {inventory}" in said, said  # Ansible's own reason
    assert command.playbook_exit(outcome) == ExitCode.BAD_INPUT


def test_a_limit_matching_no_host_of_a_good_inventory_stays_could_not_run(
    tmp_path: Path, runner_losing_everything: list[str]
) -> None:
    """The inventory is fine, group 'cluster' has its node: only the pattern matched nothing (exit 1, not 64)."""
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "cluster"), "node9", tmp_path / "run")
    assert not outcome.events.messages and not outcome.ran  # nothing of what Ansible said arrived
    assert outcome.relisted == execute.Relisting(1)
    assert command.inventory_unusable(outcome) == ""
    assert command.playbook_exit(outcome) == ExitCode.ERROR


def test_a_relisting_that_cannot_run_claims_nothing(
    tmp_path: Path, runner_losing_everything: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ansible-inventory could not be started for the second reading (a loaded machine: EAGAIN, a timeout): nothing
    is known of the inventory, so the run is not blamed on it (exit 1), never 64. The double
    ``listing_cannot_start`` stands for the failed spawn."""

    def listing_cannot_start(inventory: str, **kwargs: Any) -> str:
        raise inventory_list.InventoryError("cannot run ansible-inventory: [Errno 11] Resource temporarily unavailable")

    monkeypatch.setattr(inventory_list, "listing", listing_cannot_start)
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "gpu_nodes"), "cluster", tmp_path / "run")
    assert not outcome.events.messages  # nothing of what Ansible said arrived
    assert outcome.relisted == execute.Relisting(None, "")
    assert command.inventory_unusable(outcome) == ""
    assert command.playbook_exit(outcome) == ExitCode.ERROR


@pytest.mark.parametrize("crash", [
    "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",  # the OOM killer
    "raise RuntimeError('boom')",  # the tool itself crashed: a traceback, no error of Ansible's
])
def test_a_relisting_killed_or_crashed_claims_nothing(
    crash: str, tmp_path: Path, runner_losing_everything: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of 1642891..e8ecafa: any non-zero exit of the relisting's ansible-inventory was taken as Ansible
    refusing the inventory, so a relisting killed on a loaded machine made a good inventory exit 64. The double
    ``command`` stands for an ansible-inventory that dies so."""
    monkeypatch.setattr(inventory_list, "command", lambda args: [sys.executable, "-c", crash])
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "gpu_nodes"), "cluster", tmp_path / "run")
    assert not outcome.events.messages  # nothing of what Ansible said arrived
    assert outcome.relisted == execute.Relisting(None, "")
    assert command.inventory_unusable(outcome) == ""
    assert command.playbook_exit(outcome) == ExitCode.ERROR


def test_a_run_whose_output_says_why_is_not_listed_again(tmp_path: Path) -> None:
    """Nothing lost: Ansible's own lines decide, and the inventory is not read a second time."""
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "gpu_nodes"), "cluster", tmp_path / "run")
    assert outcome.relisted is None
    assert outcome.events.messages[:1] == SAID[:1]
    assert command.inventory_unusable(outcome).startswith(MISSING_CLUSTER)


def test_a_limit_that_matches_nothing_is_not_listed_again(tmp_path: Path) -> None:
    """Ansible's own last line says a pattern left no host: its words decide, no second reading (0.5 s)."""
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "cluster"), "cluster:!node1", tmp_path / "run")
    assert not outcome.ran and outcome.relisted is None
    assert command.playbook_exit(outcome) == ExitCode.ERROR


def test_what_a_person_reads_holds_the_lines_the_file_lost(
    tmp_path: Path, runner_losing_the_file_lines: list[str]
) -> None:
    """The output shown under the recap and the JUnit case of a run that reached no host hold Ansible's lines from the
    events when the stdout file lost them: a limit that matched nothing names itself, not "(Ansible wrote no output)"
    or a library's deprecation warning."""
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "cluster"), "node9", tmp_path / "run")
    file_text = (outcome.artifacts / "stdout").read_text()
    assert "node9" not in file_text, file_text
    tail = command.ansible_output_tail(outcome)
    assert "Could not match supplied host pattern, ignoring: node9" in tail, tail
    (case,) = command.host_cases(outcome, "rdmaforge.verify")
    assert case.name == command.RUN_CASE and case.outcome == "error"
    assert "node9" in case.details, case
    assert case.message == "no host was run: [WARNING]: No hosts matched, nothing to do", case


def test_lines_the_file_kept_are_shown_once(tmp_path: Path) -> None:
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "cluster"), "node9", tmp_path / "run")
    tail = command.ansible_output_tail(outcome)
    assert tail.count("ignoring: node9") == 1, tail


def test_ansibles_output_holds_no_dsa_deprecation_noise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cryptography's DSA deprecation warning, printed as ansible-core starts, was the last line of a run that reached
    no host: the stop reason it then gave. Silenced in the run's environment; a user's own PYTHONWARNINGS come after
    it, so they still decide (here: show every warning again)."""
    inventory = yaml_inventory(tmp_path / "hosts.yml", "cluster")
    monkeypatch.setenv("PYTHONWARNINGS", "default")
    loud = ping(inventory, "node9", tmp_path / "loud")
    if "DSA is deprecated" not in (loud.artifacts / "stdout").read_text():
        pytest.skip("this cryptography release prints no DSA deprecation warning as Ansible starts")
    monkeypatch.delenv("PYTHONWARNINGS")
    quiet = ping(inventory, "node9", tmp_path / "quiet")
    said = (quiet.artifacts / "stdout").read_text()
    assert "No hosts matched" in said and "DSA is deprecated" not in said, said
