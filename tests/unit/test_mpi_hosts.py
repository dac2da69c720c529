"""How MPI names the nodes: the hostfile's rule (mpi_launch_hostfile_by) and the benchmark's --host list."""

from __future__ import annotations

import pytest

from rdmaforge import mpi_hosts

# As the lab inventory gives them: an inventory name and its address.
HOSTVARS = {"node1": {"ansible_host": "198.18.0.11"}, "node2": {"ansible_host": "198.18.0.12"}, "gpu-a": {}}


def test_by_address_is_the_ansible_host_and_by_name_the_inventory_name() -> None:
    assert mpi_hosts.names(["node1", "gpu-a"], HOSTVARS) == {"node1": "198.18.0.11", "gpu-a": "gpu-a"}
    assert mpi_hosts.names(["node1", "gpu-a"], HOSTVARS, "name") == {"node1": "node1", "gpu-a": "gpu-a"}


def test_the_host_list_names_exactly_the_hosts_given_with_their_slots() -> None:
    # seed 000's hostfile gives each node its 8 GPUs as slots
    assert mpi_hosts.host_list(["node2", "node1"], HOSTVARS, [8, 8]) == "198.18.0.12:8,198.18.0.11:8"
    assert mpi_hosts.host_list(["node1"], HOSTVARS, [2], "name") == "node1:2"


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match="mpi_launch_hostfile_by must be one of address, name, got 'ip'"):
        mpi_hosts.names(["node1"], HOSTVARS, "ip")
    with pytest.raises(ValueError, match="2 hosts but 1 slot counts"):
        mpi_hosts.host_list(["node1", "node2"], HOSTVARS, [8])
