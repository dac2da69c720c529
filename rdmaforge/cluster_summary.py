"""summary.json across runs.

A run that reaches only some members of the cluster (``--limit``, or nodes that failed or became unreachable
earlier in the run) must not drop the others from the cluster's summary, nor present what an earlier run saw as
current: their entries are carried over from the summary being replaced, each marked ``not_in_this_run`` with the
reason, and keep the ``as_of`` time of the run that last saw the node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rdmaforge import stored
from rdmaforge.errors import UserError
from rdmaforge.parsers.rdma_devinfo import known_rate

OUTSIDE_LIMIT = "not in this run (outside --limit)"
LOST = "not in this run (failed or unreachable earlier in it)"
NO_RECORDED_SUMMARY = "in sync with its last complete converge, which kept no summary of it"


def port_lines(devices: object) -> list[str]:
    """One line per RDMA port of the ``rdma_devices`` fact for the summary: ``mlx5_0:1 ACTIVE 200 Gb/s`` (the rate
    only where one was read), ``mlx5_1:1 DOWN (DISABLED)``."""
    lines = []
    for device in devices if isinstance(devices, list) else []:
        if not isinstance(device, Mapping):
            continue
        for port in device.get("ports") or []:
            if not isinstance(port, Mapping):
                continue
            state = str(port.get("state") or "unknown state").removeprefix("PORT_")
            rate = known_rate(port.get("rate_gbps"))
            if state == "ACTIVE" and rate is not None:
                state += f" {rate:g} Gb/s"
            elif state != "ACTIVE" and port.get("physical_state"):
                state += f" ({port['physical_state']})"
            lines.append(f"{device.get('name')}:{port.get('port')} {state}")
    return lines


def previous_nodes(path: Path) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The entries of the summary at ``path`` by host, and why it could not be used (None when it could, or when
    there is none yet)."""
    if not path.exists():
        return {}, None
    try:
        document = stored.load(path, stored.SUMMARY_JSON, "cluster summary (summary.json)")
    except UserError as exc:
        return {}, str(exc)
    return {node["host"]: node for node in document["nodes"]}, None


def entries(hosts: Iterable[str], hostvars: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """This run's entry of each of ``hosts`` that has one: the entry the summary's per-node tasks set
    (``cluster_summary_node``), or, for a node site.yml's fast path left out of them, the summary kept with the record
    of its last complete converge, which the gate found the node still matches (``converge_state_in_sync``), marked
    ``recorded``: what it says was read by that converge (the match covers port states, not rates). A host with
    neither has no entry, and merge() names it lost."""
    found: list[dict[str, Any]] = []
    for host in hosts:
        facts = hostvars[host]
        if "cluster_summary_node" in facts:
            found.append(dict(facts["cluster_summary_node"]))
        elif facts.get("converge_state_in_sync"):
            recorded = (facts.get("converge_state_check") or {}).get("summary")
            missing = {"host": host, "not_in_this_run": NO_RECORDED_SUMMARY}
            found.append(dict(recorded, host=host, recorded=True) if recorded else missing)
    return found


def _address_now(host: str, hostvars: Mapping[str, Mapping[str, Any]] | None) -> str | None:
    """The address the inventory gives ``host`` now, as the summary records it (assemble.yml: ansible_host, else the
    inventory name); None when ``hostvars`` does not hold the host."""
    if hostvars is None or host not in hostvars:
        return None
    return str(hostvars[host].get("ansible_host") or host)


def merge(
    current: Iterable[Mapping[str, Any]],
    previous_path: str | Path,
    members: Iterable[str],
    play_hosts_all: Iterable[str],
    now: str,
    hostvars: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The new summary: ``current`` (this run's entries, stamped ``as_of`` ``now``) for the nodes this run reached,
    and for every other member its earlier entry (or only its name) with the reason it is not current. An entry of
    ``current`` that already carries ``not_in_this_run`` (the role could not tell what the node has) is treated the
    same way, with its own reason.

    ``members`` is the cluster group in inventory order; ``play_hosts_all`` the hosts this run targeted (after
    ``--limit``): a member among them that has no current entry was lost during the run.

    The summary is the workspace's, not an inventory's: an earlier entry whose address is not the one ``hostvars``
    gives the host now (another inventory's node of the same name, such as a lab's node2, or a node that moved) is
    not carried over, and the reason says so.
    """
    seen = {node["host"]: dict(node) for node in current}
    targeted = set(play_hosts_all)
    earlier, problem = previous_nodes(Path(previous_path))
    nodes: list[dict[str, Any]] = []
    for host in dict.fromkeys([*members, *seen]):
        entry = seen.get(host)
        if entry is not None and entry.get("not_in_this_run") is None:  # "" is a reason (none recorded), as printed
            nodes.append({**entry, "as_of": now})
            continue
        # The run could not say what this node has: its own reason (the role's), or why the run missed it.
        reason = entry["not_in_this_run"] if entry else LOST if host in targeted else OUTSIDE_LIMIT
        last = earlier.get(host)
        address = _address_now(host, hostvars)
        if last is not None and address is not None and last.get("address") not in (None, address):
            reason += (f"; its last summary, of address {last['address']}, is not carried over: the inventory gives "
                       f"{address}")  # fmt: skip
            last = None
        nodes.append({**(last or {"host": host}), "not_in_this_run": reason})
    summary: dict[str, Any] = {"time": now, "nodes": nodes}
    if problem:
        summary["previous_summary_problem"] = f"earlier entries not carried over: {problem}"
    return summary
