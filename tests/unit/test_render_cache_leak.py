"""`rdmaforge render` reads the inventory as written, never Ansible's fact cache.

ansible-inventory --list merged the facts of ansible.cfg's jsonfile cache (.cache/facts, kept 2 hours) into the
hostvars render reads: an inventory whose host was named as a host of another cluster (the lab's node1) got that
host's rail map, and NCCL_IB_HCA was written from it (review round 21c). Here Ansible itself caches a fact for a host
name no other test uses (set_fact cacheable, as preflight publishes rdmaforge_topology), and the listing must not
show it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from conftest import run_playbook

from rdmaforge.commands.render import read_inventory
from rdmaforge.paths import PROJECT_ROOT


def test_the_fact_cache_does_not_reach_the_inventory_render_reads(tmp_path: Path) -> None:
    host = f"rdmaforge-cache-leak-{os.getpid()}"
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"cluster": {"hosts": {host: {
        "rdmaforge_fabric": "tcp", "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}}}))  # fmt: skip
    playbook = tmp_path / "cache.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": host, "gather_facts": False, "tasks": [
        {"ansible.builtin.set_fact": {"rdmaforge_topology": {"nccl_ib_hca": "mlx5_9"}, "cacheable": True}}]}]))
    try:
        cached = run_playbook(str(playbook), inventory=inventory)
        assert cached.returncode == 0, cached.stdout[-3000:]
        assert list((PROJECT_ROOT / ".cache" / "facts").glob(f"*{host}")), "Ansible cached no fact: nothing tested"
        hostvars = read_inventory(str(inventory), "cluster")
    finally:
        for entry in (PROJECT_ROOT / ".cache" / "facts").glob(f"*{host}"):
            entry.unlink()
    assert hostvars[host].get("rdmaforge_topology") is None, hostvars[host]
    assert hostvars[host]["rdmaforge_fabric"] == "tcp"
