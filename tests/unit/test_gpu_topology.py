"""GPU-to-NIC rail maps from real ``nvidia-smi topo -m`` captures (tests/data/topology/SOURCES.md), from real
sysfs trees that hwloc's test suite captured on real servers (no NVIDIA GPU in any: one has accelerators and IB
HCAs behind shared PCIe switches), and from a fake sysfs PCI tree (a test double for GPU servers, which the lab
cannot have); the module itself runs for real through ``ansible localhost`` on this machine (no GPU: an empty,
explained map) and under Python 3.8."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from rdmaforge.parsers.gpu_topology import (
    TopologyError,
    classify,
    gpu_functions,
    parse_topo_matrix,
    pci_chain,
    rail_map,
    rail_order_outliers,
    read_sysfs_topology,
)
from rdmaforge.paths import PROJECT_ROOT
from tests.unit.adhoc import PY38, run_module

DATA = PROJECT_ROOT / "tests" / "data" / "topology"


def sample(name: str) -> str:
    return (DATA / name).read_text()


def test_h100_one_pix_nic_per_gpu():
    # The capture shows PIX on the diagonal GPUi/NICi and the legend NICi: mlx5_i.
    topo = parse_topo_matrix(sample("h100x8_8nic_sglang30401.txt"))
    assert topo["gpus"] == [f"GPU{i}" for i in range(8)]
    assert topo["nics"] == [f"mlx5_{i}" for i in range(8)]
    assert topo["links"]["GPU0"]["mlx5_0"] == "PIX"
    assert topo["links"]["GPU0"]["mlx5_4"] == "SYS"
    assert topo["links"]["GPU5"]["mlx5_4"] == "NODE"
    rails = rail_map(topo)
    assert [(r["gpu"], r["nic"], r["link"]) for r in rails["rails"]] == [
        (f"GPU{i}", f"mlx5_{i}", "PIX") for i in range(8)
    ]
    assert rails["nccl_ib_hca"] == ",".join(f"mlx5_{i}" for i in range(8))
    assert rails["unused_nics"] == []
    assert rails["reason"] == ""


def test_h200_legend_names_and_the_front_end_bond_left_out():
    # Legend: NIC0 mlx5_0, NIC1..NIC7 mlx5_3..mlx5_9, NIC8 mlx5_bond_0 (NODE to GPU0-3, never PIX).
    topo = parse_topo_matrix(sample("h200x8_9nic_bond_weiziyang.txt"))
    rails = rail_map(topo)
    expected = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
    assert [r["nic"] for r in rails["rails"]] == expected
    assert rails["nccl_ib_hca"] == ",".join(expected)
    assert rails["unused_nics"] == ["mlx5_bond_0"]


def test_ties_spread_over_equally_near_nics():
    # No NIC shares a switch with a GPU: GPU0 and GPU1 are NODE to both mlx5_0 and mlx5_1, SYS to the rest.
    topo = parse_topo_matrix(sample("rtx6000x4_4nic_stelline.txt"))
    rails = rail_map(topo)["rails"]
    assert rails[0]["candidates"] == ["mlx5_0", "mlx5_1"]
    assert [r["nic"] for r in rails] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert {r["link"] for r in rails} == {"NODE"}


def test_ansi_underlined_header_and_old_style_nic_columns():
    text = (
        "\x1b[4mGPU0\tGPU1\tmlx5_0\tCPU Affinity\x1b[0m\n"
        "GPU0\t X \tNV1\tPHB\t0-7\n"
        "GPU1\tNV1\t X \tPHB\t0-7\n"
        "mlx5_0\tPHB\tPHB\t X \t\n"
    )
    rails = rail_map(parse_topo_matrix(text))
    assert [r["nic"] for r in rails["rails"]] == ["mlx5_0", "mlx5_0"]
    assert rails["nccl_ib_hca"] == "mlx5_0"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no topology matrix"),
        ("No devices were found\n", "no topology matrix"),
        ("        GPU0    NIC0    CPU Affinity\nGPU0     X\n", "GPU0 is missing or has fewer than 2 columns"),
    ],
)
def test_text_that_is_not_a_matrix_is_an_error(text, message):
    with pytest.raises(TopologyError, match=message):
        parse_topo_matrix(text)


def test_no_gpu_and_no_rdma_device_are_explained():
    assert rail_map({"source": "sysfs", "gpus": [], "nics": ["eth0"], "links": {}})["reason"] == (
        "no GPU on this node: no rail map"
    )
    empty = rail_map({"source": "sysfs", "gpus": ["GPU0"], "nics": [], "links": {"GPU0": {}}})
    assert empty["reason"] == "no RDMA device on this node: no rail map"
    assert empty["rails"] == [{"gpu": "GPU0", "nic": None, "link": None, "candidates": []}]
    assert empty["nccl_ib_hca"] == ""


# --- sysfs -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "numa", "expected"),
    [
        # GPU and NIC behind two downstream ports of one PCIe switch (upstream port 0000:01:00.0).
        ("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0",
         "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", (0, 0), "PIX"),
        # Two cascaded switches under one root port.
        ("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:00.0/0000:05:00.0",
         "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:06:00.0", (0, 0), "PXB"),
        # Different root ports of one root complex.
        ("pci0000:00/0000:00:01.0/0000:01:00.0", "pci0000:00/0000:00:02.0/0000:02:00.0", (0, 0), "PHB"),
        # Different root complexes, one NUMA node / two NUMA nodes / unknown NUMA.
        ("pci0000:00/0000:00:01.0/0000:01:00.0", "pci0000:40/0000:40:01.0/0000:41:00.0", (0, 0), "NODE"),
        ("pci0000:00/0000:00:01.0/0000:01:00.0", "pci0000:80/0000:80:01.0/0000:81:00.0", (0, 1), "SYS"),
        ("pci0000:00/0000:00:01.0/0000:01:00.0", "pci0000:80/0000:80:01.0/0000:81:00.0", (None, None), "SYS"),
    ],
)  # fmt: skip
def test_classify_pci_paths(a, b, numa, expected):
    chain_a = pci_chain("/sys/devices/" + a)
    chain_b = pci_chain("/sys/devices/" + b)
    assert classify(chain_a, chain_b, *numa) == expected


@pytest.fixture
def fake_gpu_server(tmp_path: Path) -> Path:
    """A fake sysfs (test double for a 2-socket GPU server): GPU0/mlx5_0 share a switch on socket 0, GPU1 and
    mlx5_1 share one on socket 1, and an Ethernet-only NVIDIA-less device and a VGA controller of another vendor."""
    sys_root = tmp_path / "sys"
    devices = sys_root / "devices"
    bus = sys_root / "bus" / "pci" / "devices"
    ib = sys_root / "class" / "infiniband"
    bus.mkdir(parents=True)
    ib.mkdir(parents=True)

    def pci(path: str, vendor: str, pci_class: str, numa: int) -> Path:
        device = devices / path
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text(pci_class + "\n")
        (device / "numa_node").write_text(f"{numa}\n")
        (bus / device.name).symlink_to(os.path.relpath(device, bus))
        return device

    def rdma(name: str, device: Path) -> None:
        (ib / name).mkdir()
        (ib / name / "device").symlink_to(os.path.relpath(device, ib / name))

    pci("pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:00.0/0000:1a:00.0", "0x10de", "0x030200", 0)  # GPU0
    nic0 = pci("pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:01.0/0000:1b:00.0", "0x15b3", "0x020700", 0)
    pci("pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:00.0/0000:9a:00.0", "0x10de", "0x030200", 1)  # GPU1
    nic1 = pci("pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:01.0/0000:9b:00.0", "0x15b3", "0x020700", 1)
    pci("pci0000:00/0000:00:02.0/0000:03:00.0", "0x1a03", "0x030000", 0)  # BMC VGA: not a GPU
    rdma("mlx5_0", nic0)
    rdma("mlx5_1", nic1)
    return sys_root


def test_sysfs_rails_of_a_fake_gpu_server(fake_gpu_server):
    topo = read_sysfs_topology(str(fake_gpu_server))
    assert topo["gpus"] == ["GPU0", "GPU1"]
    assert topo["links"] == {
        "GPU0": {"mlx5_0": "PIX", "mlx5_1": "SYS"},
        "GPU1": {"mlx5_0": "SYS", "mlx5_1": "PIX"},
    }
    assert rail_map(topo)["nccl_ib_hca"] == "mlx5_0,mlx5_1"


def test_the_gpu_functions_are_the_nvidia_display_and_3d_controllers(fake_gpu_server, tmp_path):
    """What the converge record's fingerprint watches (gpu_pci) where no driver answers (review round 25a)."""
    assert gpu_functions(str(fake_gpu_server)) == ["0000:1a:00.0", "0000:9a:00.0"]
    assert gpu_functions(str(tmp_path / "no-sys")) is None


