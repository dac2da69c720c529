"""What the sweep measures: the rails (NICs of the same name on every node, as NCCL pairs them by index) with
each node's address on them, the rounds, and what each node does in a round (serve or measure).

Everything is checked before anything is measured: a node without a rail, or a rail without an IPv4
address, stops the run with a message that names the node and the NIC.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rdmaforge.pairwise.schedule import Round, ScheduleError, schedule


class PlanError(ValueError):
    """The inventory or the options cannot be measured; the message names the node, NIC or option."""


def parse_nic_selection(selection: str | Sequence[str]) -> list[str] | None:
    """``all`` (None: every NIC but the default-route one) or a list of NIC names (``eth1,eth2``)."""
    if isinstance(selection, str):
        items = [part.strip() for part in selection.split(",")]
    else:
        items = [str(part).strip() for part in selection]
    items = [item for item in items if item]
    if items == ["all"]:
        return None
    if not items or "all" in items:
        raise PlanError(f"--nics must be 'all' or a comma-separated list of NIC names, got {selection!r}")
    bad = [item for item in items if not item.replace("-", "").replace("_", "").replace(".", "").isalnum()]
    if bad:
        raise PlanError(f"--nics: {', '.join(bad)} is not a NIC name (letters, digits, '-', '_', '.')")
    return list(dict.fromkeys(items))


def node_addresses(node: Mapping[str, Any]) -> dict[str, str]:
    """NIC name -> first IPv4 address (without prefix) from the ``rdmaforge_node`` fact's ``nics``."""
    found: dict[str, str] = {}
    for nic in node.get("nics") or []:
        addresses = [str(a["address"]) for a in nic.get("ipv4") or [] if isinstance(a, Mapping) and a.get("address")]
        if addresses:
            found[str(nic["name"])] = addresses[0]
    return found


def rails_of(host: str, node: Mapping[str, Any], wanted: list[str] | None) -> dict[str, str]:
    """The rails of one node: the wanted NICs, or every NIC with an IPv4 address but the default-route one."""
    addresses = node_addresses(node)
    if wanted is None:
        default = str(node.get("default_route_interface") or "")
        return {name: addr for name, addr in sorted(addresses.items()) if name != default}
    missing = [name for name in wanted if name not in addresses]
    if missing:
        have = ", ".join(sorted(addresses)) or "none"
        raise PlanError(f"{host}: no IPv4 address on {', '.join(missing)} (NICs with an address: {have})")
    return {name: addresses[name] for name in wanted}


def shared_addresses(per_node: Mapping[str, Mapping[str, str]], rails: Sequence[str]) -> list[str]:
    """Each address that more than one node has on a rail: "<address> on <rail> of node1, node2"."""
    holders: dict[tuple[str, str], list[str]] = {}
    for host, addresses in per_node.items():
        for rail in rails:
            if rail in addresses:
                holders.setdefault((rail, addresses[rail]), []).append(host)
    shared = [(rail, address, hosts) for (rail, address), hosts in holders.items() if len(hosts) > 1]
    return [f"{address} on {rail} of {', '.join(hosts)}" for rail, address, hosts in shared]


@dataclass
class Plan:
    nodes: list[str]
    rails: list[str]
    addresses: dict[str, dict[str, str]]  # node -> rail -> address
    rounds: list[Round]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "rails": self.rails,
            "addresses": self.addresses,
            "rounds": [[list(pair) for pair in rnd] for rnd in self.rounds],
            "notes": self.notes,
        }


