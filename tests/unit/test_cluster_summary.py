"""summary.json across runs (rdmaforge.cluster_summary): a run that reaches only some nodes keeps the others,
marked as not seen by it, and `rdmaforge summary` never prints an earlier run's entry as current.
The lab proof (a real `--limit` run) is tests/integration/test_rdma_userspace.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge import stored
from rdmaforge.cli import main
from rdmaforge.cluster_summary import entries, merge
from rdmaforge.paths import PROJECT_ROOT

MEMBERS = ["node1", "node2", "node3"]
# The reasons a user reads, written out here rather than taken from the code under test.
OUTSIDE_LIMIT = "not in this run (outside --limit)"
LOST = "not in this run (failed or unreachable earlier in it)"
FIRST, SECOND = "2026-11-24T10:00:00Z", "2026-11-24T11:00:00Z"


def entry(host: str, mpi: str = "4.1.4") -> dict[str, Any]:
    return {"host": host, "address": "198.18.0.2", "os": "Debian 12", "fabric": "erdma", "cpus": 2, "gpus": 0,
            "rdma_devices": [], "rdma_packages": {"rdma-core": "44.0"}, "mpi_version": mpi, "nccl_build": None,
            "nccl_plugin": "aiacc", "nccl_plugin_version": "2.0.1", "nccl_plugin_api_versions": [2, 3],
            "nccl_settings": {"NCCL_SOCKET_IFNAME": "eth0"}}  # fmt: skip


def write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document))
    stored.check(document, stored.SUMMARY_JSON, str(path), "summary")  # what the role writes is what the CLI reads
    return path


def full_run(tmp_path: Path) -> Path:
    """summary.json as a first, complete run over MEMBERS writes it."""
    return write(
        tmp_path / "summary.json", merge([entry(h) for h in MEMBERS], tmp_path / "none", MEMBERS, MEMBERS, FIRST)
    )


def test_first_run_lists_every_reached_node_in_inventory_order(tmp_path: Path) -> None:
    summary = merge([entry("node3"), entry("node1"), entry("node2")], tmp_path / "absent.json", MEMBERS, MEMBERS, FIRST)
    assert [n["host"] for n in summary["nodes"]] == MEMBERS
    assert all(n["as_of"] == FIRST and "not_in_this_run" not in n for n in summary["nodes"])
    assert "previous_summary_problem" not in summary


def test_limited_run_keeps_the_other_members_marked_with_their_earlier_time(tmp_path: Path) -> None:
    path = full_run(tmp_path)
    summary = write(path, merge([entry("node2", mpi="5.0.0")], path, MEMBERS, ["node2"], SECOND))
    nodes = {n["host"]: n for n in json.loads(summary.read_text())["nodes"]}
    assert list(nodes) == MEMBERS
    assert nodes["node2"]["mpi_version"] == "5.0.0" and nodes["node2"]["as_of"] == SECOND
    assert "not_in_this_run" not in nodes["node2"]
    for host in ("node1", "node3"):
        assert nodes[host]["not_in_this_run"] == OUTSIDE_LIMIT
        assert nodes[host]["as_of"] == FIRST and nodes[host]["mpi_version"] == "4.1.4"


def test_a_node_lost_during_the_run_is_not_reported_as_outside_the_limit(tmp_path: Path) -> None:
    path = full_run(tmp_path)
    nodes = merge([entry("node1"), entry("node2")], path, MEMBERS, MEMBERS, SECOND)["nodes"]
    assert nodes[2]["host"] == "node3" and nodes[2]["not_in_this_run"] == LOST and nodes[2]["as_of"] == FIRST


def test_an_earlier_entry_of_another_address_is_not_carried_over(tmp_path: Path) -> None:
    """Review round 41a: summary.json is the workspace's. After a lab run (node1..node3 at 198.18.0.2), a limited run
    of another inventory whose nodes have the same names carried the lab container's entry over as node3's last
    summary: a GPU node shown with a container's OS, fabric and GPU count."""
    path = full_run(tmp_path)
    hostvars = {"node1": {"ansible_host": "172.20.0.11"}, "node2": {"ansible_host": "172.20.0.12"},
                "node3": {"ansible_host": "198.18.0.2"}}  # node3 is the lab's address: the same node  # fmt: skip
    nodes = merge([entry("node1")], path, MEMBERS, ["node1"], SECOND, hostvars)["nodes"]
    assert nodes[1] == {"host": "node2", "not_in_this_run": OUTSIDE_LIMIT + "; its last summary, of address "
                        "198.18.0.2, is not carried over: the inventory gives 172.20.0.12"}  # fmt: skip
    assert nodes[2]["not_in_this_run"] == OUTSIDE_LIMIT and nodes[2]["as_of"] == FIRST and nodes[2]["os"] == "Debian 12"
    # A node without ansible_host is at its inventory name (assemble.yml's address).
    nodes = merge([entry("node1")], path, MEMBERS, ["node1"], SECOND, {"node2": {}, "node3": {}})["nodes"]
    assert [n.get("os") for n in nodes[1:]] == [None, None]


