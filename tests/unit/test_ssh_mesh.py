"""rdmaforge.ssh_mesh: what the ssh_trust role writes (names, known_hosts lines) and how it reads the check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge import ssh_mesh
from rdmaforge.paths import PROJECT_ROOT

BY_BOTH = ["address", "name"]


def hostvars() -> dict[str, dict[str, Any]]:
    def node(n: int, probes: dict[str, Any] | None) -> dict[str, Any]:
        facts = {
            "all_ipv4_addresses": [f"198.18.0.1{n}", f"198.18.1.1{n}"],
            "ssh_host_key_ed25519_public_keytype": "ssh-ed25519",
            "ssh_host_key_ed25519_public": f"AAAAkey{n}",
        }
        entry: dict[str, Any] = {"ansible_host": f"198.18.0.1{n}", "ansible_facts": facts}
        if probes is not None:
            entry["ssh_trust_probe"] = {"probes": probes}
        return entry

    ok = {"ok": True, "rc": 0}
    refused = {"ok": False, "rc": 255, "error": "Host key verification failed."}
    return {
        "node1.lab": node(1, {"198.18.0.12": ok, "node2.lab": ok, "198.18.0.13": ok, "node3.lab": ok}),
        "node2.lab": node(2, {"198.18.0.11": ok, "node1.lab": ok, "198.18.0.13": ok, "node3.lab": refused}),
        "node3.lab": node(3, None),  # left out of the run by --limit: it probed nothing
    }


def test_names_cover_inventory_name_short_name_and_every_address() -> None:
    assert ssh_mesh.names("node1.lab", hostvars()) == ["node1.lab", "node1", "198.18.0.11", "198.18.1.11"]


def test_forms_follow_check_by_order() -> None:
    hv = hostvars()
    assert ssh_mesh.forms("node2.lab", hv, ["address"]) == ["198.18.0.12"]
    assert ssh_mesh.forms("node2.lab", hv, ["name"]) == ["node2.lab"]
    assert ssh_mesh.peer_forms(["node2.lab", "node3.lab"], hv, BY_BOTH) == [
        "198.18.0.12",
        "node2.lab",
        "198.18.0.13",
        "node3.lab",
    ]


def test_known_hosts_lines_name_every_form_of_every_node() -> None:
    lines = ssh_mesh.known_hosts_lines(["node2.lab", "node1.lab"], hostvars())
    assert lines == [
        "node1.lab,node1,198.18.0.11,198.18.1.11 ssh-ed25519 AAAAkey1",
        "node2.lab,node2,198.18.0.12,198.18.1.12 ssh-ed25519 AAAAkey2",
    ]


def test_a_node_without_host_key_facts_is_an_error_naming_it() -> None:
    hv = hostvars()
    hv["node2.lab"]["ansible_facts"] = {}
    with pytest.raises(ValueError, match=r"node2.lab: no SSH host key facts"):
        ssh_mesh.known_hosts_lines(["node1.lab", "node2.lab"], hv)


def test_matrix_and_failures_among_the_nodes_of_the_run() -> None:
    hv = hostvars()
    run = ["node1.lab", "node2.lab"]
    assert ssh_mesh.matrix(run, hv, BY_BOTH) == {
        "pairs": {"node1.lab": {"node2.lab": True}, "node2.lab": {"node1.lab": True}},
        "coverage": {"probed": 2, "reached": 2, "failed": 0, "not_checked": 0},
    }
    assert ssh_mesh.failures(run, hv, BY_BOTH) == []


def test_targets_outside_the_run_are_checked_too() -> None:
    """--limit node1,node2: both still probe node3, and a failure to reach it is reported."""
    hv = hostvars()
    run, members = ["node1.lab", "node2.lab"], ["node1.lab", "node2.lab", "node3.lab"]
    assert ssh_mesh.matrix(run, hv, BY_BOTH, members) == {
        "pairs": {
            "node1.lab": {"node2.lab": True, "node3.lab": True},
            "node2.lab": {"node1.lab": True, "node3.lab": False},
        },
        "coverage": {"probed": 4, "reached": 3, "failed": 1, "not_checked": 0},  # 2 sources x 2 other members
    }
    assert ssh_mesh.failures(run, hv, BY_BOTH, members) == [
        "node2.lab -> node3.lab (node3.lab): Host key verification failed."
    ]


def test_a_node_that_did_not_report_is_a_failure() -> None:
    hv = hostvars()
    assert ssh_mesh.failures(["node1.lab", "node3.lab"], hv, ["address"]) == [
        "node3.lab -> *: no result from node3.lab (unreachable, or the check did not run)"
    ]
    # its pairs count as failed, never as not checked (nor reached): every target of its row is False
    assert ssh_mesh.matrix(["node1.lab", "node3.lab"], hv, ["address"]) == {
        "pairs": {"node1.lab": {"node3.lab": True}, "node3.lab": {"node1.lab": False}},
        "coverage": {"probed": 2, "reached": 1, "failed": 1, "not_checked": 0},
    }


# The bounded check (issue 19: a 16-node lab's all-pairs check opened 480 sessions at once and timed out).
RING = [f"node{i:02d}" for i in range(1, 11)]


def test_ring_peers_are_every_other_node_when_the_limit_covers_them() -> None:
    assert ssh_mesh.ring_peers(RING[:4], "node02", 8) == ["node01", "node03", "node04"]
    assert ssh_mesh.ring_peers(RING[:4], "node02", 0) == ["node01", "node03", "node04"]


def test_ring_peers_take_the_next_nodes_and_wrap() -> None:
    assert ssh_mesh.ring_peers(RING, "node09", 3) == ["node10", "node01", "node02"]
    # every node is a source and a target exactly `limit` times, so a node with a broken key or sshd is caught
    targets = [t for source in RING for t in ssh_mesh.ring_peers(RING, source, 3)]
    assert all(targets.count(node) == 3 for node in RING)


def test_pairs_a_bounded_check_left_out_are_not_checked_never_reached() -> None:
    members = RING[:4]
    hv = {h: {"ansible_host": f"198.18.0.{i}"} for i, h in enumerate(members, start=11)}
    for source in members:
        peers = ssh_mesh.ring_peers(members, source, 1)
        hv[source]["ssh_trust_probe"] = {
            "probes": {f: {"ok": True, "rc": 0, "error": ""} for f in ssh_mesh.peer_forms(peers, hv, ["address"])}
        }
    result = ssh_mesh.matrix(members, hv, ["address"])
    assert result["pairs"] == {"node01": {"node02": True}, "node02": {"node03": True}, "node03": {"node04": True},
                               "node04": {"node01": True}}  # fmt: skip
    assert result["coverage"] == {"probed": 4, "reached": 4, "failed": 0, "not_checked": 8}  # 4 x 3 pairs in all
    assert ssh_mesh.failures(members, hv, ["address"]) == []


def test_the_result_holds_only_the_pairs_probed_and_counts_the_rest_as_not_checked() -> None:
    """10 nodes, each probing the next 3 of the ring by address and name; every probe of node05 is refused, and
    node10 answered nothing. Counted by hand (the full 10 x 9 table gave the same: 36 values true or false, 54
    null): 9 sources x 3 probed = 27 pairs, of which node02, node03 and node04 -> node05 failed (24 reached);
    node10's 9 pairs failed; 90 - 27 - 9 = 54 not checked."""
    hv: dict[str, dict[str, Any]] = {h: {"ansible_host": f"198.18.0.{i}"} for i, h in enumerate(RING, start=11)}
    refused = {"ok": False, "rc": 255, "error": "Permission denied (publickey)."}
    for source in RING[:-1]:
        peers = ssh_mesh.ring_peers(RING, source, 3)
        hv[source]["ssh_trust_probe"] = {"probes": {
            form: refused if form in ("198.18.0.15", "node05") else {"ok": True, "rc": 0, "error": ""}
            for form in ssh_mesh.peer_forms(peers, hv, BY_BOTH)
        }}  # fmt: skip
    result = ssh_mesh.matrix(RING, hv, BY_BOTH)
    assert result["coverage"] == {"probed": 36, "reached": 24, "failed": 12, "not_checked": 54}
    ring_pairs = {("node01", "node02"), ("node01", "node03"), ("node01", "node04"), ("node07", "node08"),
                  ("node07", "node09"), ("node07", "node10"), ("node08", "node09"), ("node08", "node10"),
                  ("node08", "node01"), ("node09", "node10"), ("node09", "node01"), ("node09", "node02")}  # fmt: skip
    ring_pairs |= {(f"node{s:02d}", f"node{s + step:02d}") for s in range(2, 7) for step in (1, 2, 3)}
    ring_pairs |= {("node10", target) for target in RING[:-1]}  # answered nothing: every target failed
    held = {(source, target) for source, row in result["pairs"].items() for target in row}
    assert held == ring_pairs and len(held) == 36
    assert {(s, t) for (s, t) in held if result["pairs"][s][t] is False} == {
        ("node02", "node05"), ("node03", "node05"), ("node04", "node05"), *(("node10", t) for t in RING[:-1])}
    assert all(type(v) is bool for row in result["pairs"].values() for v in row.values())  # no null left in it


