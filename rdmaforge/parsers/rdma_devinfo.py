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
     lmc, active_width, active_speed, rate_gbps, netdev, gids: [{index, gid, type}, ...]}

``physical_state``, ``active_width``, ``active_speed`` and ``gids`` are only printed by ``-v``;
``rate_gbps`` is the link rate (width x lane speed, the number ``ibstat`` prints as ``Rate``);
``netdev`` is filled by ``merge_rdma_links`` from ``rdma link show``.

``parse_ibstat`` reads infiniband-diags' ``ibstat`` (seed 001's port check) into CA records of its own, and
``merge_ibstat`` compares them with the devices above and takes the rate from them.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
from typing import TYPE_CHECKING, Literal, NamedTuple, TypedDict

if TYPE_CHECKING:  # only for annotations, which are never evaluated at runtime (Python 3.8 targets)
    from collections.abc import Iterable, Sequence

#: What ibv_devinfo prints (on stderr, exit status 255) when libibverbs sees no usable device.
NO_DEVICES_MESSAGE = "No IB devices found"
#: Why libibverbs opens no device the kernel has (libibverbs warns "no userspace device-specific driver found").
PROVIDER_MISSING = (
    "libibverbs has no user-space provider for them (install ibverbs-providers on Debian/Ubuntu, libibverbs or "
    "rdma-core on RHEL, or the vendor's OFED; then ibv_devinfo lists them)"
)
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
    rate_gbps: float | None
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


_NUMBER_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)")


def _leading_number(text: str | None) -> float | None:
    """``"25.0 Gbps"`` -> 25.0, ``"4X"`` -> 4.0, ``"200 Gb/sec (4X HDR)"`` -> 200.0; None without a number."""
    match = _NUMBER_RE.match(text or "")
    return float(match.group(1)) if match else None


def port_rate_gbps(active_width: str | None, active_speed: str | None) -> float | None:
    """A port's link rate from ibv_devinfo -v's width and lane speed: ``("4X", "50.0 Gbps")`` -> 200.0.

    ``None`` when either is missing or not a number (``invalid speed``): a rate is never guessed.
    """
    lanes, lane_speed = _leading_number(active_width), _leading_number(active_speed)
    if not lanes or not lane_speed or not (active_width or "").strip().upper().endswith("X"):
        return None
    return round(lanes * lane_speed, 3)


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
        "rate_gbps": port_rate_gbps(_name(fields.get("active_width")), _name(fields.get("active_speed"))),
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


# --- ibstat (infiniband-diags) --------------------------------------------------------------------
# Seed 001 checks its ports with ibstat. Per device it prints "CA 'mlx5_0'" ("Switch", "Router" or "iWARP RNIC" for
# other node types), that type's "... type", "Number of ports", "Firmware version", "Hardware version", "Node GUID",
# "System image GUID", then per port "Port N:", "State", "Physical state", "Rate" (Gbit/s: "200", "2.5" for 1X SDR,
# "40 (FDR10)"), "Base lid", "LMC", "SM lid", "Capability mask", "Port GUID" and "Link layer". Errors
# ("ibpanic: ...", "ibwarn: ...") go to stderr, which pasted copies mix in. It lists the devices the kernel's umad
# interface offers (ib_umad loaded; eRDMA and iWARP devices have none). With no such device it prints nothing and
# exits 0, so an empty output means "no CA", never "every port is fine".

#: ibstat's port state and physical state names (rdma-core's infiniband-diags/ibstat.c) by their kernel code; the
#: records carry ibv_devinfo's name for the same code, the one vocabulary of every consumer.
IBSTAT_PORT_STATES = {"Down": 1, "Initializing": 2, "Armed": 3, "Active": 4}
IBSTAT_PHYSICAL_STATES = {
    "Sleep": 1,
    "Polling": 2,
    "Disabled": 3,
    "PortConfigurationTraining": 4,
    "LinkUp": 5,
    "LinkErrorRecovery": 6,
    "PhyTest": 7,
}

_IBSTAT_CA_RE = re.compile(r"^\s*(CA|Switch|Router|iWARP RNIC) '([^']+)'\s*$")
_IBSTAT_PORT_RE = re.compile(r"^\s*Port (\d+):\s*$")
_IBSTAT_FIELD_RE = re.compile(r"^\s*([A-Za-z][A-Za-z ]{0,40}):\s*(.*?)\s*$")
_IBSTAT_ERROR_RE = re.compile(r"^\s*(ibpanic|iberror):")