def hwloc_capture(name: str, into: Path) -> Path:
    """The ``sys`` directory of one of hwloc's real sysfs captures (tests/data/topology/sysfs, SOURCES.md)."""
    with tarfile.open(DATA / "sysfs" / f"hwloc-{name}.tar.bz2") as archive:
        archive.extractall(into, filter="data")
    (top,) = into.iterdir()
    return top / "sys"


def test_a_real_ib_server_without_gpus_has_its_hca_and_no_rail_map(tmp_path):
    """hwloc's 32em64t-2n8c+dax+nvme+mic+dimms: a real 2-socket server whose only RDMA device is mlx4_0 (hwloc's
    XML of it: PCI 0000:82:00.0 on NUMA node 1) and whose scif0 (Xeon Phi's SCIF) has no PCI device to read."""
    rails = rail_map(read_sysfs_topology(str(hwloc_capture("32em64t-2n8c+dax+nvme+mic+dimms", tmp_path))))
    assert (rails["source"], rails["gpus"], rails["nics"]) == ("sysfs", [], ["mlx4_0"])
    assert rails["rails"] == [] and rails["nccl_ib_hca"] == ""
    assert rails["unused_nics"] == ["mlx4_0"]
    assert rails["reason"] == "no GPU on this node: no rail map"


