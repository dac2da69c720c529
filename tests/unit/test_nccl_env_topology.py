"""nccl_env_ib_hca_from_topology (seed 001: never give NCCL the storage HCAs), for real: role nccl_env on this
machine (ansible_connection=local) with the rail map the gpu_topology parser reads from a real H200 capture
(tests/data/topology/h200x8_9nic_bond_weiziyang.txt, tests/data/topology/SOURCES.md: eight rail NICs, one per GPU,
and the front-end bond mlx5_bond_0, which no GPU is near), and the rendered workloads from the same map."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import local_inventory, run_playbook

from rdmaforge.parsers.gpu_topology import parse_topo_matrix, rail_map, read_sysfs_topology
from rdmaforge.parsers.nccl_env import parse_conf as read_conf
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.workloads.nodes import build_cluster
from tests.unit.redefined_defaults import redefine_default
from tests.unit.test_workloads import PROFILES, docker_argv, host

H200 = PROJECT_ROOT / "tests" / "data" / "topology" / "h200x8_9nic_bond_weiziyang.txt"
#: The capture's legend: NIC0 is mlx5_0, NIC1..NIC7 are mlx5_3..mlx5_9, one PIX-near each GPU, in GPU order.
H200_RAILS = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}


def h200_rails() -> dict[str, Any]:
    return dict(rail_map(parse_topo_matrix(H200.read_text())))


def nccl_env_play(tmp_path: Path, **variables: Any) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Role nccl_env on this machine for an infiniband node, writing under ``tmp_path``."""
    inventory = local_inventory(tmp_path / "hosts.yml")
    conf = tmp_path / "nccl.conf"
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [{"name": "NCCL settings", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.nccl_env"}}],
        "vars": {"rdmaforge_fabric": "infiniband", "nccl_env_conf_path": str(conf),
                 "nccl_env_profile_script": str(tmp_path / "rdmaforge-nccl.sh"), **variables},
    }]))  # fmt: skip
    return run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300), conf


def test_the_rail_map_leaves_the_front_end_bond_out_of_nccl_ib_hca(tmp_path: Path) -> None:
    run, conf = nccl_env_play(tmp_path, nccl_env_ib_hca_from_topology=True, rdmaforge_topology=h200_rails())
    assert run.returncode == 0, run.stdout[-3000:]
    settings = read_conf(conf.read_text())
    assert settings["NCCL_IB_HCA"] == "=" + ",".join(H200_RAILS)
    assert "mlx5_bond_0" not in settings["NCCL_IB_HCA"]
    # The rest of seed 001's profile is untouched.
    assert settings["NCCL_DEBUG"] == "INFO" and settings["NCCL_SOCKET_IFNAME"] == "eth"
    # Off (the default), the profile's prefix, which would match the bond too.
    (tmp_path / "off").mkdir()
    off, conf_off = nccl_env_play(tmp_path / "off", rdmaforge_topology=h200_rails())
    assert off.returncode == 0, off.stdout[-3000:]
    assert read_conf(conf_off.read_text())["NCCL_IB_HCA"] == "mlx5"


def test_an_override_still_wins(tmp_path: Path) -> None:
    run, conf = nccl_env_play(
        tmp_path, nccl_env_ib_hca_from_topology=True, rdmaforge_topology={},
        nccl_env_overrides={"NCCL_IB_HCA": "=mlx5_0:1"},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:]
    assert read_conf(conf.read_text())["NCCL_IB_HCA"] == "=mlx5_0:1"


def test_a_node_without_a_rail_map_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    # This machine's own rail map: no GPU here, so none (the parser's reason, read from this machine's sysfs).
    here = dict(rail_map(read_sysfs_topology()))
    assert here["nccl_ib_hca"] == ""
    run, conf = nccl_env_play(tmp_path, nccl_env_ib_hca_from_topology=True, rdmaforge_topology=here)
    assert run.returncode != 0
    assert (
        f"localhost: nccl_env_ib_hca_from_topology is true, but this node has no GPU-to-NIC rail map: {here['reason']}"
    ) in run.stdout, run.stdout[-3000:]
    assert "Allowed: nccl_env_ib_hca_from_topology false on this node" in run.stdout
    assert not conf.exists()


def test_rendered_workloads_take_the_same_rail_map_or_say_why_not() -> None:
    facts = {"nccl_env_ib_hca_from_topology": True, "rdmaforge_topology": h200_rails()}
    argv = docker_argv(host("n1", "infiniband", variables=facts))
    env = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    assert "NCCL_IB_HCA==" + ",".join(H200_RAILS) in env
    # `rdmaforge render` reads no facts: the profile's value, with a warning naming the node and why.
    cluster = build_cluster([host("n1", "infiniband", variables={"nccl_env_ib_hca_from_topology": True})], PROFILES)
    assert not cluster.problems
    assert [w for w in cluster.warnings if w.startswith("n1: nccl_env_ib_hca_from_topology is true, but ")] == [
        "n1: nccl_env_ib_hca_from_topology is true, but this node has no GPU-to-NIC rail map: no rail map is known "
        "(rdmaforge_topology unset: run preflight first); the rendered NCCL_IB_HCA is the profile's"
    ]
    assert cluster.nodes[0].env["NCCL_IB_HCA"] == "mlx5"


def test_rendered_workloads_follow_the_roles_default_for_the_rail_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a node that does not set nccl_env_ib_hca_from_topology gets role nccl_env's default, as the role would
    variables = {"rdmaforge_topology": h200_rails()}
    assert "NCCL_IB_HCA==" + ",".join(H200_RAILS) not in docker_argv(host("n1", "infiniband", variables=variables))
    redefine_default(tmp_path, monkeypatch, "nccl_env", "nccl_env_ib_hca_from_topology", True)
    assert "NCCL_IB_HCA==" + ",".join(H200_RAILS) in docker_argv(host("n1", "infiniband", variables=variables))
