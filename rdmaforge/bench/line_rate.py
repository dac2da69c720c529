"""The line rate a benchmark's bus bandwidth is judged against, from the nodes' own RDMA ports where they say it.

A fabric profile's rate (rdmaforge.fabrics: IB 200 Gbit/s per node) is the seeds' one-HCA node. A node with eight
400 Gbit/s rails judged against it would pass at a tenth of what its fabric carries, which is the false pass this
module exists to prevent. Multi-node collectives reach a bus bandwidth near the sum of the rails a node's GPUs use
(one rail per GPU in a rail-optimised node), so on the profiles whose port rates are the links' own
(``FabricProfile.line_rate_from_ports``: mlx5 HCAs) a node's rate is the sum of its fastest active ports of the
fabric's device pattern, one per GPU. The cluster's rate is the median node's (of an even count, the faster of the
two middle nodes): what the fabric was built to carry, so that a node which lost rails fails the run instead of
lowering the bar.

The measured rate only ever raises the bar: the expected rate is the larger of it and the configured one
(``benchmark_line_rate_gbps``, the profile's by default), so a port table that under-reports cannot lower a
threshold. Pure functions; the benchmark role's filter and ``rdmaforge report`` share them.
"""

from __future__ import annotations

import fnmatch
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rdmaforge import fabrics
from rdmaforge.parsers.rdma_devinfo import ACTIVE, active_port_rates, known_rate, parse_expected_port


def node_line_rate(devices: Sequence[Mapping[str, Any]], fabric: str, gpus: int,
                   expected_ports: Sequence[str] = ()) -> dict[str, Any]:  # fmt: skip
    """``{"gbps": float | None, "detail": str}`` for one node from its ``rdma_devices`` fact.

    ``gbps`` is None, with the reason in ``detail``, when the fabric's rates are not link rates, the node has no
    active port of the fabric, or no active port's rate is known (a rate is never guessed).

    A rail that is down still counts, at the node's fastest active rate: a rail switch that fails takes the same
    rail from every node, and counting only the ports still up lowered every node's bar alike, so the cluster
    passed at a fraction of its fabric (review round 27c). The rails are ``expected_ports``
    (rdma_core_expected_ports) where the inventory names them; else, on a node with GPUs, the fabric's ports up to
    one per GPU, a port whose physical state is Disabled (switched off on purpose) left out.
    """
    profile = fabrics.BY_NAME.get(fabric)
    if profile is None or not profile.line_rate_from_ports or not profile.device_pattern:
        return {"gbps": None, "detail": f"fabric {fabric}: port rates are not used"}
    pattern = profile.device_pattern
    named = _named_rails(devices, pattern, expected_ports)
    rail_names = None if named is None else {f"{name}:{port.get('port')}" for name, port in named[0]}
    active = [(name, rate) for name, rate in active_port_rates(list(devices), pattern)
              if rail_names is None or name in rail_names]  # fmt: skip
    if not active:
        return {"gbps": None, "detail": f"no active {pattern} port"}
    unknown = [name for name, rate in active if not _is_rate(rate)]
    rates = sorted((rate for _, rate in active if rate is not None and _is_rate(rate)), reverse=True)
    if not rates:
        return {"gbps": None, "detail": f"rate unknown for {', '.join(unknown)}"}
    # A port of unknown rate is left out: the sum stays a lower bound of what the node carries, never a guess.
    used = rates[:gpus] if gpus > 0 else rates
    rails = f"{len(used)} of {len(rates)} active {pattern} ports (one per GPU)" if len(used) < len(rates) else (
        f"{len(rates)} active {pattern} port(s)")  # fmt: skip
    not_counted = f"; rate unknown for {', '.join(unknown)}, not counted" if unknown else ""
    per_port = ", ".join(f"{rate:g}" for rate in used)
    room = gpus - len(used) - len(unknown) if gpus > 0 else (len(expected_ports) if expected_ports else 0)
    down = _rails_down(devices, pattern, named, room)
    lost = ""
    if down:
        lost = (f"; rails not active, counted at {rates[0]:g} Gb/s each: {', '.join(down)} "
                "(rdma_core_expected_ports names the rails where some ports are unused on purpose)")
    total = sum(used) + rates[0] * len(down)
    return {"gbps": round(total, 3), "detail": f"{rails}: {per_port} Gb/s{not_counted}{lost}"}


