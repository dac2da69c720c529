"""The lab's names and addresses, all derived from (node count, extra NIC count).

Everything lives inside 198.18.0.0/15 (RFC 2544 benchmarking space), never a routable network:
  primary NIC (eth0) of node i: 198.18.0.(10+i)/24 on bridge rfbr0; the controller/mirror is 198.18.0.1
  extra NIC k (ethk) of node i: 198.18.k.(10+i)/24 on bridge rfbrk
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rdmaforge.paths import CACHE_DIR, PROJECT_ROOT

# 16 nodes is what the converge-scale benchmark needs; a node is a few tens of MiB (systemd, journald, sshd) on
# an overlay of the shared base tree. Names (rf<i>e<k>) and addresses (.10+i) have room for far more.
MAX_NODES = 16
MAX_EXTRA_NICS = 8
PREFIX = "rf"  # every host-side resource name starts with this, so `lab down` can find leftovers
CONTROLLER_ADDRESS = "198.18.0.1"


def gateway_address(k: int) -> str:
    """The controller's address on bridge k: the mirror on the primary bridge, the extra NICs' gateway on the others."""
    return f"198.18.{k}.1"


MIRROR_PORT = 8080


@dataclass(frozen=True)
class Nic:
    name: str  # inside the node
    host_end: str  # veth end left in the controller's namespace, enslaved to the bridge
    bridge: str
    address: str  # without prefix length
    prefixlen: int = 24


@dataclass(frozen=True)
class NodeSpec:
    index: int
    name: str
    netns: str
    nics: tuple[Nic, ...]

    @property
    def address(self) -> str:
        return self.nics[0].address


def bridge_name(k: int) -> str:
    return f"{PREFIX}br{k}"


def node_spec(index: int, extra_nics: int) -> NodeSpec:
    name = f"node{index}"
    nics = tuple(
        Nic(
            name=f"eth{k}",
            host_end=f"{PREFIX}{index}e{k}",
            bridge=bridge_name(k),
            address=f"198.18.{k}.{10 + index}",
        )
        for k in range(extra_nics + 1)
    )
    return NodeSpec(index=index, name=name, netns=f"{PREFIX}-{name}", nics=nics)


def validate_counts(nodes: int, extra_nics: int) -> None:
    if not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"--nodes must be between 1 and {MAX_NODES}, got {nodes}")
    if not 0 <= extra_nics <= MAX_EXTRA_NICS:
        raise ValueError(f"--nics must be between 0 and {MAX_EXTRA_NICS}, got {extra_nics}")


@dataclass(frozen=True)
class LabPaths:
    """Where the lab keeps its state (per machine) and what it writes into the checkout."""

    state: Path = Path(os.environ.get("RDMAFORGE_LAB_STATE", "/var/lib/rdmaforge/lab"))
    cache: Path = CACHE_DIR
    inventory_dir: Path = PROJECT_ROOT / "inventories" / "lab"

    @property
    def nodes(self) -> Path:
        return self.state / "nodes"

    @property
    def ssh_key(self) -> Path:
        return self.state / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.state / "known_hosts"

    @property
    def state_file(self) -> Path:
        return self.state / "lab.json"

    @property
    def lock(self) -> Path:
        return self.state.parent / "lab.lock"

    def node_dir(self, name: str) -> Path:
        return self.nodes / name
