"""The testinfra suite's own tests (tests/infra) against a stand-in for testinfra's host: a node in a planned
state must pass, and a node that deviates from its inventory or the roles' documented defaults must fail. What is
expected comes from the inventory given here, roles/*/defaults/main.yml read as YAML, or the seeds, never from
rdmaforge/infra_expectations.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rdmaforge import infra_report
from rdmaforge.parsers.rdma_devinfo import parse_ibstat
from rdmaforge.role_defaults import defaults
from tests.infra import test_cluster_state, test_node_state, test_tuning_state

DATA = Path(__file__).resolve().parents[1] / "data"


@dataclass
class Result:
    rc: int = 0
    stdout: str = ""
    stderr: str = ""


@dataclass
class File:
    path: str
    content_string: str = ""
    exists: bool = True
    is_symlink: bool = False
    is_directory: bool = False
    mode: int = 0o644
    user: str = "root"

    def contains(self, text: str) -> bool:
        return text in self.content_string

    @property
    def size(self) -> int:
        return len(self.content_string.encode())


@dataclass
class User:
    home: str


@dataclass
class SystemInfo:
    distribution: str = "debian"


@dataclass
class FakeHost:
    """What the suite calls on testinfra's host: file, run, check_output, exists, user, system_info."""

    files: dict[str, File] = field(default_factory=dict)
    commands: dict[str, Result] = field(default_factory=dict)
    system_info: SystemInfo = field(default_factory=SystemInfo)

    def file(self, path: str) -> File:
        return self.files.get(path) or File(path, exists=False)

    def add(self, path: str, content: str = "", **kwargs: Any) -> None:
        self.files[path] = File(path, content, **kwargs)

    def run(self, command: str) -> Result:
        if command == test_node_state.DEVINFO_COMMAND:  # the shell runs ibv_devinfo, then echoes its status
            devinfo = self.run("ibv_devinfo -v")
            return Result(0, devinfo.stdout, f"{devinfo.stderr}ibv_devinfo-exit={devinfo.rc}\n")
        return self.commands.get(command, Result(127, "", f"{command}: not found"))

    def check_output(self, command: str) -> str:
        result = self.run(command)
        assert result.rc == 0, f"{command} exited {result.rc}"
        return result.stdout.rstrip("\n")

    def exists(self, command: str) -> bool:
        return command in self.commands

    def user(self, name: str) -> User:
        return User("/root" if name == "root" else f"/home/{name}")


def role_default(role: str, name: str) -> Any:
    return defaults(role)[name]


def nccl_node(version: str) -> FakeHost:
    """A node with the cluster's NCCL build installed under /opt/nccl (the nccl_build role's default prefix)."""
    host = FakeHost()
    build = "/opt/nccl/nccl-abc123"
    host.add("/opt/nccl/current", is_symlink=True)
    manifest = {"name": "nccl", "sha256": "0" * 64, "version": version, "archs": ["sm_80"], "only_funcs": ""}
    host.add("/opt/nccl/current/.rdmaforge-build.json", json.dumps(manifest))
    host.add("/opt/nccl/current/lib/libnccl.so.2")
    host.add("/etc/ld.so.conf.d/rdmaforge-nccl.conf", "/opt/nccl/current/lib\n")
    cache = f"1 libs found in cache `/etc/ld.so.cache'\n\tlibnccl.so.2 (libc6,x86-64) => {build}/lib/libnccl.so.2\n"
    host.commands["PATH=$PATH:/sbin:/usr/sbin ldconfig -p"] = Result(0, cache)
    # current -> the build: the library ld.so gives and current's are one file
    readlink = f"readlink -f {build}/lib/libnccl.so.2 /opt/nccl/current/lib/libnccl.so.2"
    host.commands[readlink] = Result(0, f"{build}/lib/libnccl.so.2\n{build}/lib/libnccl.so.2\n")
    return host


def test_nccl_that_ld_so_gives_from_another_build_or_a_commented_registration_fails() -> None:
    """Any build directory under the prefix passed the cache check, and the registration was a substring test, so a
    stale build ld.so still gave programs, or an entry only in a comment, passed (review round 16a)."""
    check = test_cluster_state.test_nccl_is_installed_from_the_cluster_build_and_registered
    stale = nccl_node("2.18.3")
    stale.commands["PATH=$PATH:/sbin:/usr/sbin ldconfig -p"] = Result(
        0, "1 libs found\n\tlibnccl.so.2 (libc6,x86-64) => /opt/nccl/2.16.5-old/lib/libnccl.so.2\n")
    stale.commands["readlink -f /opt/nccl/2.16.5-old/lib/libnccl.so.2 /opt/nccl/current/lib/libnccl.so.2"] = Result(
        0, "/opt/nccl/2.16.5-old/lib/libnccl.so.2\n/opt/nccl/nccl-abc123/lib/libnccl.so.2\n")
    with pytest.raises(AssertionError, match="ld.so gives programs /opt/nccl/2.16.5-old/lib/libnccl.so.2"):
        check(stale, {"nccl_build_version": "2.18.3"})
    commented = nccl_node("2.18.3")
    commented.add("/etc/ld.so.conf.d/rdmaforge-nccl.conf", "# /opt/nccl/current/lib\n/opt/nccl/2.16.5-old/lib\n")
    with pytest.raises(AssertionError, match="/opt/nccl/current/lib"):
        check(commented, {"nccl_build_version": "2.18.3"})


def test_nccl_build_of_the_inventory_version_passes() -> None:
    test_cluster_state.test_nccl_is_installed_from_the_cluster_build_and_registered(
        nccl_node("2.18.3"), {"nccl_build_version": "2.18.3"}
    )
    with pytest.raises(AssertionError, match="2.18.3"):
        test_cluster_state.test_nccl_is_installed_from_the_cluster_build_and_registered(
            nccl_node("2.18.3"), {"nccl_build_version": "2.21.5"}
        )


def test_nccl_build_is_judged_against_the_role_default_when_the_inventory_sets_no_version() -> None:
    """An inventory without nccl_build_version gets the role's default version installed: a node still carrying
    another NCCL is not the cluster's build. Before, the version was compared only when the inventory set one."""
    default = str(role_default("nccl_build", "nccl_build_version"))
    test_cluster_state.test_nccl_is_installed_from_the_cluster_build_and_registered(nccl_node(default), {})
    with pytest.raises(AssertionError, match="NCCL 2.18.3 installed"):
        test_cluster_state.test_nccl_is_installed_from_the_cluster_build_and_registered(nccl_node("2.18.3"), {})


IP = "PATH=$PATH:/sbin:/usr/sbin ip -j"


