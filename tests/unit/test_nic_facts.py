"""nic_facts: the parser (rdmaforge/parsers/nic_facts.py) and the module, run for real.

The module runs against this machine's real interfaces (its default-route NIC is a virtio-net device)
and against a fake sysfs tree in tmp_path laid out like the kernel's (/sys/class/net/X -> ../../devices/
.../net/X, device -> the PCI function or virtio device, device/driver -> bus/*/drivers/<name>), which is
how a ConnectX port with a NUMA node, a virtio NIC and a bridge are tested on a machine without them.
tests/data/ip holds this machine's captured ``ip -j`` output (SOURCES.md there); inputs that machine
does not have (multipath or several default routes, iproute2 4.x quirks) are spelt out inline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaforge.converge import ledger
from rdmaforge.parsers.nic_facts import (
    IpJsonError,
    build_nics,
    driver_from_link,
    list_interfaces,
    parse_default_route,
    parse_ip_addr,
    parse_numa_node,
    pci_address_from_path,
    read_sysfs_nic,
)
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.tuning import eni_state_problems
from tests.unit.adhoc import PY38, run_module

IP_DATA = PROJECT_ROOT / "tests" / "data" / "ip"
SYS_NET = Path("/sys/class/net")
IP = shutil.which("ip") or "/usr/sbin/ip"


# --- sysfs values ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/sys/devices/pci0000:00/0000:00:03.0/virtio2", "0000:00:03.0"),  # this machine's eth0
        ("/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0", "0000:3b:00.0"),  # behind a bridge: the NIC
        ("/sys/devices/pci0000:00/0000:00:05.0", "0000:00:05.0"),
        ("/sys/devices/pci10000:00/10000:00:01.0/10000:01:00.1", "10000:01:00.1"),  # VMD domain
        ("/sys/devices/platform/soc/1c30000.ethernet", None),
        (None, None),
    ],
)
def test_pci_address_from_path(path, expected):
    assert pci_address_from_path(path) == expected


def test_numa_node_and_driver_values():
    assert [parse_numa_node(t) for t in ("1\n", "0", "-1\n", "", None, "x")] == [1, 0, None, None, None, None]
    assert driver_from_link("../../../../bus/pci/drivers/mlx5_core") == "mlx5_core"
    assert driver_from_link(None) is None


@pytest.fixture
def fake_sys(tmp_path):
    """A ConnectX-6 port on NUMA node 1 behind a PCI bridge, a virtio-net NIC, an ENA NIC whose
    numa_node is -1, a bridge and lo - linked together the way the kernel links them."""
    sys_root = tmp_path / "sys"
    (sys_root / "bus" / "pci" / "drivers" / "mlx5_core").mkdir(parents=True)
    (sys_root / "bus" / "pci" / "drivers" / "ena").mkdir(parents=True)
    (sys_root / "bus" / "virtio" / "drivers" / "virtio_net").mkdir(parents=True)
    class_net = sys_root / "class" / "net"
    class_net.mkdir(parents=True)

    def nic(device_dir: Path | None, name: str, ifindex: int, mac: str, mtu: int, state: str, driver: str | None):
        net_dir = (device_dir if device_dir else sys_root / "devices" / "virtual") / "net" / name
        net_dir.mkdir(parents=True)
        for file, value in (("ifindex", ifindex), ("address", mac), ("mtu", mtu), ("operstate", state)):
            (net_dir / file).write_text(f"{value}\n")
        if device_dir is not None:
            (net_dir / "device").symlink_to(os.path.relpath(device_dir, net_dir))
        if driver is not None and device_dir is not None:
            bus = "virtio" if driver == "virtio_net" else "pci"
            target = sys_root / "bus" / bus / "drivers" / driver
            (device_dir / "driver").symlink_to(os.path.relpath(target, device_dir))
        (class_net / name).symlink_to(os.path.relpath(net_dir, class_net))

    mlx = sys_root / "devices" / "pci0000:3a" / "0000:3a:00.0" / "0000:3b:00.0"
    mlx.mkdir(parents=True)
    (mlx / "numa_node").write_text("1\n")
    virtio_pci = sys_root / "devices" / "pci0000:00" / "0000:00:03.0"
    virtio = virtio_pci / "virtio2"
    virtio.mkdir(parents=True)
    (virtio_pci / "numa_node").write_text("0\n")  # the virtio device itself has none
    ena = sys_root / "devices" / "pci0000:00" / "0000:00:06.0"
    ena.mkdir(parents=True)
    (ena / "numa_node").write_text("-1\n")

    nic(mlx, "ens1f0np0", 5, "b8:ce:f6:00:00:01", 4200, "up", "mlx5_core")
    nic(virtio, "eth0", 2, "02:fc:00:00:00:01", 1500, "up", "virtio_net")
    nic(ena, "ens6", 3, "0e:00:00:00:00:06", 9001, "down", "ena")
    nic(None, "br0", 7, "32:5e:2d:0c:a0:af", 1500, "up", None)
    nic(None, "lo", 1, "00:00:00:00:00:00", 65536, "unknown", None)
    return class_net


def test_read_sysfs_nic_from_a_fake_tree(fake_sys):
    assert read_sysfs_nic(str(fake_sys), "ens1f0np0") == {
        "name": "ens1f0np0",
        "ifindex": 5,
        "mac": "b8:ce:f6:00:00:01",
        "mtu": 4200,
        "operstate": "up",
        "driver": "mlx5_core",
        "pci_address": "0000:3b:00.0",
        "numa_node": 1,
        "virtual": False,
    }
    virtio = read_sysfs_nic(str(fake_sys), "eth0")
    assert (virtio["driver"], virtio["pci_address"], virtio["numa_node"]) == ("virtio_net", "0000:00:03.0", 0)
    ena = read_sysfs_nic(str(fake_sys), "ens6")
    assert (ena["driver"], ena["pci_address"], ena["numa_node"], ena["operstate"]) == (
        "ena",
        "0000:00:06.0",
        None,
        "down",
    )
    bridge = read_sysfs_nic(str(fake_sys), "br0")
    assert (bridge["driver"], bridge["pci_address"], bridge["numa_node"], bridge["virtual"]) == (None, None, None, True)


def test_list_interfaces_excludes_patterns(fake_sys):
    assert list_interfaces(str(fake_sys)) == ["br0", "ens1f0np0", "ens6", "eth0"]
    # the bonding driver's file beside the interfaces is no interface (it was a NIC with every field null)
    (fake_sys / "bonding_masters").write_text("bond0\n")
    assert list_interfaces(str(fake_sys)) == ["br0", "ens1f0np0", "ens6", "eth0"]
    assert list_interfaces(str(fake_sys), ["lo", "br*", "ens6"]) == ["ens1f0np0", "eth0"]


@pytest.mark.skipif(not SYS_NET.is_dir(), reason="no /sys/class/net")
def test_read_this_machines_sysfs():
    for name in os.listdir(SYS_NET):
        try:
            entry = read_sysfs_nic(str(SYS_NET), name)
            device = SYS_NET / name / "device"
            expected_driver = (
                os.path.basename(os.readlink(device / "driver")) if (device / "driver").is_symlink() else None
            )
        except FileNotFoundError:
            continue  # the lab's interfaces come and go while the test runs
        if not (SYS_NET / name).exists():
            continue  # gone between reading it and checking it
        assert entry["driver"] == expected_driver
        assert entry["virtual"] is not device.exists()
        if entry["pci_address"]:
            assert entry["pci_address"] in os.path.realpath(device)


# --- ip -j ------------------------------------------------------------------------------------------


def test_parse_this_machines_ip_addr():
    links = parse_ip_addr((IP_DATA / "this_machine_addr_show.json").read_text())
    assert links["lo"]["ipv4"] == [
        {"address": "127.0.0.1", "prefixlen": 8, "network": "127.0.0.0/8", "broadcast": None}
    ]
    assert links["eth0"] == {
        "mac": "02:fc:00:00:00:01",
        "mtu": 1400,
        "operstate": "up",
        "ipv4": [{"address": "192.0.2.2", "prefixlen": 24, "network": "192.0.2.0/24", "broadcast": "192.0.2.255"}],
    }  # its IPv6 addresses are left out
    assert links["ifb0"]["ipv4"] == [] and links["ifb0"]["operstate"] == "down"


def test_parse_this_machines_default_route():
    route = parse_default_route((IP_DATA / "this_machine_route_default.json").read_text())
    assert route == {"interface": "eth0", "gateway": "192.0.2.1", "metric": 0}


def test_iproute2_4x_empty_records_are_skipped():
    # iproute2 4.x printed "{}" for links a filter skipped, and could leave empty addr_info entries.
    text = json.dumps(
        [
            {},
            {"ifindex": 3, "ifname": "ens6", "mtu": 9001, "operstate": "UP", "address": "0e:00:00:00:00:06",
             "addr_info": [{}, {"family": "inet", "local": "10.0.1.5", "prefixlen": 20}]},
        ]
    )  # fmt: skip
    assert parse_ip_addr(text)["ens6"]["ipv4"] == [
        {"address": "10.0.1.5", "prefixlen": 20, "network": "10.0.0.0/20", "broadcast": None}
    ]


def test_lowest_metric_and_multipath_default_routes():
    # Shapes as iproute2 prints them; spelt out because this machine has a single default route.
    two = json.dumps(
        [
            {"dst": "default", "gateway": "10.0.0.1", "dev": "ens6", "protocol": "dhcp", "metric": 200, "flags": []},
            {"dst": "default", "gateway": "192.0.2.1", "dev": "eth0", "protocol": "dhcp", "metric": 100, "flags": []},
        ]
    )
    assert parse_default_route(two) == {"interface": "eth0", "gateway": "192.0.2.1", "metric": 100}
    hops = [
        {"gateway": "10.0.0.1", "dev": "ens6", "weight": 1, "flags": []},
        {"gateway": "10.0.1.1", "dev": "ens7", "weight": 1, "flags": []},
    ]
    multipath = json.dumps([{"dst": "default", "protocol": "static", "metric": 1024, "flags": [], "nexthops": hops}])
    assert parse_default_route(multipath) == {"interface": "ens6", "gateway": "10.0.0.1", "metric": 1024}
    unreachable = '[{"type":"unreachable","dst":"default","flags":[]}]'
    assert parse_default_route(unreachable) is None
    assert parse_default_route("[]") is None
    assert parse_default_route("") is None


def test_text_that_is_not_json_is_an_error():
    with pytest.raises(IpJsonError, match='ip -j addr show did not print JSON .*: Option "-j" is unknown'):
        parse_ip_addr('Option "-j" is unknown, try "ip -help".\n')


def test_build_nics_joins_sysfs_and_ip(fake_sys):
    sysfs = [read_sysfs_nic(str(fake_sys), n) for n in list_interfaces(str(fake_sys))]
    links = parse_ip_addr(
        '[{"ifname":"ens1f0np0","addr_info":[{"family":"inet","local":"10.0.0.5","prefixlen":24,"broadcast":"10.0.0.255"}]}]'
    )
    nics = build_nics(sysfs, links, {"interface": "eth0", "gateway": "192.0.2.1", "metric": 0})
    assert [n["name"] for n in nics] == ["eth0", "ens6", "ens1f0np0", "br0"]  # ifindex order
    assert [n["name"] for n in nics if n["default_route"]] == ["eth0"]
    assert nics[2]["ipv4"][0]["network"] == "10.0.0.0/24"
    assert build_nics(sysfs, {}, None)[0]["default_route"] is False


# --- the module, for real ----------------------------------------------------------------------------


def live_ip(*arguments: str) -> str:
    return subprocess.run([IP, "-j", *arguments], capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(not SYS_NET.is_dir(), reason="no /sys/class/net")
def test_module_on_this_machine():
    run = run_module("nic_facts", {})
    assert run.rc == 0, run.result
    nics = run.result["ansible_facts"]["nics"]
    assert run.result["nics"] == nics
    names = [n["name"] for n in nics]
    assert "lo" not in names  # excluded by default
    route = parse_default_route(live_ip("route", "show", "default"))
    expected_interface = route["interface"] if route else None
    assert run.result["default_route_interface"] == expected_interface
    assert run.result["ansible_facts"]["default_route_interface"] == expected_interface
    if expected_interface is None:
        return
    (default,) = [n for n in nics if n["default_route"]]
    assert default["name"] == expected_interface
    sys_dir = SYS_NET / expected_interface
    assert default["mac"] == (sys_dir / "address").read_text().strip()
    assert default["mtu"] == int((sys_dir / "mtu").read_text())
    driver_link = sys_dir / "device" / "driver"
    assert default["driver"] == (os.path.basename(os.readlink(driver_link)) if driver_link.is_symlink() else None)
    assert (
        default["ipv4"] == parse_ip_addr(live_ip("addr", "show", "dev", expected_interface))[expected_interface]["ipv4"]
    )
    assert default["ipv4"], "the default-route interface has an IPv4 address here"


def fake_ip(directory: Path, addr: str, route: str, rc: int = 0) -> Path:
    (directory / "addr.json").write_text(addr)
    (directory / "route.json").write_text(route)
    script = directory / "fake_ip"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{directory / "ip.calls"}"\n'
        f'case "$*" in\n'
        f'  "-j addr show") cat "{directory / "addr.json"}" ;;\n'
        f'  "-j route show default") cat "{directory / "route.json"}" ;;\n'
        '  *) echo "unexpected: $*" >&2; exit 2 ;;\n'
        "esac\n"
        f"exit {rc}\n"
    )
    script.chmod(0o755)
    return script


def test_module_on_a_fake_tree(tmp_path, fake_sys):
    addr = json.dumps(
        [
            {"ifindex": 5, "ifname": "ens1f0np0", "mtu": 4200, "operstate": "UP", "addr_info": [
                {"family": "inet", "local": "10.0.0.5", "prefixlen": 24, "broadcast": "10.0.0.255"},
                {"family": "inet", "local": "10.0.0.6", "prefixlen": 32},
                {"family": "inet6", "local": "fe80::1", "prefixlen": 64},
            ]},
            {"ifindex": 2, "ifname": "eth0", "addr_info": [{"family": "inet", "local": "192.0.2.2", "prefixlen": 24}]},
        ]
    )  # fmt: skip
    route = '[{"dst":"default","gateway":"10.0.0.1","dev":"ens1f0np0","flags":[]}]'
    ip = fake_ip(tmp_path, addr, route)
    run = run_module(
        "nic_facts", {"sysfs_root": str(fake_sys), "ip_path": str(ip), "exclude": ["lo", "br*"]}, "--check"
    )
    assert run.rc == 0, run.result
    nics = {n["name"]: n for n in run.result["nics"]}
    assert sorted(nics) == ["ens1f0np0", "ens6", "eth0"]
    assert nics["ens1f0np0"] == {
        "name": "ens1f0np0",
        "ifindex": 5,
        "mac": "b8:ce:f6:00:00:01",
        "driver": "mlx5_core",
        "pci_address": "0000:3b:00.0",
        "numa_node": 1,
        "mtu": 4200,
        "operstate": "up",
        "virtual": False,
        "ipv4": [
            {"address": "10.0.0.5", "prefixlen": 24, "network": "10.0.0.0/24", "broadcast": "10.0.0.255"},
            {"address": "10.0.0.6", "prefixlen": 32, "network": "10.0.0.6/32", "broadcast": None},
        ],
        "default_route": True,
    }
    assert (nics["eth0"]["driver"], nics["eth0"]["numa_node"], nics["eth0"]["default_route"]) == (
        "virtio_net",
        0,
        False,
    )
    assert nics["ens6"]["ipv4"] == [] and nics["ens6"]["numa_node"] is None
    assert run.result["default_route_interface"] == "ens1f0np0"
    assert run.result["default_route"] == {"interface": "ens1f0np0", "gateway": "10.0.0.1", "metric": 0}
    assert (tmp_path / "ip.calls").read_text().splitlines() == ["-j addr show", "-j route show default"]


def test_module_without_json_support_fails_clearly(tmp_path, fake_sys):
    ip = fake_ip(tmp_path, 'Option "-j" is unknown, try "ip -help".', "[]", rc=255)
    run = run_module("nic_facts", {"sysfs_root": str(fake_sys), "ip_path": str(ip)})
    assert run.rc != 0
    assert run.result["msg"].startswith(f"{ip} -j addr show failed with exit status 255:")
    assert run.result["msg"].endswith("(JSON output needs iproute2 4.14 or later)")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ip_path": "/nonexistent/ip"}, "ip_path=/nonexistent/ip is not an executable file"),
        ({"sysfs_root": "/nonexistent/net"}, "sysfs_root=/nonexistent/net is not a directory (is /sys mounted?)"),
    ],
)
def test_module_refuses_bad_paths(options, message):
    run = run_module("nic_facts", options)
    assert run.rc != 0
    assert run.result["msg"] == message


@pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} not installed (set RDMAFORGE_PY38)")
def test_module_runs_with_python38_on_the_target(tmp_path, fake_sys):
    ip = fake_ip(tmp_path, (IP_DATA / "this_machine_addr_show.json").read_text(), "[]")
    run = run_module("nic_facts", {"sysfs_root": str(fake_sys), "ip_path": str(ip)}, python=PY38)
    assert run.rc == 0, run.result
    nics = {n["name"]: n for n in run.result["nics"]}
    assert nics["eth0"]["ipv4"][0]["address"] == "192.0.2.2"
    assert nics["ens1f0np0"]["pci_address"] == "0000:3b:00.0"
    assert run.result["default_route_interface"] is None


@pytest.fixture
def routing_namespace(tmp_path):
    """A real network namespace laid out like a node after the eni role: a secondary NIC (one end of a veth pair)
    with its own table and a rule for its address. Yields (namespace, a Python that runs in it, the NIC's plan)."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    name = f"rf-nicfacts-{os.getpid()}"
    subprocess.run([IP, "netns", "add", name], check=True)
    try:

        def ns(*argv: str) -> None:
            subprocess.run([IP, "-n", name, *argv], check=True, capture_output=True)

        ns("link", "add", "eni1", "mtu", "8500", "type", "veth", "peer", "name", "eni1-peer", "mtu", "8500")
        ns("link", "set", "eni1-peer", "up")
        ns("link", "set", "eni1", "up")
        ns("addr", "add", "198.18.200.5/24", "dev", "eni1")
        ns("route", "add", "198.18.200.0/24", "dev", "eni1", "table", "1001")
        ns("route", "add", "default", "via", "198.18.200.1", "dev", "eni1", "table", "1001")
        ns("rule", "add", "from", "198.18.200.5", "lookup", "1001", "priority", "1001")
        python = tmp_path / "python-in-namespace"
        python.write_text(f'#!/bin/sh\nexec {IP} netns exec {name} {sys.executable} "$@"\n')
        python.chmod(0o755)
        plan = {"name": "eni1", "address": "198.18.200.5", "network": "198.18.200.0/24", "table": 1001,
                "priority": 1001, "gateway": "198.18.200.1", "mtu": 8500}  # fmt: skip
        yield name, python, plan
    finally:
        subprocess.run([IP, "netns", "delete", name], check=False)


def test_the_module_reads_the_policy_routing_state_in_one_run(routing_namespace):
    """routing_tables: the rules, each table's routes and the main default routes, as ip itself lists them in
    the namespace; a table the kernel does not have has none. The eni role checks the plan against this output."""
    name, python, plan = routing_namespace

    def ip_in_ns(*argv: str) -> list:
        out = subprocess.run([IP, "-n", name, "-j", *argv], capture_output=True, text=True, check=True).stdout
        return json.loads(out) if out.strip() else []

    run = run_module("nic_facts", {"routing_tables": [1001, 1002]}, python=python)
    assert run.rc == 0, run.result
    routing = run.result["routing"]
    assert routing["rules"] == ip_in_ns("rule", "show")
    assert routing["tables"] == {"1001": ip_in_ns("route", "show", "table", "1001"), "1002": []}
    assert routing["main_default"] == ip_in_ns("route", "show", "default") == []
    nics = run.result["ansible_facts"]["nics"]
    assert eni_state_problems([plan], routing["rules"], {"eni1": routing["tables"]["1001"]}, [], nics) == []
    # The rule taken away: the same check names it.
    subprocess.run([IP, "-n", name, "rule", "del", "priority", "1001"], check=True)
    again = run_module("nic_facts", {"routing_tables": [1001]}, python=python).result["routing"]
    problems = eni_state_problems([plan], again["rules"], {"eni1": again["tables"]["1001"]}, [], nics)
    assert problems == ["rule missing: from 198.18.200.5 lookup 1001 priority 1001"]
    assert "routing" not in run_module("nic_facts", {}, python=python).result


def test_the_ledger_re_reads_what_the_routing_read_saw():
    """nic_facts with routing_tables replaced three command tasks of the eni role; the drift check re-runs the
    same commands those tasks left in the record (their argvs as the role's verify.yml spelled them)."""
    entry = ledger.Resources()
    args = {"routing_tables": [1001, 1002], "exclude": ["lo"]}
    ledger.add_task_result(entry, "read", "rdmaforge.cluster.nic_facts", {"invocation": {"module_args": args}})
    assert entry.commands == [
        ["ip", "-j", "rule", "show"],
        ["ip", "-j", "route", "show", "table", "1001"],
        ["ip", "-j", "route", "show", "table", "1002"],
        ["ip", "-j", "route", "show", "default"],
    ]
    plain = ledger.Resources()
    ledger.add_task_result(plain, "read", "rdmaforge.cluster.nic_facts", {"invocation": {"module_args": {}}})
    assert plain.as_dict() == ledger.Resources().as_dict()  # the NICs alone are in the node fingerprint


def test_an_eni_with_a_host_address_passes_as_ip_prints_its_route(routing_namespace):
    """A /32 ENI address: iproute2 prints the host route's dst without /32 ("198.18.201.5"), and the check looked for
    "198.18.201.5/32": every converge applied the configuration again, waited and failed (review round 37b)."""
    name, _, _ = routing_namespace

    def ns(*argv: str) -> None:
        subprocess.run([IP, "-n", name, *argv], check=True, capture_output=True)

    def ip_in_ns(*argv: str) -> list:
        out = subprocess.run([IP, "-n", name, "-j", *argv], capture_output=True, text=True, check=True).stdout
        return json.loads(out) if out.strip() else []

    ns("addr", "add", "198.18.201.5/32", "dev", "eni1")
    ns("route", "add", "198.18.201.5/32", "dev", "eni1", "table", "1002")
    ns("rule", "add", "from", "198.18.201.5", "lookup", "1002", "priority", "1002")
    table = ip_in_ns("route", "show", "table", "1002")
    assert [route["dst"] for route in table] == ["198.18.201.5"]  # what makes the case: no /32 in ip's output
    plan = {"name": "eni1", "address": "198.18.201.5", "network": "198.18.201.5/32", "table": 1002,
            "priority": 1002, "gateway": None, "mtu": 8500}  # fmt: skip
    nics = [{"name": "eni1", "mtu": 8500}]
    assert eni_state_problems([plan], ip_in_ns("rule", "show"), {"eni1": table}, [], nics) == []
    ns("route", "del", "198.18.201.5/32", "dev", "eni1", "table", "1002")
    assert eni_state_problems([plan], ip_in_ns("rule", "show"), {"eni1": []}, [], nics) == [
        "table 1002 has no route to 198.18.201.5/32 via eni1"]  # fmt: skip


def test_a_sysfs_value_that_is_not_utf8_is_read_not_a_traceback(tmp_path, fake_sys):
    """A driver's odd byte in a sysfs file raised UnicodeDecodeError, and the node probe failed with it."""
    (fake_sys / "ens6" / "operstate").write_bytes(b"up\xff\n")  # fake_sys is the class/net directory
    ip = fake_ip(tmp_path, "[]", "[]")
    run = run_module("nic_facts", {"sysfs_root": str(fake_sys), "ip_path": str(ip)}, "--check")
    assert run.rc == 0, run.result
    assert {n["name"]: n["operstate"] for n in run.result["nics"]}["ens6"] == "up\ufffd"
