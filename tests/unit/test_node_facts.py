"""rdmaforge.node_facts: the parsers behind the rdmaforge_node fact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rdmaforge import node_facts
from rdmaforge.parsers import gpu_topology, rdma_devinfo
from rdmaforge.parsers import nic_facts as nic_parser
from tests.unit.test_gpu_topology import fake_gpu_server

__all__ = ["fake_gpu_server"]  # the fake sysfs fixture, shared with test_gpu_topology.py

NVIDIA_SMI_L = """\
GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5f8e1a6c-0000-0000-0000-000000000000)
GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-5f8e1a6c-0000-0000-0000-000000000001)
  MIG 3g.40gb     Device  0: (UUID: MIG-00000000-0000-0000-0000-000000000000)
"""

LSPCI = """\
00:00.0 "0600" "8086" "09a2" -r04 "8086" "0000"
03:00.0 "0300" "1a03" "2000" -r52 "1a03" "2000"
17:00.0 "0302" "10de" "20b2" -ra1 "10de" "1463"
31:00.0 "0302" "10de" "20b2" -ra1 "10de" "1463"
85:00.0 "0680" "10de" "1af1" -ra1 "10de" "0000"
"""

#: What the rdma_devices module returns (its devices as the real ibv_devinfo output of two mlx5 HCAs, IB and RoCE,
#: parses, and its source): node_fact takes the names in the module's order.
RDMA = {
    "devices": rdma_devinfo.parse_ibv_devinfo(
        (Path(__file__).parents[1] / "data" / "ibv_devinfo" / "mlx5_ib_and_roce_ofed.txt").read_text()
    ),
    "source": "ibv_devinfo",
}

FACTS = {
    "distribution": "Debian",
    "distribution_version": "12.11",
    "distribution_major_version": "12",
    "os_family": "Debian",
    "pkg_mgr": "apt",
    "processor_vcpus": 128,
}


def test_count_nvidia_smi_gpus_ignores_mig_instances() -> None:
    assert node_facts.count_nvidia_smi_gpus(NVIDIA_SMI_L) == 2
    assert node_facts.count_nvidia_smi_gpus("") == 0


def test_count_lspci_gpus_counts_nvidia_display_controllers_only() -> None:
    # the ASPEED VGA (1a03) and the NVSwitch bridge (0680) are not GPUs for training
    assert node_facts.count_lspci_gpus(LSPCI) == 2
    assert node_facts.count_lspci_gpus('broken "line\n') == 0


IP_SAMPLES = Path(__file__).resolve().parents[1] / "data" / "ip"


def nic_probe_of_a_real_capture() -> dict:
    """The nic_facts module's result for a machine whose ``ip -j`` output was captured (tests/data/ip)."""
    links = nic_parser.parse_ip_addr((IP_SAMPLES / "this_machine_addr_show.json").read_text())
    route = nic_parser.parse_default_route((IP_SAMPLES / "this_machine_route_default.json").read_text())
    sysfs = [nic_parser.read_sysfs_nic("/nonexistent", name) for name in links if name != "lo"]
    nics = nic_parser.build_nics(sysfs, links, route)
    return {"changed": False, "nics": nics, "default_route_interface": route["interface"] if route else None}


def test_node_fact_takes_the_nic_probe_as_it_answered() -> None:
    probe = nic_probe_of_a_real_capture()
    fact = node_facts.node_fact(FACTS, nics=probe)
    # the default route's device as ip printed it, read here without rdmaforge's parser
    route_dev = json.loads((IP_SAMPLES / "this_machine_route_default.json").read_text())[0]["dev"]
    assert fact["nics"] == probe["nics"] and fact["nics"], "the same records doctor and eni read"
    assert fact["default_route_interface"] == route_dev and fact["nics_error"] is None
    addresses = {nic["name"]: [a["address"] for a in nic["ipv4"]] for nic in fact["nics"]}
    captured = json.loads((IP_SAMPLES / "this_machine_addr_show.json").read_text())
    assert addresses == {
        link["ifname"]: [a["local"] for a in link.get("addr_info", []) if a.get("family") == "inet"]
        for link in captured
        if link["ifname"] != "lo"
    }


def test_node_fact_without_iproute2_says_why_it_has_no_nics() -> None:
    failed = {"failed": True, "msg": "ip not found: install iproute2 (or set ip_path)"}
    fact = node_facts.node_fact(FACTS, nics=failed)
    assert (fact["nics"], fact["default_route_interface"]) == ([], "")
    assert fact["nics_error"] == "ip not found: install iproute2 (or set ip_path)"


def test_node_fact_prefers_nvidia_smi_and_takes_the_rdma_probe_as_it_answered() -> None:
    fact = node_facts.node_fact(FACTS, nvidia_smi=NVIDIA_SMI_L, lspci=LSPCI, rdma=RDMA)
    assert fact["os"] == {
        "distribution": "Debian",
        "version": "12.11",
        "major_version": "12",
        "family": "Debian",
        "pkg_mgr": "apt",
    }
    assert (fact["cpu_count"], fact["gpu_count"], fact["gpu_source"]) == (128, 2, "nvidia-smi")
    assert (fact["rdma_devices"], fact["rdma_source"]) == (["mlx5_1", "mlx5_3"], "ibv_devinfo")


def test_node_fact_falls_back_to_lspci_and_names_the_rdma_source() -> None:
    fact = node_facts.node_fact(FACTS, lspci=LSPCI, rdma={**RDMA, "source": "sysfs"})
    assert (fact["gpu_count"], fact["gpu_source"]) == (2, "lspci")
    assert (fact["rdma_devices"], fact["rdma_source"]) == (["mlx5_1", "mlx5_3"], "sysfs")