def eni_node(eth1_address: str) -> FakeHost:
    """eth0 with the default route, eth1 a secondary NIC with policy routing in table 1001 at priority 1001 (the eni
    role's documented bases) from 10.0.1.5, and the MTU 1400 the role documents off erdma."""
    host = FakeHost()
    local, prefix = eth1_address.split("/")
    links = [
        {"ifname": "lo", "mtu": 65536, "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
        {"ifname": "eth0", "mtu": 1500, "addr_info": [{"family": "inet", "local": "10.0.0.5", "prefixlen": 24}]},
        {"ifname": "eth1", "mtu": 1400, "addr_info": [{"family": "inet", "local": local, "prefixlen": int(prefix)}]},
    ]
    host.commands[f"{IP} addr show"] = Result(0, json.dumps(links))
    host.commands[f"{IP} route show default"] = Result(0, json.dumps([{"dst": "default", "dev": "eth0"}]))
    rules = [{"priority": 0, "src": "all", "table": "local"}, {"priority": 1001, "src": "10.0.1.5", "table": "1001"}]
    host.commands[f"{IP} rule show"] = Result(0, json.dumps(rules))
    host.commands[f"{IP} route show table 1001"] = Result(0, json.dumps([{"dst": "10.0.1.0/24", "dev": "eth1"}]))
    return host


def test_policy_routing_needs_the_planned_address_on_the_nic() -> None:
    """eni_addresses plans eth1's address: the rule and route written from the plan do not help a NIC that has
    another address. Before, the test read the rule and routes only, and passed."""
    hostvars = {"eni_enabled": True, "rdmaforge_fabric": "tcp", "eni_addresses": {"eth1": "10.0.1.5/24"}}
    test_tuning_state.test_policy_routing_per_secondary_nic(eni_node("10.0.1.5/24"), hostvars)
    with pytest.raises(
        AssertionError, match=r"eth1: eni_addresses plans 10\.0\.1\.5/24, the NIC has \['10\.0\.1\.77/24'\]"
    ):
        test_tuning_state.test_policy_routing_per_secondary_nic(eni_node("10.0.1.77/24"), hostvars)


def grub_node(pages: int, gpus: int | None = None) -> FakeHost:
    """A GRUB host whose grub.cfg boots with 1 GiB pages (the hugepages role's default size), and ``gpus`` GPUs
    listed by nvidia-smi -L (None: no nvidia-smi, no lspci)."""
    host = FakeHost()
    args = f"root=/dev/sda1 ro default_hugepagesz=1G hugepagesz=1G hugepages={pages}"
    host.add("/boot/grub/grub.cfg", f"menuentry 'Debian' {{\n\tlinux\t/vmlinuz-6.1.0 {args}\n}}\n")
    host.add("/etc/systemd/system/dev-hugepages.mount.d/rdmaforge.conf", "[Mount]\nOptions=pagesize=1G\n")
    if gpus is not None:
        listed = "".join(f"GPU {i}: NVIDIA A100-SXM4-80GB (UUID: GPU-{i})\n" for i in range(gpus))
        host.commands["nvidia-smi -L"] = Result(0, listed)
    return host


def erdma_repo_node(family: str, keyring: str = "binary keyring") -> FakeHost:
    """A node with the erdma repository as rdma_repos writes it with the role's defaults (apt: the deb822 source and
    the keyring; yum: erdma.repo)."""
    host = FakeHost(system_info=SystemInfo("debian" if family == "Debian" else "rocky"))
    host.add("/etc/apt/sources.list.d/erdma.sources",
             "Types: deb\nURIs: https://mirrors.aliyun.com/erdma/apt/ubuntu\nSuites: jammy/erdma\nComponents: main\n"
             "Signed-By: /etc/apt/keyrings/erdma.gpg\n")  # fmt: skip
    host.add("/etc/apt/keyrings/erdma.gpg", keyring)
    host.add("/etc/yum.repos.d/erdma.repo",
             "[erdma]\nbaseurl = https://mirrors.aliyun.com/erdma/yum/redhat/$releasever/erdma/x86_64\nenabled = 1\n"
             "gpgcheck = 1\ngpgkey = file:///etc/pki/rpm-gpg/RPM-GPG-KEY-rdmaforge-erdma\n")  # fmt: skip
    return host


def test_the_erdma_repository_is_the_inventorys_and_signed() -> None:
    """An empty keyring passed (it only had to exist), the source's URIs were never compared with the inventory's,
    and on yum only gpgcheck was read: a disabled repository of another mirror without its key passed (review
    round 16a). The expected URLs are the rdma_repos role's documented defaults."""
    check = test_node_state.test_erdma_repository_and_keyring
    check(erdma_repo_node("Debian"), {}, "erdma")
    with pytest.raises(AssertionError, match="the erdma keyring is missing or empty"):
        check(erdma_repo_node("Debian", keyring=""), {}, "erdma")
    with pytest.raises(AssertionError):
        check(erdma_repo_node("Debian"), {"rdma_repos_erdma_apt_url": "http://198.18.0.1/erdma/apt"}, "erdma")
    check(erdma_repo_node("RedHat"), {}, "erdma")
    disabled = erdma_repo_node("RedHat")
    disabled.add("/etc/yum.repos.d/erdma.repo", disabled.file("/etc/yum.repos.d/erdma.repo").content_string
                 .replace("enabled = 1", "enabled = 0"))  # fmt: skip
    with pytest.raises(AssertionError, match="erdma.repo: enabled is not 1"):
        check(disabled, {}, "erdma")


def test_hugepage_arguments_are_read_as_the_kernel_reads_them() -> None:
    """default_hugepagesz=2M before =1G passed (the 1G token appeared once; the kernel keeps the first); pagesize=1G
    only in a comment of the drop-in passed; memtest86+'s linux line (no kernel arguments of Linux) failed a
    correctly configured node (review round 16a)."""
    check = test_tuning_state.test_hugepage_arguments_configured_once
    twice = grub_node(50, gpus=8)
    cfg = twice.file("/boot/grub/grub.cfg").content_string
    twice.add("/boot/grub/grub.cfg", cfg.replace("ro default_hugepagesz=1G",
                                                 "ro default_hugepagesz=2M default_hugepagesz=1G"))  # fmt: skip
    with pytest.raises(AssertionError, match=r"default_hugepagesz=\['2M', '1G'\] on a kernel line"):
        check(twice, {"hugepages_enabled": True})
    commented = grub_node(50, gpus=8)
    commented.add("/etc/systemd/system/dev-hugepages.mount.d/rdmaforge.conf",
                  "[Mount]\n# Options=pagesize=1G\nOptions=pagesize=2M\n")  # fmt: skip
    with pytest.raises(AssertionError, match="Options=pagesize=2M"):
        check(commented, {"hugepages_enabled": True})
    memtest = grub_node(50, gpus=8)
    memtest.add("/boot/grub/grub.cfg",
                cfg + "menuentry 'Memory test (memtest86+x64.efi)' {\n\tlinux\t/boot/memtest86+x64.efi\n}\n")
    check(memtest, {"hugepages_enabled": True})


def test_hugepages_count_is_the_planned_one() -> None:
    """Seed 004 reserves 50 one-GiB pages on its 8-GPU nodes (hugepages=50); the role's rule is GPUs x 5 + 10 on
    other nodes, and hugepages_count overrides both. Before, any hugepages= value passed."""
    check = test_tuning_state.test_hugepage_arguments_configured_once
    check(grub_node(50, gpus=8), {"hugepages_enabled": True})
    check(grub_node(30, gpus=4), {"hugepages_enabled": True})
    check(grub_node(10), {"hugepages_enabled": True})  # no GPU: 0 x 5 + 10
    check(grub_node(32, gpus=8), {"hugepages_enabled": True, "hugepages_count": 32})
    with pytest.raises(AssertionError, match=r"hugepages=50"):
        check(grub_node(2, gpus=8), {"hugepages_enabled": True})
    with pytest.raises(AssertionError, match=r"hugepages_count=32 plans hugepages=32"):
        check(grub_node(50, gpus=8), {"hugepages_enabled": True, "hugepages_count": 32})


def devices(host: FakeHost) -> Callable[[], tuple[test_node_state.DevinfoRun, list[Any]]]:
    """What the suite's rdma_devices fixture hands the RDMA tests: the node's devices, read when asked."""
    return lambda: test_node_state.read_rdma_devices(host)


def erdma_node() -> FakeHost:
    """An eRDMA node whose ibv_devinfo -v lists one device, erdma_0, its port active (a real capture)."""
    host = FakeHost()
    host.commands["ibv_devinfo -v"] = Result(0, (DATA / "ibv_devinfo" / "erdma_alibaba.txt").read_text())
    return host


def test_rdma_ports_expected_by_the_inventory_must_exist() -> None:
    """rdma_core_expected_ports names the ports the node must have (the rdma_core role fails when one is missing);
    a node where one of them is gone is not "active at its rate". Before, only the ports found were judged."""
    check = test_node_state.test_rdma_ports_active
    check(devices(erdma_node()), {"rdma_core_expected_ports": ["erdma_0"]}, "erdma")
    check(devices(erdma_node()), {"rdma_core_expected_ports": ["erdma_0:1"]}, "erdma")
    with pytest.raises(AssertionError, match=r"rdma_core_expected_ports not found by ibv_devinfo -v: \['erdma_1'\]"):
        check(devices(erdma_node()), {"rdma_core_expected_ports": ["erdma_0", "erdma_1"]}, "erdma")
    with pytest.raises(AssertionError, match=r"\['erdma_0:2'\]"):
        check(devices(erdma_node()), {"rdma_core_expected_ports": ["erdma_0:2"]}, "erdma")


def test_a_device_whose_ports_were_cut_from_the_listing_is_not_active() -> None:
    """ibv_devinfo stops at a port it cannot query: the real erdma capture cut before its port. Only the ports read
    were judged, so a device with none read had 'nothing down' (doctor's phys_port_cnt rule catches it: review
    round 16a)."""
    capture = (DATA / "ibv_devinfo" / "erdma_alibaba.txt").read_text()
    host = FakeHost()
    host.commands["ibv_devinfo -v"] = Result(0, capture.split("                port:")[0])
    with pytest.raises(AssertionError, match=r"ports not read: \['erdma_0 has 1 port\(s\) \(phys_port_cnt\), only 0"):
        test_node_state.test_rdma_ports_active(devices(host), {}, "erdma")


def test_an_expected_rail_outside_the_fabrics_pattern_must_be_active_too() -> None:
    """rdma_core_expected_ports naming a device the fabric's pattern does not match (erdma_0 on an InfiniBand
    fabric, whose pattern is mlx5*) was checked for existence only: its PORT_DOWN passed."""
    capture = (DATA / "ibv_devinfo" / "erdma_alibaba.txt").read_text()
    mlx = capture.replace("erdma_0", "mlx5_0")
    down = capture.replace("PORT_ACTIVE (4)", "PORT_DOWN (1)")
    host = FakeHost()
    host.commands["ibv_devinfo -v"] = Result(0, mlx + down)
    with pytest.raises(AssertionError, match=r"ports not active: \{'erdma_0:1': 'PORT_DOWN'\}"):
        test_node_state.test_rdma_ports_active(devices(host), {"rdma_core_expected_ports": ["mlx5_0", "erdma_0"]},
                                               "infiniband")  # fmt: skip


def test_a_node_without_rdma_devices_is_not_judged_on_rates_and_fails_active_ports() -> None:
    """ibv_devinfo's own answer on a host without a device (exit 255, rdma-core's message): the rates are not judged
    (skipped, named so) and the ports are not active, the status in the message."""
    host = FakeHost()
    host.commands["ibv_devinfo -v"] = Result(255, "", "Failed to get IB devices list: Function not implemented\n")
    with pytest.raises(pytest.skip.Exception, match=r"not judged: port rates"):
        test_node_state.test_rdma_port_rates(devices(host), {}, "erdma")
    with pytest.raises(AssertionError, match=r"no erdma\* RDMA device: ibv_devinfo -v exited 255: Failed to get IB"):
        test_node_state.test_rdma_ports_active(devices(host), {}, "erdma")


def test_rdma_ports_on_another_link_layer_than_the_fabrics_fail() -> None:
    """A real capture with an InfiniBand mlx5_1 and an Ethernet (RoCE) mlx5_3: on an InfiniBand fabric mlx5_3 is on
    the wrong link layer, on a RoCE one mlx5_1; naming the rails (rdma_core_expected_ports) judges those only."""
    host = FakeHost()
    host.commands["ibv_devinfo -v"] = Result(0, (DATA / "ibv_devinfo" / "mlx5_ib_and_roce_ofed.txt").read_text())
    check = test_node_state.test_rdma_link_layer
    with pytest.raises(AssertionError, match=r"runs over InfiniBand, these ports are on another link layer: "
                       r"\{'mlx5_3:1': 'Ethernet'\}"):  # fmt: skip
        check(devices(host), {}, "infiniband")
    with pytest.raises(AssertionError, match=r"\{'mlx5_1:1': 'InfiniBand'\}"):
        check(devices(host), {}, "roce")
    check(devices(host), {"rdma_core_expected_ports": ["mlx5_1"]}, "infiniband")
    check(devices(host), {"rdma_core_expected_ports": ["mlx5_3:1"]}, "roce")
    with pytest.raises(pytest.skip.Exception, match=r"fabric erdma names no link layer"):
        check(devices(host), {}, "erdma")


def test_a_port_whose_link_layer_was_not_read_is_named_not_passed() -> None:
    """Review round 36: a port without a link_layer line was dropped and the test passed on the others."""
    capture = (DATA / "ibv_devinfo" / "mlx5_ib_and_roce_ofed.txt").read_text()
    host = FakeHost()
    host.commands["ibv_devinfo -v"] = Result(0, capture.replace("\t\t\tlink_layer:\t\tEthernet\n", ""))
    with pytest.raises(pytest.skip.Exception, match=r"not judged: the link layer of mlx5_3:1 was not read "
                       r"\(mlx5_1:1 on InfiniBand\)"):  # fmt: skip
        test_node_state.test_rdma_link_layer(devices(host), {}, "infiniband")


def roce_node(ibstat: str) -> FakeHost:
    """A RoCE node with infiniband-diags: ``ibstat`` prints ``ibstat`` (a real capture), ``ibv_devinfo -v`` the same
    devices and port states (rdma-core's layout) without a width or speed, so each port's rate is ibstat's Rate."""
    host = FakeHost()
    host.commands["ibstat"] = Result(0, ibstat)
    cas = parse_ibstat(ibstat)
    host.commands["ibv_devinfo -v"] = Result(0, "".join(
        f"hca_id:\t{ca['name']}\n\ttransport:\t\t\tInfiniBand (0)\n"
        + "".join(f"\t\tport:\t{p['port']}\n\t\t\tstate:\t\t\t{p['state']} (4)\n" for p in ca["ports"])
        for ca in cas))  # fmt: skip
    return host


CX7 = (DATA / "ibstat" / "mlx5_roce_cx7_and_disabled_cx6dx.txt").read_text()  # mlx5_0, mlx5_1 at 200; mlx5_10 Down


def test_rdma_port_rates_without_a_minimum_are_compared_with_each_other() -> None:
    """rdma_core_min_port_rate_gbps is null by default: the node's active ports are then judged against each other,
    as doctor's port_rate check does, so a rail that trained down fails. Before, nothing was judged and verify said
    pass."""
    check = test_node_state.test_rdma_port_rates
    check(devices(roce_node(CX7)), {}, "roce")  # both rails at 200: passes (the Down mlx5_10 is not a rate to judge)
    trained_down = CX7.replace("Rate: 200", "Rate: 100", 2).replace("Rate: 100", "Rate: 200", 1)  # mlx5_1 at 100
    with pytest.raises(AssertionError, match=r"trained down: mlx5_1:1 at 100 Gb/s while others run at 200 Gb/s"):
        check(devices(roce_node(trained_down)), {}, "roce")
    # rdma_core_expected_ports naming the rails: a slower port outside them is not judged, and one rail alone has
    # nothing to be compared with
    with pytest.raises(pytest.skip.Exception, match=r"not judged: port rates: fewer than two port rates"):
        check(devices(roce_node(trained_down)), {"rdma_core_expected_ports": ["mlx5_0"]}, "roce")
    # with a minimum, against it
    check(devices(roce_node(trained_down)), {"rdma_core_min_port_rate_gbps": 100}, "roce")
    with pytest.raises(AssertionError, match=r"below the minimum: mlx5_0:1 at 200 Gb/s, mlx5_1:1 at 200 Gb/s"):
        check(devices(roce_node(CX7)), {"rdma_core_min_port_rate_gbps": 400}, "roce")


def test_rdma_port_rates_that_cannot_be_judged_are_skipped_as_not_judged() -> None:
    """One active port and no minimum (the eRDMA capture, which prints no rate either): nothing to compare, so the
    test is skipped with a reason saying so, and verify's report names it under "skipped (not judged)"."""
    check = test_node_state.test_rdma_port_rates
    with pytest.raises(pytest.skip.Exception, match=r"^not judged: port rates: fewer than two port rates") as skip:
        check(devices(erdma_node()), {}, "erdma")
    assert "erdma_0:1 rate unknown" in str(skip.value)
    # no minimum, two rates, a third port whose rate is not reported: the third is named as not judged
    unread = roce_node(CX7)
    unread.commands["ibv_devinfo -v"].stdout += "hca_id:\tmlx5_2\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
    with pytest.raises(pytest.skip.Exception, match=r"not judged: the rate of mlx5_2:1"):
        check(devices(unread), {}, "roce")
    # with a minimum, an unknown rate fails
    with pytest.raises(AssertionError, match=r"rate not reported for erdma_0:1"):
        check(devices(erdma_node()), {"rdma_core_min_port_rate_gbps": 100}, "erdma")
    report = infra_report.render([infra_report.TestOutcome("test_rdma_port_rates", "node1", "skipped",
                                                           f"Skipped: {skip.value}")])  # fmt: skip
    assert "skipped (not judged):\n  test_rdma_port_rates on node1: not judged: port rates: fewer than two" in report
    assert "node1" in report and "not judged" in report.splitlines()[2]  # the node's row: nothing judged, no pass


LIMITS = DATA / "limits"
DROP_IN = "/etc/security/limits.d/90-rdmaforge-memlock.conf"  # roles/rdma_core/defaults: rdma_core_limits_file


#: Debian 12's answers to `getent passwd -- USER` and `id -G -- USER`: root, and alice (uid 1500, primary group
#: alice 1500, member of rdma 1600), made in /etc/passwd and /etc/group there.
PASSWD = {"root": "root:x:0:0:root:/root:/bin/bash\n", "alice": "alice:x:1500:1500::/home/alice:/bin/sh\n"}
GIDS = {"root": "0\n", "alice": "1500 1600\n"}
#: `getent group -- NAME` there: rdma lists alice, student does not.
GROUPS = {"rdma": "rdma:x:1600:alice\n", "student": "student:x:1700:bob\n"}


PAM_D = DATA / "pam.d"  # real and rendered pam.d stacks: tests/data/pam.d/SOURCES.md


def pam_stack(host: FakeHost, system: str, **changed: str) -> None:
    """``system``'s pam.d files (tests/data/pam.d/SYSTEM) on ``host`` as /etc/pam.d/NAME; ``changed`` replaces a
    file's text (name with _ for -), an empty text leaving the file out."""
    texts = {path.name: path.read_text() for path in (PAM_D / system).iterdir()}
    texts.update({name.replace("_", "-"): text for name, text in changed.items()})
    for name, text in texts.items():
        if text:
            host.add(f"/etc/pam.d/{name}", text)


SSHD_CONFIG = DATA / "sshd_config"  # Debian 12's sshd_config and RHEL 9's settings: tests/data/sshd_config/SOURCES.md
#: How the suite lists sshd_config.d for sshd_config's Include /etc/ssh/sshd_config.d/*.conf.
SSHD_D_FIND = "find /etc/ssh/sshd_config.d -mindepth 1 -maxdepth 1 ! -type d -printf '%f\\n'"


def sshd_files(host: FakeHost, system: str, **drop_ins: str) -> None:
    """``system``'s sshd_config and sshd_config.d (tests/data/sshd_config/SYSTEM) on ``host``, with ``drop_ins``
    (name: text) added to sshd_config.d, listed as find lists them."""
    found = SSHD_CONFIG / system
    host.add("/etc/ssh/sshd_config", (found / "sshd_config").read_text())
    names = {path.name: path.read_text() for path in sorted(found.glob("sshd_config.d/*"))}
    names.update(drop_ins)
    for name, text in names.items():
        host.add(f"/etc/ssh/sshd_config.d/{name}", text)
    host.add("/etc/ssh/sshd_config.d", is_directory=True)
    host.commands[SSHD_D_FIND] = Result(0, "".join(f"{name}\n" for name in reversed(list(names))))


def as_rhel(host: FakeHost) -> FakeHost:
    """``host`` (a limits_node) turned into a Rocky node: RHEL 9's sshd settings and pam.d stack instead of Debian's."""
    host.system_info = SystemInfo("rocky")
    host.files = {path: file for path, file in host.files.items() if not path.startswith(("/etc/pam.d/", "/etc/ssh/"))}
    sshd_files(host, "rhel9")  # 50-redhat.conf sets UsePAM yes
    pam_stack(host, "rhel9")  # sshd includes password-auth, which runs pam_limits.so
    return host


def limits_node(drop_in: str | None, **others: str) -> FakeHost:
    """A node with Debian 12's real limits.conf (every example commented out), sshd_config (UsePAM yes) and pam.d
    stack (sshd runs pam_limits.so without arguments), rdma_core's drop-in holding ``drop_in`` and other limits.d
    files ``others`` (name: text), listed as find lists them; root and alice are users there, and the groups of
    GROUPS answer getent one at a time."""
    host = FakeHost()
    sshd_files(host, "debian12")
    pam_stack(host, "debian12")
    host.add("/etc/security/limits.conf", (LIMITS / "debian_limits.conf").read_text())
    files = dict(others, **({DROP_IN.rsplit("/", 1)[1]: drop_in} if drop_in is not None else {}))
    for name, text in files.items():
        host.add(f"/etc/security/limits.d/{name}", text)
    listing = "".join(f"{name}\n" for name in files)  # find's order: not sorted
    host.commands[LIMITS_D_FIND] = Result(0, listing)
    host.commands[VENDOR_D_FIND] = Result(1, "", "find: '/usr/etc/security/limits.d': No such file or directory\n")
    for user, entry in PASSWD.items():
        host.commands[f"getent passwd -- {user}"] = Result(0, entry)
        host.commands[f"id -G -- {user}"] = Result(0, GIDS[user])
    for group, entry in GROUPS.items():
        host.commands[f"getent group -- {group}"] = Result(0, entry)
    return host


#: How the suite lists limits.d (a command the stand-in does not know answers 127 and lists nothing: a fail, not a
#: pass, for every case here that expects one), and the vendor directory of a Linux-PAM built with one (openSUSE's).
LIMITS_D_FIND = "find /etc/security/limits.d -mindepth 1 -maxdepth 1 -name '*.conf' ! -type d -printf '%f\\n'"
VENDOR_D_FIND = "find /usr/etc/security/limits.d -mindepth 1 -maxdepth 1 -name '*.conf' ! -type d -printf '%f\\n'"


#: The role's template (roles/rdma_core/templates/memlock.conf.j2) for its default users, * and root.
ROLE_DROP_IN = ("# Managed by rdmaforge\n* soft memlock unlimited\n* hard memlock unlimited\n"
                "root soft memlock unlimited\nroot hard memlock unlimited\n")  # fmt: skip
ALICE = {"ssh_trust_user": "alice"}  # the training login is alice's (ssh_trust's default is root)


def test_memlock_is_judged_as_pam_limits_reads_the_files() -> None:
    """The drop-in was judged by the text "root hard memlock unlimited" anywhere in it, so a commented line passed,
    and a later limits.d file lowering the limit was never read. Now every file is read as pam_limits reads it,
    for the training login (ssh_trust_user, root by default)."""
    check = test_node_state.test_memlock_drop_in
    check(limits_node(ROLE_DROP_IN), {}, "erdma")
    check(limits_node(ROLE_DROP_IN), ALICE, "erdma")
    commented = "# * hard memlock unlimited\n# root soft memlock unlimited\n# root hard memlock unlimited\n"
    with pytest.raises(AssertionError, match=r"no line sets root's soft memlock; no line sets root's hard memlock"):
        check(limits_node(commented), {}, "erdma")
    later = "*\thard\tmemlock\t65536\n"  # tab-separated, read after 90-rdmaforge-memlock.conf (C order)
    with pytest.raises(AssertionError, match=r"alice's hard memlock is 65536 \(/etc/security/limits.d/99-site.conf:1"):
        check(limits_node(ROLE_DROP_IN, **{"99-site.conf": later}), ALICE, "erdma")
    check(limits_node(ROLE_DROP_IN, **{"99-site.conf": later}), {}, "erdma")  # root's own lines outrank "*"
    check(limits_node(ROLE_DROP_IN, **{"10-site.conf": later}), ALICE, "erdma")  # read before the drop-in
    check(limits_node(ROLE_DROP_IN, **{"99-site.conf.rpmsave": later}), ALICE, "erdma")  # not a *.conf: not read
    with pytest.raises(AssertionError, match=r"90-rdmaforge-memlock.conf \(rdma_core's memlock drop-in\) is missing"):
        check(limits_node(None), {}, "erdma")
    with pytest.raises(AssertionError, match=r"fabric tcp needs no memlock drop-in"):
        check(limits_node(ROLE_DROP_IN), {}, "tcp")
    check(limits_node(None), {}, "tcp")


def test_memlock_of_the_training_login_follows_its_groups() -> None:
    """A @group line applies to the training login only where the node says it is in that group (getent, id -G):
    before, every group was taken to cover some login, so a line for a group the login is not in failed the node."""
    check = test_node_state.test_memlock_drop_in
    group = "@rdma - memlock unlimited\n"
    check(limits_node(group), {**ALICE, "rdma_core_memlock_users": ["@rdma"]}, "erdma")
    with pytest.raises(AssertionError, match=r"alice's hard memlock is 64 \(/etc/security/limits.d/50-alice.conf:1"):
        check(limits_node(group, **{"50-alice.conf": "alice hard memlock 64\n"}), ALICE, "erdma")
    with pytest.raises(AssertionError, match=r"alice's hard memlock is 64 \(/etc/security/limits.d/99-rdma.conf:1"):
        check(limits_node(ROLE_DROP_IN, **{"99-rdma.conf": "@rdma hard memlock 64\n"}), ALICE, "erdma")
    # alice is not in student (getent lists bob only, id -G has not 1700): its line is not hers
    check(limits_node(ROLE_DROP_IN, **{"99-student.conf": "@student hard memlock 64\n"}), ALICE, "erdma")


def test_memlock_of_root_on_debian_needs_roots_own_lines() -> None:
    """Debian's and Ubuntu's pam_limits apply no * line to root: rdma_core_memlock_users ["*"] leaves a root login
    with no memlock line there (it passed before), while RHEL's applies it."""
    check = test_node_state.test_memlock_drop_in
    star = "* soft memlock unlimited\n* hard memlock unlimited\n"
    with pytest.raises(AssertionError, match=r"no line sets root's soft memlock; no line sets root's hard memlock"):
        check(limits_node(star), {"rdma_core_memlock_users": ["*"]}, "erdma")
    check(as_rhel(limits_node(star)), {"rdma_core_memlock_users": ["*"]}, "erdma")


def test_memlock_lines_pam_limits_reads_otherwise_than_they_look() -> None:
    """A CRLF drop-in's "unlimited\r" is no value Linux-PAM 1.6+ reads; "+64" is 64 (strtoul); "root -x" is a
    no-limits line (a type starting with -). Each passed before."""
    check = test_node_state.test_memlock_drop_in
    with pytest.raises(AssertionError, match=r"no line sets root's soft memlock; no line sets root's hard memlock"):
        check(limits_node(ROLE_DROP_IN.replace("\n", "\r\n")), {}, "erdma")
    with pytest.raises(AssertionError, match=r"root's hard memlock is 64 \(/etc/security/limits.d/99-site.conf:1"):
        check(limits_node(ROLE_DROP_IN, **{"99-site.conf": "root hard memlock +64\n"}), {}, "erdma")
    with pytest.raises(AssertionError, match=r"'root -' \(/etc/security/limits.d/99-site.conf:1\): pam_limits sets no"):
        check(limits_node(ROLE_DROP_IN, **{"99-site.conf": "root -x\n"}), {}, "erdma")


def test_memlock_not_judged_where_the_login_or_the_vendor_files_leave_it_open() -> None:
    """A training login unknown on the node, or a vendor file (/usr/etc/security, read only by a Linux-PAM built
    with a vendor directory) that would lower its limit: not judged, never passed; they were never looked at."""
    check = test_node_state.test_memlock_drop_in
    with pytest.raises(pytest.skip.Exception, match=r"not judged: .*carol is not a user on the node"):
        check(limits_node(ROLE_DROP_IN), {"ssh_trust_user": "carol"}, "erdma")
    with pytest.raises(pytest.skip.Exception, match=r"not judged: .*ssh_trust_user is a template"):
        check(limits_node(ROLE_DROP_IN), {"ssh_trust_user": "{{ cluster_user }}"}, "erdma")
    suse = limits_node(ROLE_DROP_IN)
    suse.commands[VENDOR_D_FIND] = Result(0, "99-vendor.conf\n")
    suse.add("/usr/etc/security/limits.d/99-vendor.conf", "* hard memlock 64\n")
    with pytest.raises(pytest.skip.Exception, match=r"not judged: .*99-vendor.conf only where Linux-PAM was built"):
        check(suse, ALICE, "erdma")
    check(suse, {}, "erdma")  # root's own lines outrank it: unlimited with or without it


#: Debian 12's /etc/pam.d/sshd, its pam_limits.so line (40) as a site might change it.
DEBIAN_SSHD = (PAM_D / "debian12" / "sshd").read_text()
SSHD_LIMITS = "session    required     pam_limits.so\n"
SSH_LIMITS_CONF = "/etc/security/limits-ssh.conf"


def test_memlock_is_judged_from_the_file_sshds_pam_limits_reads() -> None:
    """pam_limits.so conf=FILE in sshd's stack reads FILE alone (no limits.d); the suite judged limits.conf and
    limits.d whatever pam.d said, so a conf= file that lowers the limit, or one that does not exist (nothing set),
    passed on the strength of a drop-in pam_limits never reads. Debian's sshd line and RHEL's password-auth line
    (through sshd's include) are followed."""
    check = test_node_state.test_memlock_drop_in
    conf = DEBIAN_SSHD.replace(SSHD_LIMITS, f"session    required     pam_limits.so conf={SSH_LIMITS_CONF}\n")
    lowered = limits_node(ROLE_DROP_IN)
    pam_stack(lowered, "debian12", sshd=conf)
    lowered.add(SSH_LIMITS_CONF, "root soft memlock 64\nroot hard memlock 64\n")
    with pytest.raises(
        AssertionError,
        match=r"root's soft memlock is 64 \(/etc/security/limits-ssh.conf:1: .*"
        r"pam_limits.so at /etc/pam.d/sshd:40 reads only /etc/security/limits-ssh.conf",
    ):
        check(lowered, {}, "erdma")
    missing = limits_node(ROLE_DROP_IN)
    pam_stack(missing, "debian12", sshd=conf)
    with pytest.raises(AssertionError, match=r"no line sets root's soft memlock.*limits-ssh.conf, which does not"):
        check(missing, {}, "erdma")
    unlimited = limits_node("root hard memlock 64\n")  # the drop-in: limits.d is not read with conf=
    pam_stack(unlimited, "debian12", sshd=conf)
    unlimited.add(SSH_LIMITS_CONF, ROLE_DROP_IN)
    check(unlimited, {}, "erdma")
    rhel = limits_node(ROLE_DROP_IN)
    rhel.system_info = SystemInfo("rocky")
    pam_stack(rhel, "rhel9", password_auth=(PAM_D / "rhel9" / "password-auth").read_text().replace(
        "pam_limits.so\n", f"pam_limits.so conf={SSH_LIMITS_CONF}\n"))  # fmt: skip
    rhel.add(SSH_LIMITS_CONF, "* hard memlock 8192\n")
    with pytest.raises(AssertionError, match=r"root's hard memlock is 8192 .*/etc/pam.d/password-auth:28 reads only"):
        check(rhel, {}, "erdma")


def test_memlock_without_pam_limits_in_sshds_stack_is_a_failure() -> None:
    """No pam_limits.so in sshd's session stack: the limits files, rdma_core's drop-in among them, do nothing for an
    SSH login; the suite passed the drop-in all the same. A stack that runs it only on some module answers, or one
    that cannot be read, is not judged."""
    check = test_node_state.test_memlock_drop_in
    without = limits_node(ROLE_DROP_IN)
    pam_stack(without, "debian12", sshd=DEBIAN_SSHD.replace(SSHD_LIMITS, ""))
    with pytest.raises(
        AssertionError,
        match=r"no pam_limits.so runs in the PAM session stack of sshd \(/etc/pam.d/sshd,"
        r" /etc/pam.d/common-session\): the limits files do not apply",
    ):
        check(without, {}, "erdma")
    skipped = limits_node(ROLE_DROP_IN)  # a jump over it when pam_succeed_if says yes
    pam_stack(
        skipped,
        "debian12",
        sshd=DEBIAN_SSHD.replace(
            SSHD_LIMITS, f"session [success=1 default=ignore] pam_succeed_if.so user = alice\n{SSHD_LIMITS}"
        ),
    )
    with pytest.raises(pytest.skip.Exception, match=r"not judged: .*pam_limits.so at /etc/pam.d/sshd:41 runs or not"):
        check(skipped, {}, "erdma")
    unread = limits_node(ROLE_DROP_IN)
    unread.files.pop("/etc/pam.d/common-session")
    with pytest.raises(pytest.skip.Exception, match=r"not judged: .*/etc/pam.d/common-session does not exist"):
        check(unread, {}, "erdma")


#: Debian 12's sshd_config line 85 (tests/data/sshd_config/debian12).
DEBIAN_USEPAM = "UsePAM yes\n"
#: `systemctl show --property=MainPID --value UNIT` for the units sshd runs as (Debian's ssh.service first).
MAIN_PID = "systemctl show --property=MainPID --value {}"
#: A real /proc/PID/limits (tests/data/sshd_config/SOURCES.md): locked memory 8388608 bytes, soft and hard.
PROC_LIMITS = (SSHD_CONFIG / "proc-limits-debian12").read_text()


def no_pam_node(sshd_limits: str | None) -> FakeHost:
    """A node whose limits files and PAM stack give every login memlock unlimited (limits_node with the role's
    drop-in) but whose sshd runs no PAM: a drop-in 10-nopam.conf says UsePAM no, read before Debian's UsePAM yes.
    ssh.service's sshd is pid 812 with ``sshd_limits`` as its /proc/812/limits (None: no running sshd)."""
    host = limits_node(ROLE_DROP_IN)
    sshd_files(host, "debian12", **{"10-nopam.conf": "# sshd without PAM\nUsePAM no\n"})
    if sshd_limits is not None:
        host.commands[MAIN_PID.format("ssh.service")] = Result(0, "812\n")
        host.commands["cat /proc/812/limits"] = Result(0, sshd_limits)
    for unit in ("ssh.service", "sshd.service"):
        host.commands.setdefault(MAIN_PID.format(unit), Result(0, "0\n"))  # systemd: no such unit, or not running
    return host


def test_memlock_without_pam_in_sshd_is_not_passed_on_the_limits_files() -> None:
    """UsePAM no (a drop-in read first): sshd runs no PAM session, so the limits files that say unlimited do not
    apply to an SSH login, which keeps sshd's own limit; the suite passed it on the files. Now a failure naming the
    node, the file and line, sshd's limit and what to do; not judged where sshd's limit is unlimited (not the
    files' doing) or cannot be read. Never a pass."""
    check = test_node_state.test_memlock_drop_in
    node1 = {"inventory_hostname": "node1"}
    with pytest.raises(AssertionError, match=r"node1: sshd runs no PAM \(UsePAM no at /etc/ssh/sshd_config.d/"
                       r"10-nopam.conf:2 \(the first value wins: /etc/ssh/sshd_config:85 ignored\)\), so pam_limits "
                       r"and the limits files, rdma_core's drop-in among them, do not apply to an SSH login, which "
                       r"keeps sshd's own memlock: soft 8192, hard 8192 KiB \(/proc/812/limits of ssh.service's "
                       r"sshd\); set UsePAM yes \(/etc/ssh/sshd_config.d/10-nopam.conf:2\) and restart sshd, or raise "
                       r"LimitMEMLOCK= of the ssh service"):  # fmt: skip
        check(no_pam_node(PROC_LIMITS), node1, "erdma")
    locked = next(line for line in PROC_LIMITS.splitlines() if line.startswith("Max locked memory"))
    unlimited = PROC_LIMITS.replace(locked, "Max locked memory         unlimited            unlimited            bytes")
    with pytest.raises(pytest.skip.Exception, match=r"not judged: .*sshd's own memlock: unlimited \(/proc/812/limits"):
        check(no_pam_node(unlimited), node1, "erdma")
    with pytest.raises(pytest.skip.Exception, match=r"not judged: .*not read here \(no running sshd in ssh.service or "
                       r"sshd.service"):  # fmt: skip
        check(no_pam_node(None), node1, "erdma")
    # Debian's own line changed to no, and RHEL's settings without 50-redhat.conf (no UsePAM line: sshd's default)
    debian = limits_node(ROLE_DROP_IN)
    debian.files["/etc/ssh/sshd_config"].content_string = (SSHD_CONFIG / "debian12" / "sshd_config").read_text(
    ).replace(DEBIAN_USEPAM, "UsePAM no\n")  # fmt: skip
    debian.commands[MAIN_PID.format("ssh.service")] = Result(0, "812\n")
    debian.commands["cat /proc/812/limits"] = Result(0, PROC_LIMITS)
    with pytest.raises(AssertionError, match=r"sshd runs no PAM \(UsePAM no at /etc/ssh/sshd_config:85\)"):
        check(debian, node1, "erdma")
    rocky = as_rhel(limits_node(ROLE_DROP_IN))
    rocky.files.pop("/etc/ssh/sshd_config.d/50-redhat.conf")
    rocky.commands[SSHD_D_FIND] = Result(0, "")
    rocky.commands[MAIN_PID.format("sshd.service")] = Result(0, "640\n")
    rocky.commands["cat /proc/640/limits"] = Result(0, PROC_LIMITS)
    with pytest.raises(AssertionError, match=r"sshd runs no PAM \(no UsePAM line in /etc/ssh/sshd_config: sshd's "
                       r"compiled default is no.*\(/proc/640/limits of sshd.service's sshd\)"):  # fmt: skip
        check(rocky, node1, "erdma")


@dataclass
class UnreadableFile(File):
    """A file that is there but that the suite's login cannot read (testinfra's cat fails: RuntimeError)."""

    @property  # type: ignore[override]
    def content_string(self) -> str:
        raise RuntimeError("Unexpected output CommandResult(rc=1, stderr='cat: Permission denied')")

    @content_string.setter
    def content_string(self, value: str) -> None:
        pass


def test_memlock_where_sshds_use_of_pam_cannot_be_told_is_not_judged() -> None:
    """A UsePAM inside a Match block (sshd refuses it there at startup unless it is Match all), sshd_config missing
    or unreadable (RHEL's is root's alone), sshd_config.d unlistable: not judged, never passed on the PAM stack."""
    check = test_node_state.test_memlock_drop_in
    match = limits_node(ROLE_DROP_IN)
    sshd_files(match, "debian12", **{"50-rdma.conf": "Match Group rdma\n\tUsePAM no\n"})
    with pytest.raises(pytest.skip.Exception, match=r"not judged: .*UsePAM at /etc/ssh/sshd_config.d/50-rdma.conf:2 "
                       r"is inside a Match block"):  # fmt: skip
        check(match, {}, "erdma")
    missing = limits_node(ROLE_DROP_IN)
    missing.files.pop("/etc/ssh/sshd_config")
    with pytest.raises(pytest.skip.Exception, match=r"not judged: .*/etc/ssh/sshd_config does not exist"):
        check(missing, {}, "erdma")
    unreadable = limits_node(ROLE_DROP_IN)
    unreadable.files["/etc/ssh/sshd_config"] = UnreadableFile("/etc/ssh/sshd_config")
    with pytest.raises(pytest.skip.Exception, match=r"not judged: .*/etc/ssh/sshd_config cannot be read: Unexpected"):
        check(unreadable, {}, "erdma")
    unlisted = limits_node(ROLE_DROP_IN)
    unlisted.commands[SSHD_D_FIND] = Result(1, "", "find: '/etc/ssh/sshd_config.d': Permission denied\n")
    with pytest.raises(pytest.skip.Exception, match=r"not judged: .*Include /etc/ssh/sshd_config.d/\*.conf: find "
                       r"exited 1: find: '/etc/ssh/sshd_config.d': Permission denied"):  # fmt: skip
        check(unlisted, {}, "erdma")


def key_pair(directory: Path, name: str) -> str:
    """A real ed25519 key pair made by ssh-keygen; its public key as `ssh-keygen -y` prints it."""
    path = directory / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True)
    return subprocess.run(["ssh-keygen", "-y", "-f", str(path)], check=True, capture_output=True, text=True).stdout