def test_the_matrix_works_out_each_targets_forms_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """matrix and failures worked out a target's forms for every source, twice (a million pairs at 1,000 nodes:
    about 4 s and 2 s on this machine for a 1,000-node ring check, 0.3 s and 0.1 s now); now once per target. The
    tables are the same (the tests above), also where one address names two targets (both probed by it)."""
    calls: list[str] = []
    real = ssh_mesh.forms

    def counted(host: str, hostvars: Any, check_by: Any) -> list[str]:
        calls.append(host)
        return real(host, hostvars, check_by)

    monkeypatch.setattr(ssh_mesh, "forms", counted)
    hv, members = hostvars(), ["node1.lab", "node2.lab", "node3.lab"]
    ssh_mesh.matrix(members, hv, BY_BOTH)
    ssh_mesh.failures(members, hv, BY_BOTH)
    assert sorted(calls) == sorted(members * 2)
    hv["node3.lab"]["ansible_host"] = "198.18.0.12"  # node3 answers at node2's address: node1 probed both there
    assert ssh_mesh.matrix(["node1.lab"], hv, ["address"], members)["pairs"] == {"node1.lab": {"node2.lab": True,
                                                                                               "node3.lab": True}}
    hv["node1.lab"]["ssh_trust_probe"]["probes"]["198.18.0.12"] = {"ok": False, "rc": 255, "error": "refused"}
    assert ssh_mesh.failures(["node1.lab"], hv, ["address"], members) == [
        "node1.lab -> node2.lab (198.18.0.12): refused", "node1.lab -> node3.lab (198.18.0.12): refused"]  # fmt: skip


