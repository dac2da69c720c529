"""How MPI names the cluster's nodes: the one rule for the mpi_launch role's hostfile and smoke test and for the
benchmark's mpirun ``--host`` list (``mpi_launch_hostfile_by``: a node's address, or its inventory name)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rdmaforge.hostnames import short_name

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


def missing_answers(lines: Sequence[str], hostnames: Sequence[str]) -> list[str]:
    """The hostnames (short, as Ansible's ``ansible_facts.hostname``) of the nodes that printed nothing in
    ``mpirun --tag-output hostname``'s output ``lines`` (``[1,0]<stdout>:node1``). A node prints its kernel hostname,
    which may be a fully qualified name: each answer counts by its short name. Each answer is counted once, so two
    nodes of one hostname need two answers (a set would have let one stand for both)."""
    answers: dict[str, int] = {}
    for line in lines:
        text = line.split(">:", 1)[1] if line.startswith("[") and ">:" in line else line
        short = short_name(text.strip())
        if short:
            answers[short] = answers.get(short, 0) + 1
    missing = []
    for name in hostnames:
        short = short_name(str(name))
        if answers.get(short, 0) > 0:
            answers[short] -= 1
        else:
            missing.append(str(name))
    return missing
