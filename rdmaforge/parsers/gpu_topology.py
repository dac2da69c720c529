"""GPU/NIC topology: which NIC is closest to each GPU, from ``nvidia-smi topo -m`` or from sysfs.

The one implementation behind the ``gpu_topology`` Ansible module (shipped to targets as
``module_utils/rdmaforge_gpu_topology.py``): standard-library only, Python 3.8.

NCCL gives each GPU the network device nearest to it; a cluster trains at its fabric's speed only when
every node pairs GPU *i* with the same rail. Both sources below give a link class per GPU/NIC pair, in
``nvidia-smi``'s vocabulary, nearest first:

``PIX``  at most one PCIe switch between them; ``PXB`` several switches; ``PHB`` through the host bridge
(root complex); ``NODE`` across host bridges of one NUMA node; ``SYS`` across NUMA nodes.

* ``nvidia-smi topo -m`` prints the matrix itself (GPU rows, NIC columns; since driver 5xx the columns are
  ``NIC0..`` with a ``NIC Legend`` naming the RDMA device of each).
* sysfs, when there is no driver yet (a bare host): every PCI device's real path
  (``/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/...``) lists the bridges above it. Two devices
  whose paths meet at most two levels up (a switch's downstream and upstream port) are ``PIX``; meeting
  higher inside one root complex is ``PXB``; meeting only at the root complex is ``PHB``; different root
  complexes are ``NODE`` on one NUMA node and ``SYS`` otherwise. This follows NCCL's own reading of a PCIe
  switch (its ports count as one hop); it is a classification, not a measurement.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # annotations only; never evaluated at runtime (Python 3.8 targets)
    from collections.abc import Mapping, Sequence

#: Link classes between a GPU and a NIC, nearest first.
LINK_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
NVIDIA_VENDOR = "0x10de"
#: PCI classes of GPUs: 0x0300xx VGA controller, 0x0302xx 3D controller (A100/H100).
GPU_CLASS_PREFIXES = ("0x0300", "0x0302")
_PCI_FUNCTION_RE = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
_LEGEND_RE = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")


class TopologyError(ValueError):
    """The input is not a topology this parser understands; the message says what was expected."""


class Rail(TypedDict):
    gpu: str
    nic: str | None
    link: str | None
    candidates: list[str]


class Topology(TypedDict):
    source: str
    gpus: list[str]
    nics: list[str]
    #: links[gpu][nic] -> link class (one of LINK_ORDER)
    links: dict[str, dict[str, str]]


class RailMap(TypedDict):
    source: str
    gpus: list[str]
    nics: list[str]
    rails: list[Rail]
    nccl_ib_hca: str
    unused_nics: list[str]
    reason: str


def link_rank(link: str) -> int:
    """Position of ``link`` in LINK_ORDER (nearest is 0); an unknown class ranks after SYS."""
    return LINK_ORDER.index(link) if link in LINK_ORDER else len(LINK_ORDER)


# --- nvidia-smi topo -m -------------------------------------------------------------------------------------


def parse_topo_matrix(text: str) -> Topology:
    """GPU-to-NIC link classes from ``nvidia-smi topo -m`` output (text as printed, ANSI underline included).

    NIC columns are named by the ``NIC Legend`` when there is one (``NIC0: mlx5_0``), else by the header
    itself (older drivers print ``mlx5_0`` there). GPU-to-GPU columns (``NV18``, ``PIX``...) are ignored.
    """
    lines = _ANSI_RE.sub("", text).splitlines()
    legend: dict[str, str] = {}
    for line in lines:
        match = _LEGEND_RE.match(line)
        if match:
            legend[match.group(1)] = match.group(2)
    header: list[str] | None = None
    rows: dict[str, list[str]] = {}
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        if header is None:
            if fields[0] == "GPU0":
                header = _device_columns(fields)
            continue
        if re.match(r"^GPU\d+$", fields[0]):
            rows[fields[0]] = fields[1:]
    if header is None:
        raise TopologyError("no topology matrix: expected a header line starting with GPU0 (nvidia-smi topo -m)")
    gpus = [name for name in header if re.match(r"^GPU\d+$", name)]
    nic_columns = [(index, name) for index, name in enumerate(header) if not re.match(r"^GPU\d+$", name)]
    links: dict[str, dict[str, str]] = {}
    for gpu in gpus:
        row = rows.get(gpu)
        if row is None or len(row) < len(header):
            raise TopologyError(f"topology matrix row {gpu} is missing or has fewer than {len(header)} columns")
        links[gpu] = {legend.get(name, name): row[index] for index, name in nic_columns}
    nics = [legend.get(name, name) for _, name in nic_columns]
    return {"source": "nvidia-smi", "gpus": gpus, "nics": nics, "links": links}


def _device_columns(fields: Sequence[str]) -> list[str]:
    """The device names of a header line: everything before ``CPU Affinity`` / ``NUMA`` / ``GPU NUMA ID``."""
    columns: list[str] = []
    for field in fields:
        if field in ("CPU", "NUMA", "Affinity", "GPU"):
            break
        columns.append(field)
    return columns


# --- sysfs --------------------------------------------------------------------------------------------------


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def pci_chain(real_path: str) -> list[str]:
    """The PCI functions from the root port down to the device: ``[0000:00:01.0, 0000:01:00.0, ...]``,
    preceded by the root complex (``pci0000:00``), from a device's resolved sysfs path."""
    chain: list[str] = []
    for part in real_path.split(os.sep):
        if part.startswith("pci") and ":" in part and not chain:
            chain.append(part)
        elif chain and _PCI_FUNCTION_RE.match(part):
            chain.append(part)
    return chain


