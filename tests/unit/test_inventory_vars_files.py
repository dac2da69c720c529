"""group_vars/host_vars entries that name no group or host of the inventory (rdmaforge.inventory_files): Ansible
reads a vars file only for the host or group its name is, and drops the others without a word (review round 23b).
Warned about, not refused: inventories may share one directory of vars files (review round 24). The expected
entries are the names this test writes, against the hosts and groups it gives."""

from __future__ import annotations

from pathlib import Path

from rdmaforge.inventory_files import unmatched_vars_files


def warning(path: Path, kind: str, hint: str = "") -> str:
    sub = f"{kind}_vars"
    return (f"{path} names no {kind} of this inventory{hint}: Ansible reads none of its variables (a {kind}'s file is "
            f"{sub}/<{kind} name>.yml; fine where another inventory sharing the directory has it)")


def test_entries_naming_no_group_or_host_are_named_with_the_closest_name(tmp_path: Path) -> None:
    for name in ("group_vars/all/main.yml", "group_vars/cluster.yml", "group_vars/gpu.yml",
                 "group_vars/.hidden.yml", "group_vars/cluster.yml~", "group_vars/README.md",
                 "host_vars/node1.yml", "host_vars/node1.yaml", "host_vars/nod2.yml", "host_vars/198.18.0.11.yml",
                 "host_vars/node2/rails.yml", "host_vars/nodes1/main.yml", "host_vars/localhost.yml"):  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("---\n{}\n")
    found = unmatched_vars_files([tmp_path, tmp_path], ["all", "cluster", "ungrouped"], ["node1", "node2"])
    assert found == [
        warning(tmp_path / "group_vars" / "gpu.yml", "group"),
        warning(tmp_path / "host_vars" / "198.18.0.11.yml", "host"),
        warning(tmp_path / "host_vars" / "nod2.yml", "host", " (did you mean node2?)"),
        warning(tmp_path / "host_vars" / "nodes1", "host", " (did you mean node1?)"),
    ]  # host_vars/localhost.yml is the controller's (the implicit localhost of the inventory)
    assert unmatched_vars_files([tmp_path / "elsewhere"], ["all"], ["node1"]) == []
