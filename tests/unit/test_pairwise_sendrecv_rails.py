"""The GPU path of pairwise (roles/pairwise/tasks/round_sendrecv.yml) run by Ansible on two fake local nodes,
mpirun a stand-in (a test double for the GPU job: it records its arguments and prints corpus 05's real two-node
sendrecv_perf output). Each rail is held to the RDMA port that both nodes' rdmaforge_node.rdma_netdevs put behind
its NIC (the rdma_devices module's ports, iproute2's ``rdma link``), NCCL_NET=IB; a NIC whose port differs
between the two nodes is measured over TCP on the NIC; and each measurement's detail names the transport.
Before, only the inventory's pairwise_rail_hcas mapped a rail to a port: on an RDMA fabric an unset map measured
every rail over TCP, not the fabric the cluster trains on."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from conftest import LOCAL_NODE, local_inventory, run_playbook

from rdmaforge.node_facts import node_fact
from rdmaforge.pairwise import plan, sendrecv
from rdmaforge.parsers.rdma_devinfo import merge_rdma_links, parse_ibv_devinfo, parse_rdma_link
from rdmaforge.paths import PROJECT_ROOT

ROLE_VARS = yaml.safe_load((PROJECT_ROOT / "roles" / "pairwise" / "vars" / "main.yml").read_text())

CORPUS = "corpus/nccl-tests/05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt"
DATA = PROJECT_ROOT / "tests" / "data"


def test_the_node_fact_maps_each_netdev_to_the_rdma_port_behind_it() -> None:
    """tests/data/rdma_link/mlx5_roce_two_ports.txt says ``link mlx5_1/1 ... netdev enp4s0f1np1``; of its two
    devices, the ibv_devinfo sample has mlx5_1 (and mlx5_3, an IB port without a netdev)."""
    listed = parse_ibv_devinfo((DATA / "ibv_devinfo" / "mlx5_ib_and_roce_ofed.txt").read_text())
    devices = merge_rdma_links(listed, parse_rdma_link((DATA / "rdma_link" / "mlx5_roce_two_ports.txt").read_text()))
    fact = node_fact({}, rdma={"devices": devices, "source": "ibv_devinfo"})
    assert fact["rdma_netdevs"] == {"enp4s0f1np1": "mlx5_1:1"}
    # the kernel's sysfs names no netdev per port: no map, and the rail goes over TCP (never a guessed port)
    assert node_fact({}, rdma={"devices": [{"name": "mlx5_0", "ports": [{"port": 1, "netdev": None}]}],
                               "source": "sysfs"})["rdma_netdevs"] == {}  # fmt: skip


def test_a_pairs_rail_takes_the_port_both_nodes_have_and_the_inventory_wins() -> None:
    node1, node2 = {"eth1": "mlx5_0:1", "eth2": "mlx5_1:1"}, {"eth1": "mlx5_0:1", "eth2": "mlx5_3:1"}
    assert sendrecv.pair_hcas({}, node1, node2) == {"eth1": "mlx5_0:1"}
    assert sendrecv.pair_hcas({}, node1, {}) == {}
    assert sendrecv.pair_hcas({"eth2": "mlx5_9"}, node1, node2) == {"eth1": "mlx5_0:1", "eth2": "mlx5_9"}
    assert sendrecv.pair_hcas({"eth1": "mlx5_7:1"}, node1, node2) == {"eth1": "mlx5_7:1"}


def fake_node(index: int, netdevs: dict[str, str]) -> dict:
    """A GPU node's rdmaforge_node fact: the NIC records nic_facts gives (addresses in the lab's subnet)."""
    return {"nics": [{"name": f"eth{k}", "ipv4": [{"address": f"198.18.{k}.{10 + index}", "prefixlen": 24}]}
                     for k in range(3)],
            "default_route_interface": "eth0", "gpu_count": 1, "rdma_netdevs": netdevs}  # fmt: skip


def test_each_rail_is_measured_over_the_port_both_nodes_put_behind_its_nic(shared_dir: Path, tmp_path: Path) -> None:
    corpus = shared_dir / CORPUS
    calls = tmp_path / "mpirun.calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mpirun = bin_dir / "mpirun"
    mpirun.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\ncat {corpus}\n")
    mpirun.chmod(0o755)
    facts = {"node1": fake_node(1, {"eth1": "mlx5_0:1", "eth2": "mlx5_1:1"}),
             "node2": fake_node(2, {"eth1": "mlx5_0:1", "eth2": "mlx5_3:1"})}  # fmt: skip
    made = plan.make_plan(facts, "all").to_dict()
    inventory = local_inventory(tmp_path / "hosts.yml", hosts=(),
                                others={name: {**LOCAL_NODE, "rdmaforge_node": fact} for name, fact in facts.items()})
    out = tmp_path / "measured"
    playbook = tmp_path / "round.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "One sendrecv round", "hosts": "all", "gather_facts": False,
        "vars": {"pairwise_plan": made, "pairwise_round": 0, "pairwise_measured": [], "pairwise_port_base": 5301,
                 "pairwise_timeout": 30, "pairwise_sendrecv_binary": "sendrecv_perf", "pairwise_rail_hcas": {},
                 "pairwise_sendrecv_min_bytes": "8", "pairwise_sendrecv_max_bytes": "1G",
                 "pairwise_sendrecv_iterations": 20, "pairwise_mpirun_args": [],
                 "pairwise_nodes": "{{ ansible_play_hosts_all | sort }}",
                 # the role's own definition (vars/main.yml): mpirun runs as the user ssh_trust trusts, root here
                 "pairwise_mpi_user": ROLE_VARS["pairwise_mpi_user"]},
        "environment": {"PATH": f"{bin_dir}:/usr/bin:/bin"},
        "tasks": [
            {"name": "Round", "ansible.builtin.include_tasks": str(PROJECT_ROOT / "roles" / "pairwise" / "tasks"
                                                                     / "round_sendrecv.yml")},
            {"name": "Keep", "ansible.builtin.copy": {"content": "{{ pairwise_measured | to_json }}",
                                                       "dest": f"{out}-{{{{ inventory_hostname }}}}.json",
                                                       "mode": "0644"}},
        ],
    }]))  # fmt: skip
    proc = run_playbook(str(playbook), inventory=inventory, env={"ANSIBLE_CACHE_PLUGIN": "memory"}, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    launched = calls.read_text().splitlines()
    assert len(launched) == 2, launched  # node1 launches the pair's run, one per rail
    by_rail = {("eth1" if "eth1" in line or "mlx5_0:1" in line else "eth2"): line.split() for line in launched}
    assert "NCCL_NET=IB" in by_rail["eth1"] and "NCCL_IB_HCA==mlx5_0:1" in by_rail["eth1"]
    # eth2 is mlx5_1 on node1 and mlx5_3 on node2: mpirun exports one NCCL_IB_HCA to both ranks, so TCP on eth2
    assert "NCCL_NET=Socket" in by_rail["eth2"] and "NCCL_SOCKET_IFNAME==eth2" in by_rail["eth2"]
    assert not any(item.startswith("NCCL_IB_HCA") for item in by_rail["eth2"])
    measured = json.loads(Path(f"{out}-node1.json").read_text())
    details = {m["nic"]: m["detail"] for m in measured}
    assert [m["status"] for m in measured] == ["ok"] * 4  # both directions of the pair on both rails
    assert details["eth1"].endswith("(NCCL_NET=IB NCCL_IB_HCA==mlx5_0:1)"), details
    assert details["eth2"].endswith("(NCCL_NET=Socket NCCL_SOCKET_IFNAME==eth2)"), details



def test_the_rails_that_would_go_over_tcp_are_named() -> None:
    node1, node2 = {"eth1": "mlx5_0:1", "eth2": "mlx5_1:1"}, {"eth1": "mlx5_0:1", "eth2": "mlx5_3:1"}
    assert sendrecv.socket_rails(["eth1", "eth2", "eth3"], {}, {"node1": node1, "node2": node2}) == [
        "eth2: a different RDMA port on each node (node1 mlx5_1:1, node2 mlx5_3:1)",
        "eth3: no RDMA port behind it on node1, node2"]  # fmt: skip
    assert sendrecv.socket_rails(["eth1", "eth2"], {"eth2": "mlx5_1:1"}, {"node1": node1, "node2": node2}) == []
    assert sendrecv.socket_rails(["eth1"], {}, {"node1": node1, "node2": None}) == [
        "eth1: no RDMA port behind it on node2"]


def sweep(tmp_path: Path, fabric: str, output: Path | None = None, **extra: object) -> tuple[int, str]:
    """The pairwise role itself on two fake local GPU nodes (mpirun a stand-in that records its calls and prints
    ``output``, a real sendrecv_perf output, or nothing where only the checks before any measurement matter)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    prints = f"cat {output}\n" if output is not None else ""
    (bin_dir / "mpirun").write_text(f"#!/bin/sh\necho \"$*\" >> {tmp_path / 'mpirun.calls'}\n{prints}")
    (bin_dir / "mpirun").chmod(0o755)
    facts = {"node1": fake_node(1, {"eth1": "mlx5_0:1"}), "node2": fake_node(2, {"eth1": "mlx5_0:1"})}
    inventory = local_inventory(tmp_path / "hosts.yml", hosts=(),
                                others={name: {**LOCAL_NODE, "rdmaforge_node": fact, "rdmaforge_fabric": fabric}
                                        for name, fact in facts.items()})  # fmt: skip
    playbook = tmp_path / "sweep.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "sweep", "hosts": "all", "gather_facts": False, "environment": {"PATH": f"{bin_dir}:/usr/bin:/bin"},
        "vars": {"pairwise_output_dir": str(tmp_path / "out"), "pairwise_sendrecv_binary": "sendrecv_perf", **extra},
        "tasks": [{"name": "Sweep", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.pairwise"}}]}]))
    proc = run_playbook(str(playbook), inventory=inventory, env={"ANSIBLE_CACHE_PLUGIN": "memory"}, timeout=300)
    return proc.returncode, proc.stdout


def test_an_rdma_fabrics_rail_without_a_port_is_refused_before_anything_is_measured(tmp_path: Path) -> None:
    """Review round 27c: eth2 (no RDMA port on either node) was measured over NCCL's socket transport and scored
    healthy on a RoCE fabric, without its RDMA path ever being tested."""
    rc, out = sweep(tmp_path, "roce")
    assert rc != 0
    assert ("pairwise: fabric roce moves NCCL traffic over RDMA, but sendrecv_perf would measure these rails over TCP "
            "(NCCL_NET=Socket) and never test their RDMA path: eth2: no RDMA port behind it on node1, node2") in out
    assert not (tmp_path / "mpirun.calls").exists()
    rc, out = sweep(tmp_path, "roce", pairwise_nics=["eth1"], pairwise_fail_on_suspects=False)
    assert "never test their RDMA path" not in out and (tmp_path / "mpirun.calls").exists(), out[-3000:]


def test_a_plain_playbook_run_fails_a_sweep_the_cli_calls_incomplete(shared_dir: Path, tmp_path: Path) -> None:
    """Review round 27c: with no pairwise_line_rate_gbps (the default), `rdmaforge pairwise` exits 5 (a fleet slow
    alike names no suspect) while ansible-playbook pairwise.yml exited 0 for the same sweep."""
    output = shared_dir / CORPUS
    rc, out = sweep(tmp_path / "a", "tcp", output, pairwise_nics=["eth1"])
    assert rc != 0 and "pairwise incomplete: " in out and "pairwise_line_rate_gbps" in out, out[-3000:]
    rc, out = sweep(tmp_path / "b", "tcp", output, pairwise_nics=["eth1"], pairwise_line_rate_gbps=100)
    assert rc == 0 and "pairwise incomplete" not in out, out[-3000:]


def test_iperf3_on_an_rdma_fabric_is_refused_unless_tcp_is_asked_for(tmp_path: Path) -> None:
    """Review round 33b: iperf3 (asked for, or auto on nodes without GPUs) measured an RoCE fabric's rails over TCP
    and called the nodes healthy, exit 0, with no word that their RDMA path was never tested."""
    rc, out = sweep(tmp_path / "a", "roce", pairwise_method="iperf3", pairwise_install_iperf3=False)
    assert rc != 0
    assert ("pairwise: fabric roce moves NCCL traffic over RDMA, but iperf3 (pairwise_method: iperf3) measures the "
            "rails over TCP only and never tests their RDMA path (HCA, GIDs, PFC)") in out, out[-3000:]
    assert "End iperf3 servers" not in out  # refused before anything on the nodes
    # Asked for: measured, and the results say what was not (the method line lists the sweep's notes).
    rc, out = sweep(tmp_path / "b", "roce", pairwise_method="iperf3", pairwise_install_iperf3=False,
                    pairwise_socket_rails=True, pairwise_iperf_seconds=1, pairwise_timeout=5,
                    pairwise_fail_on_suspects=False)  # fmt: skip
    assert "never tests their RDMA path" not in out, out[-3000:]
    assert ("RDMA path not measured: fabric roce moves NCCL traffic over RDMA, and iperf3 measured the rails over "
            "TCP (pairwise_socket_rails: true)") in out, out[-3000:]
    # On a TCP fabric iperf3 is the fabric's own transport: neither refused nor noted.
    rc, out = sweep(tmp_path / "c", "tcp", pairwise_method="iperf3", pairwise_install_iperf3=False,
                    pairwise_iperf_seconds=1, pairwise_timeout=5, pairwise_fail_on_suspects=False)  # fmt: skip
    assert "never tests their RDMA path" not in out and "RDMA path not measured" not in out, out[-3000:]
    assert "End iperf3 servers" in out, out[-3000:]
