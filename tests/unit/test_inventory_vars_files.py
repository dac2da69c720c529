"""group_vars/host_vars entries that name no group or host of the inventory (rdmaforge.inventory_files): Ansible
reads a vars file only for the host or group its name is, and drops the others without a word (review round 23b).
The expected entries are the names this test writes, against the hosts and groups it gives."""

from __future__ import annotations

from pathlib import Path

from rdmaforge.inventory_files import unmatched_vars_files


def test_entries_naming_no_group_or_host_are_named_with_the_closest_name(tmp_path: Path) -> None:
    for name in ("group_vars/all/main.yml", "group_vars/cluster.yml", "group_vars/gpu.yml",
                 "group_vars/.hidden.yml", "group_vars/cluster.yml~", "group_vars/README.md",
                 "host_vars/node1.yml", "host_vars/node1.yaml", "host_vars/nod2.yml", "host_vars/198.18.0.11.yml",
                 "host_vars/node2/rails.yml", "host_vars/nodes1/main.yml"):  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("---\n{}\n")
    found = unmatched_vars_files([tmp_path, tmp_path], ["all", "cluster", "ungrouped"], ["node1", "node2"])
    assert found == [
        f"{tmp_path}/group_vars/gpu.yml: names no group of the inventory, so Ansible reads none of its variables; "
        "allowed: the name of a group (group_vars/<group name>.yml)",
        f"{tmp_path}/host_vars/198.18.0.11.yml: names no host of the inventory, so Ansible reads none of its "
        "variables; allowed: the name of a host (host_vars/<host name>.yml)",
        f"{tmp_path}/host_vars/nod2.yml: names no host of the inventory (did you mean node2?), so Ansible reads none "
        "of its variables; allowed: the name of a host (host_vars/<host name>.yml)",
        f"{tmp_path}/host_vars/nodes1: names no host of the inventory (did you mean node1?), so Ansible reads none of "
        "its variables; allowed: the name of a host (host_vars/<host name>.yml)",
    ]
    assert unmatched_vars_files([tmp_path / "elsewhere"], ["all"], ["node1"]) == []