def _named_rails(devices: Sequence[Mapping[str, Any]], pattern: str,
                 expected_ports: Sequence[str]) -> tuple[list[tuple[str, Mapping[str, Any]]], list[str]] | None:
    """The ports of the pattern's devices that rdma_core_expected_ports (``DEVICE:PORT`` or ``DEVICE``) names, as
    ``(device, port)`` once each, and the specs that name none ("missing"); None without expected ports (every port
    of the pattern may be a rail)."""
    if not expected_ports:
        return None
    ports = _pattern_ports(devices, pattern)
    named: list[tuple[str, Mapping[str, Any]]] = []
    missing = []
    for spec in expected_ports:
        parsed = parse_expected_port(str(spec))
        if parsed is None:
            continue
        name, number = parsed
        mine = [(device, port) for device, port in ports if device == name and number in (None, port.get("port"))]
        named += [item for item in mine if item not in named]
        if not mine and str(spec) not in missing:
            missing.append(str(spec))
    return named, missing


def _pattern_ports(devices: Sequence[Mapping[str, Any]], pattern: str) -> list[tuple[str, Mapping[str, Any]]]:
    """``(device, port)`` for every port of the devices whose name matches ``pattern``."""
    return [(str(device.get("name")), port) for device in devices if isinstance(device, Mapping)
            and fnmatch.fnmatch(str(device.get("name")), pattern)
            for port in device.get("ports") or () if isinstance(port, Mapping)]  # fmt: skip


def _rails_down(devices: Sequence[Mapping[str, Any]], pattern: str,
                named: tuple[list[tuple[str, Mapping[str, Any]]], list[str]] | None, room: int) -> list[str]:
    """The rails of a node that are not active, as ``DEVICE:PORT STATE``, at most ``room``: the named rails
    (_named_rails) not active or missing; without them, the ports of the pattern not active whose physical state is
    not Disabled."""
    if named is not None:
        ports, missing = named
        down = [f"{name}:{port.get('port')} {port.get('state') or 'state unknown'}" for name, port in ports
                if port.get("state") != ACTIVE]  # fmt: skip
        return [*down, *(f"{spec} missing" for spec in missing)][:max(room, 0)]
    idle = [f"{name}:{port.get('port')} {port.get('state') or 'state unknown'}"
            for name, port in _pattern_ports(devices, pattern) if port.get("state") != ACTIVE
            and not str(port.get("physical_state") or "").upper().startswith("DISABLED")]  # fmt: skip
    return idle[:max(room, 0)]


def _is_rate(value: object) -> bool:
    # A known rate (rdma_devinfo.known_rate) above 0: a rate of 0 must not pull the lower bound, or the threshold, to 0.
    rate = known_rate(value)
    return rate is not None and rate > 0


