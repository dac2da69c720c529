"""The ssh_trust role's check on a 1,000-node cluster: the filters that read every node's result (rdmaforge.ssh_mesh).

Inputs, built here at that scale, shaped as the role and its modules produce them:
- every node has its inventory variables (``ansible_host``), the facts the role gathers (``setup`` with the
  ssh_pub_keys and network subsets: three host keys, a management and an RDMA NIC), the converge check's answer
  (``converge_state_check`` with ``host_identity``, library/converge_state.py) and the SSH check's registered result
  (``ssh_trust_probe``: ``ssh_mesh_check``'s ``probes`` and ``failed_targets``, library/ssh_mesh_check.py);
- the check is the role's default (roles/ssh_trust/defaults/main.yml): each node probes the next
  ``ssh_trust_check_peers`` nodes of the sorted ring by every form of ``ssh_trust_check_by``. The targets are worked
  out here from those two settings, not by the filters under test;
- FAILING targets fail as ssh does (a changed host key, a refused key, a timeout), for every node probing them.

Timed in CPU seconds (see TARGET_CPU_SECONDS; the wall time is in the detail), the least of REPEATS, each mode in a
fresh child process (its peak RSS is the last figure):
- ``plain``: the filters called on plain data (the figure commit 71c5888 timed by hand): the matrix and the
  failures of a full run, and every play host's share of the nodes --limit leaves out (LIMITED of them in the play);
- ``ansible``: the same filters as the role's tasks render them, their expressions read from the role's YAML and
  rendered by Ansible's templar with real ``HostVars`` over a 1,000-node inventory (inventories/example's
  group_vars): what ``ansible-playbook`` pays, lazy containers and ``hostvars[node]`` lookups included. The
  coverage the role prints is rendered too (from the matrix fact, as the role's next task reads it).

A figure counts only when the filter's answer is the one the inputs call for (pairs reached, failed, not checked;
the failing lines; every left-out node in exactly one share): otherwise its target fails, saying what differed.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.common import Result, Timing, peak_rss_mib, stopwatch
from rdmaforge import ssh_mesh
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.role_defaults import defaults

NODES = 1000
#: The play of the --limit case: so many nodes in the play, the others (990) left out and read by their shares.
LIMITED = 10
REPEATS = 3
#: Targets that fail for every node probing them, with ssh's last line (the module keeps it as ``error``).
FAILING = {
    "node0042": (255, "Host key verification failed."),
    "node0517": (255, "root@node0517: Permission denied (publickey)."),
    "node0999": (255, "ssh: connect to host node0999 port 22: Connection timed out"),
}
MODES = ("plain", "ansible")
EXAMPLE_GROUP_VARS = PROJECT_ROOT / "inventories" / "example" / "group_vars"
TASKS = PROJECT_ROOT / "roles" / "ssh_trust" / "tasks"
LEFT_OUT_TASK = "Read the SSH host keys of the cluster's nodes that this run leaves out"

# Targets, in CPU seconds of the call (the least of REPEATS): what an idle core would take. The machine these run on
# is shared (2 cores, load averages of 4 to 9 while they were measured), which doubles the wall time or more; a
# wall-time target roomy enough for that would not tell the old code from the new. Each is about 2-3 times what
# was measured on 2026-12-02 (README, "SSH trust at 1,000 nodes").
TARGET_CPU_SECONDS = {
    # 0.023-0.025 measured for the pairs probed and the counts (0.11-0.18 for the million pairs of the N x N table,
    # which this target fails); the per-pair code before 71c5888 took 4.1 s.
    ("plain", "matrix"): 0.08,
    # 0.04-0.08 measured; 2.1 s before 71c5888.
    ("plain", "failures"): 0.3,
    # the play host that took longest: under 0.01 measured. What 87fce4b bought (each of them reads its share,
    # at most 99 nodes here, not one host all 990) is checked with the answer (check_shares).
    ("plain", "left-out share"): 0.05,
    # 1.25-1.37 measured for the 8,000 pairs probed and the counts, most of it a hostvars lookup of each node (as the
    # failures'); 8.4-10.0 while the result was the million pairs of the N x N table (991,000 of them "not checked",
    # None, for Ansible to take in), 12.9 before 057d38b.
    ("ansible", "matrix"): 3.5,
    # 1.5-1.8 measured: a hostvars lookup of each node (about 7 ms at 1,000 nodes); 5.3 before 057d38b.
    ("ansible", "failures"): 3.5,
    # 0.002 measured: the counts the matrix filter worked out, read from its fact; 4.6-6.4 while they were counted
    # from the million values of the N x N table read back.
    ("ansible", "coverage"): 0.1,
    # one play host's loop: a hostvars lookup of each left-out node, 1.3-1.4 measured.
    ("ansible", "left-out share"): 3.0,
}
#: The child's peak RSS, inputs included (46 and 79 MiB of it): 47 and 94-95 MiB measured, 96-121 and 185-231 while
#: the matrix was the N x N table.
TARGET_RSS_MIB = {"plain": 80.0, "ansible": 150.0}
CASES = {
    "plain": ("matrix", "failures", "left-out share"),
    "ansible": ("matrix", "failures", "coverage", "left-out share"),
}


def cluster(nodes: int = NODES) -> list[str]:
    return [f"node{i:04d}" for i in range(1, nodes + 1)]


def management_address(index: int) -> str:
    return f"10.20.{index // 250}.{index % 250 + 1}"


def rdma_address(index: int) -> str:
    return f"192.168.{index // 250}.{index % 250 + 1}"


def host_key(kind: str, index: int) -> str:
    """A host public key's base64 of the real length for its kind (ed25519 68 characters, ecdsa-p256 140, rsa-3072
    544), distinct per node."""
    length = {"ed25519": 68, "ecdsa": 140, "rsa": 544}[kind]
    seed = f"AAAA{kind}{index:04d}"
    return (seed * (length // len(seed) + 1))[:length]


KEY_TYPES = {"ed25519": "ssh-ed25519", "ecdsa": "ecdsa-sha2-nistp256", "rsa": "ssh-rsa"}
#: An interface's ethtool features as setup lists them (a subset: the names are real, the list is longer there).
FEATURES = {name: "on" if i % 3 else "off [fixed]" for i, name in enumerate(
    ["esp_hw_offload", "fcoe_mtu", "generic_receive_offload", "generic_segmentation_offload", "highdma",
     "hw_tc_offload", "l2_fwd_offload", "large_receive_offload", "loopback", "netns_local", "ntuple_filters",
     "receive_hashing", "rx_all", "rx_checksumming", "rx_fcs", "rx_gro_hw", "rx_vlan_filter", "rx_vlan_offload",
     "scatter_gather", "tcp_segmentation_offload", "tx_checksum_ip_generic", "tx_checksumming", "tx_fcoe_segmentation",
     "tx_gre_segmentation", "tx_gso_partial", "tx_lockless", "tx_nocache_copy", "tx_scatter_gather",
     "tx_tcp6_segmentation", "tx_tcp_segmentation", "tx_udp_segmentation", "tx_vlan_offload", "vlan_challenged"]
)}  # fmt: skip


def _interface(device: str, address: str, index: int, mtu: int) -> dict[str, Any]:
    network = address.rsplit(".", 1)[0] + ".0"
    return {
        "device": device, "active": True, "type": "ether", "mtu": mtu, "promisc": False, "speed": 100000,
        "module": "mlx5_core", "pciid": f"0000:{index % 256:02x}:00.0",
        "macaddress": f"02:00:{index // 256:02x}:{index % 256:02x}:{mtu % 256:02x}:01",
        "ipv4": {"address": address, "broadcast": network[:-1] + "255", "netmask": "255.255.255.0",
                 "network": network, "prefix": "24"},
        "ipv6": [{"address": f"fe80::ff:fe00:{index:x}", "prefix": "64", "scope": "link"}],
        "features": dict(FEATURES), "timestamping": [], "hw_timestamp_filters": [],
    }  # fmt: skip


def facts(index: int) -> dict[str, Any]:
    """What the role's ``setup`` (gather_subset ssh_pub_keys and network) leaves in a node's ``ansible_facts``."""
    mgmt, rdma = management_address(index), rdma_address(index)
    gathered: dict[str, Any] = {
        "all_ipv4_addresses": [mgmt, rdma],
        "all_ipv6_addresses": [f"fe80::ff:fe00:{index:x}"],
        "default_ipv4": {"address": mgmt, "alias": "eth0", "gateway": mgmt.rsplit(".", 1)[0] + ".254",
                         "interface": "eth0", "netmask": "255.255.255.0", "type": "ether"},  # fmt: skip
        "interfaces": ["lo", "eth0", "eth1"],
        "lo": {"device": "lo", "active": True, "type": "loopback", "mtu": 65536, "promisc": False,
               "ipv4": {"address": "127.0.0.1", "netmask": "255.0.0.0", "network": "127.0.0.0", "prefix": "8"}},
        "eth0": _interface("eth0", mgmt, index, 1500),
        "eth1": _interface("eth1", rdma, index, 9000),
        "locally_reachable_ips": {"ipv4": ["127.0.0.0/8", mgmt, rdma], "ipv6": ["::1"]},
        "gather_subset": ["!all", "!min", "network", "ssh_pub_keys"],
        "module_setup": True,
    }
    for kind, keytype in KEY_TYPES.items():
        gathered[f"ssh_host_key_{kind}_public"] = host_key(kind, index)
        gathered[f"ssh_host_key_{kind}_public_keytype"] = keytype
    return gathered


def observation(index: int) -> dict[str, Any]:
    """The converge check's registered answer on a node in sync (library/converge_state.py, RV host_identity)."""
    keys = {kind: {"keytype": keytype, "key": host_key(kind, index)} for kind, keytype in KEY_TYPES.items()}
    return {
        "changed": False, "failed": False, "in_sync": True, "drift_local": False, "observed": 212, "reasons": [],
        "summary": {"converged": "2026-12-01T09:12:44Z", "roles": 17},
        "host_identity": {"ssh_host_keys": keys,
                          "ipv4_addresses": sorted([management_address(index), rdma_address(index)])},
    }  # fmt: skip


