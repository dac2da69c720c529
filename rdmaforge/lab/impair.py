"""Lab-only fault injection on a node's extra NIC, inside the node's own network namespace: a token-bucket rate
limit (tc tbf), a rate limit towards one peer only (tc htb with a u32 filter on the peer's address, applied at
both ends so the pair's link is slow both ways), the link down, or everything cleared.

netem is not available on the lab's kernel; tbf, htb and u32 are. Used by `rdmaforge lab impair` and the tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rdmaforge.lab.shell import LabError, quiet, run
from rdmaforge.lab.spec import NodeSpec, node_spec

_RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit)$", re.IGNORECASE)
_UNIT_BITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
#: The rate of a NIC's other traffic when only one peer is limited: high enough never to limit a veth.
UNLIMITED = "100gbit"


@dataclass(frozen=True)
class Target:
    node: NodeSpec
    nic: str

    @property
    def netns(self) -> str:
        return self.node.netns


def rate_bits(rate: str) -> int:
    """``20mbit`` -> 20000000; ValueError naming what is allowed."""
    match = _RATE.match(rate.strip())
    if not match or float(match.group(1)) <= 0:
        raise ValueError(
            f"--rate {rate!r}: give a positive number with a unit bit, kbit, mbit, gbit or tbit (e.g. 20mbit)"
        )
    return int(float(match.group(1)) * _UNIT_BITS[match.group(2).lower()])


def burst_bytes(rate: str) -> int:
    """10 ms of traffic at ``rate``, at least 32 KiB (tbf needs more than rate/HZ per tick)."""
    return max(32 * 1024, rate_bits(rate) // 8 // 100)


def resolve(nodes: int, extra_nics: int, name: str, nic: str) -> Target:
    """The lab node and NIC; LabError naming what exists when either does not."""
    names = [f"node{i}" for i in range(1, nodes + 1)]
    if name not in names:
        raise LabError(f"no lab node named {name!r}; nodes: {', '.join(names) or 'none (run lab up)'}")
    spec = node_spec(names.index(name) + 1, extra_nics)
    extra = [n.name for n in spec.nics[1:]]
    if nic == spec.nics[0].name:
        raise LabError(f"{nic} carries SSH and the mirror; impair an extra NIC ({', '.join(extra) or 'none'})")
    if nic not in extra:
        raise LabError(f"{name} has no extra NIC {nic!r}; extra NICs: {', '.join(extra) or 'none (lab up --nics N)'}")
    return Target(spec, nic)


def address_on(node: NodeSpec, nic: str) -> str:
    for item in node.nics:
        if item.name == nic:
            return item.address
    raise LabError(f"{node.name} has no NIC {nic}")


def rate_commands(nic: str, rate: str) -> list[list[str]]:
    """Every packet leaving ``nic`` through one token bucket."""
    return [["tc", "qdisc", "replace", "dev", nic, "root", "tbf", "rate", rate, "burst", str(burst_bytes(rate)),
             "latency", "100ms"]]  # fmt: skip


def peer_rate_commands(nic: str, rate: str, peer_address: str, others: str = UNLIMITED) -> list[list[str]]:
    """Packets to ``peer_address`` limited to ``rate``; everything else to ``others`` (htb default class)."""
    burst = str(burst_bytes(rate))
    return [
        ["tc", "qdisc", "add", "dev", nic, "root", "handle", "1:", "htb", "default", "20"],
        ["tc", "class", "add", "dev", nic, "parent", "1:", "classid", "1:10", "htb", "rate", rate, "ceil", rate,
         "burst", burst],
        ["tc", "class", "add", "dev", nic, "parent", "1:", "classid", "1:20", "htb", "rate", others, "ceil", others,
         "burst", str(burst_bytes(others))],
        ["tc", "filter", "add", "dev", nic, "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip",
         "dst", f"{peer_address}/32", "flowid", "1:10"],
    ]  # fmt: skip


def _in_netns(netns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv]


def clear(target: Target) -> None:
    """No qdisc of ours, link up (safe to repeat)."""
    quiet(_in_netns(target.netns, ["tc", "qdisc", "del", "dev", target.nic, "root"]))
    run(_in_netns(target.netns, ["ip", "link", "set", target.nic, "up"]))


def limit(target: Target, rate: str) -> None:
    rate_bits(rate)
    clear(target)
    for argv in rate_commands(target.nic, rate):
        run(_in_netns(target.netns, argv))


def limit_link(target: Target, peer: Target, rate: str, others: str = UNLIMITED) -> None:
    """Both ends' traffic to each other limited on this rail; their traffic to other nodes limited to ``others``."""
    rate_bits(rate)
    rate_bits(others)
    if peer.node.name == target.node.name:
        raise LabError(f"--to {peer.node.name}: a link needs two different nodes")
    for near, far in ((target, peer), (peer, target)):
        clear(near)
        for argv in peer_rate_commands(near.nic, rate, address_on(far.node, near.nic), others):
            run(_in_netns(near.netns, argv))


def down(target: Target) -> None:
    run(_in_netns(target.netns, ["ip", "link", "set", target.nic, "down"]))


def describe(target: Target) -> str:
    """``tc qdisc show`` and the link state, for the command's output."""
    qdisc = run(_in_netns(target.netns, ["tc", "qdisc", "show", "dev", target.nic]), check=False).stdout.strip()
    link = run(_in_netns(target.netns, ["ip", "-br", "link", "show", "dev", target.nic]), check=False).stdout.strip()
    return f"{target.node.name} {target.nic}: {link.split()[1] if link else 'unknown'}; {qdisc or 'no qdisc'}"
