"""The lab's pure parts: addressing, /etc/hosts block, nspawn command line, generated inventory, cache GC, the
mirror's nccl-tests source (../shared/sources, checked against its SHA256SUMS)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rdmaforge import inventory_checks
from rdmaforge.lab import cache, inventory, mirror, node, packages, spec, supervisor
from rdmaforge.lab.mirror import Mirror
from rdmaforge.lab.shell import LabError


def test_addresses_stay_inside_the_benchmarking_range() -> None:
    n3 = spec.node_spec(3, extra_nics=2)
    assert n3.name == "node3" and n3.netns == "rf-node3"
    assert [(nic.name, nic.bridge, nic.address) for nic in n3.nics] == [
        ("eth0", "rfbr0", "198.18.0.13"),
        ("eth1", "rfbr1", "198.18.1.13"),
        ("eth2", "rfbr2", "198.18.2.13"),
    ]
    assert all(len(nic.host_end) <= 15 for nic in spec.node_spec(16, 8).nics)  # IFNAMSIZ
    spec.validate_counts(16, 2)  # the converge-scale benchmark's largest lab


@pytest.mark.parametrize(("nodes", "nics"), [(0, 2), (17, 2), (2, -1), (2, 9)])
def test_counts_are_bounded(nodes: int, nics: int) -> None:
    with pytest.raises(ValueError, match="must be between"):
        spec.validate_counts(nodes, nics)


def test_lab_block_in_etc_hosts_is_replaced_not_appended() -> None:
    nodes = [spec.node_spec(i, 0) for i in (1, 2)]
    original = "127.0.0.1\tlocalhost\n10.0.0.5 other\n"
    once = node.with_lab_block(original, nodes)
    assert node.with_lab_block(once, nodes) == once
    assert "10.0.0.5 other" in once and once.count(node.LAB_BLOCK_BEGIN) == 1
    three = node.with_lab_block(once, [*nodes, spec.node_spec(3, 0)])
    assert "198.18.0.13\tnode3" in three and three.count("node1") == 1
    # A block another tool appended after the lab's stays after it: growing and shrinking the lab gives back the
    # same bytes (a converged node's /etc/hosts is part of its converge record).
    managed = once + "# BEGIN rdmaforge cluster hosts\n198.18.0.11\tnode1\n# END rdmaforge cluster hosts\n"
    grown = node.with_lab_block(managed, [*nodes, spec.node_spec(3, 0)])
    assert grown.index(node.LAB_BLOCK_BEGIN) < grown.index("# BEGIN rdmaforge cluster hosts")
    assert node.with_lab_block(grown, nodes) == managed


def test_nspawn_boots_systemd_in_the_nodes_namespace() -> None:
    argv = supervisor.nspawn_argv("node1", Path("/x/root"), "rf-node1", ["/usr/local/cuda-13.0:/usr/local/cuda"])
    assert argv[:2] == ["nsenter", "--net=/run/netns/rf-node1"]
    assert argv[argv.index("systemd-nspawn") - 1] == "sh"  # the sysfs wrapper execs nspawn
    assert "--boot" in argv and "--machine=node1" in argv
    assert "--network-namespace-path=/run/netns/rf-node1" in argv
    assert "--bind-ro=/usr/local/cuda-13.0:/usr/local/cuda" in argv
    assert supervisor.REBOOT_EXIT_STATUS == 133


def test_generated_inventory_points_every_mirror_url_at_the_lab(tmp_path: Path) -> None:
    paths = spec.LabPaths(state=tmp_path / "state", cache=tmp_path / "cache", inventory_dir=tmp_path / "inv")
    fake_mirror = Mirror(tmp_path / "www", "AB" * 20, "nvidia-nccl_2.29.7-1.orig.tar.gz", "0" * 64)
    hosts = inventory.write(paths, [spec.node_spec(i, 1) for i in (1, 2)], fake_mirror)
    data = yaml.safe_load(hosts.read_text())
    assert data["all"]["children"]["cluster"]["hosts"]["node2"]["ansible_host"] == "198.18.0.12"
    mirror_vars = yaml.safe_load((paths.inventory_dir / "group_vars" / "all" / "mirror.yml").read_text())
    urls = [v for v in mirror_vars.values() if isinstance(v, str) and "://" in v]
    assert urls and all(u.startswith("http://198.18.0.1:8080") for u in urls)
    assert mirror_vars["rdma_repos_erdma_gpg_fingerprint"] == "AB" * 20
    assert mirror_vars["nccl_build_version"] == "2.29.7"
    connection = yaml.safe_load((paths.inventory_dir / "group_vars" / "all" / "connection.yml").read_text())
    assert "StrictHostKeyChecking=yes" in connection["ansible_ssh_common_args"]


def test_old_cache_builds_are_removed(tmp_path: Path) -> None:
    for name in ("old1", "old2", "current", "gnupg"):
        (tmp_path / name).mkdir()
    cache.remove_other_builds(tmp_path / "current", keep={"gnupg"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current", "gnupg"]


def sources_with(tmp_path: Path, content: bytes, pinned: str | None = None) -> Path:
    """A ../shared/sources stand-in holding the nccl-tests tarball and a SHA256SUMS pinning ``pinned``."""
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / packages.NCCL_TESTS_TARBALL).write_bytes(content)
    digest = pinned if pinned is not None else hashlib.sha256(content).hexdigest()
    (sources / "SHA256SUMS").write_text(f"{'1' * 64}  other.tar.gz\n{digest}  {packages.NCCL_TESTS_TARBALL}\n")
    return sources


def test_the_mirror_copies_the_nccl_tests_tarball_checked_against_its_pin(tmp_path: Path) -> None:
    sources = sources_with(tmp_path, b"nccl-tests source")
    found = mirror.local_tarball(packages.NCCL_TESTS_TARBALL, sources)
    assert found.path == sources / packages.NCCL_TESTS_TARBALL
    assert found.pinned_sha256 == hashlib.sha256(b"nccl-tests source").hexdigest()
    digest = mirror.copy_verified(found, tmp_path / "www" / "nccl-tests")
    assert digest == found.pinned_sha256
    served = tmp_path / "www" / "nccl-tests"
    assert (served / packages.NCCL_TESTS_TARBALL).read_bytes() == b"nccl-tests source"
    assert (served / "SHA256SUMS").read_text() == f"{digest}  {packages.NCCL_TESTS_TARBALL}\n"
    assert sorted(p.name for p in served.iterdir()) == ["SHA256SUMS", packages.NCCL_TESTS_TARBALL]


def test_a_tarball_that_does_not_match_its_pin_is_an_error_naming_both_hashes(tmp_path: Path) -> None:
    pinned = "ab" * 32
    found = mirror.local_tarball(packages.NCCL_TESTS_TARBALL, sources_with(tmp_path, b"tampered", pinned))
    actual = hashlib.sha256(b"tampered").hexdigest()
    with pytest.raises(LabError, match=f"has sha256 {actual}, but .*SHA256SUMS pins {pinned}"):
        mirror.copy_verified(found, tmp_path / "www" / "nccl-tests")
    assert not any((tmp_path / "www" / "nccl-tests").iterdir())  # nothing half-copied is left to serve


def test_an_unpinned_tarball_is_an_error(tmp_path: Path) -> None:
    sources = sources_with(tmp_path, b"x")
    (sources / "SHA256SUMS").write_text(f"{'1' * 64}  other.tar.gz\n")
    found = mirror.local_tarball(packages.NCCL_TESTS_TARBALL, sources)
    with pytest.raises(LabError, match=f"pins no sha256 for {packages.NCCL_TESTS_TARBALL}"):
        mirror.copy_verified(found, tmp_path / "www")


def test_without_shared_sources_the_mirror_has_no_nccl_tests(tmp_path: Path) -> None:
    absent = mirror.local_tarball(packages.NCCL_TESTS_TARBALL, tmp_path / "no-such-dir")
    assert absent.path is None and absent.absent == f"{tmp_path / 'no-such-dir'} is absent"
    (tmp_path / "empty").mkdir()
    missing = mirror.local_tarball(packages.NCCL_TESTS_TARBALL, tmp_path / "empty")
    assert missing.path is None and packages.NCCL_TESTS_TARBALL in missing.absent
    # a mirror with nccl-tests and one without are two cache entries, not one reused for the other
    present = mirror.local_tarball(packages.NCCL_TESTS_TARBALL, sources_with(tmp_path, b"src"))
    assert mirror.mirror_dir(tmp_path, present) != mirror.mirror_dir(tmp_path, absent)
    assert mirror.mirror_dir(tmp_path, absent) == mirror.mirror_dir(tmp_path, missing)


def test_the_real_shared_sources_tarball_matches_its_pin(tmp_path: Path) -> None:
    if not mirror.LOCAL_SOURCES.is_dir():
        pytest.skip(f"{mirror.LOCAL_SOURCES} is absent: the third-party sources live beside the checkout")
    found = mirror.local_tarball(packages.NCCL_TESTS_TARBALL)
    assert found.path is not None, found.absent
    assert mirror.copy_verified(found, tmp_path) == found.pinned_sha256


def lab_mirror_vars(tmp_path: Path, fake_mirror: Mirror) -> tuple[dict[str, object], str]:
    """The generated mirror.yml's variables, and the comment written above nccl_tests_enabled (one line)."""
    paths = spec.LabPaths(state=tmp_path / "state", cache=tmp_path / "cache", inventory_dir=tmp_path / "inv")
    inventory.write(paths, [spec.node_spec(1, 1)], fake_mirror)
    text = (paths.inventory_dir / "group_vars" / "all" / "mirror.yml").read_text()
    lines = text.splitlines()
    at = lines.index("nccl_tests_enabled: false")
    start = at
    while lines[start - 1].startswith("# ") and lines[start - 1] != inventory.HEADER.strip():
        start -= 1
    assert start < at, f"no comment above nccl_tests_enabled:\n{text}"
    return yaml.safe_load(text), " ".join(line.removeprefix("# ") for line in lines[start:at])


