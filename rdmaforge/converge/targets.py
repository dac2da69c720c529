"""Which hosts the plays after preflight target: the fast path leaves out what it found in sync.

site.yml's gate (the converge_state role) puts the nodes in sync into ``NODE_IN_SYNC``, and every node into
``CLUSTER_IN_SYNC`` as well when the whole cluster is in sync. A play that touches only a node itself targets the
cluster less the first group; a cluster-wide play (it reads the other nodes) the cluster less the second. A node
left out of a play costs that play nothing; a node in the play only to end there paid a task per play (issue 19).
Run alone (no gate), neither group exists and every play targets the whole cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: The nodes in sync with their last complete converge: left out of the plays that touch only a node itself.
NODE_IN_SYNC = "converge_state_in_sync"
#: Every node, when the whole cluster is in sync: left out of the cluster-wide plays as well.
CLUSTER_IN_SYNC = "converge_state_cluster_in_sync"
#: A play's scope, and the group of the nodes it leaves out.
SCOPES: Mapping[str, str] = {"node": NODE_IN_SYNC, "cluster": CLUSTER_IN_SYNC}


def skip_groups(cluster_plays_skip_in_sync: bool) -> list[str]:
    """The groups a node in sync joins (the gate adds only the nodes in sync to any group): also the second one
    when the cluster-wide plays need not run on it (the whole cluster is in sync, or what differs is the drifted
    nodes' own: ``drift_is_local``)."""
    return [NODE_IN_SYNC, CLUSTER_IN_SYNC] if cluster_plays_skip_in_sync else [NODE_IN_SYNC]


def drift_is_local(checks: Mapping[str, Mapping[str, Any] | None]) -> bool:
    """True when some node is out of sync and every such node differs from its record only in resources it manages
    or reads itself (the converge_state module's ``drift_local``: files, listings, packages, services, venvs, the
    output of read-only commands run on the node).

    The other nodes' cluster-wide files are written from the inventory and from each node's fingerprint (addresses,
    host keys), never from those resources: the nodes in sync can then stay out of the cluster-wide plays, which
    run on the drifted nodes alone. A node not checked, with no record, recorded for another desired state or with
    another fingerprint makes this False, and the cluster-wide plays run on every node as before.
    """
    out_of_sync = [check or {} for check in checks.values() if not (check and check.get("in_sync") is True)]
    return bool(out_of_sync) and all(
        not check.get("skipped") and check.get("drift_local") is True for check in out_of_sync
    )


def play_hosts(groups: Mapping[str, Sequence[str]], scope: str, group: str = "cluster") -> list[str]:
    """The hosts of ``group`` a play of ``scope`` ('node' or 'cluster') targets, in inventory order. No such group
    gives no hosts, as the plain pattern would (``--syntax-check`` has no inventory; preflight stops an inventory
    without a cluster group before any play)."""
    if scope not in SCOPES:
        raise ValueError(f"play scope {scope!r} is not one of {', '.join(sorted(SCOPES))}")
    left_out = set(groups.get(SCOPES[scope], ()))
    return [host for host in groups.get(group, ()) if host not in left_out]