def observed(n: int, addresses: list[str]) -> dict[str, Any]:
    """A node's converge check answer as the converge_state module returns it (RV(host_identity))."""
    keys = {"ed25519": {"keytype": "ssh-ed25519", "key": f"AAAAnow{n}"}}
    return {"in_sync": True, "host_identity": {"ssh_host_keys": keys, "ipv4_addresses": addresses}}


def test_a_node_left_out_of_the_play_is_written_from_this_runs_observation_not_its_cached_facts() -> None:
    """The drift of one node puts it alone in the SSH trust play; the others' host keys and addresses, read by the
    converge check at the start of the run, replace their facts (from the fact cache: an earlier run's keys). A node
    of the play keeps its gathered facts: read later, after the roles before it (a secondary NIC's address)."""
    hv = hostvars()
    hv["node2.lab"][ssh_mesh.OBSERVATION] = observed(2, ["198.18.2.12", "198.18.0.12"])
    hv["node1.lab"][ssh_mesh.OBSERVATION] = observed(1, ["198.18.0.11"])
    lines = ssh_mesh.known_hosts_lines(["node1.lab", "node2.lab"], hv, ["node1.lab"])
    assert lines == [
        "node1.lab,node1,198.18.0.11,198.18.1.11 ssh-ed25519 AAAAkey1",
        "node2.lab,node2,198.18.0.12,198.18.2.12 ssh-ed25519 AAAAnow2",
    ]
    assert ssh_mesh.peer_names(["node2.lab"], hv, ["node1.lab"]) == ["node2.lab", "node2", "198.18.0.12", "198.18.2.12"]
    # Without the play's hosts (the argument left out) every node comes from its facts, as before.
    cached = ["node2.lab,node2,198.18.0.12,198.18.1.12 ssh-ed25519 AAAAkey2"]
    assert ssh_mesh.known_hosts_lines(["node2.lab"], hv) == cached


