"""`rdmaforge bench` and `rdmaforge pairwise` check the inventory before they connect to any node, as preflight and
doctor do: their plays gathered facts first, so a bad inventory on unreachable nodes showed only UNREACHABLE (exit 3)
and never the inventory's own error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.runner.exit_codes import ExitCode


@pytest.mark.parametrize("name", ["bench", "pairwise"])
def test_a_bad_inventory_is_named_before_any_connection(tmp_path: Path, name: str) -> None:
    """The nodes are loopback addresses at a closed port (9): a task that connects would find them unreachable.
    The run stops on the controller's inventory check instead, with preflight's refusal (each node failed, exit 2,
    as `rdmaforge provision` and `rdmaforge doctor` give it)."""
    hosts = {f"node{i}": {"ansible_host": f"127.0.0.{i}", "ansible_port": 9} for i in (1, 2)}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": {"rdmaforge_fabric": "ethernet"},
                                                 "children": {"cluster": {"hosts": hosts}}}}))  # fmt: skip
    runs = tmp_path / "runs"
    env = {**os.environ, "ANSIBLE_CACHE_PLUGIN": "memory", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run([sys.executable, "-m", "rdmaforge.cli", name, "-i", str(inventory), "--runs-dir", str(runs)],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == ExitCode.HOST_FAILED, output[-4000:]
    for host in hosts:
        assert f"{host}: rdmaforge_fabric='ethernet'" in output, output[-4000:]  # preflight's line for the host
    assert "UNREACHABLE" not in output and "Connection refused" not in output, output[-4000:]
    (run_dir,) = runs.iterdir()
    recap = json.loads((run_dir / "recap.json").read_text())
    assert recap.get("unreachable") in ([], None), recap


@pytest.mark.parametrize("name", ["bench.yml", "pairwise.yml"])
def test_the_roles_still_get_facts_when_preflight_is_skipped(name: str) -> None:
    """The play gathers no facts (preflight gathers them after its inventory checks); with rdmaforge_node given
    already, preflight is skipped, and a setup task under that condition gathers the facts the roles read
    (ansible_facts' pkg_mgr, os_family, hostname)."""
    (play,) = yaml.safe_load((PROJECT_ROOT / "playbooks" / name).read_text())
    assert play["gather_facts"] is False
    preflight, setup = play["pre_tasks"]
    assert preflight["ansible.builtin.include_role"]["name"] == "rdmaforge.cluster.preflight"
    assert preflight["when"] == "rdmaforge_node is not defined"
    assert "ansible.builtin.setup" in setup and setup["when"] == "rdmaforge_node is defined"