def classify(chain_a: Sequence[str], chain_b: Sequence[str], numa_a: int | None, numa_b: int | None) -> str:
    """The link class between two PCI devices, from their chains (see the module docstring)."""
    if not chain_a or not chain_b or chain_a[0] != chain_b[0]:
        if numa_a is not None and numa_a == numa_b:
            return "NODE"
        return "SYS"
    common = 0
    # No zip(strict=...): targets run Python 3.8.
    while common < min(len(chain_a), len(chain_b)) and chain_a[common] == chain_b[common]:
        common += 1
    # Levels from each device up to the deepest shared component (the device itself is the last element).
    up = max(len(chain_a) - common, len(chain_b) - common)
    if common == 1:
        return "PHB"  # they meet only at the root complex
    return "PIX" if up <= 2 else "PXB"


def _numa(device_dir: str) -> int | None:
    text = _read(os.path.join(device_dir, "numa_node"))
    try:
        value = int(text) if text is not None else -1
    except ValueError:
        return None
    return value if value >= 0 else None


def gpu_functions(sys_root: str = "/sys") -> list[str] | None:
    """The PCI functions (0000:1b:00.0) of the NVIDIA display/3D controllers, in bus order; None where the PCI
    tree cannot be read (no GPU list, which is not a list of none)."""
    pci_root = os.path.join(sys_root, "bus", "pci", "devices")
    try:
        functions = sorted(os.listdir(pci_root))
    except OSError:
        return None
    found = []
    for function in functions:
        device_dir = os.path.join(pci_root, function)
        vendor = (_read(os.path.join(device_dir, "vendor")) or "").lower()
        pci_class = (_read(os.path.join(device_dir, "class")) or "").lower()
        if vendor == NVIDIA_VENDOR and pci_class.startswith(GPU_CLASS_PREFIXES):
            found.append(function)
    return found