def trust_node(private_public: str, authorized_public: str) -> FakeHost:
    """root's cluster key (the ssh_trust role's defaults: user root, key rdmaforge_cluster_ed25519) whose public half
    is ``private_public``, and an authorized_keys whose cluster block holds ``authorized_public``."""
    host = FakeHost()
    key = "/root/.ssh/rdmaforge_cluster_ed25519"
    host.add(key, mode=0o600)
    host.commands[f"ssh-keygen -y -f {key}"] = Result(0, private_public)
    block = f"# BEGIN rdmaforge cluster trust\n{authorized_public}# END rdmaforge cluster trust\n"
    host.add("/root/.ssh/authorized_keys", f"ssh-rsa AAAAB3Nza operator@laptop\n{block}")
    host.add("/etc/ssh/ssh_known_hosts", f"# BEGIN rdmaforge cluster trust\nnode1,10.0.0.1 {private_public}"
             "# END rdmaforge cluster trust\n")  # fmt: skip
    return host


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (openssh-client) is not installed here")
def test_ssh_trust_authorises_the_key_the_node_holds(tmp_path: Path) -> None:
    """The cluster block of authorized_keys must hold the public half of the cluster key on the node: every node
    holds the one pair and logs in to its peers with it. Before, the block's marker was enough."""
    cluster, old = key_pair(tmp_path, "cluster"), key_pair(tmp_path, "old")
    hostvars = {"groups": {"cluster": ["node1"]}}
    check = test_cluster_state.test_cluster_ssh_trust_key_and_known_hosts
    check(trust_node(cluster, cluster), hostvars)
    with pytest.raises(
        AssertionError, match="authorized_keys' cluster block lacks /root/.ssh/rdmaforge_cluster_ed25519"
    ):
        check(trust_node(cluster, old), hostvars)


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (openssh-client) is not installed here")
def test_ssh_trust_needs_the_key_as_a_line_and_peers_of_its_own_group(tmp_path: Path) -> None:
    """The key was found by substring, so one commented out or restricted by options passed; the peers were
    group cluster's whatever ssh_trust_group named, so without a cluster group the checks looped over nothing
    (review round 16a)."""
    cluster = key_pair(tmp_path, "cluster")
    check = test_cluster_state.test_cluster_ssh_trust_key_and_known_hosts
    for line in (f"# {cluster}", f'from="203.0.113.9",command="/bin/false" {cluster}'):
        with pytest.raises(AssertionError, match="cluster block lacks .* key as a line"):
            check(trust_node(cluster, line), {"groups": {"cluster": ["node1"]}})
    gpus = {"groups": {"gpus": ["node1"]}, "ssh_trust_group": "gpus"}
    check(trust_node(cluster, cluster), gpus)
    with pytest.raises(AssertionError, match="no host key in /etc/ssh/ssh_known_hosts for \\['node2'\\]"):
        check(trust_node(cluster, cluster), {"groups": {"gpus": ["node1", "node2"]}, "ssh_trust_group": "gpus"})
    with pytest.raises(AssertionError, match="group 'gpus' \\(ssh_trust_group\\) has no hosts"):
        check(trust_node(cluster, cluster), {"groups": {"cluster": ["node1"]}, "ssh_trust_group": "gpus"})


