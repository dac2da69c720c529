"""Issue 16: every fabric profile's userspace converged for real on lab nodes (playbooks/rdma.yml over SSH, packages
from the lab mirror), not only rendered. Each node gets its own profile through host_vars in a copy of the lab
inventory, so the three RDMA profiles converge in one run (then again: changed=0) and the two socket profiles in a
second (then in --check --diff: changed=0); a last run puts the lab's own profile (erdma) back. After each
converge `rdmaforge verify` runs the testinfra suite's userspace tests on those nodes with their profile: the
package set and the memlock drop-in pass for every profile that has them (InfiniBand and RoCE included), and what
needs a device the lab has not (port state, link layer) or a limit its nodes cannot have (memlock unlimited) is
reported as not judged or as the inventory's accepted deviation, never as a pass.

What is expected comes from the seeds where they list packages (000: the eRDMA Ubuntu line, 001: the InfiniBand
line). roce and acs_type1 have no seed list: for them the test checks that dpkg reports installed what the profile
table selected (printed by the role), so a package the role skipped or apt dropped is caught.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from rdmaforge import fabrics, infra_report
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.runner.exit_codes import ExitCode
from tests.conftest import LabHandle, recap
from tests.integration.test_cli import cli, run_dir_of

pytestmark = pytest.mark.lab

SEEDS = PROJECT_ROOT.parent / "shared" / "seeds"
LIMITS_FILE = "/etc/security/limits.d/90-rdmaforge-memlock.conf"
ERDMA_SOURCES = "/etc/apt/sources.list.d/erdma.sources"
#: The testinfra suite's tests of what playbooks/rdma.yml converges (the rest need the whole site.yml).
USERSPACE_TESTS = ("test_rdma_userspace_packages", "test_memlock_drop_in", "test_memlock_of_a_login_is_unlimited",
                   "test_erdma_repository_and_keyring", "test_rdma_ports_active", "test_rdma_link_layer")


def seed_apt_line(prefix: str, must_name: str) -> list[str]:
    """The packages of the seed's first `apt install` line that names ``must_name``."""
    paths = sorted(SEEDS.glob(f"{prefix}_*.txt"))
    if not paths:
        pytest.skip(f"{SEEDS} is absent: the seed documents live beside the checkout")
    for line in paths[0].read_text(encoding="utf-8").splitlines():
        match = re.search(r"\bapt(?:-get)? (?:update && apt(?:-get)? )?install (.*)$", line)
        if match and must_name in match.group(1).split():
            return [word for word in match.group(1).split() if not word.startswith("-")]
    raise AssertionError(f"no apt install line naming {must_name} in {paths[0]}")


def with_profiles(converged: LabHandle, tmp_path: Path, profiles: dict[str, str]) -> Path:
    """A copy of the lab inventory in which each named node has its own rdmaforge_fabric."""
    inventory_dir = tmp_path / "inventory"
    shutil.copytree(converged.inventory.parent, inventory_dir)
    (inventory_dir / "host_vars").mkdir(exist_ok=True)
    for node, profile in profiles.items():
        (inventory_dir / "host_vars" / f"{node}.yml").write_text(yaml.safe_dump({"rdmaforge_fabric": profile}))
    return inventory_dir / converged.inventory.name


def dpkg_installed(lab: LabHandle, node: str, packages: list[str]) -> list[str]:
    """The packages of ``packages`` that dpkg does not report installed on ``node``."""
    fmt = "'${Package} ${Status}\\n'"
    out = lab.ssh(node, f"dpkg-query -W -f {fmt} {' '.join(packages)}", check=False).stdout
    installed = {line.split()[0] for line in out.splitlines() if line.endswith("install ok installed")}
    return [p for p in packages if p not in installed]


def selected_packages(output: str, node: str) -> list[str]:
    """What the role installed on ``node``, from its package task's printed list."""
    found = re.search(rf"RDMA packages for {node} \(\w+\): ([^\"\n]*)", output)
    assert found, f"no package list printed for {node}"
    return found.group(1).split(", ")


def verified(converged: LabHandle, tmp_path: Path, node: str, profile: str) -> dict[str, infra_report.TestOutcome]:
    """`rdmaforge verify --limit NODE` of the userspace tests, in an inventory whose every node has ``profile`` (one
    inventory may not mix profiles): each test's outcome. Its exit code is 0: a failure fails the test with the
    suite's own message."""
    inventory = with_profiles(converged, tmp_path / f"verify-{node}-{profile}", dict.fromkeys(converged.nodes, profile))
    proc = cli(tmp_path / "runs", "verify", "-i", str(inventory), "--limit", node,
               "-k", " or ".join(USERSPACE_TESTS))  # fmt: skip
    assert proc.returncode == ExitCode.OK, proc.stdout[-6000:]
    outcomes = infra_report.parse_junit(run_dir_of(proc.stdout) / "verify" / "junit.xml", [node])
    assert {o.host for o in outcomes} == {node} and {o.test for o in outcomes} == set(USERSPACE_TESTS), outcomes
    return {o.test: o for o in outcomes}


def assert_status(found: dict[str, infra_report.TestOutcome], test: str, status: str, reason: str = "") -> None:
    outcome = found[test]
    assert outcome.status == status and reason in outcome.message, outcome


