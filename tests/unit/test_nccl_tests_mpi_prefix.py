"""nccl-tests against the MPI role mpi set up (review round 41b): with mpi_install_method: prefix (an OpenMPI under
mpi_prefix), nccl-tests was still built against the distribution's MPI (its headers installed on the builder,
MPI_HOME the distribution path), whose libmpi is not the one mpirun starts on the nodes; and its build id named no
MPI, so a change of MPI found the cached build of the old one. Rendered through the role's own Jinja (the build
needs nvcc and a GPU node), and the role's preflight check run on this machine for two fake nodes."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import LOCAL_NODE, local_inventory, run_playbook

from rdmaforge import role_defaults
from tests.unit.role_vars import evaluate, role_vars

DEBIAN = {"os_family": "Debian", "architecture": "x86_64"}
PACKAGES = {"Debian": ["build-essential"], "RedHat": ["gcc"]}  # nccl_build_packages, as nccl_build publishes it


def rendered(facts: dict[str, Any] = DEBIAN, **inventory: Any) -> Any:
    return role_vars("nccl_tests", facts, nccl_build_packages=PACKAGES, nccl_build_id="2.29.7-cuda13.0-sm_90",
                     **inventory)  # fmt: skip


def test_a_prefix_mpi_is_the_one_nccl_tests_links_and_no_distribution_mpi_is_installed() -> None:
    prefix = rendered(mpi_install_method="prefix", mpi_prefix="/opt/openmpi-5.0.5")
    assert evaluate(prefix, "nccl_tests_mpi_dir") == "/opt/openmpi-5.0.5"
    assert evaluate(prefix, "nccl_tests_mpi_include_dir") == ""  # mpi.h is in <prefix>/include
    assert evaluate(prefix, "nccl_tests_build_packages") == PACKAGES  # no libopenmpi-dev: another MPI's libmpi
    rhel = rendered({"os_family": "RedHat", "architecture": "x86_64"}, mpi_install_method="prefix",
                      mpi_prefix="/opt/openmpi-5.0.5")  # fmt: skip
    assert evaluate(rhel, "nccl_tests_mpi_dir") == "/opt/openmpi-5.0.5"
    assert evaluate(rhel, "nccl_tests_mpi_include_dir") == ""
    # the distribution's MPI, as before
    distro = rendered()
    assert evaluate(distro, "nccl_tests_mpi_dir") == "/usr/lib/x86_64-linux-gnu/openmpi"
    assert evaluate(distro, "nccl_tests_build_packages") == {"Debian": ["build-essential", "libopenmpi-dev"],
                                                             "RedHat": ["gcc", "openmpi-devel"]}  # fmt: skip
    # the role's build line and packages are these (roles/nccl_tests/tasks/main.yml)
    tasks = (Path(__file__).resolve().parents[2] / "roles" / "nccl_tests" / "tasks" / "main.yml").read_text()
    assert "nccl_tests_mpi_dir, nccl_build_gencode" in tasks
    assert 'build_once_packages: "{{ nccl_tests_build_packages }}"' in tasks


def test_role_mpis_defaults_are_the_ones_nccl_tests_assumes() -> None:
    """Role mpi's defaults are not visible to nccl_tests (another play): its vars repeat them."""
    mpi = role_defaults.defaults("mpi")
    assert evaluate(rendered(), "nccl_tests_mpi_from_prefix") is (mpi["mpi_install_method"] == "prefix")
    assert evaluate(rendered(mpi_install_method="prefix"), "nccl_tests_mpi_dir") == mpi["mpi_prefix"]


def test_another_mpi_is_another_nccl_tests_build() -> None:
    ids = {evaluate(rendered(**inventory), "nccl_tests_build_id") for inventory in (
        {}, {"mpi_install_method": "prefix"}, {"mpi_install_method": "prefix", "mpi_prefix": "/opt/openmpi-5.0.5"})}
    assert len(ids) == 3, ids
    assert all(build_id.startswith("2.17.8-nccl2.29.7-cuda13.0-sm_90-mpi") for build_id in ids), ids
    # without MPI the MPI is not linked: one build
    assert len({evaluate(rendered(nccl_tests_mpi=False, **inventory), "nccl_tests_build_id") for inventory in (
        {}, {"mpi_install_method": "prefix", "mpi_prefix": "/opt/openmpi-5.0.5"})}) == 1


def validate(tmp_path: Path, node2: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """The role's preflight check (tasks/validate.yml) on two fake nodes of this machine; node2 has ``node2``."""
    inventory = local_inventory(tmp_path / "hosts.yml", ("node1",), others={"node2": {**LOCAL_NODE, **node2}})
    playbook = tmp_path / "validate.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "nccl_tests validate", "hosts": "node1:node2", "gather_facts": True, "gather_subset": ["min"],
        "tasks": [{"name": "validate", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.nccl_tests",
                                                                        "tasks_from": "validate"}}],
    }]))  # fmt: skip
    return run_playbook(str(playbook), inventory=inventory, env={"ANSIBLE_CACHE_PLUGIN": "memory"}, timeout=300)


@pytest.mark.parametrize(("node2", "home", "named"), [
    ({"mpi_install_method": "prefix", "mpi_prefix": "/opt/openmpi-5.0.5"}, "/opt/openmpi-5.0.5",
     "(mpi_install_method=prefix, mpi_prefix=/opt/openmpi-5.0.5)"),
    # the distribution's MPI at another path (as on a node of another OS family)
    ({"nccl_tests_mpi_home": {"Debian": "/opt/other", "RedHat": "/opt/other"}}, "/opt/other",
     "(mpi_install_method=distro, nccl_tests_mpi_home[Debian])"),
])  # fmt: skip
def test_nodes_with_another_mpi_are_refused_by_preflight(tmp_path: Path, node2: dict[str, Any], home: str,
                                                         named: str) -> None:  # fmt: skip
    """Each node names the nccl-tests build by its own MPI: a node whose MPI differs names a build no run makes (the
    builder builds one), and mpirun would mix two MPIs in one job. Refused by preflight, naming node, variables and
    what is allowed, before any role changes a node."""
    if "nccl_tests_mpi_home" in node2 and evaluate(rendered(), "nccl_tests_mpi_dir") == home:
        pytest.skip("this machine's own MPI path")
    proc = validate(tmp_path, node2)
    assert proc.returncode != 0, proc.stdout[-4000:]
    text = " ".join(proc.stdout.split())
    assert "fatal: [node2]" in proc.stdout and "fatal: [node1]" not in proc.stdout, proc.stdout[-4000:]
    assert f"node2: nccl-tests would link the MPI at {home} here {named}, but at " in text, text[-3000:]
    assert "on node1: it is built once, against one MPI; allowed: one MPI for every node of the play" in text
    # the same MPI on every node: nothing to refuse
    assert validate(tmp_path, {}).returncode == 0
