"""Builds the ``rdmaforge_node`` fact from gathered facts and the output of a few read-only tools.

The one implementation of these parsers: the preflight role uses them through
``filter_plugins/rdmaforge_node.py``, tests import them directly. No Ansible imports.

``rdmaforge_node`` (one per host)::

    os:            {distribution, version, major_version, family, pkg_mgr}
    cpu_count:     logical CPUs (int)
    gpu_count:     NVIDIA GPUs (int); null when gpu_source is none (unknown, never 0: known_gpu_count reads it)
    gpu_source:    'nvidia-smi' | 'lspci' | 'sysfs' | 'none'   (where gpu_count came from; none: nothing answered)
    gpu_compute_caps: each GPU's compute capability, e.g. ['9.0'] (nvidia-smi; [] when it cannot say)
    rdma_devices:  RDMA device names, e.g. ['erdma_0'] or ['mlx5_0', 'mlx5_1']
    rdma_source:   'ibv_devinfo' | 'sysfs' | 'none'
    rdma_netdevs:  netdev -> the RDMA port behind it, 'device:port', e.g. {'eth1': 'mlx5_0:1'}, from the ports'
                   netdev (iproute2's ``rdma link``); {} where no port names one (sysfs source, no rdma tool)
    nics:          the nic_facts module's records, in ifindex order, without the interfaces preflight_nic_exclude
                   names: [{name, ifindex, mac, driver, pci_address, numa_node, mtu, operstate, virtual,
                   ipv4: [{address, prefixlen, network, broadcast}], default_route}]
    nics_error:    why there is no NIC list (no iproute2, say), else None
    default_route_interface: name of the interface holding the IPv4 default route ('' when none)
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from rdmaforge.plain_data import whole_number

NVIDIA_VENDOR = "10de"
#: PCI classes of GPUs: 0300 VGA compatible controller, 0302 3D controller (A100/H100 are 0302).
#: NVSwitches (0680, bridge) are deliberately not counted.
GPU_PCI_CLASSES = frozenset({"0300", "0302"})


def count_nvidia_smi_gpus(output: str) -> int:
    """GPUs in ``nvidia-smi -L`` output: ``GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)``.

    MIG instances are listed indented under their GPU and are not counted.
    """
    return sum(1 for line in output.splitlines() if re.match(r"GPU \d+:", line))


def parse_compute_caps(output: str) -> list[str]:
    """Compute capabilities from ``nvidia-smi --query-gpu=compute_cap --format=csv,noheader``: one ``9.0`` per GPU.

    [] when any line is something else: drivers older than 510 answer ``Field "compute_cap" is not a valid
    field to query``, and a partial list would hide the GPU it left out.
    """
    caps = [line.strip() for line in output.splitlines() if line.strip()]
    return caps if all(re.fullmatch(r"\d+\.\d+", cap) for cap in caps) else []


def count_lspci_gpus(output: str) -> int:
    """NVIDIA VGA/3D controllers in ``lspci -n -mm`` output.

    A line reads ``17:00.0 "0302" "10de" "20b2" -ra1 "10de" "1463"``: slot, class, vendor, device, ...
    """
    count = 0
    for line in output.splitlines():
        try:
            fields = shlex.split(line)
        except ValueError:
            continue
        if len(fields) >= 3 and fields[1][:4] in GPU_PCI_CLASSES and fields[2].lower() == NVIDIA_VENDOR:
            count += 1
    return count


def nics_from_probe(probe: Mapping[str, Any] | None) -> tuple[list[dict[str, Any]], str, str | None]:
    """The ``nic_facts`` module's registered result -> (nics, default-route interface, error or None).

    The module reads sysfs and ``ip -j``; it fails where iproute2 is missing or too old (no JSON). Then the node has
    no NIC list and the error says why, rather than an empty list that reads as "no NICs".
    """
    probe = probe if isinstance(probe, Mapping) else {}
    listed = probe.get("nics")
    if not isinstance(listed, list):
        return [], "", str(probe.get("msg") or "nic_facts returned no NICs")
    nics = [dict(nic) for nic in listed if isinstance(nic, Mapping) and nic.get("name")]
    return nics, str(probe.get("default_route_interface") or ""), None


def count_gpus(nvidia_smi: str | None, lspci: str | None, sysfs_gpus: int | None) -> tuple[int | None, str]:
    """(GPU count, where it came from): ``nvidia-smi -L`` when the driver answers, else ``lspci``, else the PCI tree
    in sysfs (gpu_topology's read: no pciutils needed); (None, "none") when none of them answered: not counted,
    which is not 0 GPUs. A tool's output is None when the tool is absent or failed."""
    if nvidia_smi is not None:
        return count_nvidia_smi_gpus(nvidia_smi), "nvidia-smi"
    if lspci is not None:
        return count_lspci_gpus(lspci), "lspci"
    if sysfs_gpus is not None:
        return int(sysfs_gpus), "sysfs"
    return None, "none"


def _count(value: object, least: int) -> int | None:
    """A whole number of ``least`` or more, as a fact or an inventory gives it (plain_data.whole_number: an int, or a
    whole float or text such as a value templated to text or given with -e); None for anything else."""
    number = whole_number(value)
    return number if number is not None and number >= least else None


def known_gpu_count(fact: object, declared: object = None) -> int | None:
    """A node's GPU count from its ``rdmaforge_node`` fact; None (unknown, never 0) when there is no fact, when its
    ``gpu_count`` is null (nothing could be read: ``gpu_source`` none) or not a count, and for a fact of an earlier
    rdmaforge that kept 0 with ``gpu_source`` none. The one reading of the fact's count every consumer shares.

    ``declared`` is the inventory's count for such a node (``rdmaforge_gpus_per_node``), taken only when the fact's
    is unknown (a count read on the node wins): a whole number of 1 or more, since a node without GPUs is counted
    as 0 by preflight itself; anything else leaves the count unknown."""
    counted = None if not isinstance(fact, Mapping) or fact.get("gpu_source") == "none" else fact.get("gpu_count")
    found = _count(counted, 0)
    return found if found is not None else _count(declared, 1)


def rdma_netdevs(devices: list[Any]) -> dict[str, str]:
    """netdev -> ``device:port`` (NCCL_IB_HCA's form) for each port of ``devices`` (the rdma_devices module's
    records) that names its netdev. A netdev named by two ports (never on a sane node) keeps the first."""
    out: dict[str, str] = {}
    for device in devices:
        if not isinstance(device, Mapping) or not device.get("name"):
            continue
        for port in device.get("ports") or []:
            if isinstance(port, Mapping) and port.get("netdev") and port.get("port") is not None:
                out.setdefault(str(port["netdev"]), f"{device['name']}:{port['port']}")
    return out


def node_fact(
    facts: Mapping[str, Any],
    nvidia_smi: str | None = None,
    lspci: str | None = None,
    rdma: Mapping[str, Any] | None = None,
    compute_caps: str | None = None,
    nics: Mapping[str, Any] | None = None,
    sysfs_gpus: int | None = None,
) -> dict[str, Any]:
    """The ``rdmaforge_node`` fact. A tool's output is None when the tool is absent or failed.

    GPUs: count_gpus (nvidia-smi, lspci, then sysfs); null with ``gpu_source`` none when none answered. RDMA
    devices: the ``rdma_devices`` module's result (``ibv_devinfo`` when rdma-core is installed, else the kernel's
    /sys/class/infiniband: drivers load before user space is installed), in the order it lists them, and its
    ``source``.
    NICs: the ``nic_facts`` module's result (sysfs and ``ip -j``), the same records doctor and eni read.
    """
    # Not counted is null, never 0: a consumer that reads the count alone must not take the node for a CPU-only one.
    gpu_count, gpu_source = count_gpus(nvidia_smi, lspci, sysfs_gpus)
    rdma = rdma if isinstance(rdma, Mapping) else {}
    listed = rdma.get("devices")
    devices: list[Any] = listed if isinstance(listed, list) else []
    rdma_devices = [str(d["name"]) for d in devices if isinstance(d, Mapping) and d.get("name")]
    rdma_source = str(rdma.get("source") or "none")
    nic_list, default_route, nics_error = nics_from_probe(nics)
    return {
        "os": {
            "distribution": str(facts.get("distribution", "")),
            "version": str(facts.get("distribution_version", "")),
            "major_version": str(facts.get("distribution_major_version", "")),
            "family": str(facts.get("os_family", "")),
            "pkg_mgr": str(facts.get("pkg_mgr", "")),
        },
        "cpu_count": int(facts.get("processor_vcpus") or facts.get("processor_nproc") or 0),
        "gpu_count": gpu_count,
        "gpu_source": gpu_source,
        "gpu_compute_caps": parse_compute_caps(compute_caps) if nvidia_smi is not None and compute_caps else [],
        "rdma_devices": rdma_devices,
        "rdma_source": rdma_source,
        "rdma_netdevs": rdma_netdevs(devices),
        "nics": nic_list,
        "nics_error": nics_error,
        "default_route_interface": default_route,
    }