def test_every_fabric_profile_converges_on_a_lab_node(converged: LabHandle, tmp_path: Path) -> None:
    nodes = list(converged.nodes)
    assert len(nodes) >= 3, "the lab needs three nodes for the three RDMA profiles"
    rdma_nodes = dict(zip(nodes, ("infiniband", "roce", "acs_type1"), strict=False))
    socket_nodes = dict(zip(nodes, ("tcp", "acs_type2"), strict=False))
    try:
        rdma_inventory = with_profiles(converged, tmp_path / "rdma", rdma_nodes)
        rdma = converged.playbook("rdma.yml", inventory=rdma_inventory)
        assert rdma.returncode == 0, rdma.stdout[-6000:]
        ib_node, roce_node, acs_node = nodes[:3]
        assert dpkg_installed(converged, ib_node, seed_apt_line("001", "infiniband-diags")) == []
        for node in (roce_node, acs_node):
            assert dpkg_installed(converged, node, selected_packages(rdma.stdout, node)) == []
        for node, profile in rdma_nodes.items():
            # No RDMA hardware in the lab: said as a warning, never as a working fabric.
            assert f"WARNING {node}: fabric profile '{profile}' expects RDMA devices but" in rdma.stdout
            assert converged.ssh(node, f"test -e {LIMITS_FILE}", check=False).returncode == 0
            assert converged.ssh(node, f"test -e {ERDMA_SOURCES}", check=False).returncode == 1  # erdma only
        # Seed 001's port check: Debian's real ibstat runs where the profile installs infiniband-diags (infiniband,
        # acs_type1); on a node without a device it prints nothing and exits 0, which must read as "no device".
        for node in (ib_node, acs_node):
            assert converged.ssh(node, "command -v ibstat", check=False).returncode == 0
            assert re.search(f"WARNING {node}: fabric profile '{rdma_nodes[node]}' expects RDMA devices but "
                             r"ibv_devinfo found none named \S+ and ibstat lists no device either;", rdma.stdout)

        # The suite judges each node against its own profile: the packages and the memlock settings pass (for
        # InfiniBand and RoCE too); the ports and their link layer are not judged without a device.
        for node, profile in rdma_nodes.items():
            found = verified(converged, tmp_path, node, profile)
            assert_status(found, "test_rdma_userspace_packages", "passed")
            assert_status(found, "test_memlock_drop_in", "passed")
            # The lab's nodes cannot raise a hard memlock limit (lab inventory: doctor_accept): named, not passed.
            assert_status(found, "test_memlock_of_a_login_is_unlimited", "skipped",
                          "accepted by the inventory (doctor_accept)")
            assert_status(found, "test_erdma_repository_and_keyring", "skipped",
                          f"fabric {profile}: the erdma repository is not used")
            assert_status(found, "test_rdma_ports_active", "skipped", "rdma_require_active_ports is false")
            # acs_type1 names no link layer in the fabric table: nothing to judge, and said so.
            assert_status(found, "test_rdma_link_layer", "skipped",
                          "not judged" if fabrics.port_link_layers().get(profile) else "names no link layer")

        # A second converge of each RDMA profile changes nothing.
        again = converged.playbook("rdma.yml", inventory=rdma_inventory)
        assert again.returncode == 0, again.stdout[-6000:]
        assert {node: counts["changed"] for node, counts in recap(again.stdout).items()} == dict.fromkeys(nodes, 0), (
            again.stdout[-6000:]
        )

        socket_inventory = with_profiles(converged, tmp_path / "socket", socket_nodes)
        limit = ",".join(socket_nodes)
        sockets = converged.playbook("rdma.yml", "--limit", limit, inventory=socket_inventory)
        assert sockets.returncode == 0, sockets.stdout[-6000:]
        # --check --diff on the converged socket profiles reports nothing to change.
        checked = converged.playbook("rdma.yml", "--limit", limit, "--check", "--diff", inventory=socket_inventory)
        assert checked.returncode == 0, checked.stdout[-6000:]
        assert {node: counts["changed"] for node, counts in recap(checked.stdout).items()} == dict.fromkeys(
            socket_nodes, 0
        ), checked.stdout[-6000:]
        tcp_node, type2_node = nodes[:2]
        assert converged.ssh(tcp_node, f"test -e {LIMITS_FILE}", check=False).returncode == 1  # TCP: no memlock
        assert "expects RDMA devices" not in sockets.stdout  # socket profiles expect none
        assert selected_packages(sockets.stdout, tcp_node) == ["none"]
        assert selected_packages(sockets.stdout, type2_node) == ["none"]
        for node, profile in socket_nodes.items():
            found = verified(converged, tmp_path, node, profile)
            assert_status(found, "test_rdma_userspace_packages", "skipped",
                          f"fabric {profile} on Debian: the rdma_core table lists no package to install")
            assert_status(found, "test_rdma_ports_active", "skipped", f"fabric {profile} does not use RDMA")
            if profile == "tcp":
                assert_status(found, "test_memlock_drop_in", "passed")  # passes only when the drop-in is gone
    finally:
        back = converged.playbook("rdma.yml")  # the lab's own profile
        assert back.returncode == 0, back.stdout[-4000:]
    assert dpkg_installed(converged, nodes[0], seed_apt_line("000", "ibverbs-providers")) == []
    assert converged.ssh(nodes[0], f"test -e {ERDMA_SOURCES}", check=False).returncode == 0