def test_real_pcie_switches_give_each_accelerator_the_hca_of_its_switch(tmp_path):
    """hwloc's 32intel64-2p8co2t+8ve: a real Supermicro SYS-4029GP-TRT2 (a GPU chassis) whose GPU slots hold 8 NEC
    Vector Engines (PCI class 0b40) and two ConnectX-4 IB HCAs (class 0207), four VEs and one HCA behind each of
    two PLX switches (hwloc's expected console output of it: 0000:1a:00.0 with ve0-ve3 under bridge 18:00.0,
    0000:3e:00.0 with ve4-ve7 under 3b:00.0, both host bridges on NUMA node 0). The reader takes only NVIDIA
    GPUs, so the accelerators stand in for them here: their real sysfs paths go through pci_chain, classify and
    rail_map as a GPU's would."""
    sys_root = hwloc_capture("32intel64-2p8co2t+8ve", tmp_path)
    bus = sys_root / "bus" / "pci" / "devices"

    def of_class(prefix: str) -> list[str]:
        return sorted(f.name for f in bus.iterdir() if (f / "class").read_text().startswith(prefix))

    accelerators, hcas = of_class("0x0b40"), of_class("0x0207")
    assert (len(accelerators), hcas) == (8, ["0000:1a:00.0", "0000:3e:00.0"])
    chain = {f: pci_chain(os.path.realpath(bus / f)) for f in accelerators + hcas}
    numa = {f: int((bus / f / "numa_node").read_text()) for f in accelerators + hcas}
    gpus = [f"GPU{i}" for i in range(len(accelerators))]
    links = {gpu: {hca: classify(chain[f], chain[hca], numa[f], numa[hca]) for hca in hcas}
             for gpu, f in zip(gpus, accelerators, strict=True)}  # fmt: skip
    assert links["GPU0"] == {"0000:1a:00.0": "PIX", "0000:3e:00.0": "NODE"}
    assert links["GPU7"] == {"0000:1a:00.0": "NODE", "0000:3e:00.0": "PIX"}
    rails = rail_map({"source": "sysfs", "gpus": gpus, "nics": hcas, "links": links})
    assert [rail["nic"] for rail in rails["rails"]] == ["0000:1a:00.0"] * 4 + ["0000:3e:00.0"] * 4
    assert rails["nccl_ib_hca"] == "0000:1a:00.0,0000:3e:00.0"
    assert rails["unused_nics"] == []


