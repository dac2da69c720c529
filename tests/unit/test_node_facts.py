"""rdmaforge.node_facts: the parsers behind the rdmaforge_node fact."""

from __future__ import annotations

from pathlib import Path

from rdmaforge import node_facts
from rdmaforge.parsers import rdma_devinfo

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
    "interfaces": ["lo", "eth0", "veth-a", "eth0_1"],
    "lo": {"device": "lo", "type": "loopback", "active": True, "mtu": 65536},
    "eth0": {
        "device": "eth0",
        "macaddress": "00:16:3e:00:00:01",
        "mtu": 1500,
        "active": True,
        "type": "ether",
        "ipv4": {"address": "172.20.20.145", "prefix": "24"},
        "ipv4_secondaries": [{"address": "172.20.20.200", "prefix": "24"}],
    },
    "veth_a": {
        "device": "veth-a",
        "macaddress": "02:00:00:00:00:02",
        "mtu": 9000,
        "active": False,
        "type": "ether",
    },
    "eth0_1": {"device": "eth0:1", "mtu": 1500, "active": True, "type": "ether"},
    "default_ipv4": {"interface": "eth0", "address": "172.20.20.145"},
}


def test_count_nvidia_smi_gpus_ignores_mig_instances() -> None:
    assert node_facts.count_nvidia_smi_gpus(NVIDIA_SMI_L) == 2
    assert node_facts.count_nvidia_smi_gpus("") == 0


def test_count_lspci_gpus_counts_nvidia_display_controllers_only() -> None:
    # the ASPEED VGA (1a03) and the NVSwitch bridge (0680) are not GPUs for training
    assert node_facts.count_lspci_gpus(LSPCI) == 2
    assert node_facts.count_lspci_gpus('broken "line\n') == 0


def test_nics_from_facts() -> None:
    assert node_facts.nics_from_facts(FACTS) == [
        {
            "name": "eth0",
            "mac": "00:16:3e:00:00:01",
            "mtu": 1500,
            "state": "up",
            "type": "ether",
            "ipv4": ["172.20.20.145/24", "172.20.20.200/24"],
        },
        {"name": "eth0:1", "mac": "", "mtu": 1500, "state": "up", "type": "ether", "ipv4": []},
        {
            "name": "veth-a",
            "mac": "02:00:00:00:00:02",
            "mtu": 9000,
            "state": "down",
            "type": "ether",
            "ipv4": [],
        },
    ]


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
    assert fact["default_route_interface"] == "eth0"


def test_node_fact_falls_back_to_lspci_and_names_the_rdma_source() -> None:
    fact = node_facts.node_fact(FACTS, lspci=LSPCI, rdma={**RDMA, "source": "sysfs"})
    assert (fact["gpu_count"], fact["gpu_source"]) == (2, "lspci")
    assert (fact["rdma_devices"], fact["rdma_source"]) == (["mlx5_1", "mlx5_3"], "sysfs")


def test_node_fact_of_a_bare_host() -> None:
    fact = node_facts.node_fact({"interfaces": []})
    assert (fact["gpu_count"], fact["gpu_source"], fact["rdma_devices"], fact["rdma_source"]) == (
        0,
        "none",
        [],
        "none",
    )
    assert fact["nics"] == [] and fact["default_route_interface"] == "" and fact["cpu_count"] == 0


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