def test_only_nodes_without_an_observation_with_keys_are_read_by_the_role_itself() -> None:
    hv = hostvars()
    hv["node1.lab"][ssh_mesh.OBSERVATION] = observed(1, ["198.18.0.11"])
    hv["node2.lab"][ssh_mesh.OBSERVATION] = {"skipped": True, "changed": False}  # the check did not run
    no_keys = observed(3, ["198.18.0.13"])
    no_keys["host_identity"]["ssh_host_keys"] = {}
    hv["node3.lab"][ssh_mesh.OBSERVATION] = no_keys  # no sshd keys where setup would look: setup says so itself
    assert ssh_mesh.unobserved(["node1.lab", "node2.lab", "node3.lab"], hv) == ["node2.lab", "node3.lab"]
    # Facts of an unobserved node left out of the play are taken as they are (the role has just gathered them).
    assert ssh_mesh.known_hosts_lines(["node2.lab"], hv, ["node1.lab"]) == [
        "node2.lab,node2,198.18.0.12,198.18.1.12 ssh-ed25519 AAAAkey2"
    ]


def test_addresses_are_listed_in_numeric_order_whatever_order_the_facts_give() -> None:
    """Gathered facts list addresses in the kernel's order of interfaces; the text must not depend on it."""
    hv = hostvars()
    hv["node1.lab"]["ansible_facts"]["all_ipv4_addresses"] = ["198.18.10.11", "198.18.9.11", "198.18.0.11"]
    assert ssh_mesh.names("node1.lab", hv) == ["node1.lab", "node1", "198.18.0.11", "198.18.9.11", "198.18.10.11"]


#: A 10-node cluster converged with --limit on 3 of them: 7 left out, of which the converge check read 2.
CLUSTER = [f"n{i:02d}" for i in range(1, 11)]
PLAY = ["n07", "n02", "n09"]  # in the order the inventory and --limit give them
OBSERVED = {"n01", "n10"}
READ_BY_THE_ROLE = ["n03", "n04", "n05", "n06", "n08"]  # the other left-out nodes: setup must read each once
LEFT_OUT_TASK = "Read the SSH host keys of the cluster's nodes that this run leaves out"


def left_out_reads(play_hosts: list[str]) -> dict[str, list[str]]:
    """What the ssh_trust role's task reading the left-out nodes loops over on each play host still running
    (``play_hosts``): its loop expression from roles/ssh_trust/tasks/main.yml, rendered with the real filters;
    a run_once task runs on the first of them only."""
    from tests.unit.role_vars import evaluate, role_vars

    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "ssh_trust" / "tasks" / "main.yml").read_text())
    (task,) = [t for t in tasks if t["name"] == LEFT_OUT_TASK]
    hv: dict[str, Any] = {host: {"ansible_host": host} for host in CLUSTER}
    for host in OBSERVED:
        hv[host][ssh_mesh.OBSERVATION] = observed(int(host[1:]), [f"198.18.0.{int(host[1:])}"])
    runners = play_hosts[:1] if task.get("run_once") else play_hosts
    reads = {}
    for host in runners:
        templar = role_vars("ssh_trust", {}, groups={"cluster": CLUSTER}, hostvars=hv, inventory_hostname=host,
                            ansible_play_hosts_all=PLAY, ansible_play_hosts=play_hosts)  # fmt: skip
        reads[host] = list(evaluate(templar, task["loop"].strip().removeprefix("{{").removesuffix("}}")))
    return reads


