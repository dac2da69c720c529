"""What `rdmaforge reset` decides from the node's own answers, read from real commands on this machine: which
packages an install adds (dpkg-query), and which policy rules and tables are the eni role's (`ip -j rule show` in a
network namespace of this test's own)."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from rdmaforge import tuning
from rdmaforge.parsers import packages


def dpkg_query(names: list[str]) -> str:
    proc = subprocess.run(packages.query_argv("apt", names), capture_output=True, text=True, check=False)
    return proc.stdout


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg-query (a Debian-family machine)")
def test_absent_names_the_packages_dpkg_does_not_have_installed() -> None:
    # dpkg and coreutils are on every Debian system; the other name is no package at all.
    names = ["dpkg", "rdmaforge-no-such-package", "coreutils=0.0-versioned", "dpkg"]
    output = dpkg_query(names)
    assert packages.absent(output, names) == ["rdmaforge-no-such-package"]
    # The version in a spec is not part of the name dpkg is asked about.
    assert packages.query_argv("apt", ["rdma-core=44.0-2"])[-1] == "rdma-core"
    assert packages.absent("", ["a", "b>=1", "a"]) == ["a", "b"]


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg-query (a Debian-family machine)")
def test_an_install_is_pending_only_for_a_missing_or_version_pinned_package() -> None:
    """os_packages leaves apt out when nothing is pending: every package installed and none pinned to a version."""
    installed = ["dpkg", "coreutils"]  # on every Debian system
    assert packages.pending(dpkg_query(installed), installed) == []
    names = ["dpkg", "rdmaforge-no-such-package", "coreutils=0.0-versioned", "coreutils >= 1"]
    # the missing one, and the pinned ones although installed (only apt can tell whether the version matches)
    assert packages.pending(dpkg_query(names), names) == names[1:]
    # a package dpkg removed but whose configuration it kept is installed again
    assert packages.pending("libfoo1\t1.0-1\tconfig-files\nbar\t2.0\tinstalled\n", ["libfoo1", "bar"]) == ["libfoo1"]
    assert packages.pending("", []) == []


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg-query (a Debian-family machine)")
def test_a_removed_package_with_its_configuration_kept_counts_as_absent() -> None:
    # dpkg lists such a package with status config-files: an install adds it again.
    output = "libfoo1\t1.0-1\tconfig-files\nbar\t2.0\tinstalled\n"
    assert packages.absent(output, ["libfoo1", "bar"]) == ["libfoo1"]


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb (a Debian-family machine)")
def test_the_package_name_comes_from_the_file_not_its_file_name(tmp_path) -> None:
    # A vendor's file name need not be the package's name (seed 000's aiacc-nccl-plugin-1.0.2.deb): a .deb built
    # here under another file name, read back with the command the nccl_plugin role runs.
    root = tmp_path / "tree"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: rdmaforge-test-plugin\nVersion: 1.0.2\nArchitecture: all\nMaintainer: tests <t@example.invalid>\n"
        "Description: a package built by this test\n"
    )
    deb = tmp_path / "vendor-named-1.0.2.deb"
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), str(deb)], check=True,
                   capture_output=True)  # fmt: skip
    argv = packages.file_name_argv("apt", str(deb))
    assert subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip() == "rdmaforge-test-plugin"
    assert packages.file_name_argv("dnf", "/x/p.rpm") == ["rpm", "-q", "--package", "--queryformat", "%{NAME}\n",
                                                          "/x/p.rpm"]  # fmt: skip


@pytest.fixture
def netns() -> Iterator[str]:
    if shutil.which("ip") is None:
        pytest.skip("needs iproute2's ip")
    name = f"rf-test-{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot create a network namespace here: {made.stderr.strip()}")
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False)


def test_only_rules_in_both_eni_ranges_are_withdrawn(netns: str) -> None:
    def ip(*argv: str) -> str:
        return subprocess.run(["ip", "-n", netns, *argv], capture_output=True, text=True, check=True).stdout

    # As the eni role sets them (defaults: tables and priorities from 1001), plus rules of other tools.
    ip("rule", "add", "from", "198.18.1.11", "table", "1001", "priority", "1001")
    ip("rule", "add", "from", "198.18.2.11", "table", "1002", "priority", "1002")
    ip("rule", "add", "from", "10.0.0.5", "table", "1001", "priority", "500")  # a priority outside the range
    ip("rule", "add", "from", "10.0.0.6", "table", "main", "priority", "1003")  # a table outside the range
    ip("rule", "add", "from", "10.0.0.7", "table", "77", "priority", "1004")
    rules = json.loads(ip("-j", "rule", "show"))
    plan = tuning.eni_withdraw_plan(rules, 1001, 1001)
    assert plan == {"rules": [["priority", "1001", "from", "198.18.1.11", "table", "1001"],
                              ["priority", "1002", "from", "198.18.2.11", "table", "1002"]],
                    "tables": [1001, 1002]}  # fmt: skip
    # Other bases (an inventory that moved them) select nothing of these.
    assert tuning.eni_withdraw_plan(rules, 2001, 2001) == {"rules": [], "tables": []}


def test_withdrawing_a_rule_leaves_another_tools_rule_of_the_same_priority(netns: str) -> None:
    """withdraw.yml ran `ip rule del priority 1001`, and the kernel deletes the first rule of that priority: another
    tool's rule added before the eni role's went, and the eni role's stayed."""

    def ip(*argv: str) -> str:
        return subprocess.run(["ip", "-n", netns, *argv], capture_output=True, text=True, check=True).stdout

    ip("rule", "add", "from", "192.0.2.7", "table", "5000", "priority", "1001")  # another tool's, first
    ip("rule", "add", "from", "198.18.1.11", "table", "1001", "priority", "1001")  # the eni role's
    ip("rule", "add", "from", "198.18.4.0/24", "table", "1002", "priority", "1002")  # a subnet, as a hand-made one
    for selector in tuning.eni_withdraw_plan(json.loads(ip("-j", "rule", "show")), 1001, 1001)["rules"]:
        ip("rule", "del", *selector)  # as withdraw.yml runs it
    left = [(r["priority"], r.get("src"), r["table"]) for r in json.loads(ip("-j", "rule", "show"))]
    assert (1001, "192.0.2.7", "5000") in left
    assert [r for r in left if r[2] in ("1001", "1002")] == []