def test_node_fact_of_a_bare_host() -> None:
    """Nothing answered (no nvidia-smi, no lspci, no PCI tree read): the count is null, unknown, never 0; a consumer
    reading gpu_count alone took 0 for a CPU-only node."""
    fact = node_facts.node_fact({"interfaces": []})
    assert (fact["gpu_count"], fact["gpu_source"], fact["rdma_devices"], fact["rdma_source"]) == (
        None,
        "none",
        [],
        "none",
    )
    assert fact["nics"] == [] and fact["default_route_interface"] == "" and fact["cpu_count"] == 0
    assert fact["nics_error"] == "nic_facts returned no NICs"


def test_without_nvidia_smi_and_lspci_the_pci_tree_in_sysfs_counts_the_gpus(fake_gpu_server: Path) -> None:
    """No pciutils on the node: the GPUs gpu_topology finds in sysfs (the fake server's two) are the count, and a
    node where nothing answered is counted by nothing (doctor: None, not 0)."""
    found = gpu_topology.read_sysfs_topology(str(fake_gpu_server))
    fact = node_facts.node_fact(FACTS, sysfs_gpus=len(found["gpus"]))
    assert (fact["gpu_count"], fact["gpu_source"]) == (2, "sysfs")
    assert node_facts.count_gpus(None, LSPCI, 0) == (2, "lspci")  # lspci answered first
    assert node_facts.count_gpus(None, None, None) == (None, "none")


def test_the_labs_nodes_count_0_gpus_from_sysfs_a_measured_0() -> None:
    """The lab's nodes have no pciutils and no GPU: the PCI tree in sysfs lists none, a real 0 (gpu_source sysfs)."""
    fact = node_facts.node_fact(FACTS, sysfs_gpus=0)
    assert (fact["gpu_count"], fact["gpu_source"]) == (0, "sysfs")
    assert node_facts.known_gpu_count(fact) == 0


@pytest.mark.parametrize(
    ("fact", "count"),
    [({"gpu_count": 8, "gpu_source": "nvidia-smi"}, 8),
     ({"gpu_count": 0, "gpu_source": "sysfs"}, 0),
     ({"gpu_count": None, "gpu_source": "none"}, None),
     ({"gpu_count": 0, "gpu_source": "none"}, None),  # a fact of an earlier rdmaforge: 0 that was never counted
     ({"gpu_count": "4", "gpu_source": "lspci"}, 4),
     ({"gpu_count": True}, None),
     ({}, None),
     (None, None)],
)  # fmt: skip
def test_known_gpu_count_is_none_when_nothing_was_counted(fact: object, count: int | None) -> None:
    assert node_facts.known_gpu_count(fact) == count


@pytest.mark.parametrize(
    ("fact", "declared", "count"),
    [({"gpu_count": None, "gpu_source": "none"}, 4, 4),
     ({"gpu_count": 0, "gpu_source": "none"}, "8", 8),  # -e gives text
     (None, 2, 2),
     ({"gpu_count": 8, "gpu_source": "nvidia-smi"}, 4, 8),  # a count read on the node wins
     ({"gpu_count": 0, "gpu_source": "sysfs"}, 4, 0),
     ({"gpu_count": None, "gpu_source": "none"}, 0, None),  # no GPU count: preflight counts a node without GPUs
     ({"gpu_count": None, "gpu_source": "none"}, "eight", None),
     ({"gpu_count": None, "gpu_source": "none"}, True, None),
     ({"gpu_count": None, "gpu_source": "none"}, None, None)],
)  # fmt: skip
def test_the_inventorys_count_stands_in_only_for_an_unknown_one(fact: object, declared: object,
                                                                 count: int | None) -> None:  # fmt: skip
    """rdmaforge_gpus_per_node: what the hostfile and the benchmark plan ranks by where preflight read no count."""
    assert node_facts.known_gpu_count(fact, declared) == count


def test_a_pci_tree_that_cannot_be_read_lists_no_gpus_and_says_so(tmp_path: Path) -> None:
    found = gpu_topology.read_sysfs_topology(str(tmp_path / "no-sys"))
    assert (found["source"], found["gpus"]) == ("none", [])


H100_PROBE = Path(__file__).resolve().parents[1] / "data" / "device-h100" / "probe.txt"


def test_compute_caps_of_a_real_h100() -> None:
    # The recorded query has a header and several columns; the probe asks for compute_cap alone, without header.
    query = H100_PROBE.read_text().split("== nvidia-smi --query-gpu\n", 1)[1].split("\n== ", 1)[0].splitlines()
    column = query[0].split(", ").index("compute_cap")
    answer = "\n".join(line.split(", ")[column] for line in query[1:])
    assert node_facts.parse_compute_caps(answer + "\n") == ["9.0"]
    fact = node_facts.node_fact({"interfaces": []}, nvidia_smi="GPU 0: NVIDIA H100 80GB HBM3 (UUID: x)",
                                compute_caps=answer)  # fmt: skip
    assert fact["gpu_compute_caps"] == ["9.0"]


def test_compute_caps_an_old_driver_cannot_give_are_unknown() -> None:
    # nvidia-smi before 510 refuses the field; a partial answer would hide a GPU, so none is kept.
    assert node_facts.parse_compute_caps('Field "compute_cap" is not a valid field to query.\n') == []
    assert node_facts.parse_compute_caps("8.0\n\n") == ["8.0"]
    assert node_facts.node_fact({"interfaces": []}, lspci="", compute_caps="9.0")["gpu_compute_caps"] == []