def ring(members: Sequence[str], source: str, peers: int) -> list[str]:
    """The next ``peers`` members after ``source`` in sorted order, wrapping (the role's ring, its own arithmetic)."""
    ordered = sorted(members)
    start = ordered.index(source)
    return [ordered[(start + step) % len(ordered)] for step in range(1, min(peers, len(ordered) - 1) + 1)]


def reached_by(peer: str, address: str, check_by: Sequence[str]) -> list[str]:
    """How the check reaches a peer: its address and/or its inventory name, in that order (the role's check_by)."""
    return ([address] if "address" in check_by else []) + ([peer] if "name" in check_by else [])


def probe_result(source: str, members: Sequence[str], addresses: Mapping[str, str], peers: int,
                 check_by: Sequence[str]) -> dict[str, Any]:  # fmt: skip
    """``ssh_mesh_check``'s registered result on ``source``: one probe per form of each of its ring peers."""
    probes: dict[str, Any] = {}
    for peer in ring(members, source, peers):
        rc, error = FAILING.get(peer, (0, ""))
        for form in reached_by(peer, addresses[peer], check_by):
            probes[form] = {"ok": rc == 0, "rc": rc, "error": error}
    return {
        "changed": False, "failed": False, "probes": probes,
        "failed_targets": [form for form, probe in probes.items() if not probe["ok"]],
        "invocation": {"module_args": {"targets": list(probes), "user": "root", "identity_file": None, "timeout": 5,
                                       "parallel": 4, "retries": 3}},
    }  # fmt: skip