def test_the_lab_inventory_points_nccl_tests_at_the_mirror_but_leaves_it_off(tmp_path: Path) -> None:
    sha = "cd" * 32
    fake = Mirror(tmp_path / "www", "AB" * 20, "n.tar.gz", "0" * 64, packages.NCCL_TESTS_TARBALL, sha)
    found, comment = lab_mirror_vars(tmp_path, fake)
    assert found["nccl_tests_enabled"] is False  # one test switches it on; the other converges leave it out
    assert found["nccl_tests_source"] == "tarball"
    assert found["nccl_tests_tarball_url"] == f"http://198.18.0.1:8080/nccl-tests/{packages.NCCL_TESTS_TARBALL}"
    assert found["nccl_tests_tarball_sha256"] == sha
    assert found["nccl_tests_version"] == "2.19.6" == packages.NCCL_TESTS_VERSION
    # a partial list preflight accepts once the test switches the role on (the benchmark's and pairwise's binaries)
    assert found["nccl_tests_binaries"]
    assert inventory_checks.nccl_tests_binaries_problems("node1", {**found, "nccl_tests_enabled": True}) == []
    assert "make test builds it once" in comment and "test_nccl_tests_on_lab.py" in comment, comment


def test_without_the_source_the_lab_inventory_says_why_nccl_tests_is_off(tmp_path: Path) -> None:
    fake = Mirror(tmp_path / "www", "AB" * 20, "n.tar.gz", "0" * 64, nccl_tests_absent="/x/shared/sources is absent")
    found, comment = lab_mirror_vars(tmp_path, fake)
    assert found["nccl_tests_enabled"] is False
    assert not any(key.startswith("nccl_tests_tarball") or key == "nccl_tests_source" for key in found)
    assert "its source is not in the lab mirror (/x/shared/sources is absent;" in comment, comment


