"""A run that reached no host is judged the same when ansible-runner loses the end of Ansible's output.

ansible-runner reads Ansible's output through a pty and, once the process has ended, pumps it one last time with a
timeout (its issue 1330): on a loaded machine the last lines can be lost. They are the ones that say why no host
ran ("Could not match supplied host pattern, ignoring: cluster", "Completely failed to parse inventory source"): a
fresh-clone `make test` saw `rdmaforge verify` on an inventory without group 'cluster' exit 1 ("no host matched
the --limit") instead of 64 (bad input). Ansible really runs here; only the loss is simulated, by the double
``runner_losing_the_tail``, which cuts Ansible's output at its first warning or error line, as the pty lost it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge.runner import command, execute, inventory_list
from rdmaforge.runner.exit_codes import ExitCode

#: What every command says of an inventory without group 'cluster' (tests/unit/test_lifecycle_cli.py).
MISSING_CLUSTER = "no host was run: the inventory has no host in 'cluster', the group the playbook runs on"


@pytest.fixture
def runner_losing_the_tail(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """ansible_runner.run, then its stdout artifact cut at the first [WARNING] or [ERROR] line (what was cut is
    kept in the returned list, so a test can see that something was lost)."""
    real_run = execute.ansible_runner.run
    lost: list[str] = []

    def run(**kwargs: Any) -> Any:
        result = real_run(**kwargs)
        stdout = Path(kwargs["artifact_dir"]) / kwargs["ident"] / "stdout"
        lines = stdout.read_text().splitlines(keepends=True)
        cut = next((i for i, line in enumerate(lines) if line.startswith(("[WARNING]", "[ERROR]"))), len(lines))
        lost.extend(lines[cut:])
        stdout.write_text("".join(lines[:cut]))
        return result

    monkeypatch.setattr(execute.ansible_runner, "run", run)
    return lost


def ping(inventory: Path, pattern: str, run_dir: Path) -> execute.Outcome:
    """verify's first run: ping on the pattern (its --limit, 'cluster' by default)."""
    run_dir.mkdir()
    request = execute.Request(inventory=inventory, module="ansible.builtin.ping", host_pattern=pattern)
    return execute.run(request, run_dir)


def yaml_inventory(path: Path, group: str) -> Path:
    path.write_text(yaml.safe_dump({"all": {"children": {group: {"hosts": {"node1": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "no-such-connection"}}}}}}))
    return path


def test_an_inventory_without_group_cluster_is_bad_input_when_the_warning_is_lost(
    tmp_path: Path, runner_losing_the_tail: list[str]
) -> None:
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "gpu_nodes"), "cluster", tmp_path / "run")
    assert any("cluster" in line for line in runner_losing_the_tail), runner_losing_the_tail  # the loss happened
    assert not outcome.ran
    assert command.inventory_unusable(outcome).startswith(MISSING_CLUSTER)
    assert command.playbook_exit(outcome) == ExitCode.BAD_INPUT


def test_an_inventory_ansible_cannot_parse_is_bad_input_when_its_error_is_lost(
    tmp_path: Path, runner_losing_the_tail: list[str]
) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(textwrap.dedent("""\
        [cluster]
        node1 ansible_host=127.0.0.1
        [cluster:vars
        """))
    outcome = ping(inventory, "cluster", tmp_path / "run")
    assert runner_losing_the_tail, "Ansible said nothing to lose"
    assert not outcome.ran
    said = command.inventory_unusable(outcome)
    assert said.startswith("no host was run: Ansible cannot read the inventory"), said
    assert f"Completely failed to parse inventory source {inventory}" in said, said  # Ansible's own reason
    assert command.playbook_exit(outcome) == ExitCode.BAD_INPUT


def test_a_limit_matching_no_host_of_a_good_inventory_stays_could_not_run(
    tmp_path: Path, runner_losing_the_tail: list[str]
) -> None:
    """The inventory is fine, group 'cluster' has its node: only the pattern matched nothing (exit 1, not 64)."""
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "cluster"), "node9", tmp_path / "run")
    assert runner_losing_the_tail
    assert not outcome.ran
    assert command.inventory_unusable(outcome) == ""
    assert command.playbook_exit(outcome) == ExitCode.ERROR


def test_a_run_whose_output_says_why_is_not_listed_again(tmp_path: Path) -> None:
    """Nothing lost: Ansible's own lines decide, and the inventory is not read a second time."""
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "gpu_nodes"), "cluster", tmp_path / "run")
    assert outcome.relisted is None
    assert command.inventory_unusable(outcome).startswith(MISSING_CLUSTER)


def test_a_relisting_that_cannot_run_claims_nothing(
    tmp_path: Path, runner_losing_the_tail: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ansible-inventory could not be started for the second reading (a loaded machine: EAGAIN, a timeout): nothing
    is known of the inventory, so the run is not blamed on it (exit 1, as before the relisting), never 64. The
    double ``listing_cannot_start`` stands for the failed spawn."""

    def listing_cannot_start(inventory: str, **kwargs: Any) -> str:
        raise inventory_list.InventoryError("cannot run ansible-inventory: [Errno 11] Resource temporarily unavailable")

    monkeypatch.setattr(inventory_list, "listing", listing_cannot_start)
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "gpu_nodes"), "cluster", tmp_path / "run")
    assert runner_losing_the_tail
    assert outcome.relisted == execute.Relisting(None, "")
    assert command.inventory_unusable(outcome) == ""
    assert command.playbook_exit(outcome) == ExitCode.ERROR


def test_a_limit_that_matches_nothing_is_not_listed_again(tmp_path: Path) -> None:
    """Ansible's own last line says a pattern left no host: its words decide, no second reading (0.5 s)."""
    outcome = ping(yaml_inventory(tmp_path / "hosts.yml", "cluster"), "cluster:!node1", tmp_path / "run")
    assert not outcome.ran and outcome.relisted is None
    assert command.playbook_exit(outcome) == ExitCode.ERROR