def test_this_machine_has_no_gpu_and_says_so():
    rails = rail_map(read_sysfs_topology("/sys"))
    assert rails["gpus"] == []
    assert rails["rails"] == []
    assert rails["reason"] == "no GPU on this node: no rail map"


# --- across nodes ------------------------------------------------------------------------------------------


def test_a_node_with_swapped_rails_is_flagged():
    good = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    swapped = ["mlx5_1", "mlx5_0", "mlx5_2", "mlx5_3"]
    result = rail_order_outliers({"n1": good, "n2": good, "n3": swapped, "lab": []})
    assert result["reference"] == good
    assert result["outliers"] == {"n3": swapped}
    assert result["compared"] == ["n1", "n2", "n3"]
    assert rail_order_outliers({"a": [], "b": []}) == {"reference": [], "outliers": {}, "compared": []}


# --- the module, for real -----------------------------------------------------------------------------------


def test_module_on_this_machine_reports_an_empty_map():
    run = run_module("gpu_topology", {"source": "auto"}, "--check")
    assert run.rc == 0, run.result
    assert run.result["changed"] is False
    facts = run.result["ansible_facts"]["rdmaforge_topology"]
    assert facts["reason"] == "no GPU on this node: no rail map"
    assert facts["source"] == "sysfs"


def test_module_on_a_fake_tree_and_forced_nvidia_smi(tmp_path, fake_gpu_server):
    run = run_module("gpu_topology", {"source": "sysfs", "sys_root": str(fake_gpu_server)})
    assert run.rc == 0, run.result
    assert run.result["nccl_ib_hca"] == "mlx5_0,mlx5_1"
    # A stand-in nvidia-smi that prints a real capture (the test double for a driver the lab lacks).
    fake_smi = tmp_path / "nvidia-smi"
    fake_smi.write_text(f"#!/bin/sh\ncat '{DATA / 'h200x8_9nic_bond_weiziyang.txt'}'\n")
    fake_smi.chmod(0o755)
    run = run_module("gpu_topology", {"source": "nvidia_smi", "nvidia_smi_path": str(fake_smi)})
    assert run.rc == 0, run.result
    assert run.result["source"] == "nvidia-smi"
    assert run.result["unused_nics"] == ["mlx5_bond_0"]
    broken = tmp_path / "broken-smi"
    broken.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate' >&2\nexit 9\n")
    broken.chmod(0o755)
    run = run_module("gpu_topology", {"source": "nvidia_smi", "nvidia_smi_path": str(broken)})
    assert run.rc != 0
    assert "topo -m failed with exit status 9: NVIDIA-SMI has failed" in run.result["msg"]


@pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} not installed (set RDMAFORGE_PY38)")
def test_module_runs_with_python38_on_the_target(fake_gpu_server):
    run = run_module("gpu_topology", {"source": "sysfs", "sys_root": str(fake_gpu_server)}, python=PY38)
    assert run.rc == 0, run.result
    assert [r["nic"] for r in run.result["rails"]] == ["mlx5_0", "mlx5_1"]


def test_a_mistyped_nvidia_smi_path_or_an_unreadable_pci_tree_is_said_so(tmp_path):
    """Review round 37c: nvidia_smi_path=/nonexistent fell back to sysfs without a word (ibv_devinfo_path and ip_path
    were checked), and a PCI tree that could not be read was reported as "no GPU on this node"."""
    typo = run_module("gpu_topology", {"source": "auto", "nvidia_smi_path": "/nonexistent/nvidia-smi"}, "--check")
    assert typo.rc != 0 and typo.result["msg"] == "nvidia_smi_path=/nonexistent/nvidia-smi is not an executable file"
    unread = run_module("gpu_topology", {"source": "sysfs", "sys_root": str(tmp_path / "no-sys")}, "--check")
    assert unread.rc == 0, unread.result
    assert unread.result["source"] == "none" and "no GPU on this node" not in unread.result["reason"]
    assert unread.result["reason"].startswith("the PCI device tree could not be read"), unread.result