def test_only_packages_installed_on_purpose_block_a_removal() -> None:
    # apt-get -s remove of the packages a lab node's converge recorded, as the node printed it, with one line
    # added: a package a user installed on purpose since (mpi-default-bin), which depends on openmpi-bin.
    dry_run = (
        "Remv binutils [2.40-2]\nRemv openmpi-bin [4.1.4-3+b1]\nRemv libopenmpi3 [4.1.4-3+b1]\n"
        "Remv libucx0 [1.13.1-1]\nRemv libfabric1 [1.17.0-3]\nRemv ibverbs-providers [44.0-2]\n"
        "Remv ibverbs-utils [44.0-2]\nRemv librdmacm1 [44.0-2]\nRemv libibverbs1 [44.0-2]\n"
        "Remv python3-packaging [23.0-1]\nRemv python3-venv [3.11.2-1+b1]\nRemv rdma-core [44.0-2]\n"
        "Remv mpi-default-bin:amd64 [1.14]\n"
    )
    removing = ["binutils", "openmpi-bin", "ibverbs-providers", "ibverbs-utils", "librdmacm1", "libibverbs1",
                "python3-packaging", "python3-venv", "rdma-core"]  # fmt: skip
    # The node's apt-mark showmanual lists what apt installed on request (the recorded packages among them), not
    # libopenmpi3, libucx0 or libfabric1, which came as dependencies.
    manual = "\n".join(["openssh-server", "binutils", "mpi-default-bin", *removing])
    assert packages.removal_blockers(dry_run, manual, removing) == ["mpi-default-bin"]
    # Without it, the dependants that are there only as dependencies do not block.
    assert packages.removal_blockers(dry_run, manual.replace("mpi-default-bin", ""), removing) == []
    # rpm -e --test names the dependants by name-version-release.arch.
    refused = ("error: Failed dependencies:\n"
               "\tlibibverbs.so.1()(64bit) is needed by (installed) openmpi-4.1.1-5.el8.x86_64\n")  # fmt: skip
    assert packages.removal_blockers(refused, "openmpi\n", ["libibverbs"]) == ["openmpi"]
    assert packages.removal_blockers(refused, "", ["libibverbs"]) == []
    assert packages.removal_argv("apt", ["a"]) == ["apt-get", "-s", "remove", "a"]
    assert packages.removal_argv("dnf", ["a"]) == ["rpm", "-e", "--test", "a"]


def dry_run(argv: list[str]) -> tuple[str, int]:
    """A real dry run on this machine: its output (stdout and stderr, as the role joins them) and exit status."""
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.stdout + "\n" + proc.stderr, proc.returncode


@pytest.mark.parametrize("manager", ["apt", "dnf"])
def test_a_dry_run_that_failed_is_no_answer(manager: str) -> None:
    """reset read a failed dry run (apt: no such package, a held lock; rpm: an ambiguous or unknown name) as 'nothing
    installed on purpose needs them', and removed the packages anyway."""
    tool = "apt-get" if manager == "apt" else "rpm"
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed on this machine")
    output, rc = dry_run(packages.removal_argv(manager, ["rdmaforge-no-such-package"]))
    assert rc != 0
    problem = packages.dry_run_problem(output, rc)
    said = ("E: Unable to locate package rdmaforge-no-such-package" if manager == "apt"
            else "error: package rdmaforge-no-such-package is not installed")  # fmt: skip
    assert problem == f"exit {rc}: {said}"
    # An answer: exit 0, or rpm's exit 1 naming what needs them (a blocker, read by removal_blockers).
    assert packages.dry_run_problem("Remv openmpi-bin [4.1.4-3+b1]\n", 0) == ""
    refused = "error: Failed dependencies:\n\tlibibverbs.so.1()(64bit) is needed by (installed) openmpi-4.1.1-5.el8\n"
    assert packages.dry_run_problem(refused, 1) == ""
    assert packages.dry_run_problem("", None) == ""  # not run: nothing to remove
    assert packages.dry_run_problem("", 100) == "exit 100, with no output"