def test_a_member_no_run_has_reached_has_only_its_name_and_the_reason(tmp_path: Path) -> None:
    nodes = merge([entry("node1")], tmp_path / "none", MEMBERS, ["node1", "node2"], FIRST)["nodes"]
    assert nodes[1] == {"host": "node2", "not_in_this_run": LOST}
    assert nodes[2] == {"host": "node3", "not_in_this_run": OUTSIDE_LIMIT}


@pytest.mark.parametrize("damage", ["{not json", json.dumps({"nodes": "node1"})])
def test_a_damaged_earlier_summary_is_named_not_carried_over(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "summary.json"
    path.write_text(damage)
    summary = merge([entry("node1")], path, MEMBERS, ["node1"], SECOND)
    assert str(path) in summary["previous_summary_problem"]
    assert summary["nodes"][1] == {"host": "node2", "not_in_this_run": OUTSIDE_LIMIT}


def test_cli_prints_earlier_entries_as_earlier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "summary.json", merge([entry("node1"), entry("node2")], tmp_path / "none", MEMBERS,
                                                  ["node1", "node2"], FIRST))  # fmt: skip
    write(path, merge([entry("node2")], path, MEMBERS, ["node2"], SECOND))
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"summary written {SECOND}"
    assert f"node1: {OUTSIDE_LIMIT}; its last summary (as of {FIRST}):" in out
    assert any(line.startswith("node2 (198.18.0.2): Debian 12") for line in out)
    assert f"node3: {OUTSIDE_LIMIT}; no earlier summary of it is on record" in out
    # node1's details are indented under its note, so no line presents them as a current node's
    assert not any(line.startswith("node1 (") for line in out)


def test_a_null_gpu_count_is_printed_as_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The role records the fact's count: null where preflight could not read it (or did not run). It was printed as
    "None GPUs"; the lab's measured 0 stays "0 GPUs"."""
    unknown = {**entry("node1"), "gpus": None}
    path = write(tmp_path / "summary.json", merge([unknown, entry("node2")], tmp_path / "none", ["node1", "node2"],
                                                  ["node1", "node2"], FIRST))  # fmt: skip
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "node1 (198.18.0.2): Debian 12, fabric erdma, 2 CPUs, GPU count unknown, RDMA devices: none" in out, out
    assert "node2 (198.18.0.2): Debian 12, fabric erdma, 2 CPUs, 0 GPUs, RDMA devices: none" in out, out
    assert "None GPUs" not in out


def test_a_plugin_recorded_as_a_number_is_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The schema takes any scalar for nccl_plugin: -1 (a hand-edited or damaged file) ended in an internal error
    (exit 70: int += str) instead of being printed as recorded (review round 17c)."""
    path = write(tmp_path / "summary.json", {"nodes": [{**entry("node1"), "nccl_plugin": -1,
                                                        "nccl_plugin_version": 2}]})  # fmt: skip
    assert main(["summary", str(path)]) == 0
    assert "  NCCL plugin: -1 2 (net API" in capsys.readouterr().out


def test_a_missing_summary_gets_the_provision_hint_a_dangling_link_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A link whose file is gone is the user's own (review round 34a, low): running provision would not bring back
    the file it names, so only a missing summary gets the hint."""
    assert main(["summary", str(tmp_path / "summary.json")]) == 64
    assert "rdmaforge provision writes it at its end" in capsys.readouterr().err
    link = tmp_path / "latest.json"
    link.symlink_to(tmp_path / "gone" / "summary.json")
    assert main(["summary", str(link)]) == 64
    err = capsys.readouterr().err
    assert f"is a symbolic link to {tmp_path / 'gone' / 'summary.json'}, which does not exist" in err, err
    assert "provision" not in err, err