class IbstatPort(TypedDict):
    port: int
    state: str | None
    physical_state: str | None
    rate_gbps: float | None
    base_lid: int | None
    sm_lid: int | None
    lmc: int | None
    capability_mask: str | None
    port_guid: str | None
    link_layer: str | None


class IbstatCa(TypedDict):
    name: str
    node_type: str
    ca_type: str | None
    number_of_ports: int | None
    fw_ver: str | None
    hw_ver: str | None
    node_guid: str | None
    sys_image_guid: str | None
    ports: list[IbstatPort]


def _ibstat_state(text: str | None, codes: dict[str, int], names: dict[int, str]) -> str | None:
    """ibstat's ``Active`` -> ``PORT_ACTIVE``; a name ibstat does not define is kept as printed."""
    if not text:
        return None
    code = codes.get(text.strip())
    return names.get(code, text.strip()) if code is not None else text.strip()


def _ibstat_port(number: int, fields: dict[str, str]) -> IbstatPort:
    return {
        "port": number,
        "state": _ibstat_state(fields.get("State"), IBSTAT_PORT_STATES, SYSFS_PORT_STATES),
        "physical_state": _ibstat_state(fields.get("Physical state"), IBSTAT_PHYSICAL_STATES, SYSFS_PHYSICAL_STATES),
        "rate_gbps": _leading_number(fields.get("Rate")),
        "base_lid": _to_int(fields.get("Base lid")),
        "sm_lid": _to_int(fields.get("SM lid")),
        "lmc": _to_int(fields.get("LMC")),
        "capability_mask": _non_empty(fields.get("Capability mask")),
        "port_guid": _non_empty(fields.get("Port GUID")),
        "link_layer": _non_empty(fields.get("Link layer")),
    }


def parse_ibstat(output: str | None) -> list[IbstatCa]:
    """The devices and ports of ``ibstat`` output, in the order printed; ``[]`` for empty output.

    Matching is by key name, never by indentation (pasted copies lose the tabs); lines that are neither a device
    header, a port header nor a known key (``ibwarn:`` noise, a ``...`` a reporter left) are skipped.
    """
    cas: list[IbstatCa] = []
    ca: IbstatCa | None = None
    ca_fields: dict[str, str] = {}
    ports: list[tuple[int, dict[str, str]]] = []

    def close() -> None:
        if ca is None:
            return
        ca["ca_type"] = _non_empty(ca_fields.get(ca["node_type"] + " type"))
        ca["number_of_ports"] = _to_int(ca_fields.get("Number of ports"))
        ca["fw_ver"] = _non_empty(ca_fields.get("Firmware version"))
        ca["hw_ver"] = _non_empty(ca_fields.get("Hardware version"))
        ca["node_guid"] = _non_empty(ca_fields.get("Node GUID"))
        ca["sys_image_guid"] = _non_empty(ca_fields.get("System image GUID"))
        ca["ports"] = [_ibstat_port(number, fields) for number, fields in ports]

    for line in (output or "").splitlines():
        header = _IBSTAT_CA_RE.match(line)
        if header is not None:
            close()
            ca = {"name": header.group(2), "node_type": header.group(1), "ca_type": None, "number_of_ports": None,
                  "fw_ver": None, "hw_ver": None, "node_guid": None, "sys_image_guid": None, "ports": []}  # fmt: skip
            cas.append(ca)
            ca_fields, ports = {}, []
            continue
        if ca is None:
            continue
        port = _IBSTAT_PORT_RE.match(line)
        if port is not None:
            ports.append((int(port.group(1)), {}))
            continue
        field = _IBSTAT_FIELD_RE.match(line)
        if field is not None:
            # Device keys always precede the ports, so once a port is open every key is a port key.
            (ports[-1][1] if ports else ca_fields).setdefault(field.group(1).strip(), field.group(2))
    close()
    return cas


def ibstat_errors(output: str | None) -> list[str]:
    """ibstat's own failure lines (``ibpanic: ... stat of IB device 'mlx5_8' failed``), as printed."""
    return [line.strip() for line in (output or "").splitlines() if _IBSTAT_ERROR_RE.match(line)]