def test_the_lab_records_the_inventory_it_wrote_for_status_elsewhere(tmp_path: Path) -> None:
    """The lab is one per machine: `lab status` from another directory (an installed rdmaforge) printed an inventory
    under that directory, which did not exist. The run that brings the lab up records its inventory's path."""
    from rdmaforge.lab import Lab

    paths = spec.LabPaths(state=tmp_path / "state", cache=tmp_path / "cache", inventory_dir=tmp_path / "elsewhere")
    lab = Lab(paths)
    assert lab.recorded_inventory is None  # no lab up
    paths.state.mkdir()
    paths.state_file.write_text(json.dumps({"nodes": 2, "nics": 2}))  # a lab brought up before the path was kept
    assert lab.recorded_inventory is None
    written = "/work/checkout/inventories/lab/hosts.yml"
    paths.state_file.write_text(json.dumps({"nodes": 2, "nics": 2, "inventory": written}))
    assert lab.recorded_inventory == Path(written)


def test_the_source_tarballs_directory_can_be_named(tmp_path: Path) -> None:
    """From an installed wheel there is no checkout beside the user to hold ../shared/sources (review round 39a)."""
    code = "from rdmaforge.lab import mirror; print(mirror.LOCAL_SOURCES)"
    env = {**os.environ, "RDMAFORGE_SOURCES": str(tmp_path / "sources")}
    named = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert named.stdout.strip() == str(tmp_path / "sources")