def plugin_node(library: str, sha256: str) -> FakeHost:
    """An eRDMA node whose libnccl-net.so (under the nccl_plugin role's default prefix) links to ``library``, a file
    with that ``sha256``, registered with ld.so and exporting ncclNetPlugin_v6."""
    host = FakeHost()
    link = "/opt/rdmaforge/nccl-plugin/lib/libnccl-net.so"
    host.add(link, is_symlink=True)
    host.add("/etc/ld.so.conf.d/rdmaforge-nccl-plugin.conf", "/opt/rdmaforge/nccl-plugin/lib\n")
    host.commands[f"readlink -f {link}"] = Result(0, f"{library}\n")
    host.commands[f"sha256sum {library}"] = Result(0, f"{sha256}  {library}\n")
    cache = f"1 libs found in cache `/etc/ld.so.cache'\n\tlibnccl-net.so (libc6,x86-64) => {link}\n"
    host.commands["PATH=$PATH:/sbin:/usr/sbin ldconfig -p"] = Result(0, cache)
    host.commands[f"nm -D --defined-only {link}"] = Result(0, "0000000000061be0 D ncclNetPlugin_v6\n")
    return host


def test_nccl_net_plugin_is_the_provider_library() -> None:
    """On erdma the provider is AIACC from PyPI, whose library the role pins by sha256: another library behind the
    link (a hand-replaced file, a plugin of another provider) is not the plugin planned. Before, any library that
    exported a net API passed."""
    check = test_node_state.test_nccl_net_plugin_registered_and_exports_net_api
    aiacc = "/opt/rdmaforge/nccl-plugin/aiacc-2.0.1/libnccl-net.so.0.0.0"
    pinned = role_default("nccl_plugin", "nccl_plugin_aiacc_library_sha256")
    check(plugin_node(aiacc, pinned), {}, "erdma")
    with pytest.raises(AssertionError, match="nccl_plugin_aiacc_library_sha256"):
        check(plugin_node(aiacc, "1" * 64), {}, "erdma")
    harp = role_default("nccl_plugin", "nccl_plugin_harp_lib")
    check(plugin_node(harp, "2" * 64), {"nccl_plugin_provider": "harp"}, "tcp")
    with pytest.raises(AssertionError, match="nccl_plugin_harp_lib"):
        check(plugin_node(aiacc, pinned), {"nccl_plugin_provider": "harp"}, "tcp")