def merge_ibstat(devices: Sequence[Device], cas: Sequence[IbstatCa]) -> tuple[list[Device], list[str]]:
    """Copies of ``devices`` with ibstat's rates, and where ibstat and ibv_devinfo disagree, in words.

    A port keeps the lower of the two rates when both are known and differ (a rate is never overstated), takes
    ibstat's when ibv_devinfo printed none (no ``-v``), and a state disagreement is reported, not resolved: the
    port's state stays ibv_devinfo's, which every check reads.
    """
    by_port = {(ca["name"], port["port"]): port for ca in cas for port in ca["ports"]}
    listed = {device["name"] for device in devices}
    notes = [f"ibstat lists {ca['name']}, which ibv_devinfo does not" for ca in cas if ca["name"] not in listed]
    merged: list[Device] = []
    for device in devices:
        ports: list[Port] = []
        for port in device["ports"]:
            copy = port.copy()
            copy["gids"] = list(port["gids"])
            seen = by_port.get((device["name"], port["port"]))
            if seen is not None:
                where = f"{device['name']} port {port['port']}"
                if seen["state"] and port["state"] and seen["state"] != port["state"]:
                    notes.append(f"{where}: ibv_devinfo says {port['state']}, ibstat says {seen['state']}")
                ours, theirs = port["rate_gbps"], seen["rate_gbps"]
                if ours is not None and theirs is not None and abs(ours - theirs) > 0.01 * max(ours, theirs):
                    notes.append(f"{where}: ibv_devinfo's width x speed gives {ours:g} Gb/s, ibstat's Rate {theirs:g}")
                known = [rate for rate in (ours, theirs) if rate is not None]
                copy["rate_gbps"] = min(known) if known else None
            ports.append(copy)
        device_copy = device.copy()
        device_copy["ports"] = ports
        merged.append(device_copy)
    return merged, notes


# --- checks shared by the module and filters -----------------------------------------------------


def known_rate(value: object) -> float | None:
    """A port's recorded ``rate_gbps`` as a number; None when it is unknown or not a number (a stored fact of the
    wrong type, a boolean), or no rate an active link runs at (0, negative, NaN, infinite: NaN passed every
    minimum, since no comparison with it is true)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    rate = float(value)
    return rate if math.isfinite(rate) and rate > 0 else None


def active_port_rates(devices: object, pattern: str | None = None) -> list[tuple[str, float | None]]:
    """``("DEVICE:PORT", rate_gbps)`` of every PORT_ACTIVE port of the devices whose name matches the fnmatch
    ``pattern`` (every device without one). Takes facts as stored (anything not a list of mappings is skipped); the
    rate is ``known_rate``'s, None when unknown. doctor's checks and the benchmark's line rate read ports through it."""
    found: list[tuple[str, float | None]] = []
    for device in devices if isinstance(devices, list) else []:
        if not isinstance(device, dict) or (pattern and not fnmatch.fnmatch(str(device.get("name")), pattern)):
            continue
        for port in device.get("ports") or []:
            if isinstance(port, dict) and port.get("state") == ACTIVE:
                found.append((f"{device.get('name')}:{port.get('port')}", known_rate(port.get("rate_gbps"))))
    return found


class RateVerdict(NamedTuple):
    """``judge_port_rates``'s finding: ``status`` ok (measured and as expected), problem, or not_checked (nothing to
    judge against: the reason says why); ``unread`` the active ports whose rate was not reported (not judged)."""

    status: Literal["ok", "problem", "not_checked"]
    actual: str
    expected: str | None
    reason: str
    unread: list[str]


def _gbps(rate: float | None) -> str:
    return f"{rate:g} Gb/s" if rate is not None else "rate unknown"