def test_a_summary_without_nodes_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`summary` is a display (exit 0: printed, no verdict); with no node it printed one blank line."""
    path = write(tmp_path / "summary.json", {"nodes": []})
    assert main(["summary", str(path)]) == 0
    assert capsys.readouterr().out == (
        f"no node in {path}: the summary lists none (playbooks/summary.yml summarized no host)\n"
    )


def test_an_entry_the_role_could_not_vouch_for_keeps_the_earlier_one_with_the_role_s_reason(tmp_path: Path) -> None:
    path = full_run(tmp_path)
    drifted = "not converged by this run, and it differs from its last complete converge (file /etc/nccl.conf)"
    current = [entry("node1"), {"host": "node2", "not_in_this_run": drifted}, entry("node3")]
    nodes = merge(current, path, MEMBERS, MEMBERS, SECOND)["nodes"]
    assert nodes[1] == {**entry("node2"), "as_of": FIRST, "not_in_this_run": drifted}
    assert nodes[0]["as_of"] == nodes[2]["as_of"] == SECOND


def test_nodes_on_the_fast_path_get_the_summary_kept_with_their_record(tmp_path: Path) -> None:
    # site.yml's summary: node1 converged in this run (its tasks set its entry); node2 and node3 took the fast path
    # (the gate found them in sync with their record), node3's record from before records kept a summary; node4
    # has neither (lost before the summary).
    hostvars: dict[str, dict[str, Any]] = {
        "node1": {"cluster_summary_node": entry("node1", mpi="5.0.0")},
        "node2": {"converge_state_in_sync": True, "converge_state_check": {"in_sync": True, "summary": entry("node2")}},
        "node3": {"converge_state_in_sync": True, "converge_state_check": {"in_sync": True, "summary": {}}},
        "node4": {"converge_state_check": {"in_sync": False, "summary": entry("node4")}},
    }
    found = entries(list(hostvars), hostvars)
    assert [node["host"] for node in found] == ["node1", "node2", "node3"]
    assert found[0]["mpi_version"] == "5.0.0" and found[1] == {**entry("node2"), "recorded": True}
    assert found[2] == {"host": "node3", "not_in_this_run": "in sync with its last complete converge, which kept no "
                        "summary of it"}  # fmt: skip
    document = merge(found, tmp_path / "none", [*hostvars], [*hostvars], SECOND)
    nodes = {node["host"]: node for node in document["nodes"]}
    assert nodes["node2"]["as_of"] == SECOND and "not_in_this_run" not in nodes["node2"]
    assert nodes["node4"]["not_in_this_run"] == LOST


def test_summary_yml_alone_marks_each_node_its_record_cannot_vouch_for(tmp_path: Path) -> None:
    # The role's own tasks (its per-node set_fact, then write.yml), run by ansible-playbook on local hosts, each
    # given the answer of the converge check that summary.yml runs first (converge_state_check).
    role = PROJECT_ROOT / "roles" / "cluster_summary"
    checks = {
        "node1": {"in_sync": True, "summary": entry("node1")},
        "node2": {"in_sync": True, "summary": {}},  # a record that kept no summary
        "node3": {"in_sync": False, "summary": entry("node3"), "reasons": ["/etc/nccl.conf: mode 0600"]},
        "node4": {"in_sync": False, "reasons": ["no record"]},  # the check answers no summary without a record
    }
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    hosts = {name: {**local, "converge_state_check": check} for name, check in checks.items()}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    tasks = yaml.safe_load((role / "tasks" / "main.yml").read_text())
    entry_task = next(task for task in tasks if "ansible.builtin.set_fact" in task)
    play_vars = {**yaml.safe_load((role / "vars" / "main.yml").read_text()), "cluster_summary_from_this_run": False,
                 "cluster_summary_dir": str(tmp_path), "cluster_summary_group": "cluster"}  # fmt: skip
    plays = [
        {"name": "entries", "hosts": "cluster", "gather_facts": False, "vars": play_vars, "tasks": [entry_task]},
        {"name": "report", "hosts": "cluster", "gather_facts": False, "vars": play_vars,
         "tasks": yaml.safe_load((role / "tasks" / "write.yml").read_text())},
    ]  # fmt: skip
    playbook = tmp_path / "summary.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    env = {**os.environ, "ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg"), "ANSIBLE_CACHE_PLUGIN": "memory",
           "ANSIBLE_NOCOLOR": "1"}  # fmt: skip
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook)]
    proc = subprocess.run(argv, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    nodes = {node["host"]: node for node in json.loads((tmp_path / "summary.json").read_text())["nodes"]}
    assert list(nodes) == list(checks)
    assert "not_in_this_run" not in nodes["node1"] and nodes["node1"]["mpi_version"] == "4.1.4"
    assert nodes["node1"]["recorded"] is True  # read by the converge that recorded it, not by this run
    assert nodes["node2"]["not_in_this_run"] == (
        "not converged by this run, and its last complete converge, which it matches, kept no summary of it"
    )
    assert nodes["node3"]["not_in_this_run"] == (
        "not converged by this run, and it differs from its last complete converge (/etc/nccl.conf: mode 0600)"
    )
    assert nodes["node4"]["not_in_this_run"] == (
        "not converged by this run, and no complete converge has been recorded on it"
    )


def test_the_summary_lists_each_rdma_port_with_its_state_and_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ports of a real ibstat output (tests/data/ibstat: two CX-7 RoCE ports at 200, a CX-6 Dx port down and
    disabled) as the rdma_devices module reports them, through the role's filter, into summary.json and out of
    `rdmaforge summary`."""
    from rdmaforge.cluster_summary import port_lines
    from rdmaforge.parsers.rdma_devinfo import merge_ibstat
    from tests.unit.test_ibstat import cas, devinfo_like

    parsed = cas("mlx5_roce_cx7_and_disabled_cx6dx.txt")
    devices, _ = merge_ibstat(devinfo_like(parsed), parsed)
    devices[2]["ports"][0]["physical_state"] = "DISABLED"  # rdma link fills it in on a node (ibstat's Disabled)
    lines = port_lines(devices)
    assert lines == ["mlx5_0:1 ACTIVE 200 Gb/s", "mlx5_1:1 ACTIVE 200 Gb/s", "mlx5_10:1 DOWN (DISABLED)"]
    assert port_lines([]) == [] and port_lines(None) == []
    node = {**entry("node1"), "rdma_devices": ["mlx5_0", "mlx5_1", "mlx5_10"], "rdma_ports": lines}
    path = write(tmp_path / "summary.json", merge([node], tmp_path / "none", ["node1"], ["node1"], FIRST))
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "  RDMA ports:  mlx5_0:1 ACTIVE 200 Gb/s, mlx5_1:1 ACTIVE 200 Gb/s, mlx5_10:1 DOWN (DISABLED)" in out


