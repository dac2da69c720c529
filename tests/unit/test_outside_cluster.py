"""Hosts outside group cluster: every playbook after preflight targets group cluster (playbooks/*.yml), so a node
left in ``ungrouped`` or only in another group would never be converged while the run ends green. The inventory
check refuses it, naming the host, its groups and the group the playbooks target. The example inventory and the
lab's generated one pass."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import yaml

from rdmaforge import inventory_checks as checks
from rdmaforge.lab import inventory as lab_inventory
from rdmaforge.lab import spec
from rdmaforge.lab.mirror import Mirror
from rdmaforge.paths import PROJECT_ROOT

BIN = Path(os.environ.get("VIRTUAL_ENV", PROJECT_ROOT / ".venv")) / "bin"
TARGETS = r"\{\{ groups \| rdmaforge\.cluster\.rdmaforge_converge_targets\('(node|cluster)'\) \}\}"
ALLOWED = (
    "allowed: every node under all.children.cluster.hosts (or in a group inside cluster); take any other host out "
    "of this inventory"
)


def groups_of(hosts_yml: Path) -> dict[str, list[str]]:
    """Ansible's ``groups`` for an inventory file, as ansible-inventory computes them (never connects)."""
    exe = BIN / "ansible-inventory"
    proc = subprocess.run([str(exe) if exe.exists() else "ansible-inventory", "-i", str(hosts_yml), "--list"],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    listing = json.loads(proc.stdout)

    def hosts(group: str) -> list[str]:
        entry = listing.get(group) or {}
        found = list(entry.get("hosts") or [])
        for child in entry.get("children") or []:
            found += [h for h in hosts(child) if h not in found]
        return found

    names = {"all", *(name for name in listing if name != "_meta")}
    return {name: hosts(name) for name in names}


def test_the_playbooks_target_group_cluster() -> None:
    # The group the rule names is the one the playbooks' plays on nodes target: "cluster", or the converge targets
    # of "cluster" (rdmaforge_converge_targets' default group); the others are the controller or groups a run fills.
    runtime = {"localhost", "hugepages_reboot_queue", "cluster_remaining", "cluster_removed"}
    targets = set()
    for path in sorted((PROJECT_ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(path.read_text()) or []:
            hosts = str(play.get("hosts", ""))
            if hosts and hosts not in runtime:
                targets.add("cluster" if hosts == "cluster" or re.fullmatch(TARGETS, hosts) else hosts)
    assert targets == {"cluster"}
    assert checks.PLAYBOOK_GROUP == "cluster"


def test_an_ungrouped_host_and_one_in_other_groups_are_refused(tmp_path: Path) -> None:
    hosts_yml = tmp_path / "hosts.yml"
    hosts_yml.write_text(yaml.safe_dump({"all": {
        "hosts": {"gpu9": {"ansible_host": "192.0.2.9"}},
        "children": {
            "cluster": {"hosts": {"gpu1": {"ansible_host": "192.0.2.1"}, "gpu2": {"ansible_host": "192.0.2.2"}}},
            "spares": {"hosts": {"gpu8": {"ansible_host": "192.0.2.8"}}},
            "nccl_builder": {"hosts": {"gpu8": None}},
        },
    }}))  # fmt: skip
    problems = checks.outside_group_problems(groups_of(hosts_yml))
    assert sorted(p.message for p in problems) == [
        "gpu8: is in groups nccl_builder, spares, not in group cluster, which the playbooks target: no playbook would "
        f"converge it; {ALLOWED}",
        "gpu9: is in group ungrouped, not in group cluster, which the playbooks target: no playbook would converge "
        f"it; {ALLOWED}",
    ]


def test_hosts_of_a_group_inside_cluster_and_a_listed_localhost_are_fine(tmp_path: Path) -> None:
    hosts_yml = tmp_path / "hosts.yml"
    hosts_yml.write_text(yaml.safe_dump({"all": {
        "hosts": {"localhost": {"ansible_connection": "local"}},
        "children": {"cluster": {"children": {"rack1": {"hosts": {"gpu1": {"ansible_host": "192.0.2.1"}}},
                                              "rack2": {"hosts": {"gpu2": {"ansible_host": "192.0.2.2"}}}}}},
    }}))  # fmt: skip
    assert checks.outside_group_problems(groups_of(hosts_yml)) == []


def test_the_report_lists_the_host_outside_the_cluster() -> None:
    nodes = [checks.NodeInput("gpu1", "192.0.2.1", "erdma"), checks.NodeInput("gpu2", "192.0.2.2", "erdma")]
    groups = {"all": ["gpu1", "gpu2", "gpu3"], "ungrouped": ["gpu3"], "cluster": ["gpu1", "gpu2"]}
    assert checks.inventory_report(nodes, groups=groups) == {
        "gpu3": [
            "gpu3: is in group ungrouped, not in group cluster, which the playbooks target: no playbook would "
            f"converge it; {ALLOWED}"
        ]
    }
    assert checks.inventory_report(nodes, groups={**groups, "all": ["gpu1", "gpu2"], "ungrouped": []}) == {}


def test_the_example_inventory_has_no_host_outside_the_cluster() -> None:
    groups = groups_of(PROJECT_ROOT / "inventories" / "example" / "hosts.yml")
    assert groups["cluster"] == ["erdma-node1", "erdma-node2"]
    assert checks.outside_group_problems(groups) == []


def test_the_lab_inventory_has_no_host_outside_the_cluster(tmp_path: Path) -> None:
    paths = spec.LabPaths(state=tmp_path / "state", cache=tmp_path / "cache", inventory_dir=tmp_path / "inv")
    fake_mirror = Mirror(tmp_path / "www", "AB" * 20, "nvidia-nccl_2.29.7-1.orig.tar.gz", "0" * 64)
    hosts_yml = lab_inventory.write(paths, [spec.node_spec(i, 1) for i in (1, 2, 3)], fake_mirror)
    groups = groups_of(hosts_yml)
    assert groups["cluster"] == ["node1", "node2", "node3"]
    assert checks.outside_group_problems(groups) == []