def expected_line_rate(fabric: str, configured_gbps: float, ports: Mapping[str, Any] | None,
                       nodes: Sequence[str] = ()) -> dict[str, Any]:  # fmt: skip
    """The rate a run is judged against: ``{"gbps", "source", "detail"}``.

    ``ports`` is run.json's ``port_line_rates`` (host -> ``node_line_rate``), absent or empty when the run did not
    read them. ``source`` is ``ports`` when the nodes' rails carry more than ``configured_gbps``, else ``configured``
    (the inventory's ``benchmark_line_rate_gbps``, by default the fabric profile's). With ``nodes`` (run.json's),
    only those nodes' ports count: a stale entry of another host is no node of this run.

    The nodes' rate is the median node's: what the fabric was built to carry. The slowest node's set the bar until
    review round 23a, so a node with 7 of its 8 rails down (or trained down) lowered the threshold by the same
    factor and the degraded cluster passed. The fastest node's would let one node's extra port (a storage HCA of
    the fabric's pattern) raise every node's bar (review round 24). Of an even count of nodes it is the faster of
    the two middle ones (``median_high``): the mean of two nodes let one whose rails trained down lower the bar
    and pass (review round 41c); a false fail of two nodes that differ is named and has a switch, a false pass
    has neither. A node off the median, and a node of the run without a rate, are named in the detail; a cluster
    whose nodes differ on purpose sets benchmark_line_rate_from_ports: false.
    """
    detail = f"benchmark_line_rate_gbps {configured_gbps:g} Gb/s per node"
    if not ports:
        return {"gbps": configured_gbps, "source": "configured", "detail": detail}
    if nodes:
        ports = {node: ports.get(node) for node in nodes}
    known = {host: entry for host, entry in ports.items() if isinstance(entry, Mapping) and _is_rate(entry.get("gbps"))}
    missing = sorted(set(ports) - set(known))
    unread = ""
    if missing:
        why = (ports[missing[0]] or {}).get("detail") if isinstance(ports[missing[0]], Mapping) else None
        unread = f"; no port rate from {', '.join(missing)} ({why or 'not read'})"
    if not known:
        return {"gbps": configured_gbps, "source": "configured", "detail": f"{detail}; port rates not used{unread}"}
    rates = {host: float(entry["gbps"]) for host, entry in known.items()}
    # median_high: of two middle nodes the faster one, a node's own rate. The plain median of two nodes is their
    # mean, so a node whose rails trained down lowered the bar and the run passed (review round 41c).
    measured = statistics.median_high(rates.values())
    slowest = min(rates, key=lambda host: (rates[host], host))
    fastest = max(rates, key=lambda host: (rates[host], host))
    same = rates[slowest] == rates[fastest]
    median_detail = f"every node: {known[slowest].get('detail')}" if same else "the median node's rails"
    off = ""
    if rates[slowest] < measured:
        off += (f"; slowest node {slowest} carries {rates[slowest]:g} Gb/s ({known[slowest].get('detail')}), below "
                "the median it is judged against")  # fmt: skip
    if rates[fastest] > measured:
        off += f"; fastest node {fastest} carries {rates[fastest]:g} Gb/s ({known[fastest].get('detail')})"
    if off:
        off += " (benchmark_line_rate_from_ports: false for nodes that differ on purpose)"
    if measured > configured_gbps:
        return {"gbps": measured, "source": "ports",
                "detail": f"{measured:g} Gb/s per node from the ports ({median_detail}), above "
                          f"benchmark_line_rate_gbps {configured_gbps:g}{off}{unread}"}  # fmt: skip
    detail += f"; the ports carry {measured:g} Gb/s per node ({median_detail}), no more{off}{unread}"
    return {"gbps": configured_gbps, "source": "configured", "detail": detail}


#: How many times the expected line rate a measurement across the fabric may reach before it is no measurement of
#: it. A collective across two nodes or more cannot move a node's data faster than its ports carry: a ring's busbw
#: stays below the node's line rate, and even in-network reduction (SHARP) or a hierarchical algorithm stays below
#: twice it (busbw = algbw x 2(n-1)/n, with each node sending and receiving at least its buffer). One direction of a
#: pair on one rail (``rdmaforge pairwise``: iperf3's received rate, sendrecv_perf's busbw of 2 ranks) stays below
#: the rail's line rate itself, so twice it is generous there too.
CEILING_FACTOR = 2.0

#: The fastest single port a NIC has, in Gbit/s: 1.6 Tbit/s Ethernet (IEEE 802.3dj; InfiniBand XDR ports carry 800).
#: What one rail is judged against when no line rate is configured (``pairwise_line_rate_gbps`` null): a rate
#: above twice it is no link's, whatever the link.
FASTEST_PORT_GBPS = 1600.0


def rate_ceiling(expected: float) -> float:
    """The highest rate a measurement across the fabric can show where the expected line rate is ``expected``, in
    the same unit (a benchmark's per-node rate in GB/s against its bus bandwidth, a rail's Gbit/s against a pair's
    rate); above it the number is implausible (a corrupt log, a broken timer, or a line rate set far below what the
    nodes carry), never a pass."""
    return CEILING_FACTOR * expected