def judge_port_rates(
    devices: object, pattern: str, floor: object = None, expected_ports: Sequence[object] = ()
) -> RateVerdict:
    """Each active ``pattern`` port's link rate (ibv_devinfo -v, ibstat): against ``floor`` (the inventory's
    rdma_core_min_port_rate_gbps) when it is set, else against the node's other active ports, so a link that
    trained down (100 on an HDR fabric) is caught. ``expected_ports`` (rdma_core_expected_ports) names the rails
    when a node has other ports of the pattern (a storage HCA): only those are judged then. With no floor and fewer
    than two known rates there is nothing to compare: not_checked, never ok. The one judgement of port rates:
    ``rdmaforge doctor`` (doctor_checks.check_port_rate) and ``rdmaforge verify`` (tests/infra) both call it."""
    wanted = [spec for spec in (parse_expected_port(str(s)) for s in expected_ports or []) if spec]
    active = [(label, rate) for label, rate in active_port_rates(devices, pattern)
              if not wanted or any(label == f"{name}:{number}" if number is not None else label.startswith(f"{name}:")
                                   for name, number in wanted)]  # fmt: skip
    if not active:
        among = f" among rdma_core_expected_ports {[f'{n}:{p}' if p else n for n, p in wanted]}" if wanted else ""
        return RateVerdict("not_checked", "none", None, f"no active {pattern} port{among} to read a rate from", [])
    actual = ", ".join(f"{name} {_gbps(rate)}" for name, rate in active)
    unknown = [name for name, rate in active if rate is None]
    known = [(name, rate) for name, rate in active if rate is not None]
    not_read = ""
    if unknown:
        not_read = f"; rate not reported for {', '.join(unknown)} (no ibv_devinfo -v width/speed, no ibstat)"
    if floor not in (None, ""):
        minimum = _positive_rate(floor)
        if minimum is None:  # 0, less or NaN would let every port through: an inventory error, never a pass
            return RateVerdict("problem", actual, "a positive rdma_core_min_port_rate_gbps",
                               f"rdma_core_min_port_rate_gbps={floor!r} is not a rate to judge against; allowed: a "
                               "positive number of Gbit/s, or null" + not_read, unknown)  # fmt: skip
        expected = f">= {minimum:g} Gb/s on every active port"
        slow = [f"{name} at {rate:g} Gb/s" for name, rate in known if rate < minimum]
        if slow or unknown:
            what = ("below the minimum: " + ", ".join(slow) if slow else "") + not_read
            return RateVerdict("problem", actual, expected, what.lstrip("; "), unknown)
        return RateVerdict("ok", actual, expected, f"{len(known)} active port(s), none below {minimum:g} Gb/s", [])
    if len(known) < 2:
        return RateVerdict("not_checked", actual, None, "fewer than two port rates to compare and no "
                           "rdma_core_min_port_rate_gbps" + not_read, unknown)  # fmt: skip
    top = max(rate for _, rate in known)
    expected = f"every active port at the node's fastest, {top:g} Gb/s"
    slow = [f"{name} at {rate:g} Gb/s" for name, rate in known if rate < top]
    if slow:
        reason = f"trained down: {', '.join(slow)} while others run at {top:g} Gb/s{not_read}"
        return RateVerdict("problem", actual, expected, reason, unknown)
    return RateVerdict("ok", actual, expected, f"{len(known)} ports at {top:g} Gb/s, compared with each other (set "
                       f"rdma_core_min_port_rate_gbps to judge them against a number){not_read}", unknown)  # fmt: skip


def _positive_rate(value: object) -> float | None:
    """A minimum rate as the inventory gives it (a number, or its text from -e): the finite number above 0, else
    None (0, negative, NaN, infinite, a boolean, a word)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if 0 < number < float("inf") else None


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


def select_ports(devices: Sequence[Device], expected: Sequence[str]) -> tuple[list[tuple[str, Port]], list[str]]:
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


def rate_problem(device: str, port: Port, min_rate_gbps: float) -> str | None:
    """Why an active port's link rate is not good enough, or None when it is at least ``min_rate_gbps``."""
    rate = port["rate_gbps"]
    if rate is None:
        return (f"{device} port {port['port']}: its link rate is unknown (ibv_devinfo -v printed no active width and "
                f"speed, and ibstat is not installed or does not list it), so it cannot be shown to reach "
                f"{min_rate_gbps:g} Gb/s")  # fmt: skip
    if rate < min_rate_gbps:
        lanes = f" ({port['active_width']} at {port['active_speed']} per lane)" if port["active_width"] else ""
        return (
            f"{device} port {port['port']} runs at {rate:g} Gb/s{lanes}, below the {min_rate_gbps:g} Gb/s expected: "
            "the link trained down (check the cable or transceiver and the switch port's speed)"
        )
    return None