def role_setting(name: str) -> Any:
    return defaults("ssh_trust")[name]


def hostvars(members: Sequence[str], play: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Every node's variables after the role's check, for a run of ``play`` (the others: inventory and cached
    facts only, no result registered by this run)."""
    peers, check_by = int(role_setting("ssh_trust_check_peers")), list(role_setting("ssh_trust_check_by"))
    addresses = {node: management_address(i) for i, node in enumerate(members)}
    in_play = set(play)
    result: dict[str, dict[str, Any]] = {}
    for i, node in enumerate(members):
        entry: dict[str, Any] = {"ansible_host": addresses[node], "ansible_facts": facts(i)}
        if node in in_play:
            entry[ssh_mesh.OBSERVATION] = observation(i)
            entry["ssh_trust_probe"] = probe_result(node, members, addresses, peers, check_by)
        result[node] = entry
    return result


def expected(members: Sequence[str], play: Sequence[str]) -> dict[str, Any]:
    """What the filters must answer for these inputs, by counting: ring pairs reached and failed, the rest not
    checked, a line per failing (source, form), and the left-out nodes dealt over the play."""
    peers, check_by = int(role_setting("ssh_trust_check_peers")), list(role_setting("ssh_trust_check_by"))
    probed = len(members) * min(peers, len(members) - 1)
    failed = sum(1 for source in members for peer in ring(members, source, peers) if peer in FAILING)
    left_out = len(members) - len(play)
    return {
        "coverage": {"probed": probed, "reached": probed - failed, "failed": failed,
                     "not_checked": len(members) * (len(members) - 1) - probed},
        "failure lines": failed * len(check_by),
        "left out": left_out,
        "largest share": math.ceil(left_out / len(play)),
    }  # fmt: skip


def check_matrix(result: Mapping[str, Any], want: Mapping[str, Any]) -> str:
    """The pairs held (true or false, each a pair probed: the rest not checked) and the coverage the filter counted,
    each against the counts the inputs call for."""
    values = [value for row in result["pairs"].values() for value in row.values()]
    reached, failed = sum(v is True for v in values), sum(v is False for v in values)
    held = {"probed": len(values), "reached": reached, "failed": failed, "other values": len(values) - reached - failed}
    called = {key: want["coverage"][key] for key in ("probed", "reached", "failed")} | {"other values": 0}
    if held != called:
        return f"matrix held {held}, the inputs call for {called}"
    counted = dict(result["coverage"])
    return "" if counted == want["coverage"] else f"matrix counted {counted}, the inputs call for {want['coverage']}"


def check_failures(lines: Sequence[str], want: Mapping[str, Any]) -> str:
    bad = [line for line in lines if not any(f"-> {peer} (" in line and line.endswith(error)
                                            for peer, (_, error) in FAILING.items())]  # fmt: skip
    if len(lines) != want["failure lines"] or bad:
        return (f"{len(lines)} failure lines ({len(bad)} naming no failing target), the inputs call for "
                f"{want['failure lines']}")  # fmt: skip
    return ""


def check_coverage(counts: Mapping[str, Any], want: Mapping[str, Any]) -> str:
    counted = dict(counts)
    return "" if counted == want["coverage"] else f"coverage {counted}, the inputs call for {want['coverage']}"


def check_shares(shares: Mapping[str, Sequence[str]], members: Sequence[str], play: Sequence[str],
                 want: Mapping[str, Any]) -> str:  # fmt: skip
    read = sorted(node for share in shares.values() for node in share)
    if read != sorted(set(members) - set(play)):
        return (f"the shares read {len(read)} nodes ({len(set(read))} distinct), the inputs call for each of the "
                f"{want['left out']} left out once")  # fmt: skip
    if max(len(share) for share in shares.values()) != want["largest share"]:
        return f"largest share {max(len(s) for s in shares.values())}, the inputs call for {want['largest share']}"
    return ""


def timed(call: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds, answer) of the call that took the least CPU time of ``repeats`` (only its answer
    is kept: the failures are thousands of lines)."""
    best: tuple[Timing, Any] | None = None
    for _ in range(repeats):
        with stopwatch() as timing:
            answer = call()
        if best is None or timing.cpu < best[0].cpu:
            best = (timing, answer)
        del answer
    assert best is not None
    return best[0].wall, best[0].cpu, best[1]


def slowest_share(readers: Sequence[str], share: Callable[[str], Any], repeats: int,
                  check: Callable[[Mapping[str, Sequence[str]]], str]) -> dict[str, Any]:  # fmt: skip
    """Each play host's share, timed: the figures of the one that took the most CPU time (the task's wait: every
    play host renders its own loop, at once), with all of theirs, and what ``check`` says of the shares."""
    shares: dict[str, list[str]] = {}
    slowest, total = (0.0, 0.0), 0.0
    for reader in readers:
        wall, cpu, answer = timed(partial(share, reader), repeats)
        shares[reader] = list(answer)
        slowest, total = max(slowest, (wall, cpu), key=lambda figure: figure[1]), total + cpu
    return {"seconds": slowest[0], "cpu": slowest[1], "all_cpu": total, "wrong": check(shares)}


def measure_plain() -> dict[str, Any]:
    members = cluster()
    play = members[:LIMITED]
    full, limited, want = hostvars(members, members), hostvars(members, play), expected(members, play)
    check_by = list(role_setting("ssh_trust_check_by"))
    figures: dict[str, Any] = {"inputs_rss_mib": peak_rss_mib()}
    wall, cpu, table = timed(lambda: ssh_mesh.matrix(members, full, check_by, members))
    figures["matrix"] = {"seconds": wall, "cpu": cpu, "wrong": check_matrix(table, want)}
    del table
    wall, cpu, lines = timed(lambda: ssh_mesh.failures(members, full, check_by, members))
    figures["failures"] = {"seconds": wall, "cpu": cpu, "wrong": check_failures(lines, want)}
    figures["left-out share"] = slowest_share(play, partial(ssh_mesh.left_out_share, members, limited, play, play),
                                              REPEATS, partial(check_shares, members=members, play=play, want=want))
    figures["rss_mib"] = peak_rss_mib()
    return figures


def measure_ansible() -> dict[str, Any]:
    from benchmarks.ansible_vars import RoleRender

    members = cluster()
    play = members[:LIMITED]
    want = expected(members, play)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="rdmaforge-ssh-mesh-bench-") as tmp:
        full = RoleRender.build(Path(tmp) / "full", "ssh_trust", EXAMPLE_GROUP_VARS, hostvars(members, members),
                                "cluster")  # fmt: skip
        figures["inputs_rss_mib"] = peak_rss_mib()
        exprs = matrix_facts()
        matrix_expr, failures_expr = exprs["ssh_trust_matrix"], exprs["ssh_trust_failing_pairs"]
        first = members[0]  # run_once: the first host of the play
        wall, cpu, table = timed(partial(full.render, matrix_expr, first, members))
        figures["matrix"] = {"seconds": wall, "cpu": cpu, "wrong": check_matrix(table, want)}
        wall, cpu, lines = timed(partial(full.render, failures_expr, first, members))
        figures["failures"] = {"seconds": wall, "cpu": cpu, "wrong": check_failures(lines, want)}
        # The next task reads the matrix back from the fact set_fact left on the play's hosts.
        (debug,) = [t for t in _tasks("check.yml") if t.get("name") == "Say how much of the mesh was checked"]
        full.register(first, "ssh_trust_matrix", table)
        del table
        coverage_expr = debug["vars"]["ssh_trust_coverage"]
        wall, cpu, counts = timed(partial(full.render, coverage_expr, first, members))
        figures["coverage"] = {"seconds": wall, "cpu": cpu, "wrong": check_coverage(counts, want)}
        del full  # one inventory at a time
        limited = RoleRender.build(Path(tmp) / "limited", "ssh_trust", EXAMPLE_GROUP_VARS, hostvars(members, play),
                                   "cluster")  # fmt: skip
        (task,) = [t for t in _tasks("main.yml") if t.get("name") == LEFT_OUT_TASK]
        # Once each: ten play hosts are ten samples, each a second or more.
        figures["left-out share"] = slowest_share(play, lambda reader: limited.render(task["loop"], reader, play), 1,
                                                  partial(check_shares, members=members, play=play, want=want))
    figures["rss_mib"] = peak_rss_mib()
    return figures


