"""Parse ``ibv_devinfo [-v]`` and ``rdma link show`` into RDMA device/port records.

The one implementation of these parsers. The ``rdma_devices`` Ansible module ships this very file to
target hosts (``module_utils/rdmaforge_rdma_devinfo.py`` is a symlink to it), so it must stay
standard-library only and run on Python 3.8: annotations are strings (``from __future__ import
annotations``), and nothing newer than 3.8 is evaluated at runtime.

Nothing here raises on odd input: unknown lines are skipped, unparsable numbers become ``None``.
Real outputs mix stderr into stdout (``Failed to open device``, libibverbs warnings), come from
older rdma-core or MLNX_OFED builds with extra lines (``Device ports:``), and are often pasted with
tabs expanded to spaces, so matching is by key name, never by indentation.

A device (``parse_ibv_devinfo``)::

    {name, transport, fw_ver, node_guid, sys_image_guid, vendor_id, vendor_part_id, hw_ver,
     board_id, phys_port_cnt, ports: [port, ...]}

A port::

    {port, state, state_code, physical_state, max_mtu, active_mtu, link_layer, sm_lid, port_lid,
     lmc, active_width, active_speed, netdev, gids: [{index, gid, type}, ...]}

``physical_state``, ``active_width``, ``active_speed`` and ``gids`` are only printed by ``-v``;
``netdev`` is filled by ``merge_rdma_links`` from ``rdma link show``.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:  # only for annotations, which are never evaluated at runtime (Python 3.8 targets)
    from collections.abc import Iterable, Sequence

#: What ibv_devinfo prints (on stderr, exit status 255) when libibverbs sees no usable device.
NO_DEVICES_MESSAGE = "No IB devices found"
ACTIVE = "PORT_ACTIVE"

_HCA_RE = re.compile(r"^\s*hca_id:\s*(\S+)")
_PORT_RE = re.compile(r"^\s*port:\s*(\d+)\s*$")
# GID[  3]:		::ffff:10.0.0.1, RoCE v2   (the ", type" suffix is printed for Ethernet ports only,
# by rdma-core 28+; RoCE v2 GIDs are then shown in inet_ntop form, the others as raw hex groups)
_GID_RE = re.compile(r"^\s*GID\[\s*(\d+)\]:\s*([0-9A-Fa-f:.]+)\s*(?:,\s*(\S.*?))?\s*$")
_KEY_VALUE_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*):\s*(.*?)\s*$")
# "PORT_ACTIVE (4)", "4096 (5)", "25.0 Gbps (32)": a name followed by the numeric enum value.
_NAME_CODE_RE = re.compile(r"^(.*?)\s*\((-?\d+)\)\s*$")


class Gid(TypedDict):
    index: int
    gid: str
    type: str | None


class Port(TypedDict):
    port: int
    state: str | None
    state_code: int | None
    physical_state: str | None
    max_mtu: int | None
    active_mtu: int | None
    link_layer: str | None
    sm_lid: int | None
    port_lid: int | None
    lmc: int | None
    active_width: str | None
    active_speed: str | None
    netdev: str | None
    gids: list[Gid]


class Device(TypedDict):
    name: str
    transport: str | None
    fw_ver: str | None
    node_guid: str | None
    sys_image_guid: str | None
    vendor_id: str | None
    vendor_part_id: int | None
    hw_ver: str | None
    board_id: str | None
    phys_port_cnt: int | None
    ports: list[Port]


class RdmaLink(TypedDict):
    device: str
    port: int
    state: str | None
    physical_state: str | None
    netdev: str | None


class _RawPort:
    """One ``port:`` block as printed: its key/value lines and GID lines, not yet interpreted."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.fields: dict[str, str] = {}
        self.gids: list[Gid] = []