def test_no_net_plugin_means_none_in_the_ld_so_cache_either() -> None:
    """Provider none checked only that rdmaforge's link was absent: NCCL dlopens "libnccl-net.so" through the ld.so
    cache, so the AIACC vendor package's /usr/local/lib/libnccl-net.so (or a registration left behind) was still
    loaded while verify passed, also on a machine rdmaforge never touched (review round 16a)."""
    check = test_node_state.test_nccl_net_plugin_registered_and_exports_net_api
    empty = FakeHost()
    empty.commands["PATH=$PATH:/sbin:/usr/sbin ldconfig -p"] = Result(0, "0 libs found in cache `/etc/ld.so.cache'\n")
    check(empty, {}, "tcp")
    vendor = FakeHost()
    cache = ("1 libs found in cache `/etc/ld.so.cache'\n"
             "\tlibnccl-net.so (libc6,x86-64) => /usr/local/lib/libnccl-net.so\n")
    vendor.commands["PATH=$PATH:/sbin:/usr/sbin ldconfig -p"] = Result(0, cache)
    with pytest.raises(AssertionError, match="NCCL would load the net plugin /usr/local/lib/libnccl-net.so"):
        check(vendor, {}, "tcp")


@pytest.mark.parametrize(
    "check",
    [
        test_tuning_state.test_hugepage_arguments_configured_once,
        test_tuning_state.test_policy_routing_per_secondary_nic,
    ],
)
def test_a_templated_switch_is_not_judged_rather_than_read_as_false(check: Any) -> None:
    """testinfra does not render templates: a switch the inventory sets with one is named as not judged."""
    name = "hugepages_enabled" if "hugepage" in check.__name__ else "eni_enabled"
    with pytest.raises(pytest.skip.Exception, match=rf"not judged: {name} is a template"):
        check(FakeHost(), {name: "{{ inventory_hostname in groups['tuned'] }}"})
    with pytest.raises(pytest.skip.Exception, match=rf"{name} is false for this node"):
        check(FakeHost(), {name: False})