def read_sysfs_topology(sys_root: str = "/sys") -> Topology:
    """GPUs (NVIDIA display/3D controllers) and RDMA devices (``class/infiniband``) with their link classes."""
    pci_root = os.path.join(sys_root, "bus", "pci", "devices")
    gpus: list[str] = []
    gpu_dirs: dict[str, str] = {}
    functions = gpu_functions(sys_root)
    source = "none" if functions is None else "sysfs"
    for function in functions or ():
        name = f"GPU{len(gpus)}"  # nvidia-smi numbers GPUs in PCI bus order, as this sorted listing does
        gpus.append(name)
        gpu_dirs[name] = os.path.realpath(os.path.join(pci_root, function))
    rdma_root = os.path.join(sys_root, "class", "infiniband")
    nic_dirs: dict[str, str] = {}
    try:
        rdma_names = sorted(os.listdir(rdma_root))
    except OSError:
        rdma_names = []
    for name in rdma_names:
        device_link = os.path.join(rdma_root, name, "device")
        if os.path.exists(device_link):
            nic_dirs[name] = os.path.realpath(device_link)
    links: dict[str, dict[str, str]] = {}
    for gpu, gpu_dir in gpu_dirs.items():
        links[gpu] = {
            nic: classify(pci_chain(gpu_dir), pci_chain(nic_dir), _numa(gpu_dir), _numa(nic_dir))
            for nic, nic_dir in nic_dirs.items()
        }
    return {"source": source, "gpus": gpus, "nics": list(nic_dirs), "links": links}


# --- rails --------------------------------------------------------------------------------------------------


def rail_map(topology: Topology) -> RailMap:
    """Each GPU's nearest NIC, the ``NCCL_IB_HCA`` order that follows from it, and the NICs no GPU is near.

    Ties (two NICs equally near a GPU) go to the NIC that no earlier GPU took, then to the first in the
    listed order, so GPU0..N spread over the tied NICs as NCCL would.
    """
    rails: list[Rail] = []
    taken: list[str] = []
    for gpu in topology["gpus"]:
        row = topology["links"].get(gpu, {})
        ranked = sorted(((link_rank(link), index, nic) for index, (nic, link) in enumerate(row.items())))
        if not ranked or ranked[0][0] >= len(LINK_ORDER):
            rails.append({"gpu": gpu, "nic": None, "link": None, "candidates": []})
            continue
        best = ranked[0][0]
        candidates = [nic for rank, _, nic in ranked if rank == best]
        fresh = [nic for nic in candidates if nic not in taken]
        chosen = (fresh or candidates)[0]
        taken.append(chosen)
        rails.append({"gpu": gpu, "nic": chosen, "link": row[chosen], "candidates": candidates})
    order: list[str] = []
    for rail in rails:
        if rail["nic"] is not None and rail["nic"] not in order:
            order.append(rail["nic"])
    unused = [nic for nic in topology["nics"] if nic not in order]
    if topology["source"] == "none":  # the PCI tree could not be read: GPUs unknown, not absent (review round 37c)
        reason = "the PCI device tree could not be read (no nvidia-smi either): GPUs unknown, no rail map"
    elif not topology["gpus"]:
        reason = "no GPU on this node: no rail map"
    elif not topology["nics"]:
        reason = "no RDMA device on this node: no rail map"
    else:
        reason = ""
    return {
        "source": topology["source"],
        "gpus": list(topology["gpus"]),
        "nics": list(topology["nics"]),
        "rails": rails,
        "nccl_ib_hca": ",".join(order),
        "unused_nics": unused,
        "reason": reason,
    }


def rail_order_outliers(per_node: Mapping[str, Sequence[str | None]]) -> dict[str, Any]:
    """Nodes whose GPU-to-NIC order differs from the most common one among nodes that have a rail map.

    ``per_node`` maps a node to its NICs in GPU order (``[rail.nic for rail in rails]``); nodes with an
    empty list (no GPU or no RDMA device) are not compared. Returns ``{"reference": [...], "outliers":
    {node: [...]}, "compared": [...]}``; on a tie the reference is the order of the first node listed.
    """
    compared = [node for node, order in per_node.items() if order]
    counts: dict[tuple[str | None, ...], int] = {}
    first_seen: dict[tuple[str | None, ...], int] = {}
    for index, node in enumerate(compared):
        key = tuple(per_node[node])
        counts[key] = counts.get(key, 0) + 1
        first_seen.setdefault(key, index)
    if not counts:
        return {"reference": [], "outliers": {}, "compared": []}
    reference = max(counts, key=lambda key: (counts[key], -first_seen[key]))
    outliers = {node: list(per_node[node]) for node in compared if tuple(per_node[node]) != reference}
    return {"reference": list(reference), "outliers": outliers, "compared": compared}