class _RawDevice:
    """One ``hca_id:`` block: device-level key/value lines, then its ports."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: dict[str, str] = {}
        self.ports: list[_RawPort] = []


# --- small value helpers -------------------------------------------------------------------------


def _to_int(text: str | None, base: int = 10) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip(), base)
    except ValueError:
        return None


def _split_name_code(text: str | None) -> tuple[str | None, int | None]:
    """``"PORT_ACTIVE (4)"`` -> ``("PORT_ACTIVE", 4)``; text without a code keeps ``None``."""
    if text is None or not text.strip():
        return None, None
    match = _NAME_CODE_RE.match(text)
    if match is None:
        return text.strip(), None
    return match.group(1).strip() or None, int(match.group(2))


def _name(text: str | None) -> str | None:
    return _split_name_code(text)[0]


def _mtu_bytes(text: str | None) -> int | None:
    """``"4096 (5)"`` -> 4096. ``"invalid MTU (0)"`` has no byte count, so ``None``."""
    return _to_int(_name(text))


def _non_empty(text: str | None) -> str | None:
    return text if text else None


# --- ibv_devinfo ---------------------------------------------------------------------------------


def parse_gid_line(line: str) -> Gid | None:
    """``GID[  1]:  fe80::ac0:ebff:feda:1cfb, RoCE v2`` -> ``{index: 1, gid: ..., type: "RoCE v2"}``."""
    match = _GID_RE.match(line)
    if match is None:
        return None
    return {"index": int(match.group(1)), "gid": match.group(2), "type": match.group(3)}


def _collect(output: str) -> list[_RawDevice]:
    """Group the lines of ``output`` into devices and ports, without interpreting values yet."""
    devices: list[_RawDevice] = []
    device: _RawDevice | None = None
    port: _RawPort | None = None
    for line in output.splitlines():
        hca = _HCA_RE.match(line)
        if hca is not None:
            device, port = _RawDevice(hca.group(1)), None
            devices.append(device)
            continue
        if device is None:
            # Lines before the first hca_id: warnings, "No IB devices found", a pasted fragment.
            continue
        port_match = _PORT_RE.match(line)
        if port_match is not None:
            port = _RawPort(int(port_match.group(1)))
            device.ports.append(port)
            continue
        if port is not None:
            gid = parse_gid_line(line)
            if gid is not None:
                port.gids.append(gid)
                continue
        key_value = _KEY_VALUE_RE.match(line)
        if key_value is None:
            continue  # capability flag lists, "Failed to open device", blank lines
        # Device attributes always precede the ports, so once a port is open every key is a port key.
        target = port.fields if port is not None else device.fields
        target.setdefault(key_value.group(1), key_value.group(2))
    return devices


def _build_port(raw: _RawPort) -> Port:
    fields = raw.fields
    state, state_code = _split_name_code(fields.get("state"))
    return {
        "port": raw.number,
        "state": state,
        "state_code": state_code,
        "physical_state": _name(fields.get("phys_state")),
        "max_mtu": _mtu_bytes(fields.get("max_mtu")),
        "active_mtu": _mtu_bytes(fields.get("active_mtu")),
        "link_layer": _non_empty(fields.get("link_layer")),
        "sm_lid": _to_int(fields.get("sm_lid")),
        "port_lid": _to_int(fields.get("port_lid")),
        "lmc": _to_int(fields.get("port_lmc"), 16),
        "active_width": _name(fields.get("active_width")),
        "active_speed": _name(fields.get("active_speed")),
        "netdev": None,
        "gids": list(raw.gids),
    }


def _build_device(raw: _RawDevice) -> Device:
    fields = raw.fields
    return {
        "name": raw.name,
        "transport": _name(fields.get("transport")),
        "fw_ver": _non_empty(fields.get("fw_ver")),
        "node_guid": _non_empty(fields.get("node_guid")),
        "sys_image_guid": _non_empty(fields.get("sys_image_guid")),
        "vendor_id": _non_empty(fields.get("vendor_id")),
        "vendor_part_id": _to_int(fields.get("vendor_part_id")),
        "hw_ver": _non_empty(fields.get("hw_ver")),
        "board_id": _non_empty(fields.get("board_id")),
        "phys_port_cnt": _to_int(fields.get("phys_port_cnt")),
        "ports": [_build_port(port) for port in raw.ports],
    }


def parse_ibv_devinfo(output: str | None) -> list[Device]:
    """Devices in ``ibv_devinfo`` or ``ibv_devinfo -v`` output, in the order printed.

    ``"No IB devices found"``, empty or unrecognisable output gives ``[]``.
    """
    if not output:
        return []
    return [_build_device(raw) for raw in _collect(output)]


# --- rdma link (iproute2) ------------------------------------------------------------------------

_LINK_KEYS = ("state", "physical_state", "netdev")
# Early iproute2 releases printed "0/1: mlx5_0/1: ..." (device index/port, then name/port) instead of
# "link mlx5_0/1 ...".
_OLD_INDEX_RE = re.compile(r"^\d+/\d+:$")


def _link_tokens(line: str) -> list[str] | None:
    """The tokens of a ``rdma link`` record normalised to ``["link", "DEV/PORT", key, value, ...]``."""
    tokens = line.split()
    if len(tokens) >= 2 and _OLD_INDEX_RE.match(tokens[0]):
        return ["link", tokens[1].rstrip(":"), *tokens[2:]]
    if len(tokens) >= 2 and tokens[0] == "link":
        return tokens
    return None


def parse_rdma_link_line(line: str) -> RdmaLink | None:
    """``link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1f0`` -> one record.

    InfiniBand ports print ``subnet_prefix``/``lid``/``sm_lid``/``lmc`` pairs before ``state`` and
    have no ``netdev`` unless IPoIB is up; keys are therefore looked up, not read by position.
    """
    tokens = _link_tokens(line)
    if tokens is None:
        return None
    device, _, port_text = tokens[1].rpartition("/")
    port = _to_int(port_text)
    if not device or port is None:
        return None
    values: dict[str, str] = {}
    for position in range(2, len(tokens) - 1):
        key = tokens[position]
        if key in _LINK_KEYS and key not in values:
            values[key] = tokens[position + 1]
    return {
        "device": device,
        "port": port,
        "state": values.get("state"),
        "physical_state": values.get("physical_state"),
        "netdev": values.get("netdev"),
    }


def _link_records(output: str) -> list[str]:
    """Lines of ``output`` with wrapped continuation lines joined to the record they continue.

    A long record can be wrapped onto an indented second line (``\tstate ACTIVE ...``); a line that
    does not start a record is therefore appended to the previous one instead of being dropped.
    """
    records: list[str] = []
    for line in output.splitlines():
        text = line.strip()
        if not text:
            continue
        if _link_tokens(text) is None and records and line[:1] in (" ", "\t"):
            records[-1] = records[-1] + " " + text
        else:
            records.append(text)
    return records


def parse_rdma_link(output: str | None) -> list[RdmaLink]:
    """Records of ``rdma link show`` output; lines that are not ``link DEV/PORT ...`` are skipped."""
    if not output:
        return []
    links = (parse_rdma_link_line(record) for record in _link_records(output))
    return [link for link in links if link is not None]


def merge_rdma_links(devices: Sequence[Device], links: Iterable[RdmaLink]) -> list[Device]:
    """Copies of ``devices`` with each port's ``netdev`` taken from the matching ``rdma link`` record.

    ``physical_state`` is filled from ``rdma link`` too when ibv_devinfo did not print it (no ``-v``),
    so a plain ``ibv_devinfo`` still tells LINK_UP from DISABLED. Ports without a record keep
    ``netdev: None``.
    """
    by_port: dict[tuple[str, int], RdmaLink] = {(link["device"], link["port"]): link for link in links}
    merged: list[Device] = []
    for device in devices:
        ports: list[Port] = []
        for port in device["ports"]:
            copy = port.copy()
            copy["gids"] = list(port["gids"])
            link = by_port.get((device["name"], port["port"]))
            if link is not None:
                copy["netdev"] = link["netdev"]
                if copy["physical_state"] is None:
                    copy["physical_state"] = link["physical_state"]
            ports.append(copy)
        device_copy = device.copy()
        device_copy["ports"] = ports
        merged.append(device_copy)
    return merged


# --- checks shared by the module and filters -----------------------------------------------------


def inactive_ports(devices: Iterable[Device]) -> list[str]:
    """``["mlx5_1/1: PORT_DOWN", ...]`` for every port that is not PORT_ACTIVE."""
    return [
        "{}/{}: {}".format(device["name"], port["port"], port["state"] or "unknown state")
        for device in devices
        for port in device["ports"]
        if port["state"] != ACTIVE
    ]


def parse_expected_port(spec: str) -> tuple[str, int | None] | None:
    """``"mlx5_0:1"`` or ``"mlx5_0/1"`` -> ``("mlx5_0", 1)``; ``"mlx5_0"`` -> ``("mlx5_0", None)``.

    ``None`` for anything else (empty, or a port part that is not a number).
    """
    text = spec.strip() if isinstance(spec, str) else ""
    for separator in (":", "/"):
        if separator in text:
            name, _, port_text = text.rpartition(separator)
            port = _to_int(port_text)
            if not name or port is None:
                return None
            return name, port
    return (text, None) if text else None


def _port_hint(port: Port) -> str:
    """What to look at for a port that is not active, in terms a person can act on."""
    state, physical = port["state"], port["physical_state"]
    netdev = port["netdev"] or "its netdev"
    if physical == "DISABLED":
        # Disabled ports are switched off on purpose: an admin-down netdev (RoCE) or a disabled port.
        return f"the port is disabled: bring {netdev} up (ip link set ... up) or enable the port (mlxlink)"
    if physical in ("POLLING", "SLEEP") or state == "PORT_DOWN":
        return "no link: check the cable/transceiver and the switch port"
    if state == "PORT_INIT" and port["link_layer"] != "Ethernet":
        # InfiniBand only: the link trained but no subnet manager has assigned a LID yet.
        return "the link is up but no subnet manager configured it: start opensm or check the fabric SM"
    if state == "PORT_ARMED":
        return "the subnet manager has not activated the port yet"
    return "expected PORT_ACTIVE"


def describe_port(device: str, port: Port) -> str:
    """``mlx5_1 port 1 is PORT_DOWN (physical state DISABLED, link layer Ethernet): <hint>``."""
    details = [
        f"{label} {value}"
        for label, value in (("physical state", port["physical_state"]), ("link layer", port["link_layer"]))
        if value
    ]
    suffix = " ({})".format(", ".join(details)) if details else ""
    return "{} port {} is {}{}: {}".format(
        device, port["port"], port["state"] or "in an unknown state", suffix, _port_hint(port)
    )


def _select_ports(devices: Sequence[Device], expected: Sequence[str]) -> tuple[list[tuple[str, Port]], list[str]]:
    """The ports named by ``expected`` (all ports when empty) and problems with the names themselves."""
    by_name = {device["name"]: device for device in devices}
    found = ", ".join(sorted(by_name)) or "none"
    if not expected:
        return [(d["name"], p) for d in devices for p in d["ports"]], []
    selected: list[tuple[str, Port]] = []
    problems: list[str] = []
    for spec in expected:
        parsed = parse_expected_port(spec)
        if parsed is None:
            problems.append(f"expected port {spec!r} is not DEVICE or DEVICE:PORT")
            continue
        name, number = parsed
        device = by_name.get(name)
        if device is None:
            problems.append(f"expected RDMA device {name} not found (devices present: {found})")
            continue
        ports = [p for p in device["ports"] if number is None or p["port"] == number]
        if not ports:
            have = ", ".join(str(p["port"]) for p in device["ports"]) or "none"
            what = f"port {number}" if number is not None else "any port"
            problems.append(f"expected {name} {what} not found ({name} has ports: {have})")
        selected.extend((name, p) for p in ports)
    return selected, problems


def port_problems(devices: Sequence[Device], expected: Sequence[str] = ()) -> list[str]:
    """Human-readable reasons the expected ports (every port when ``expected`` is empty) are not usable.

    An empty list means every selected port exists and is PORT_ACTIVE. With nothing expected and no
    device at all, that absence is the problem: a driver that failed to load shows up this way.
    """
    if not devices and not expected:
        return ["ibv_devinfo reports no RDMA devices: check the HCA driver is loaded (lsmod | grep _ib)"]
    selected, problems = _select_ports(devices, expected)
    seen: set[tuple[str, int]] = set()
    for name, port in selected:
        if (name, port["port"]) in seen:
            continue  # "mlx5_0" and "mlx5_0:1" both listed: report the port once
        seen.add((name, port["port"]))
        if port["state"] != ACTIVE:
            problems.append(describe_port(name, port))
    return problems


# --- the kernel's /sys/class/infiniband ----------------------------------------------------------
# Read when ibv_devinfo is not installed yet (the kernel's drivers load before rdma-core's user space) or does not
# work. The kernel prints a port's states as "CODE: NAME" ("4: ACTIVE", "5: LinkUp"); the records use the names
# ibv_devinfo prints for the same codes, so that every consumer reads one vocabulary.

#: ibv_devinfo's port state names by the kernel's code (libibverbs' ibv_port_state_str).
SYSFS_PORT_STATES = {0: "PORT_NOP", 1: "PORT_DOWN", 2: "PORT_INIT", 3: "PORT_ARMED", 4: ACTIVE, 5: "PORT_ACTIVE_DEFER"}
#: ibv_devinfo's physical state names by the kernel's code.
SYSFS_PHYSICAL_STATES = {
    1: "SLEEP",
    2: "POLLING",
    3: "DISABLED",
    4: "PORT_CONFIGURATION TRAINING",
    5: "LINK_UP",
    6: "LINK_ERROR RECOVERY",
    7: "PHY TEST",
}


def _sysfs_code(text: str | None) -> int | None:
    """``"4: ACTIVE"`` -> 4."""
    if not text or ":" not in text:
        return None
    return _to_int(text.split(":", 1)[0])


def sysfs_port(number: int, files: dict[str, str]) -> Port:
    """A port record from the files of ``/sys/class/infiniband/DEVICE/ports/NUMBER`` (name -> content)."""
    state_code = _sysfs_code(files.get("state"))
    physical_code = _sysfs_code(files.get("phys_state"))
    return {
        "port": number,
        "state": SYSFS_PORT_STATES.get(state_code) if state_code is not None else None,
        "state_code": state_code,
        "physical_state": SYSFS_PHYSICAL_STATES.get(physical_code) if physical_code is not None else None,
        "max_mtu": None,
        "active_mtu": None,
        "link_layer": _non_empty(files.get("link_layer")),
        "sm_lid": _to_int(files.get("sm_lid"), 16),
        "port_lid": _to_int(files.get("lid"), 16),
        "lmc": _to_int(files.get("lid_mask_count")),
        "active_width": None,
        "active_speed": None,
        "netdev": None,
        "gids": [],
    }


def sysfs_device(name: str, files: dict[str, str], ports: dict[int, dict[str, str]]) -> Device:
    """A device record from ``/sys/class/infiniband/NAME``'s files and its ports' files."""
    return {
        "name": name,
        "transport": None,
        "fw_ver": _non_empty(files.get("fw_ver")),
        "node_guid": _non_empty(files.get("node_guid")),
        "sys_image_guid": _non_empty(files.get("sys_image_guid")),
        "vendor_id": None,
        "vendor_part_id": None,
        "hw_ver": _non_empty(files.get("hw_rev")),
        "board_id": _non_empty(files.get("board_id")),
        "phys_port_cnt": len(ports),
        "ports": [sysfs_port(number, ports[number]) for number in sorted(ports)],
    }


def _read_small_files(directory: str, names: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in names:
        try:
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as handle:
                out[name] = handle.read(4096).strip()
        except OSError:
            continue  # absent for this driver, or not readable: the record says null
    return out


_DEVICE_FILES = ("fw_ver", "node_guid", "sys_image_guid", "hw_rev", "board_id")
_PORT_FILES = ("state", "phys_state", "link_layer", "sm_lid", "lid", "lid_mask_count")


def read_sysfs_devices(root: str) -> list[Device]:
    """Every device under ``root`` (``/sys/class/infiniband``), by name; [] when it is absent or empty."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    devices: list[Device] = []
    for name in names:
        device_dir = os.path.join(root, name)
        ports: dict[int, dict[str, str]] = {}
        try:
            port_names = os.listdir(os.path.join(device_dir, "ports"))
        except OSError:
            port_names = []
        for port_name in port_names:
            if port_name.isdigit():
                ports[int(port_name)] = _read_small_files(os.path.join(device_dir, "ports", port_name), _PORT_FILES)
        devices.append(sysfs_device(name, _read_small_files(device_dir, _DEVICE_FILES), ports))
    return devices


__all__ = [
    "ACTIVE",
    "NO_DEVICES_MESSAGE",
    "Device",
    "Gid",
    "Port",
    "RdmaLink",
    "describe_port",
    "inactive_ports",
    "merge_rdma_links",
    "parse_expected_port",
    "parse_gid_line",
    "parse_ibv_devinfo",
    "parse_rdma_link",
    "parse_rdma_link_line",
    "port_problems",
    "read_sysfs_devices",
    "sysfs_device",
    "sysfs_port",
]
