"""The NCCL rollout's batch size (rdmaforge_upgrade_serial) is checked before any node is touched: upgrade_nccl.yml
and rollback_nccl.yml stop in their first play, with the value and what is allowed, also under --limit. The
cluster's hosts here are addresses from TEST-NET-1 (RFC 5737) with a connection that cannot work: reaching one would
fail the run differently (UNREACHABLE), so the message proves the check ran first and connected to no node."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_playbook
from test_lifecycle_cli import unreachable_inventory

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}
ALLOWED = "allowed: a whole number of nodes per batch, at least 1"


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    return unreachable_inventory(tmp_path)


def refused(proc: subprocess.CompletedProcess[str], value: object) -> None:
    assert proc.returncode != 0
    assert f"rdmaforge_upgrade_serial={json.dumps(value)}: {ALLOWED}" in proc.stdout, proc.stdout[-3000:]
    assert "UNREACHABLE" not in proc.stdout, proc.stdout[-3000:]  # no node was connected to
    assert "invalid literal" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    recap = proc.stdout.split("PLAY RECAP")[-1]
    assert "unreachable=1" not in recap and "changed=1" not in recap, recap


@pytest.mark.parametrize("playbook", ["upgrade_nccl.yml", "rollback_nccl.yml"])
def test_both_rollout_playbooks_check_the_batch_size_first(inventory: Path, playbook: str) -> None:
    refused(run_playbook(playbook, "-e", "rdmaforge_upgrade_serial=0", inventory=inventory, env=ENV), "0")


@pytest.mark.parametrize("playbook", ["upgrade_nccl.yml", "rollback_nccl.yml"])
def test_the_batch_size_is_checked_under_limit(inventory: Path, playbook: str) -> None:
    """--limit leaves localhost out of every play: the check must still run before the rollout's `serial:`."""
    proc = run_playbook(playbook, "--limit", "node1", "-e", "rdmaforge_upgrade_serial=0", inventory=inventory, env=ENV)
    refused(proc, "0")


@pytest.mark.parametrize("value", [0, -1, "two", "150%", "0%", "2.5", True, [1], "25%\n", "3\n", "²", "３"])
def test_a_bad_batch_size_is_refused(inventory: Path, value: object) -> None:
    extra = json.dumps({"rdmaforge_upgrade_serial": value})
    refused(run_playbook("check_upgrade_serial.yml", "-e", extra, inventory=inventory, env=ENV), value)


@pytest.mark.parametrize("value", [None, 1, 3, "2", "25%", "100%"])
def test_a_good_batch_size_passes(inventory: Path, value: object) -> None:
    extra = [] if value is None else ["-e", json.dumps({"rdmaforge_upgrade_serial": value})]
    proc = run_playbook("check_upgrade_serial.yml", *extra, inventory=inventory, env=ENV)
    assert proc.returncode == 0, proc.stdout[-3000:]


@pytest.mark.parametrize("given", ["²", "３", "٣"])
def test_a_digit_of_another_script_is_no_batch_size_of_the_command_line(given: str) -> None:
    """str.isdigit is true for "²" (int() raised: exit 70) and for "３" (read as 3): both are text now, which the
    playbook's check refuses like any other word."""
    import argparse

    from rdmaforge.commands import upgrade_nccl

    variables = upgrade_nccl.rollout_variables(argparse.Namespace(serial=given, allow_partial=False))
    assert variables["rdmaforge_upgrade_serial"] == given
