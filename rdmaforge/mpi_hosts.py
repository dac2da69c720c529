"""How MPI names the cluster's nodes: the one rule for the mpi_launch role's hostfile and smoke test and for the
benchmark's mpirun ``--host`` list (``mpi_launch_hostfile_by``: a node's address, or its inventory name)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

BY = ("address", "name")


def names(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]], by: str = "address") -> dict[str, str]:
    """{inventory name: what mpirun is given}: ``ansible_host`` (the inventory name without one) by address, the
    inventory name by name."""
    if by not in BY:
        raise ValueError(f"mpi_launch_hostfile_by must be one of {', '.join(BY)}, got {by!r}")
    return {host: str(hostvars[host].get("ansible_host", host)) if by == "address" else host for host in hosts}


def host_list(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]], slots: Sequence[int],
              by: str = "address") -> str:  # fmt: skip
    """mpirun's ``--host`` value: ``NAME:SLOTS`` per host, in the order given, ``slots`` in the same order."""
    if len(slots) != len(hosts):
        raise ValueError(f"{len(hosts)} hosts but {len(slots)} slot counts")
    named = names(hosts, hostvars, by)
    return ",".join(f"{named[host]}:{int(count)}" for host, count in zip(hosts, slots, strict=True))
