"""The lifecycle commands (remove-node, upgrade-nccl, rollback-nccl) run their playbooks through ansible-runner
for real. Bad input stops in the playbook's first play, on localhost, before any node is touched: the cluster's
hosts here are TEST-NET-1 addresses (RFC 5737) with a connection plugin that does not exist, so reaching one would
end the run differently. The commands' own arguments win over a user's -e of the same variable. The lab proof of a
removal through the command is in tests/integration/test_remove_node_on_lab.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rdmaforge.runner.exit_codes import ExitCode


def unreachable_inventory(tmp_path: Path) -> Path:
    """Group 'cluster' of two nodes that cannot be reached (TEST-NET-1, a connection plugin that does not exist)."""
    path = tmp_path / "hosts.yml"
    nodes = {f"node{i}": {"ansible_host": f"192.0.2.{i}", "ansible_connection": "no-such-connection",
                          "rdmaforge_fabric": "tcp"} for i in (1, 2)}  # fmt: skip
    path.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": nodes}}}}))
    return path


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    return unreachable_inventory(tmp_path)


def rdmaforge(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    runs = tmp_path / "runs"
    return subprocess.run([sys.executable, "-m", "rdmaforge.cli", *argv, "--runs-dir", str(runs)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)  # fmt: skip


def recap_hosts(proc: subprocess.CompletedProcess[str]) -> dict[str, dict[str, int]]:
    run_dir = Path(proc.stdout.rstrip().rsplit("artifacts: ", 1)[1])
    return json.loads((run_dir / "recap.json").read_text())["hosts"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["remove-node", "node9"], 'rdmaforge_remove_nodes=["node9"]: allowed: a non-empty list of hosts of group '
                                   "'cluster' (node1, node2) that leaves at least one node; not in the cluster: node9"),
        (["remove-node", "node1", "node2"], "that leaves at least one node"),
        # --serial is checked by argparse (exit 64, tests/unit/test_cli_plumbing_hostile.py); -e reaches the playbook
        (["upgrade-nccl", "-e", '{"rdmaforge_upgrade_serial": 0}'],
         "rdmaforge_upgrade_serial=0: allowed: a whole number of nodes per batch"),
        (["rollback-nccl", "-e", '{"rdmaforge_upgrade_serial": "150%"}'],
         'rdmaforge_upgrade_serial="150%": allowed: a whole number'),
    ],
)  # fmt: skip
def test_bad_input_stops_on_the_controller_before_any_node(
    inventory: Path, tmp_path: Path, argv: list[str], says: str
) -> None:
    proc = rdmaforge(tmp_path, *argv, "-i", str(inventory))
    # Node names or a batch size the playbook refuses are bad input (64; remove_node.yml and check_upgrade_serial.yml
    # publish rdmaforge_bad_input): they were 'a host failed' (2), with localhost or node1 marked failed.
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert says in proc.stdout, proc.stdout[-3000:]
    # No node of the cluster was reached, or even tried: a node's connection (a plugin that does not exist) was never
    # loaded. (The batch size check runs on group cluster, delegated to the controller, so --limit cannot skip it:
    # its failure is reported for the first node.)
    assert "no-such-connection" not in proc.stdout, proc.stdout[-3000:]
    # The inventory check before it (playbooks/inventory_check.yml) runs for the nodes, delegated to the controller.
    counts = recap_hosts(proc)
    failed = {name for name, host in counts.items() if host["failed"]}
    assert failed == ({"node1"} if "serial" in says else {"localhost"}), counts
    assert all(host["unreachable"] == 0 and host["changed"] == 0 for host in counts.values()), counts


def test_the_commands_arguments_win_over_a_users_extra_vars(inventory: Path, tmp_path: Path) -> None:
    proc = rdmaforge(tmp_path, "remove-node", "node9", "-i", str(inventory),
                     "-e", json.dumps({"rdmaforge_remove_nodes": ["node1"]}))  # fmt: skip
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:]
    assert 'rdmaforge_remove_nodes=["node9"]: allowed' in proc.stdout, proc.stdout[-3000:]


def test_reset_without_yes_runs_nothing(inventory: Path, tmp_path: Path) -> None:
    proc = rdmaforge(tmp_path, "reset", "-i", str(inventory), "--limit", "node2")
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-2000:]
    says = "removes what rdmaforge installed from the nodes of --limit node2; nothing was changed. Add --yes"
    assert says in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists()  # no run started, so no node could be touched


def test_reset_without_yes_under_json_prints_the_error_document(inventory: Path, tmp_path: Path) -> None:
    """README, --json: a run refused before it starts prints {command, exit_code, meaning, error}; stdout was empty,
    and `rdmaforge reset --json | jq` failed on it (review round 29a)."""
    proc = rdmaforge(tmp_path, "reset", "-i", str(inventory), "--json")
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-2000:]
    document = json.loads(proc.stdout)
    assert (document["command"], document["exit_code"]) == ("reset", 64)
    assert "every node of the inventory; nothing was changed. Add --yes" in document["error"]


@pytest.mark.parametrize("limit", [[], ["--limit", "node2"]], ids=["every-node", "limit"])
def test_reset_playbook_unconfirmed_stops_before_any_node_is_touched(
    inventory: Path, tmp_path: Path, limit: list[str]
) -> None:
    """Run as ansible-playbook is, without the command's --yes: the first play refuses, no node is contacted. Under
    --limit too: the refusal was a play for localhost, which --limit node2 left out, and the reset went ahead."""
    root = Path(__file__).resolve().parents[2]  # its ansible.cfg finds the collection
    for extra in ([], ["-e", json.dumps({"rdmaforge_reset_confirm": False})]):
        argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), "playbooks/reset.yml"]
        proc = subprocess.run([*argv, *limit, *extra], capture_output=True, text=True, timeout=300, cwd=root)
        assert proc.returncode != 0, proc.stdout[-3000:]
        assert "rdmaforge_reset_confirm=false: allowed: true" in proc.stdout, proc.stdout[-3000:]
        recap = proc.stdout.split("PLAY RECAP", 1)[1]
        # The assert ran on the controller: no node was reached (none unreachable, none changed), and no later play
        # started (only the refusing one ran).
        assert "unreachable=0" in recap and "changed=1" not in recap and "ok=1" not in recap, recap
        assert proc.stdout.count("PLAY [") == 1, proc.stdout[-3000:]


@pytest.mark.parametrize("name", ["upgrade-nccl", "rollback-nccl"])
def test_allow_partial_is_handed_on_as_the_opt_in(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--allow-partial: -e nccl_build_allow_partial=true, as the -e file ansible-playbook gets; without it, nothing
    (the inventory's value stands)."""
    from rdmaforge import cli
    from rdmaforge.runner import command, extravars

    runs: list[tuple[str, dict[str, object]]] = []
    monkeypatch.setattr(command, "run_changing_playbook",
                        lambda args, _name, playbook, ours: runs.append((playbook, dict(ours))) or 0)  # fmt: skip
    playbook = name.replace("-", "_") + ".yml"
    assert cli.main([name, "-i", "hosts.yml", "--limit", "node1", "--allow-partial", "--serial", "2"]) == 0
    assert cli.main([name, "-i", "hosts.yml", "--limit", "node1"]) == 0
    assert runs == [(playbook, {"nccl_build_allow_partial": True, "rdmaforge_upgrade_serial": 2}), (playbook, {})]
    argv = extravars.to_cmdline([extravars.ExtraVars(inline=runs[0][1])], tmp_path)
    assert argv[0] == "-e"
    assert json.loads(Path(argv[1].removeprefix("@")).read_text())["nccl_build_allow_partial"] is True
    # without --limit there is no part to allow: a usage error, before any run (review round 29a)
    assert cli.main([name, "-i", "hosts.yml", "--allow-partial"]) == ExitCode.BAD_INPUT
    assert len(runs) == 2


