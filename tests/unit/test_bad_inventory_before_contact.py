"""Every command that runs against hosts refuses a bad inventory before it reaches any node (review round 17c:
verify pinged the nodes, rollback-nccl and remove-node ran their first plays on them, and a node with a bad name
was reported as unreachable, the inventory's problem never named). The nodes here are unroutable addresses of the
lab range whose ssh is a stand-in that records each call: a run that reaches for a node leaves a record."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from rdmaforge.cli import main
from rdmaforge.runner.exit_codes import ExitCode

#: Each command, with the arguments it needs besides -i (remove-node names a node; reset needs --yes).
COMMANDS = {
    "provision": [], "verify": [], "doctor": [], "bench": [], "pairwise": [], "upgrade-nccl": [],
    "rollback-nccl": [], "remove-node": ["node2"], "reset": ["--yes"],
}  # fmt: skip


def recording_ssh(directory: Path) -> tuple[Path, Path]:
    """A stand-in for ssh that writes its arguments to a file and fails as an unreachable host does."""
    record = directory / "ssh-calls"
    script = directory / "ssh"
    script.write_text(f'#!/bin/sh\necho "$@" >> {record}\n'
                      'echo "ssh: connect to host: No route to host" >&2\nexit 255\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, record


def bad_inventory(directory: Path, ssh: Path, node1: dict[str, object]) -> Path:
    hosts: dict[str, dict[str, object]] = {
        "node1": {"ansible_host": "198.18.250.11", **node1},
        "node2": {"ansible_host": "198.18.250.12", "rdmaforge_fabric": "erdma"},
    }
    for variables in hosts.values():
        variables["ansible_ssh_executable"] = str(ssh)
    path = directory / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    return path


@dataclass(frozen=True)
class Run:
    code: int
    reached: bool  # the stand-in ssh was called


def run_against(tmp_path: Path, argv: list[str], node1: dict[str, object], rename: str | None = None) -> Run:
    """``rdmaforge ARGV -i INVENTORY`` on two unroutable nodes whose ssh records each call; node1 gets ``node1``'s
    variables (and the name ``rename``)."""
    ssh, record = recording_ssh(tmp_path)
    inventory = bad_inventory(tmp_path, ssh, node1)
    if rename is not None:
        inventory.write_text(inventory.read_text().replace("node1:", f"{rename}:"))
    code = main([argv[0], "-i", str(inventory), "--runs-dir", str(tmp_path / "runs"), *argv[1:]])
    return Run(code, record.exists() and os.path.getsize(record) > 0)


@pytest.fixture(autouse=True)
def memory_fact_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN", "memory")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_bad_fabric_is_refused_before_any_node_is_reached(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_against(tmp_path, [name, *COMMANDS[name]], {"rdmaforge_fabric": "ethernet"})
    out = capsys.readouterr().out
    assert not run.reached, f"{name} reached for a node"
    # An inventory problem is bad input (64), as render says it: 2 read as a node that failed (review round 33a).
    assert run.code == ExitCode.BAD_INPUT, out
    assert "node1" in out and "rdmaforge_fabric" in out and "ethernet" in out, out
    assert not [line for line in out.splitlines() if line.startswith("node") and "UNREACHABLE" in line.upper()], out
    # node2's inventory is fine, but it did not run either: failed, never 'ok' (review round 18: the check play's
    # any_errors_fatal stopped it silently, and it read ok in the table and passed in JUnit)
    (row,) = [line.split() for line in out.splitlines() if line.startswith("node2 ")]
    assert row[-1] == "FAILED", out


def test_a_node_name_that_is_no_host_name_is_named_not_reported_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_against(tmp_path, ["verify"], {"rdmaforge_fabric": "erdma"}, rename="node_1!")
    out = capsys.readouterr().out
    assert not run.reached and run.code == ExitCode.BAD_INPUT, out
    assert "node_1!" in out and "unreachable: node_1!" not in out, out


def test_the_stand_in_ssh_records_a_run_that_reaches_a_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The check above can fail: with a good inventory, verify does reach for the nodes (and finds them unreachable)."""
    run = run_against(tmp_path, ["verify"], {"rdmaforge_fabric": "erdma"})
    assert run.reached and run.code == ExitCode.UNREACHABLE, capsys.readouterr().out