@pytest.mark.parametrize(
    ("name", "value", "skipped_as"),
    [("rdmaforge_fabric", "{{ site_fabric }}", "not judged: rdmaforge_fabric="),
     ("eni_mtu", "{{ site_mtu }}", "not judged: eni_mtu is a template"),
     ("eni_gateways", "{{ gateway_map }}", "not judged: eni_gateways is a template"),
     ("eni_addresses", {"eth1": "{{ eth1_address }}"}, "not judged: eni_addresses is a template")],
)  # fmt: skip
def test_a_templated_plan_is_not_judged_rather_than_read_as_the_default(name: str, value: object,
                                                                        skipped_as: str) -> None:
    """Review round 36: testinfra renders no template, and the suite read one as unset: a templated fabric as tcp
    (MTU 1400 expected where erdma with jumbo frames plans 8500), templated gateways and addresses as none (their
    checks left out). The node at 1400 passed. Without the template it fails; with it, it is not judged."""
    node = eni_node("10.0.1.5/24")  # at MTU 1400
    check = test_tuning_state.test_policy_routing_per_secondary_nic
    planned = {"eni_enabled": True, "rdmaforge_fabric": "erdma", "eni_jumbo_frames": True}
    with pytest.raises(AssertionError, match="eth1: MTU 1400, planned 8500"):
        check(node, planned)
    with pytest.raises(pytest.skip.Exception, match=skipped_as):
        check(node, {**planned, name: value})