def test_the_nodes_left_out_of_the_run_are_read_once_each_by_the_play_hosts_at_once() -> None:
    """Under --limit the role reads the host keys of the left-out nodes the converge check did not read. One play
    host read them all, one after the other (about 1 s each, 3ac0cc1: some 16 minutes for 990 nodes left out of a
    1,000-node cluster); now each play host reads its share, so up to `forks` go at once. The nodes read are the
    same, each exactly once, and so is the known_hosts block written from their facts."""
    reads = left_out_reads(PLAY)
    assert sorted(node for share in reads.values() for node in share) == READ_BY_THE_ROLE  # each once, none else
    assert max(len(share) for share in reads.values()) == 2  # ceil(5 / 3): not 5 on one host
    assert set(reads) == set(PLAY)
    # A play host that failed earlier reads nothing; the ones still running cover its share.
    running = left_out_reads(["n07", "n09"])
    assert sorted(node for share in running.values() for node in share) == READ_BY_THE_ROLE
    assert max(len(share) for share in running.values()) == 3


class PassCounted(list[str]):
    """A list that counts the passes over it: under Ansible the filter's list arguments are lazy, each pass renders
    every item again."""

    passes = 0

    def __iter__(self) -> Any:
        type(self).passes += 1
        return super().__iter__()


class LookupCounted(dict[str, Any]):
    """``hostvars``: under Ansible each lookup works out all of a node's variables."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.lookups: list[str] = []

    def __getitem__(self, host: str) -> Any:
        self.lookups.append(host)
        return super().__getitem__(host)


@pytest.mark.parametrize("table", [ssh_mesh.matrix, ssh_mesh.failures])
def test_matrix_and_failures_pass_over_the_nodes_and_look_each_up_once(table: Any) -> None:
    """Rendered by the role at 1,000 nodes (benchmarks/ssh_mesh_scale.py), the matrix took 13 CPU s and the
    failures 5: a pass over the lazy targets for every source, and two hostvars lookups of every node. The tables
    are the same (the tests above)."""
    plain = hostvars()
    members = ["node1.lab", "node2.lab", "node3.lab"]
    hv = LookupCounted(plain)
    PassCounted.passes = 0
    counted = table(PassCounted(members[:2]), hv, BY_BOTH, PassCounted(members))
    assert counted == table(members[:2], plain, BY_BOTH, members)
    assert PassCounted.passes == 2  # the sources once, the targets once
    assert sorted(hv.lookups) == members  # each node once: node1 and node2 are sources and targets


def test_a_peer_count_given_as_text_is_read_as_its_number() -> None:
    """-e ssh_trust_check_peers=1 (rdmaforge's -e and ansible-playbook's give text, which validate.yml accepts on
    purpose) crashed the SSH check with a TypeError in ring_peers, after the trust files were written. The role's
    ssh_trust_targets reads it as a number: the same peers as the number itself."""
    from tests.unit.role_vars import evaluate, role_vars

    hosts = {name: {"ansible_host": f"198.18.0.{i}"} for i, name in enumerate(RING[:4], start=11)}
    common = {"ssh_trust_members": RING[:4], "ssh_trust_lost": [], "hostvars": hosts, "inventory_hostname": "node02",
              "ssh_trust_check_by": ["name"]}  # fmt: skip
    as_text = evaluate(role_vars("ssh_trust", {}, ssh_trust_check_peers="1", **common), "ssh_trust_targets")
    as_number = evaluate(role_vars("ssh_trust", {}, ssh_trust_check_peers=1, **common), "ssh_trust_targets")
    assert list(as_text) == list(as_number) == ["node03"]


def test_the_ssh_check_alone_refuses_to_check_by_nothing(tmp_path: Path) -> None:
    """playbooks/ssh_check.yml with ssh_trust_check_by: [] probed no pair and passed ("0 node pairs reached, 0
    failed"): refused by the role's own validation before any node is probed (preflight refused it already)."""
    from conftest import run_playbook

    inventory = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
             "ansible_become": False}  # fmt: skip
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": {"localhost": local}}}}}))
    proc = run_playbook("ssh_check.yml", "-e", '{"ssh_trust_check_by": []}', inventory=inventory,
                        env={"ANSIBLE_CACHE_PLUGIN": "memory"})  # fmt: skip
    assert proc.returncode != 0, proc.stdout[-3000:]
    said = " ".join(proc.stdout.split())
    assert "localhost: ssh_trust_check_by=[] names nothing to check by; allowed: address, name, or both" in said
    assert "Reach the peer nodes over SSH" not in proc.stdout, proc.stdout[-3000:]


