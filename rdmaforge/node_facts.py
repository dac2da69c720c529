"""Builds the ``rdmaforge_node`` fact from gathered facts and the output of a few read-only tools.

The one implementation of these parsers: the preflight role uses them through
``filter_plugins/rdmaforge_node.py``, tests import them directly. No Ansible imports.

``rdmaforge_node`` (one per host)::

    os:            {distribution, version, major_version, family, pkg_mgr}
    cpu_count:     logical CPUs (int)
    gpu_count:     NVIDIA GPUs (int)
    gpu_source:    'nvidia-smi' | 'lspci' | 'none'   (where gpu_count came from)
    gpu_compute_caps: each GPU's compute capability, e.g. ['9.0'] (nvidia-smi; [] when it cannot say)
    rdma_devices:  RDMA device names, e.g. ['erdma_0'] or ['mlx5_0', 'mlx5_1']
    rdma_source:   'ibv_devinfo' | 'sysfs' | 'none'
    nics:          [{name, mac, mtu, state, type, ipv4: ['172.20.20.145/24', ...]}], loopback excluded
    default_route_interface: name of the interface holding the IPv4 default route ('' when none)
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

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


def _fact_key(interface: str) -> str:
    # Ansible stores interface 'veth-a' under the fact 'veth_a' (and 'eth0:1' is listed as 'eth0_1').
    return interface.replace("-", "_").replace(":", "_")


def _ipv4_cidrs(fact: Mapping[str, Any]) -> list[str]:
    entries: list[Mapping[str, Any]] = []
    primary = fact.get("ipv4")
    if isinstance(primary, Mapping):
        entries.append(primary)
    secondaries = fact.get("ipv4_secondaries")
    if isinstance(secondaries, list):
        entries += [e for e in secondaries if isinstance(e, Mapping)]
    return [
        f"{e['address']}/{e['prefix']}" if e.get("prefix") else str(e["address"]) for e in entries if e.get("address")
    ]


def nics_from_facts(facts: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Network interfaces from gathered facts (``ansible_facts``), loopback excluded, sorted by name."""
    nics = []
    for interface in facts.get("interfaces") or []:
        fact = facts.get(_fact_key(str(interface)))
        if not isinstance(fact, Mapping) or fact.get("type") == "loopback" or interface == "lo":
            continue
        nics.append(
            {
                "name": str(fact.get("device", interface)),
                "mac": str(fact.get("macaddress", "")),
                "mtu": int(fact.get("mtu", 0) or 0),
                "state": "up" if fact.get("active") else "down",
                "type": str(fact.get("type", "unknown")),
                "ipv4": _ipv4_cidrs(fact),
            }
        )
    return sorted(nics, key=lambda nic: nic["name"])


def node_fact(
    facts: Mapping[str, Any],
    nvidia_smi: str | None = None,
    lspci: str | None = None,
    rdma: Mapping[str, Any] | None = None,
    compute_caps: str | None = None,
) -> dict[str, Any]:
    """The ``rdmaforge_node`` fact. A tool's output is None when the tool is absent or failed.

    GPUs: ``nvidia-smi -L`` when it works (the driver is loaded), else ``lspci`` (sees GPUs on a
    bare host before any driver is installed), else 0. RDMA devices: the ``rdma_devices`` module's
    result (``ibv_devinfo`` when rdma-core is installed, else the kernel's /sys/class/infiniband:
    drivers load before user space is installed), in the order it lists them, and its ``source``.
    """
    if nvidia_smi is not None:
        gpu_count, gpu_source = count_nvidia_smi_gpus(nvidia_smi), "nvidia-smi"
    elif lspci is not None:
        gpu_count, gpu_source = count_lspci_gpus(lspci), "lspci"
    else:
        gpu_count, gpu_source = 0, "none"
    rdma = rdma if isinstance(rdma, Mapping) else {}
    listed = rdma.get("devices")
    devices: list[Any] = listed if isinstance(listed, list) else []
    rdma_devices = [str(d["name"]) for d in devices if isinstance(d, Mapping) and d.get("name")]
    rdma_source = str(rdma.get("source") or "none")
    default_ipv4 = facts.get("default_ipv4")
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
        "nics": nics_from_facts(facts),
        "default_route_interface": str(default_ipv4.get("interface", "")) if isinstance(default_ipv4, Mapping) else "",
    }
