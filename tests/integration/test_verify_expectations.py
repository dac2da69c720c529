"""Issue 13 on the lab: `rdmaforge verify` checks against expectations derived from the inventory and the roles'
tables, so it fails on a node whose /etc/nccl.conf was emptied, on a replaced host key in known_hosts and on a
wrong ENI rule (each on that node only). Every test restores what it changed."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdmaforge.runner.exit_codes import ExitCode
from tests.conftest import LabHandle
from tests.integration.test_cli import cli, in_netns, runs, table_rows, victim

pytestmark = pytest.mark.lab
__all__ = ["runs", "victim"]  # fixtures shared with test_cli.py


def verify_only(converged: LabHandle, runs: Path, test: str) -> tuple[dict[str, list[str]], str]:
    proc = cli(runs, "verify", "-i", str(converged.inventory), "-k", test)
    assert proc.returncode == ExitCode.HOST_FAILED, proc.stdout[-4000:]
    return table_rows(proc.stdout, list(converged.nodes)), proc.stdout


def assert_only_failing(rows: dict[str, list[str]], node: str, output: str, test: str) -> None:
    assert rows[node][-1] == "FAIL" and rows[node][1] == "1", rows
    assert all(cells[-1] == "pass" for name, cells in rows.items() if name != node), rows
    assert f"  {node}: {test}: " in output


@pytest.fixture
def emptied_nccl_conf(converged: LabHandle, victim: str) -> Iterator[str]:
    converged.ssh(victim, "cp -p /etc/nccl.conf /etc/nccl.conf.rdmaforge-test && : > /etc/nccl.conf")
    try:
        yield victim
    finally:
        converged.ssh(victim, "mv /etc/nccl.conf.rdmaforge-test /etc/nccl.conf")


def test_verify_fails_on_an_emptied_nccl_conf(converged: LabHandle, runs: Path, emptied_nccl_conf: str) -> None:
    test = "test_nccl_conf_holds_the_profile"
    rows, output = verify_only(converged, runs, test)
    assert_only_failing(rows, emptied_nccl_conf, output, test)


@pytest.fixture
def replaced_host_key(converged: LabHandle, victim: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The victim's known_hosts entry for the first node carries a freshly made key instead of the real one."""
    peer = next(iter(converged.nodes))
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "impostor")], check=True)
    impostor = (tmp_path / "impostor.pub").read_text().split()[1]
    known = "/etc/ssh/ssh_known_hosts"
    # Only lines whose first field names the peer, and only their ed25519 key.
    script = (f"cp -p {known} {known}.rdmaforge-test && "
              f"awk -v peer={peer} -v key={impostor} 'BEGIN{{OFS=\" \"}} "
              f"{{ split($1, names, \",\"); hit = 0; for (i in names) if (names[i] == peer) hit = 1; "
              f"if (hit && $2 == \"ssh-ed25519\") $3 = key; print }}' {known}.rdmaforge-test > {known}")  # fmt: skip
    converged.ssh(victim, script)
    assert impostor in converged.ssh(victim, f"cat {known}").stdout
    try:
        yield victim, peer
    finally:
        converged.ssh(victim, f"mv {known}.rdmaforge-test {known}")


def test_verify_fails_on_a_replaced_host_key(
    converged: LabHandle, runs: Path, replaced_host_key: tuple[str, str]
) -> None:
    node, peer = replaced_host_key
    test = "test_known_hosts_holds_the_keys_the_peers_really_serve"
    rows, output = verify_only(converged, runs, test)
    assert_only_failing(rows, node, output, test)
    assert f"{peer} ssh-ed25519 " in output


@pytest.fixture
def wrong_eni_rule(converged: LabHandle, victim: str) -> Iterator[str]:
    """The victim's first ENI rule points at another table (1001 + 7) at the same priority. Every rule for table
    1001 goes, not only the first: a rule put back without networkd's `proto static` and a networkd restart (a
    reboot) leave two, and deleting one of them left verify a correct rule to find (the CI run of 2026-12-03).
    Each is put back as it was, its protocol too."""
    rules = [r for r in json.loads(in_netns(victim, "ip -j rule show")) if str(r.get("table")) == "1001"]
    assert rules, f"{victim} has no rule for table 1001 to replace"
    source, priority = rules[0]["src"], rules[0]["priority"]
    assert all((r["src"], r["priority"]) == (source, priority) for r in rules), rules
    rule = f"from {source} lookup 1001 priority {priority}"
    removed = [rule + (f" protocol {r['protocol']}" if "protocol" in r else "") for r in rules]
    # `ip rule del` without a protocol matches any: repeated until none is left.
    in_netns(victim, f"while ip rule del from {source} lookup 1001 priority {priority} 2>/dev/null; do :; done; "
                     f"ip rule add from {source} lookup 1008 priority {priority}")  # fmt: skip
    assert not [r for r in json.loads(in_netns(victim, "ip -j rule show")) if str(r.get("table")) == "1001"]
    try:
        yield victim
    finally:
        in_netns(victim, "; ".join([f"ip rule del from {source} lookup 1008 priority {priority}",
                                    *(f"ip rule add {entry}" for entry in removed)]))  # fmt: skip


def test_verify_fails_on_a_wrong_eni_rule(converged: LabHandle, runs: Path, wrong_eni_rule: str) -> None:
    test = "test_policy_routing_per_secondary_nic"
    rows, output = verify_only(converged, runs, test)
    assert_only_failing(rows, wrong_eni_rule, output, test)
    assert "no rule 'from " in output and "lookup 1001' at priority " in output