def make_plan(
    facts: Mapping[str, Mapping[str, Any]], selection: str | Sequence[str], rounds: int = 0, seed: int = 0
) -> Plan:
    """``facts``: node -> its ``rdmaforge_node`` fact. Every node must have every rail."""
    wanted = parse_nic_selection(selection)
    nodes = sorted(facts)
    per_node = {host: rails_of(host, facts[host], wanted) for host in nodes}
    if wanted is None:
        every = sorted({rail for rails in per_node.values() for rail in rails})
        lacking = {host: [r for r in every if r not in rails] for host, rails in per_node.items()}
        lacking = {host: missing for host, missing in lacking.items() if missing}
        if lacking:
            detail = "; ".join(f"{host} lacks {', '.join(missing)}" for host, missing in sorted(lacking.items()))
            raise PlanError(f"--nics all: the nodes do not have the same NICs ({detail}); name the rails with --nics")
        wanted = every
    if not wanted:
        raise PlanError("no rail to measure: the nodes have no NIC with an IPv4 address besides the default route's")
    shared = shared_addresses(per_node, wanted)
    if shared:
        raise PlanError(f"two nodes have one rail address, so a pair of them would measure one node or fail to "
                        f"connect, and be blamed on the link: {'; '.join(shared[:5])}"
                        f"{f' (and {len(shared) - 5} more)' if len(shared) > 5 else ''}; give each node its own "
                        "address on every rail (a cloned static IP)")  # fmt: skip
    try:
        rounds_list = schedule(nodes, rounds, seed)
    except ScheduleError as exc:
        raise PlanError(str(exc)) from exc
    too_big = raw_size_problem(nodes, list(wanted), rounds_list)
    if too_big:
        raise PlanError(too_big)
    return Plan(nodes=nodes, rails=list(wanted), addresses=per_node, rounds=rounds_list)


#: The room a measurement's detail takes in raw.json, at most: its transport and a short reason.
_DETAIL_ROOM = 100


def raw_size_problem(nodes: Sequence[str], rails: Sequence[str], rounds: Sequence[Round]) -> str | None:
    """Why the sweep's raw.json would be larger than the report reads (stored.PAIRWISE_RAW_MAX_BYTES), said before
    anything is measured: 1000 nodes on 8 rails ran for hours, then the report refused its file (review round 27c).
    None when it fits."""
    from rdmaforge.stored import PAIRWISE_RAW_MAX_BYTES  # noqa: PLC0415 - stored is the reader's module

    if not nodes or not rails:
        return None
    longest, rail = max(nodes, key=len), max(rails, key=len)
    one = {"gbps": 1234567.891, "status": "failed", "detail": "x" * _DETAIL_ROOM, "a": longest, "b": longest,
           "nic": rail, "round": len(rounds)}  # fmt: skip
    directions = 2 * len(rails) * sum(len(pairs) for pairs in rounds)
    size = directions * (len(json.dumps(one)) + 2)
    if size <= PAIRWISE_RAW_MAX_BYTES:
        return None
    return (f"{len(nodes)} nodes on {len(rails)} rail(s) in {len(rounds)} rounds is {directions} measurements, about "
            f"{size >> 20} MiB of results, more than the report reads ({PAIRWISE_RAW_MAX_BYTES >> 20} MiB): measure "
            "fewer rounds (--rounds K, pairwise_rounds: K random matchings, each node in one pair a round) or fewer "
            "rails (--nics, pairwise_nics) per sweep")


def ports(base: int, rail_index: int) -> tuple[int, int]:
    """The two iperf3 server ports of a rail: one per direction (each server is one-off)."""
    return base + 2 * rail_index, base + 2 * rail_index + 1


def jobs(plan: Mapping[str, Any], round_index: int, host: str, port_base: int) -> dict[str, list[dict[str, Any]]]:
    """What ``host`` does in a round: ``serve`` (it is the pair's second node) or ``measure`` (the first).

    ``plan`` is Plan.to_dict() (it travels through Ansible as data). A node with a bye gets two empty lists.
    """
    serve: list[dict[str, Any]] = []
    measure: list[dict[str, Any]] = []
    addresses = plan["addresses"]
    # The host's one pair of the round first, then its rails: the role asks once per host and round, and walking
    # every pair's rails for each (review round 27c) cost O(nodes^3 x rails) over a sweep, 282 s of the controller's
    # CPU for 1000 nodes on one rail.
    pair = next((pair for pair in plan["rounds"][round_index] if host in pair), None)
    if pair is None:
        return {"serve": serve, "measure": measure}
    a, b = pair
    for index, rail in enumerate(plan["rails"]):
        forward, reverse = ports(port_base, index)
        if host == b:
            serve.append({"nic": rail, "bind": addresses[b][rail], "ports": [forward, reverse]})
        else:
            measure.append({"nic": rail, "bind": addresses[a][rail], "peer": b, "peer_address": addresses[b][rail],
                            "port_forward": forward, "port_reverse": reverse})  # fmt: skip
    return {"serve": serve, "measure": measure}
