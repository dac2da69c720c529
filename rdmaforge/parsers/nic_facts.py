"""Network interfaces from sysfs (``/sys/class/net``) and iproute2's JSON output.

The one implementation behind the ``nic_facts`` Ansible module (shipped to targets as
``module_utils/rdmaforge_nic_facts.py``, a symlink to this file): standard-library only, Python 3.8.

sysfs gives the hardware side of each interface (MAC, MTU, operstate, driver, PCI function, NUMA
node); ``ip -j addr show`` gives its IPv4 addresses and ``ip -j route show default`` the interface
that carries the default route. Parsers take text and paths so that a fake sysfs tree and captured
JSON test them as well as the real thing.

Where sysfs points (``/sys/class/net/X/device``):

* a PCI NIC (mlx5_core, ena, ixgbe): ``.../0000:3b:00.0``, the PCI function itself;
* virtio-net: ``.../0000:00:03.0/virtio2``, a virtio device under the PCI function, whose driver
  is ``virtio_net`` and which has no ``numa_node`` of its own (the PCI function has);
* a virtual interface (lo, bridge, veth, bond, ifb): no ``device`` link at all: no driver, no PCI
  address, no NUMA node.

So the PCI address is the nearest path component that is a PCI function, and the NUMA node is
read from the device, else from that PCI function. ``numa_node`` -1 (no affinity) becomes ``None``.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import os
import re
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # annotations only; never evaluated at runtime (Python 3.8 targets)
    from collections.abc import Iterable, Mapping, Sequence

_PCI_ADDRESS_RE = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


class Ipv4(TypedDict):
    address: str
    prefixlen: int
    network: str | None
    broadcast: str | None


class SysfsNic(TypedDict):
    name: str
    ifindex: int | None
    mac: str | None
    mtu: int | None
    operstate: str | None
    driver: str | None
    pci_address: str | None
    numa_node: int | None
    virtual: bool


class Nic(TypedDict):
    name: str
    ifindex: int | None
    mac: str | None
    driver: str | None
    pci_address: str | None
    numa_node: int | None
    mtu: int | None
    operstate: str | None
    virtual: bool
    ipv4: list[Ipv4]
    default_route: bool


class DefaultRoute(TypedDict):
    interface: str | None
    gateway: str | None
    metric: int


class IpLink(TypedDict):
    mac: str | None
    mtu: int | None
    operstate: str | None
    ipv4: list[Ipv4]


class IpJsonError(ValueError):
    """``ip -j`` printed something that is not its JSON (old iproute2 without ``-j``, an error text)."""


# --- sysfs values ----------------------------------------------------------------------------------


def pci_address_from_path(device_path: str | None) -> str | None:
    """The PCI function in a resolved ``device`` path: its last component that looks like one.

    ``/sys/devices/pci0000:00/0000:00:03.0/virtio2`` -> ``0000:00:03.0``;
    ``/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0`` -> ``0000:3b:00.0`` (the NIC, not the bridge).
    """
    if not device_path:
        return None
    for part in reversed(device_path.rstrip("/").split("/")):
        if _PCI_ADDRESS_RE.match(part):
            return part.lower()
    return None


def parse_numa_node(text: str | None) -> int | None:
    """``"1\\n"`` -> 1; ``"-1"`` (no NUMA affinity, or a single-node machine) and junk -> ``None``."""
    try:
        node = int((text or "").strip())
    except ValueError:
        return None
    return node if node >= 0 else None


def driver_from_link(target: str | None) -> str | None:
    """``../../../../bus/pci/drivers/mlx5_core`` -> ``mlx5_core``."""
    if not target:
        return None
    return os.path.basename(target.rstrip("/")) or None


def _read(path: str) -> str | None:
    try:
        # a byte that is not UTF-8 (a driver's odd label) raised UnicodeDecodeError and failed node_probe too
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None  # e.g. reading "speed" of a down link gives EINVAL; absent files are normal


def _to_int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def read_sysfs_nic(root: str, name: str) -> SysfsNic:
    """What ``root/name`` (normally ``/sys/class/net/<name>``) says about one interface."""
    base = os.path.join(root, name)
    device = os.path.join(base, "device")
    has_device = os.path.exists(device)
    device_path = os.path.realpath(device) if has_device else None
    pci_address = pci_address_from_path(device_path)
    numa_text = _read(os.path.join(device, "numa_node")) if has_device else None
    if numa_text is None and device_path and pci_address and pci_address in device_path:
        # virtio: the virtioN device has no numa_node; its PCI function (a parent directory) has.
        pci_dir = device_path[: device_path.rindex(pci_address) + len(pci_address)]
        numa_text = _read(os.path.join(pci_dir, "numa_node"))
    driver_link = os.path.join(device, "driver")
    driver = driver_from_link(os.readlink(driver_link)) if has_device and os.path.islink(driver_link) else None
    return {
        "name": name,
        "ifindex": _to_int(_read(os.path.join(base, "ifindex"))),
        "mac": _read(os.path.join(base, "address")) or None,
        "mtu": _to_int(_read(os.path.join(base, "mtu"))),
        "operstate": _read(os.path.join(base, "operstate")) or None,
        "driver": driver,
        "pci_address": pci_address,
        "numa_node": parse_numa_node(numa_text),
        "virtual": not has_device,
    }


def list_interfaces(root: str, exclude: Iterable[str] = ("lo",)) -> list[str]:
    """Interface names under ``root``, without those matching an ``exclude`` shell pattern (``veth*``). Only
    directories (the kernel's are links to them): /sys/class/net also holds files, such as the bonding driver's
    ``bonding_masters``, which are no interface."""
    patterns = list(exclude)
    return sorted(
        name
        for name in os.listdir(root)
        if not name.startswith(".")
        and not any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
        and os.path.isdir(os.path.join(root, name))
    )


# --- ip -j ----------------------------------------------------------------------------------------


def parse_ip_list(text: str | None, command: str) -> list[dict[str, Any]]:
    """The records of an ``ip -j`` listing (addresses, rules, routes); [] when it printed nothing. IpJsonError when
    it printed something that is not its JSON."""
    if not text or not text.strip():
        return []
    try:
        data = json.loads(text)
    except ValueError as error:
        first_line = text.strip().splitlines()[0][:200]
        raise IpJsonError(f"{command} did not print JSON ({error}): {first_line}") from None
    if not isinstance(data, list):
        raise IpJsonError(f"{command} printed JSON that is not a list")
    # iproute2 4.x printed "{}" for interfaces a filter skipped: ignore anything that is not a record.
    return [item for item in data if isinstance(item, dict) and item]


def routing_commands(tables: Iterable[int], ip: str = "ip") -> list[list[str]]:
    """The commands that read the policy routing state: the rules, each table's routes, the main table's default
    routes. nic_facts runs them (``routing_tables``); the converge ledger records the same argvs for the drift check."""
    return [
        [ip, "-j", "rule", "show"],
        *([ip, "-j", "route", "show", "table", str(int(table))] for table in tables),
        [ip, "-j", "route", "show", "default"],
    ]


def _ipv4(info: Mapping[str, Any]) -> Ipv4 | None:
    address, prefixlen = info.get("local"), info.get("prefixlen")
    if info.get("family") != "inet" or not isinstance(address, str) or not isinstance(prefixlen, int):
        return None
    try:
        network: str | None = str(ipaddress.ip_interface(f"{address}/{prefixlen}").network)
    except ValueError:
        network = None
    broadcast = info.get("broadcast")
    return {
        "address": address,
        "prefixlen": prefixlen,
        "network": network,
        "broadcast": broadcast if isinstance(broadcast, str) else None,
    }


def parse_ip_addr(text: str | None) -> dict[str, IpLink]:
    """``ip -j addr show`` -> ``{ifname: {mac, mtu, operstate, ipv4: [...]}}`` (IPv4 only, in order)."""
    links: dict[str, IpLink] = {}
    for record in parse_ip_list(text, "ip -j addr show"):
        name = record.get("ifname")
        if not isinstance(name, str):
            continue
        infos = record.get("addr_info")
        addresses = (
            [a for a in (_ipv4(i) for i in infos if isinstance(i, dict)) if a] if isinstance(infos, list) else []
        )
        mtu, state, mac = record.get("mtu"), record.get("operstate"), record.get("address")
        links[name] = {
            "mac": mac if isinstance(mac, str) else None,
            "mtu": mtu if isinstance(mtu, int) else None,
            "operstate": state.lower() if isinstance(state, str) else None,
            "ipv4": addresses,
        }
    return links


def parse_default_route(text: str | None) -> DefaultRoute | None:
    """The default route with the lowest metric from ``ip -j route show default``.

    A multipath route (``nexthops``) reports its first next hop. ``None`` when there is none.
    """
    best: DefaultRoute | None = None
    for route in parse_ip_list(text, "ip -j route show default"):
        if route.get("dst", "default") != "default" or route.get("type", "unicast") != "unicast":
            continue  # "unreachable default" and friends carry no traffic out of an interface
        hop: Mapping[str, Any] = route
        nexthops = route.get("nexthops")
        if not route.get("dev") and isinstance(nexthops, list) and nexthops and isinstance(nexthops[0], dict):
            hop = nexthops[0]
        metric = route.get("metric", 0)
        candidate: DefaultRoute = {
            "interface": hop.get("dev") if isinstance(hop.get("dev"), str) else None,
            "gateway": hop.get("gateway") if isinstance(hop.get("gateway"), str) else None,
            "metric": metric if isinstance(metric, int) else 0,
        }
        if best is None or candidate["metric"] < best["metric"]:
            best = candidate
    return best


# --- together --------------------------------------------------------------------------------------


def build_nics(
    sysfs: Sequence[SysfsNic],
    ip_links: Mapping[str, IpLink],
    default_route: DefaultRoute | None,
) -> list[Nic]:
    """One record per sysfs interface, in ifindex order; values sysfs lacks are taken from ``ip``."""
    route_dev = default_route["interface"] if default_route else None
    nics: list[Nic] = []
    for entry in sorted(sysfs, key=lambda e: (e["ifindex"] is None, e["ifindex"] or 0, e["name"])):
        link = ip_links.get(entry["name"])
        nics.append(
            {
                "name": entry["name"],
                "ifindex": entry["ifindex"],
                "mac": entry["mac"] or (link["mac"] if link else None),
                "driver": entry["driver"],
                "pci_address": entry["pci_address"],
                "numa_node": entry["numa_node"],
                "mtu": entry["mtu"] if entry["mtu"] is not None else (link["mtu"] if link else None),
                "operstate": entry["operstate"] or (link["operstate"] if link else None),
                "virtual": entry["virtual"],
                "ipv4": list(link["ipv4"]) if link else [],
                "default_route": entry["name"] == route_dev,
            }
        )
    return nics


__all__ = [
    "DefaultRoute",
    "IpJsonError",
    "IpLink",
    "Ipv4",
    "Nic",
    "SysfsNic",
    "build_nics",
    "driver_from_link",
    "list_interfaces",
    "parse_default_route",
    "parse_ip_addr",
    "parse_numa_node",
    "pci_address_from_path",
    "read_sysfs_nic",
]