def port_problems(
    devices: Sequence[Device],
    expected: Sequence[str] = (),
    min_rate_gbps: float | None = None,
    kernel_devices: Sequence[str] = (),
    pattern: str | None = None,
    link_layer: str | None = None,
) -> list[str]:
    """Human-readable reasons the expected ports (every port when ``expected`` is empty) are not usable.

    An empty list means every selected port exists and is PORT_ACTIVE (and, with ``min_rate_gbps``, runs at least
    that fast). With nothing expected and no device at all, that absence is the problem: a driver that failed to
    load shows up this way, or, when the kernel lists devices (``kernel_devices``), a missing user-space provider.
    ``pattern`` (the fabric profile's device names, fnmatch: ``erdma*``) keeps only the fabric's devices: another
    device (a storage HCA, Soft-RoCE's rxe0) neither stands in for a missing one nor fails the check by being down.
    ``link_layer`` (``InfiniBand`` or ``Ethernet``) is the one a selected port must be on, where it was read.
    """
    if pattern:
        others = sorted(str(d["name"]) for d in devices if not fnmatch.fnmatch(str(d["name"]), pattern))
        devices = [d for d in devices if fnmatch.fnmatch(str(d["name"]), pattern)]
        kernel_devices = [name for name in kernel_devices if fnmatch.fnmatch(name, pattern)]
        if not devices and not kernel_devices:
            besides = f" (it lists only {', '.join(others)}, not the fabric's)" if others else ""
            return [f"ibv_devinfo reports no {pattern} RDMA device{besides}: check the fabric's driver is loaded "
                    "(lsmod | grep _ib)"]  # fmt: skip
    if not devices and kernel_devices:
        return [f"ibv_devinfo reports no RDMA devices, but the kernel has {', '.join(kernel_devices)}: "
                f"{PROVIDER_MISSING}"]  # fmt: skip
    if not devices and not expected:
        return ["ibv_devinfo reports no RDMA devices: check the HCA driver is loaded (lsmod | grep _ib)"]
    selected, problems = select_ports(devices, expected)
    if link_layer:
        problems += [f"{name} port {port['port']} is on link layer {port['link_layer']}, not the fabric's {link_layer}"
                     for name, port in selected if port.get("link_layer") not in (None, "", link_layer)]  # fmt: skip
    # A listing cut short (ibv_devinfo stops at a port it cannot query) shows a device with fewer ports than it has:
    # the ports not listed are not ACTIVE as far as anyone can tell, never "no port, so nothing down".
    named = {parsed[0] for parsed in (parse_expected_port(str(spec)) for spec in expected) if parsed}
    for device in devices:
        count, listed = device.get("phys_port_cnt"), len(device["ports"])
        if (not expected or device["name"] in named) and isinstance(count, int) and listed < count:
            problems.append(f"{device['name']} has {count} port(s) (phys_port_cnt), but only {listed} could be read")
    seen: set[tuple[str, int]] = set()
    for name, port in selected:
        if (name, port["port"]) in seen:
            continue  # "mlx5_0" and "mlx5_0:1" both listed: report the port once
        seen.add((name, port["port"]))
        if port["state"] != ACTIVE:
            problems.append(describe_port(name, port))
        elif min_rate_gbps is not None:
            slow = rate_problem(name, port, min_rate_gbps)
            if slow is not None:
                problems.append(slow)
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
        # The kernel's rate file reads "200 Gb/sec (4X HDR)": ibstat's Rate and ibstatus's rate line both come from it.
        "rate_gbps": _leading_number(files.get("rate")) or None,
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
_PORT_FILES = ("state", "phys_state", "link_layer", "sm_lid", "lid", "lid_mask_count", "rate")


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
    "IBSTAT_PHYSICAL_STATES",
    "IBSTAT_PORT_STATES",
    "NO_DEVICES_MESSAGE",
    "Device",
    "Gid",
    "IbstatCa",
    "IbstatPort",
    "Port",
    "RdmaLink",
    "active_port_rates",
    "describe_port",
    "ibstat_errors",
    "inactive_ports",
    "known_rate",
    "merge_ibstat",
    "merge_rdma_links",
    "parse_expected_port",
    "parse_gid_line",
    "parse_ibstat",
    "parse_ibv_devinfo",
    "parse_rdma_link",
    "parse_rdma_link_line",
    "port_problems",
    "PROVIDER_MISSING",
    "port_rate_gbps",
    "rate_problem",
    "read_sysfs_devices",
    "sysfs_device",
    "sysfs_port",
]