@pytest.mark.parametrize("command", [["provision"], ["reset", "--yes"]], ids=["provision", "reset"])
def test_an_inventory_ansible_parses_only_in_part_stops_before_any_node(tmp_path: Path, command: list[str]) -> None:
    """An INI header missing its ']' (hostile-input finding): Ansible warned 'Unable to parse' and went on with
    node1 and without the group's variables; provision passed preflight and then failed half-way, reset began on
    the node. ansible.cfg's any_unparsed_is_failed makes it Ansible's error: no host run. It is bad input, exit 64
    as for a YAML inventory that cannot be read (it was 1, "could not run"), and the message names the file and
    why Ansible's INI plugin refused it."""
    inventory = tmp_path / "hosts"
    inventory.write_text("[cluster]\nnode1 ansible_host=127.0.0.1 ansible_port=9 ansible_connection=no-such-connection"
                         "\n[cluster:vars\nrdmaforge_fabric=tcp\n")  # fmt: skip
    proc = rdmaforge(tmp_path, *command, "-i", str(inventory))
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Completely failed to parse inventory source" in proc.stdout + proc.stderr, proc.stdout[-3000:]
    why = f"no host was run: Ansible cannot parse the inventory {inventory} ("
    line = next((x for x in proc.stdout.splitlines() if why in x), "")
    assert "Failed to parse inventory with 'ini' plugin: Failed to parse inventory" in line, proc.stdout[-3000:]

    # --json: the document says why (it had empty hosts and problems and no error: review round 29a)
    proc = rdmaforge(tmp_path, *command, "-i", str(inventory), "--json")
    document = json.loads(proc.stdout)
    assert document["exit_code"] == ExitCode.BAD_INPUT
    assert document["error"].startswith(why), document["error"]


