"""The plays after preflight pick their nodes from the groups site.yml's gate fills (issue 19: a node in sync is
left out of a play instead of entering it to end there).

Run for real with ansible-playbook on hosts with a local connection: the gate's own task (read from
roles/converge_state/tasks/main.yml) fills the groups, then plays with the real playbooks' ``hosts:`` lines run.
Which play is cluster-wide comes from the README's list (`/etc/hosts`, SSH trust, the MPI hostfile and launch).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rdmaforge.converge import targets
from rdmaforge.paths import PROJECT_ROOT

PLAYBOOKS = PROJECT_ROOT / "playbooks"
#: The plays that read the other nodes (README, "Per node"), and the record (nothing to record when the cluster is
#: in sync): they run on every node unless the cluster is in sync.
CLUSTER_WIDE = {"cluster_hosts.yml", "ssh_trust.yml", "mpi_launch.yml", "converge_record.yml"}
#: site.yml's plays that every node is in: preflight (the gate itself). (The summary's report play too, but its tasks
#: run once for the cluster: test_the_summary_costs_a_node_in_sync_no_task.)
EVERY_NODE = {"preflight.yml"}


def site_playbooks() -> list[str]:
    site = yaml.safe_load((PLAYBOOKS / "site.yml").read_text())
    return [entry["ansible.builtin.import_playbook"] for entry in site]


def first_play(name: str) -> dict:
    plays = yaml.safe_load((PLAYBOOKS / name).read_text())
    return next(play for play in plays if play.get("hosts") not in ("localhost",))


def gate_task() -> dict:
    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "converge_state" / "tasks" / "main.yml").read_text())
    return next(task for task in tasks if "ansible.builtin.add_host" in task)


def test_every_play_after_preflight_leaves_out_what_its_scope_allows() -> None:
    names = site_playbooks()
    assert set(CLUSTER_WIDE) | set(EVERY_NODE) <= set(names)
    for name in names:
        hosts = first_play(name)["hosts"]
        if name in EVERY_NODE:
            assert hosts == "cluster", name
        else:
            scope = "cluster" if name in CLUSTER_WIDE else "node"
            expected = "{{ groups | rdmaforge.cluster.rdmaforge_converge_targets('" + scope + "') }}"
            assert hosts == expected, name


def test_the_summary_costs_a_node_in_sync_no_task() -> None:
    # Its per-node play leaves out the nodes in sync (first_play, above); its report play is on every node the run
    # reached, and runs each of its tasks once, on the controller.
    plays = yaml.safe_load((PLAYBOOKS / "summary.yml").read_text())
    assert [play["hosts"] for play in plays][1:] == ["cluster"]
    imports = [task["ansible.builtin.import_role"] for task in plays[1]["tasks"]]
    assert imports == [{"name": "rdmaforge.cluster.cluster_summary", "tasks_from": "write", "rolespec_validate": False}]
    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "cluster_summary" / "tasks" / "write.yml").read_text())
    assert tasks and all(task.get("run_once") is True and task.get("delegate_to") == "localhost" for task in tasks)


def run_plays(tmp_path: Path, in_sync: list[str], cluster_in_sync: bool,
              drift_local: bool = False) -> dict[str, dict[str, bool]]:  # fmt: skip
    """{scope: {host: its converge_state_in_sync}} for the hosts each scope's play ran on, after the gate's task
    grouped ``in_sync`` (the later roles read converge_state_in_sync: the summary, the record's merge)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": {
        name: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
        for name in ("node1", "node2", "node3")}}}}}))  # fmt: skip
    gate = {**gate_task(), "vars": {"converge_state_in_sync_hosts": in_sync,
                                    "converge_state_cluster_in_sync": cluster_in_sync,
                                    "converge_state_drift_local": drift_local}}  # fmt: skip
    plays = [{"name": "gate", "hosts": "cluster", "gather_facts": False, "tasks": [gate]}]
    for scope, example in (("node", "rdma.yml"), ("cluster", "ssh_trust.yml")):
        msg = "IN_SYNC={{ converge_state_in_sync | default(false) }}"
        task = {"name": f"ran {scope}", "ansible.builtin.debug": {"msg": msg}}
        plays.append({"name": f"scope {scope}", "hosts": first_play(example)["hosts"], "gather_facts": False,
                      "tasks": [task]})  # fmt: skip
    playbook = tmp_path / "plays.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    env = {**os.environ, "ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg"), "ANSIBLE_CACHE_PLUGIN": "memory",
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}  # fmt: skip
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook)]
    proc = subprocess.run(argv, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "changed=1" not in proc.stdout  # grouping changes nothing on a node
    ran: dict[str, dict[str, bool]] = {}
    for scope in ("node", "cluster"):
        section = proc.stdout.split(f"PLAY [scope {scope}]")[1].split("PLAY ")[0]
        found = re.findall(r'^ok: \[(\w+)\] => \{\n\s+"msg": "IN_SYNC=(True|False)"', section, re.MULTILINE)
        assert len(found) == section.count("ok: ["), section
        ran[scope] = {host: flag == "True" for host, flag in found}
    return ran


def test_a_node_in_sync_is_in_no_play_of_its_own_but_in_the_cluster_wide_ones(tmp_path: Path) -> None:
    ran = run_plays(tmp_path, ["node1", "node3"], cluster_in_sync=False)
    assert ran == {"node": {"node2": False}, "cluster": {"node1": True, "node2": False, "node3": True}}


def test_drift_of_a_nodes_own_leaves_the_nodes_in_sync_out_of_the_cluster_wide_plays_too(tmp_path: Path) -> None:
    ran = run_plays(tmp_path, ["node1", "node3"], cluster_in_sync=False, drift_local=True)
    assert ran == {"node": {"node2": False}, "cluster": {"node2": False}}


def test_a_cluster_in_sync_leaves_every_node_out_of_every_play(tmp_path: Path) -> None:
    ran = run_plays(tmp_path, ["node1", "node2", "node3"], cluster_in_sync=True)
    assert ran == {"node": {}, "cluster": {}}


def test_without_the_gate_every_play_targets_the_whole_group() -> None:
    groups = {"all": ["a", "b", "c"], "cluster": ["b", "a", "c"]}
    assert targets.play_hosts(groups, "node") == ["b", "a", "c"]
    assert targets.play_hosts(groups, "cluster") == ["b", "a", "c"]
    assert targets.play_hosts({**groups, targets.NODE_IN_SYNC: ["a"]}, "cluster") == ["b", "a", "c"]


def test_a_wrong_scope_is_named_and_a_missing_group_has_no_hosts() -> None:
    with pytest.raises(ValueError, match=re.escape("play scope 'nodes' is not one of cluster, node")):
        targets.play_hosts({"cluster": ["a"]}, "nodes")
    assert targets.play_hosts({"all": ["a"]}, "node") == []