def matrix_facts() -> dict[str, str]:
    """The expressions of check.yml's set_fact that builds the matrix (other set_facts there set other facts)."""
    (set_fact,) = [t["ansible.builtin.set_fact"] for t in _tasks("check.yml")
                   if "ssh_trust_matrix" in t.get("ansible.builtin.set_fact", {})]  # fmt: skip
    facts: dict[str, str] = set_fact
    return facts


def _tasks(name: str) -> list[dict[str, Any]]:
    import yaml

    tasks: list[dict[str, Any]] = yaml.safe_load((TASKS / name).read_text())
    return tasks


def measure(mode: str) -> dict[str, Any]:
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: allowed values are {', '.join(MODES)}")
    return measure_plain() if mode == "plain" else measure_ansible()


def _isolated(mode: str) -> dict[str, Any]:
    """measure(mode) in a fresh process: its peak RSS is its own."""
    code = "import json, sys; from benchmarks.ssh_mesh_scale import measure; print(json.dumps(measure(sys.argv[1])))"
    out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, cwd=PROJECT_ROOT,
                         check=False)  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"ssh_mesh_scale {mode}: the measuring process exited {out.returncode}:\n"
                           f"{out.stderr[-3000:]}")  # fmt: skip
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


LABELS = {"plain": "filter on plain data", "ansible": "as the role renders it"}