def test_templated_nccl_settings_are_not_judged_and_a_templated_role_default_is_its_meaning() -> None:
    """Review round 36: templated nccl_env_overrides or nccl_env_accelerator were read as none, so a node without
    the accelerator's settings passed. nccl_env_profile's own default is a template (the fabric): read as that."""
    from rdmaforge.infra_expectations import nccl_settings

    for name, value in (("nccl_env_overrides", "{{ site_nccl }}"), ("nccl_env_accelerator", "{{ site_acc }}")):
        with pytest.raises(pytest.skip.Exception, match=f"not judged: {name} is a template"):
            nccl_settings({name: value}, "erdma")
    erdma = defaults("nccl_env")["nccl_env_profiles"]["erdma"]
    assert nccl_settings({}, "erdma") == {str(k): str(v) for k, v in erdma.items() if v is not None}


@pytest.mark.parametrize("value", ["{{ cluster_fabric }}", {"__ansible_unsafe": "erdma"}, "ethernet"])
def test_a_fabric_testinfra_cannot_read_is_not_judged(value: object) -> None:
    """A templated or !unsafe rdmaforge_fabric was read as text: "fabric ... does not use RDMA" skipped every RDMA
    test as if the node had none, and the plugin test passed with no plugin (review round 16a)."""
    from rdmaforge.infra_expectations import fabric_of

    with pytest.raises(pytest.skip.Exception, match="not judged: rdmaforge_fabric="):
        fabric_of({"rdmaforge_fabric": value})
    assert fabric_of({"rdmaforge_fabric": "erdma"}) == "erdma"


