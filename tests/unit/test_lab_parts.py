"""The lab's pure parts: addressing, /etc/hosts block, nspawn command line, generated inventory, cache GC."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rdmaforge.lab import cache, inventory, node, spec, supervisor
from rdmaforge.lab.mirror import Mirror


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