def judge(mode: str, figures: Mapping[str, Any], load: str) -> list[Result]:
    """The rows of one mode: each case's CPU seconds (met only when its answer was right) and the child's peak RSS."""
    results = []
    wrong_any = []
    for case in CASES[mode]:
        figure = figures[case]
        target = TARGET_CPU_SECONDS[(mode, case)]
        detail = f"wall {figure['seconds']:.3f} s; best of {REPEATS}"
        if case == "left-out share":
            repeats = f", best of {REPEATS}" if mode == "plain" else ""
            detail = (f"the play host of {LIMITED} that took longest{repeats} ({NODES - LIMITED} nodes left out), wall "
                      f"{figure['seconds']:.3f} s; {figure['all_cpu']:.2f} CPU s for them all")  # fmt: skip
        detail += f"; load average {load}"
        if figure["wrong"]:
            wrong_any.append(case)
            detail = f"wrong answer, not a measurement: {figure['wrong']}; {detail}"
        met = not figure["wrong"] and figure["cpu"] < target
        results.append(Result(f"ssh_trust check, {NODES} nodes: {case}, {LABELS[mode]}", round(figure["cpu"], 3),
                              "CPU s", f"< {target:g} CPU s", met, detail))  # fmt: skip
    rss, limit = figures["rss_mib"], TARGET_RSS_MIB[mode]
    detail = f"inputs {figures['inputs_rss_mib']:.1f} MiB of it"
    if wrong_any:
        detail = f"wrong answer in {', '.join(wrong_any)}: not a measurement; {detail}"
    results.append(Result(f"ssh_trust check, {NODES} nodes, {LABELS[mode]}: peak RSS", round(rss, 1), "MiB",
                          f"<= {limit:g} MiB", not wrong_any and rss <= limit, detail))  # fmt: skip
    return results


def run() -> list[Result]:
    results: list[Result] = []
    for mode in MODES:
        before = os.getloadavg()[0]
        figures = _isolated(mode)
        results += judge(mode, figures, f"{before:.1f} before / {os.getloadavg()[0]:.1f} after")
    return results