def test_facts_the_run_could_not_read_are_printed_in_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A null OS, address, fabric or CPU count was printed as "None"."""
    blank = {**entry("node1"), "os": None, "address": None, "fabric": None, "cpus": None}
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"time": FIRST, "nodes": [blank]}))
    assert main(["summary", str(path)]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("node1 ")]
    assert line.startswith("node1 (address unknown): OS unknown, fabric unknown, unknown CPUs, 0 GPUs"), line
    assert "None" not in line


def test_an_empty_reason_for_a_node_not_in_this_run_is_still_not_current(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`not_in_this_run: ""` was read as absent, and the earlier entry printed as the node's current state."""
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"time": SECOND, "nodes": [{**entry("node1"), "as_of": FIRST, "not_in_this_run": ""}]}))
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"node1: not in this run (no reason recorded); its last summary (as of {FIRST}):" in out
    assert not any(line.startswith("node1 (") for line in out)


@pytest.mark.parametrize(
    ("host", "problem"),
    [("a\nb", "without control characters"), ("", "not empty"), ("x\x1b[2J", "without control characters")],
    ids=["newline", "empty", "escape"],
)
def test_a_host_name_that_cannot_be_printed_on_its_line_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str, problem: str
) -> None:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"nodes": [entry(host)]}))
    assert main(["summary", str(path)]) == 64
    err = capsys.readouterr().err
    assert "nodes[0].host: must be a host name" in err and problem in err, err