@pytest.mark.parametrize(("args", "message"), [
    ({"targets": ["-oProxyCommand=touch {mark}"]}, "targets: '-oProxyCommand=touch {mark}' is not allowed; allowed:"),
    ({"targets": ["127.0.0.1"], "user": "-oProxyCommand=touch {mark}"}, "user: '-oProxyCommand=touch {mark}' is not"),
    ({"targets": ["node1 -oProxyCommand=x"]}, "targets: 'node1 -oProxyCommand=x' is not allowed"),
    ({"targets": ["127.0.0.1"], "timeout": 0}, "timeout=0: allowed values are 1 or more"),
])  # fmt: skip
def test_a_target_or_user_read_as_an_ssh_option_is_refused(tmp_path: Path, args: dict, message: str) -> None:
    """A target "-oProxyCommand=..." went to ssh before the destination, as an option: the module, read-only in
    check mode too, ran a local command (review round 37c). Refused before any ssh runs, which --check proves."""
    from tests.unit.adhoc import run_module

    mark = tmp_path / "ran"
    filled = {k: [t.format(mark=mark) for t in v] if k == "targets" else v for k, v in args.items()}
    if isinstance(filled.get("user"), str):
        filled["user"] = filled["user"].format(mark=mark)
    refused = run_module("ssh_mesh_check", filled, "--check")
    assert refused.rc == 2 and refused.result["msg"].startswith(message.format(mark=mark)), refused.result
    assert not mark.exists()


def test_an_address_several_nodes_answer_to_is_trusted_for_none_of_them() -> None:
    """docker0's 172.17.0.1 on every node was listed under each node's host key: `ssh-keygen -F 172.17.0.1` found
    both keys, so ssh to that address accepted either node, and a node reporting another's address could pose as it
    (review round 38a)."""
    hv = hostvars()
    for host in ("node1.lab", "node2.lab"):
        hv[host]["ansible_facts"]["all_ipv4_addresses"].append("172.17.0.1")
    hv["node2.lab"]["ansible_facts"]["all_ipv4_addresses"].append("198.18.0.11")  # node1's address, on node2 too
    lines = ssh_mesh.known_hosts_lines(["node2.lab", "node1.lab"], hv)
    assert lines == [
        "# left out, more than one node answers to it: 172.17.0.1",  # 198.18.0.11 stays on node1's own line
        "node1.lab,node1,198.18.0.11,198.18.1.11 ssh-ed25519 AAAAkey1",  # its own address stays its own
        "node2.lab,node2,198.18.0.12,198.18.1.12 ssh-ed25519 AAAAkey2",
    ]
