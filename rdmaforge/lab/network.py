"""Bridges, network namespaces and veth pairs of the lab, created and removed with iproute2."""

from __future__ import annotations

import json
from pathlib import Path

from rdmaforge.lab.shell import quiet, run
from rdmaforge.lab.spec import CONTROLLER_ADDRESS, PREFIX, NodeSpec, bridge_name, gateway_address


def link_exists(name: str) -> bool:
    return quiet(["ip", "link", "show", "dev", name])


def ensure_bridges(extra_nics: int) -> None:
    for k in range(extra_nics + 1):
        name = bridge_name(k)
        if not link_exists(name):
            run(["ip", "link", "add", name, "type", "bridge"])
        # The controller sits on every bridge: on the primary one it reaches the nodes over SSH and serves the
        # mirror; on the others it is the gateway of the extra NICs (as a cloud subnet's gateway is for ENIs).
        have = run(["ip", "-j", "addr", "show", "dev", name]).stdout
        if f'"{gateway_address(k)}"' not in have:
            run(["ip", "addr", "add", f"{gateway_address(k)}/24", "dev", name])
        run(["ip", "link", "set", name, "up"])


def ensure_node_network(node: NodeSpec) -> None:
    """Namespace, one veth per NIC (node end renamed ethK), static addresses and a default route via eth0."""
    if not Path(f"/run/netns/{node.netns}").exists():
        run(["ip", "netns", "add", node.netns])
    ns = ["ip", "-n", node.netns]
    run([*ns, "link", "set", "lo", "up"])
    for nic in node.nics:
        if not link_exists(nic.host_end):
            run(
                [
                    "ip",
                    "link",
                    "add",
                    nic.host_end,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    nic.name,
                    "netns",
                    node.netns,
                ]
            )
        run(["ip", "link", "set", nic.host_end, "master", nic.bridge, "up"])
        addrs = run([*ns, "-j", "addr", "show", "dev", nic.name]).stdout
        if nic.address not in addrs:
            # With its broadcast address, as a DHCP client or ifupdown sets it: systemd-networkd 252 keeps
            # re-applying an address that lacks the broadcast its own config implies, until it gives up (ERANGE).
            run([*ns, "addr", "add", f"{nic.address}/{nic.prefixlen}", "broadcast", "+", "dev", nic.name])
        run([*ns, "link", "set", nic.name, "up"])
    routes = json.loads(run([*ns, "-j", "route", "show", "default"]).stdout or "[]")
    if not routes:
        run([*ns, "route", "add", "default", "via", CONTROLLER_ADDRESS, "dev", node.nics[0].name])


def forget_neighbours(nodes: list[NodeSpec], extra_nics: int) -> None:
    """Drop the ARP entries of every node and of the controller's lab bridges.

    A node removed and created again (`lab up` to fewer nodes, then more) comes back with new MAC addresses; the
    other nodes would keep sending to the old ones until their stale entries are probed again (seconds), so a
    connection in that window times out. Entries are learned again on the next packet.
    """
    for node in nodes:
        quiet(["ip", "-n", node.netns, "neigh", "flush", "all"])
    for k in range(extra_nics + 1):
        quiet(["ip", "neigh", "flush", "dev", bridge_name(k)])


def lab_namespaces() -> list[str]:
    out = run(["ip", "-j", "netns", "list"], check=False).stdout
    names = [entry["name"] for entry in json.loads(out or "[]")]
    return [n for n in names if n.startswith(f"{PREFIX}-")]


def lab_links() -> list[str]:
    out = run(["ip", "-j", "link", "show"], check=False).stdout
    names = [entry["ifname"] for entry in json.loads(out or "[]")]
    return [
        n for n in names if n.startswith(PREFIX) and (n[len(PREFIX) :][:1].isdigit() or n.startswith(f"{PREFIX}br"))
    ]


def remove_node_network(netns: str) -> None:
    # Deleting the namespace destroys the node ends of its veths, which destroys the host ends too.
    quiet(["ip", "netns", "del", netns])


def teardown_all() -> None:
    for ns in lab_namespaces():
        remove_node_network(ns)
    for link in lab_links():
        quiet(["ip", "link", "del", link])