def test_mpirun_is_looked_for_on_the_training_users_ssh_login() -> None:
    """The check ran `command -v mpirun` as the connection user (sudo's secure_path under -b, which on RHEL lacks
    /usr/local/bin where the mpi role links it): neither the PATH mpirun's remote launch gets (review round 16a)."""
    check = test_node_state.test_mpirun_on_non_interactive_path
    login = ("ssh -o BatchMode=yes -o StrictHostKeyChecking=yes node1 "
             "'command -v mpirun && { command -v orted || command -v prted; } && mpirun --version'")  # fmt: skip
    host = FakeHost()
    host.commands["command -v mpirun"] = Result(0, "/usr/bin/mpirun\n")  # the connection user's PATH has it
    with pytest.raises(AssertionError, match="not on the PATH of root's SSH login"):
        check(host, {"inventory_hostname": "node1"})
    host.commands[login] = Result(0, "/usr/local/bin/mpirun\n/usr/local/bin/orted\nmpirun (Open MPI) 4.1.4\n")
    check(host, {"inventory_hostname": "node1"})


def taco_node(gpus: int | None, conf: str, light_intra_size: str) -> FakeHost:
    """An erdma node converged with seed 004's taco accelerator (roles/nccl_env/defaults/main.yml's taco settings:
    NCCL_ALGO=RING to nccl.conf, the LIGHT_* names to the profile script) and ``gpus`` GPUs on nvidia-smi -L."""
    host = FakeHost()
    if gpus is not None:
        listed = "".join(f"GPU {i}: NVIDIA A100 (UUID: GPU-{i})\n" for i in range(gpus))
        host.commands["nvidia-smi -L"] = Result(0, listed)
    host.add("/etc/nccl.conf", conf)
    host.add("/etc/profile.d/rdmaforge-nccl.sh",
             "# Ansible managed\nexport LIGHT_2D_ALLREDUCE=1\nexport LIGHT_INTRA_SIZE=" + light_intra_size +
             "\nexport LIGHT_TOPK_ALLREDUCE=1\nexport LIGHT_TOPK_THRESHOLD=2097152\n")  # fmt: skip
    return host


TACO = {"inventory_hostname": "node1", "nccl_env_accelerator": "taco",
        "nccl_env_overrides": {"NCCL_MIN_NCHANNELS": "node_gpu_count"}}  # fmt: skip
TACO_CONF = "NCCL_ALGO=RING\nNCCL_MIN_NCHANNELS=4\nNCCL_SOCKET_IFNAME=eth0\n"


def test_settings_of_value_node_gpu_count_are_judged_as_the_node_gpu_count() -> None:
    """nccl_env writes the node's GPU count where a setting says node_gpu_count; the suite expected the words
    themselves, a false fail on every node that uses it (review round 16a). Seed 004: LIGHT_INTRA_SIZE=8 on its
    8-GPU nodes; here a 4-GPU node gets 4."""
    test_node_state.test_nccl_conf_holds_the_profile(taco_node(4, TACO_CONF, "4"), TACO, "erdma")
    test_node_state.test_login_shells_get_the_other_settings(taco_node(4, TACO_CONF, "4"), TACO, "erdma")
    with pytest.raises(AssertionError):
        test_node_state.test_nccl_conf_holds_the_profile(taco_node(8, TACO_CONF, "8"), TACO, "erdma")
    with pytest.raises(AssertionError, match="LIGHT_INTRA_SIZE"):
        test_node_state.test_login_shells_get_the_other_settings(taco_node(8, TACO_CONF, "4"), TACO, "erdma")
    # No GPU on the node: the inventory's count, else not judged
    declared = {**TACO, "rdmaforge_gpus_per_node": 4}
    test_node_state.test_nccl_conf_holds_the_profile(taco_node(None, TACO_CONF, "4"), declared, "erdma")
    with pytest.raises(pytest.skip.Exception, match="not judged: NCCL_MIN_NCHANNELS"):
        test_node_state.test_nccl_conf_holds_the_profile(taco_node(None, TACO_CONF, "4"), TACO, "erdma")


def test_login_script_holds_exactly_the_other_settings() -> None:
    """The profile script (LightCC's and ACSpeed's settings, which NCCL does not read from nccl.conf) was not
    checked at all: a missing one, or one left behind when no such setting is planned, now fails."""
    missing = taco_node(4, TACO_CONF, "4")
    del missing.files["/etc/profile.d/rdmaforge-nccl.sh"]
    with pytest.raises(AssertionError, match="missing"):
        test_node_state.test_login_shells_get_the_other_settings(missing, TACO, "erdma")
    plain = {"inventory_hostname": "node1"}
    with pytest.raises(AssertionError, match="plans none"):
        test_node_state.test_login_shells_get_the_other_settings(taco_node(4, TACO_CONF, "4"), plain, "erdma")
    del missing.files["/etc/nccl.conf"]
    test_node_state.test_login_shells_get_the_other_settings(missing, plain, "erdma")
    # seed 003's autotuning setting, given as an override, is exported as written (quoted by the role's `quote`)
    acspeed = {"inventory_hostname": "node1", "nccl_env_overrides": {"AIACC_AUTOTUNE_PERF_MODE": "time"}}
    node = FakeHost()
    node.add("/etc/profile.d/rdmaforge-nccl.sh", "# Ansible managed\nexport AIACC_AUTOTUNE_PERF_MODE=time\n")
    test_node_state.test_login_shells_get_the_other_settings(node, acspeed, "erdma")


def test_nccl_conf_of_the_training_user_that_differs_fails() -> None:
    """NCCL reads ~/.nccl.conf first and keeps a name's first value (param.cc: setenv without overwrite), so the
    training user's own NCCL_SOCKET_IFNAME=eth1 is what their runs use, whatever /etc/nccl.conf says."""
    node = FakeHost()
    node.add("/etc/nccl.conf", "NCCL_SOCKET_IFNAME=eth0\n")
    hostvars = {"inventory_hostname": "node1", "ssh_trust_user": "train"}
    node.commands["test -e /home/train"] = Result(0)
    # A home verify's login cannot enter (0700, verify without -b): not judged, never "no file there"
    with pytest.raises(pytest.skip.Exception, match="cannot enter /home/train"):
        test_node_state.test_no_nccl_conf_of_the_training_user_overrides_the_profile(node, hostvars)
    node.commands["test -x /home/train"] = Result(0)
    test_node_state.test_no_nccl_conf_of_the_training_user_overrides_the_profile(node, hostvars)  # no such file
    node.add("/home/train/.nccl.conf", "NCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME=eth0\n")  # adds, contradicts nothing
    test_node_state.test_no_nccl_conf_of_the_training_user_overrides_the_profile(node, hostvars)
    node.add("/home/train/.nccl.conf", "NCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME=eth1\nNCCL_SOCKET_IFNAME=eth0\n")
    with pytest.raises(AssertionError, match=r"\.nccl\.conf sets NCCL_SOCKET_IFNAME=eth1 \(/etc/nccl\.conf: eth0\)"):
        test_node_state.test_no_nccl_conf_of_the_training_user_overrides_the_profile(node, hostvars)


def test_a_templated_package_table_is_not_judged_rather_than_empty() -> None:
    """rdma_core_packages given as a template (testinfra renders none) skipped as "the table lists no package", as if
    the fabric needed nothing; it is named as not judged now (review round 16a)."""
    hostvars = {"inventory_hostname": "node1", "rdma_core_packages": "{{ site_rdma_packages }}"}
    with pytest.raises(pytest.skip.Exception, match="not judged: rdma_core_packages is a template"):
        test_node_state.test_rdma_userspace_packages(FakeHost(), hostvars, "erdma")