def test_an_integer_too_long_to_read_is_named_without_python_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "summary.json"
    path.write_text('{"nodes": [{"host": "node1", "cpus": ' + "9" * 5001 + "}]}")
    assert main(["summary", str(path)]) == 64
    err = capsys.readouterr().err
    assert "an integer of more than 4300 digits" in err and "sys.set_int_max_str_digits" not in err, err


def test_an_entry_with_an_empty_reason_is_not_stamped_current_by_the_merge(tmp_path: Path) -> None:
    """The merge took `not_in_this_run: ""` for current (stamped as of this run) while the CLI prints it as not
    current: the two now agree, and the earlier entry is kept with the empty reason."""
    path = full_run(tmp_path)
    vouched_for = {**entry("node1", mpi="5.0.0"), "not_in_this_run": ""}
    nodes = merge([vouched_for, entry("node2"), entry("node3")], path, MEMBERS, MEMBERS, SECOND)["nodes"]
    assert nodes[0]["not_in_this_run"] == "" and nodes[0]["as_of"] == FIRST and nodes[0]["mpi_version"] == "4.1.4"


def test_a_damaged_earlier_summary_is_never_called_no_earlier_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a summary.json that could not be read, a node outside --limit has no entry on record, though earlier
    runs summarized it: the line says what is known ("no earlier summary of it is on record")."""
    path = full_run(tmp_path)
    path.write_text(path.read_text()[:40])  # damaged
    write(path, merge([entry("node2")], path, MEMBERS, ["node2"], SECOND))
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "no earlier run has summarized it" not in out
    assert f"node1: {OUTSIDE_LIMIT}; no earlier summary of it is on record" in out


def test_a_value_holding_a_newline_cannot_fake_a_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = {**entry("node1", mpi="4.1.4\nnode2 (198.18.0.3): Debian 12, fabric erdma"), "as_of": FIRST}
    node["nccl_settings"] = {"NCCL_DEBUG": "INFO\n  MPI:         5.0.0"}
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"time": FIRST, "nodes": [node]}))
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert not any(line.startswith("node2 ") for line in out), out
    assert "  MPI:         4.1.4\\x0anode2 (198.18.0.3): Debian 12, fabric erdma" in out
    assert sum(line.startswith("  MPI:") for line in out) == 1


def test_an_entry_taken_from_the_converge_record_says_so(tmp_path: Path) -> None:
    """site.yml's fast path (and summary.yml on its own) give a node in sync the summary its last complete converge
    recorded: it was printed as this run's reading, stamped with this run's time, though the record's comparison
    covers port states, not rates (a link that trained from 200 to 100 Gb/s kept its old rate: review round 15b)."""
    from rdmaforge.cluster_summary import entries
    from rdmaforge.commands.summary import RECORDED_NOTE, format_node

    recorded = {"host": "node1", "os": "Debian 12", "rdma_ports": ["mlx5_0:1 ACTIVE 200 Gb/s"]}
    hostvars = {"node1": {"converge_state_in_sync": True, "converge_state_check": {"summary": recorded}},
                "node2": {"cluster_summary_node": {"host": "node2", "os": "Debian 12"}}}  # fmt: skip
    found = {entry["host"]: entry for entry in entries(["node1", "node2"], hostvars)}
    assert found["node1"]["recorded"] is True and "recorded" not in found["node2"]
    summary = merge(found.values(), tmp_path / "summary.json", ["node1", "node2"], ["node1", "node2"], SECOND)
    nodes = {n["host"]: n for n in summary["nodes"]}
    assert format_node(nodes["node1"])[-1] == f"  {RECORDED_NOTE}"
    assert RECORDED_NOTE not in "\n".join(format_node(nodes["node2"]))
