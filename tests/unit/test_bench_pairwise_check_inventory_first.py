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
from conftest import local_inventory

from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.runner.exit_codes import ExitCode


@pytest.mark.parametrize("name", ["bench", "pairwise"])
def test_a_bad_inventory_is_named_before_any_connection(tmp_path: Path, name: str) -> None:
    """The nodes are loopback addresses at a closed port (9): a task that connects would find them unreachable.
    The run stops on the controller's inventory check instead, with preflight's refusal (each node failed, exit 64,
    bad input, as `rdmaforge provision` and `rdmaforge doctor` give it)."""
    hosts = {f"node{i}": {"ansible_host": f"127.0.0.{i}", "ansible_port": 9} for i in (1, 2)}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": {"rdmaforge_fabric": "ethernet"},
                                                 "children": {"cluster": {"hosts": hosts}}}}))  # fmt: skip
    runs = tmp_path / "runs"
    env = {**os.environ, "ANSIBLE_CACHE_PLUGIN": "memory", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run([sys.executable, "-m", "rdmaforge.cli", name, "-i", str(inventory), "--runs-dir", str(runs)],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == ExitCode.BAD_INPUT, output[-4000:]
    for host in hosts:
        assert f"{host}: rdmaforge_fabric='ethernet'" in output, output[-4000:]  # preflight's line for the host
    assert "UNREACHABLE" not in output and "Connection refused" not in output, output[-4000:]
    (run_dir,) = runs.iterdir()
    recap = json.loads((run_dir / "recap.json").read_text())
    assert recap.get("unreachable") in ([], None), recap


#: A play that runs the measuring playbooks' entry point of preflight, then shows what the roles after it read.
ENTRY_POINT_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: rdmaforge.cluster.preflight
        tasks_from: before_measuring
        rolespec_validate: false
    - ansible.builtin.debug:
        msg: "os_family={{ ansible_facts['os_family'] | default('UNKNOWN') }}"
"""


@pytest.mark.parametrize("name", ["bench.yml", "pairwise.yml"])
def test_the_measuring_playbooks_start_with_preflights_entry_point(name: str) -> None:
    (play,) = yaml.safe_load((PROJECT_ROOT / "playbooks" / name).read_text())
    assert play["gather_facts"] is False  # preflight gathers them, after the inventory checks
    (preflight,) = play["pre_tasks"]
    assert preflight["ansible.builtin.include_role"]["name"] == "rdmaforge.cluster.preflight"
    assert preflight["ansible.builtin.include_role"]["tasks_from"] == "before_measuring"


def test_the_roles_still_get_facts_when_preflight_is_skipped(tmp_path: Path) -> None:
    """With rdmaforge_node given already, preflight is skipped (no inventory check ran) and the entry point gathers
    the facts the roles read (ansible_facts' pkg_mgr, os_family, hostname) itself."""
    playbook = tmp_path / "entry.yml"
    playbook.write_text(ENTRY_POINT_PLAY)
    inventory = local_inventory(tmp_path / "hosts.yml")
    env = {**os.environ, "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}
    ansible_playbook = Path(sys.executable).parent / "ansible-playbook"
    given = subprocess.run([str(ansible_playbook), "-i", str(inventory), str(playbook), "-e",
                            json.dumps({"rdmaforge_node": {"gpus": 0}})],
                           cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert given.returncode == 0, given.stdout[-4000:] + given.stderr[-2000:]
    assert "os_family=Debian" in given.stdout and "Check every role's variables" not in given.stdout, given.stdout
    # Without it, the read-only preflight runs (its inventory check first) and gathers the facts.
    fresh = subprocess.run([str(ansible_playbook), "-i", str(inventory), str(playbook), "--check"],
                           cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert "Check every role's variables" in fresh.stdout, fresh.stdout[-4000:]