def test_reset_of_an_inventory_without_cluster_nodes_is_no_success(tmp_path: Path) -> None:
    """The node is only in another group: nothing can be reset. It printed 'localhost ok' and exit 0 (the
    confirmation play was a play for localhost); now no host is run and the exit says so."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {"node1": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "no-such-connection"}}}}}}))
    proc = rdmaforge(tmp_path, "reset", "-i", str(inventory), "--yes")
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "no host was run" in proc.stdout and "localhost" not in proc.stdout.split("PLAY RECAP", 1)[-1]
    assert MISSING_CLUSTER in proc.stdout, proc.stdout[-3000:]


#: What a run on an inventory without group cluster says (Ansible itself only warns that the pattern matched nothing).
MISSING_CLUSTER = "no host was run: the inventory has no host in 'cluster', the group the playbook runs on"


@pytest.mark.parametrize("argv", [["doctor"], ["rollback-nccl"], ["pairwise"], ["bench"]])
def test_a_command_on_an_inventory_without_group_cluster_names_the_group(tmp_path: Path, argv: list[str]) -> None:
    """Commands without preflight said only "no host was run" (exit 1) when the inventory put its nodes in another
    group: the run's JUnit error case and its output name the missing group now, and the exit is bad input (64), as
    render's on the same inventory."""
    import xml.etree.ElementTree as ET

    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {"node1": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "no-such-connection"}}}}}}))
    report = tmp_path / "junit.xml"
    proc = rdmaforge(tmp_path, *argv, "-i", str(inventory), "--junit", str(report))
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert MISSING_CLUSTER in proc.stdout, proc.stdout[-3000:]
    messages = [e.get("message", "") for e in ET.parse(report).getroot().iter("error")]
    assert any(m.startswith(MISSING_CLUSTER) for m in messages), messages


#: What preflight (provision) and render say of an inventory without group cluster.
NO_CLUSTER_HOSTS = "the inventory has no hosts in group 'cluster'"


@pytest.mark.parametrize("argv", [["provision"], ["verify"], ["render"]])
def test_every_command_exits_bad_input_on_an_inventory_without_group_cluster(
    tmp_path: Path, argv: list[str]
) -> None:
    """One inventory fault, one exit code (review: provision exited 2, 'a host failed', as preflight failed on
    localhost; verify and doctor 1; render 64). --json carries the same code; nothing is connected to."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {"node1": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "no-such-connection"}}}}}}))
    if argv == ["render"]:  # no run directory of its own
        proc = subprocess.run([sys.executable, "-m", "rdmaforge.cli", "render", "-i", str(inventory), "-o",
                               str(tmp_path / "out")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    else:
        proc = rdmaforge(tmp_path, *argv, "-i", str(inventory), "--json")
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-2000:]
    said = proc.stdout + proc.stderr
    assert NO_CLUSTER_HOSTS in said or MISSING_CLUSTER in said, said[-3000:]
    if argv != ["render"]:
        assert json.loads(proc.stdout)["exit_code"] == ExitCode.BAD_INPUT


def test_remove_node_refuses_an_empty_name_before_any_run(tmp_path: Path, inventory: Path) -> None:
    proc = rdmaforge(tmp_path, "remove-node", "-i", str(inventory), "")
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "an empty node name; allowed: a host of group 'cluster'" in proc.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", [["provision"], ["reset", "--yes"], ["doctor"]])
def test_a_group_vars_file_with_a_yaml_error_is_named_before_any_run(
    tmp_path: Path, inventory: Path, command: list[str]
) -> None:
    """Ansible says only 'YAML parsing failed', naming no file (exit 1 after a run had started)."""
    broken = inventory.parent / "group_vars" / "cluster" / "fabric.yml"
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text("rdmaforge_fabric: [erdma\n")
    proc = rdmaforge(tmp_path, *command, "-i", str(inventory))
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert f"{broken}: line 2 column 1: YAML syntax error" in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists()


def test_remove_node_refuses_a_limit_before_any_run(tmp_path: Path, inventory: Path) -> None:
    """Under --limit the playbook's first play (for localhost: the names' check, the groups of the later plays) did
    not run: 'remove-node nosuch --limit node1' ended 'no host was run' without naming 'nosuch'."""
    proc = rdmaforge(tmp_path, "remove-node", "-i", str(inventory), "nosuch", "--limit", "node1")
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "--limit node1: remove-node takes the nodes to remove as its arguments" in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists()
