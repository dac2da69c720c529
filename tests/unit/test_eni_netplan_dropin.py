"""Role eni's netplan backend writes the networkd.conf drop-in that keeps other tools' routing rules and routes, as
its networkd backend does: netplan renders to systemd-networkd, which drops foreign rules when `netplan apply`
restarts it (review round 37b: only the networkd backend wrote it). Run for real on this machine in check mode
with --diff (no netplan here: its handler would run `netplan apply`), every path under tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from conftest import local_inventory, run_playbook

from rdmaforge import role_defaults


def test_the_netplan_backend_writes_the_networkd_dropin_too(tmp_path: Path) -> None:
    dropin, netplan = tmp_path / "networkd.conf.d" / "60-rdmaforge-eni.conf", tmp_path / "netplan" / "60-eni.yaml"
    plan = {"enis": [{"name": "eth1", "address": "198.18.1.11", "prefixlen": 24, "network": "198.18.1.0/24",
                      "mtu": 1500, "table": 1001, "priority": 1001, "gateway": "198.18.1.1"}]}  # fmt: skip
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "eni netplan", "hosts": "localhost", "gather_facts": False, "vars": {"eni_plan": plan},
        "tasks": [{"name": "netplan", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.eni",
                                                                      "tasks_from": "netplan"}}],
    }], sort_keys=False))  # fmt: skip
    extra = json.dumps({"eni_networkd_dropin": str(dropin), "eni_netplan_file": str(netplan)})
    proc = run_playbook(str(playbook), "-e", extra, "--check", "--diff",
                        inventory=local_inventory(tmp_path / "hosts.yml"), env={"ANSIBLE_CACHE_PLUGIN": "memory"},
                        timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:]
    text = role_defaults.defaults("eni", kind="vars")["eni_networkd_dropin_text"]
    assert "ManageForeignRoutingPolicyRules=no" in text and "ManageForeignRoutes=no" in text
    assert f"+++ after: {dropin}" in proc.stdout, proc.stdout[-4000:]
    assert all(f"+{line}" in proc.stdout for line in text.splitlines()), proc.stdout[-4000:]
    assert not dropin.exists() and not netplan.exists()  # check mode
