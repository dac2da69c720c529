"""rdmaforge.parsers.rdma_devinfo against real ibv_devinfo / rdma link outputs.

The fixtures and where each comes from: tests/data/ibv_devinfo/SOURCES.md, tests/data/rdma_link/SOURCES.md.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from rdmaforge.parsers.rdma_devinfo import (
    describe_port,
    inactive_ports,
    merge_rdma_links,
    parse_expected_port,
    parse_gid_line,
    parse_ibv_devinfo,
    parse_rdma_link,
    parse_rdma_link_line,
    port_problems,
)
from rdmaforge.paths import PROJECT_ROOT

DATA = PROJECT_ROOT / "tests" / "data"
IBV = DATA / "ibv_devinfo"
LINKS = DATA / "rdma_link"
PARSER = PROJECT_ROOT / "rdmaforge" / "parsers" / "rdma_devinfo.py"
PY38 = Path(os.environ.get("RDMAFORGE_PY38", "/root/.pyenv/versions/3.8.18/bin/python3.8"))


def devices(name: str) -> list:
    return parse_ibv_devinfo((IBV / name).read_text())


def summary(devs: list) -> list:
    """(name, [(port, state, link_layer, active_mtu)]) per device: the shape most tests compare."""
    return [(d["name"], [(p["port"], p["state"], p["link_layer"], p["active_mtu"]) for p in d["ports"]]) for d in devs]


# --- ibv_devinfo fixtures ------------------------------------------------------------------------


def test_mlx4_two_hcas_tab_indented_ofed():
    devs = devices("mlx4_ib_two_hcas.txt")
    assert summary(devs) == [
        ("mlx4_1", [(1, "PORT_ACTIVE", "InfiniBand", 4096), (2, "PORT_DOWN", "InfiniBand", 4096)]),
        ("mlx4_0", [(1, "PORT_ACTIVE", "InfiniBand", 4096), (2, "PORT_DOWN", "InfiniBand", 4096)]),
    ]
    first = devs[0]
    assert {k: v for k, v in first.items() if k != "ports"} == {
        "name": "mlx4_1",
        "transport": "InfiniBand",
        "fw_ver": "2.42.5000",
        "node_guid": "7cfe:9003:00a5:95c0",
        "sys_image_guid": "7cfe:9003:00a5:95c3",
        "vendor_id": "0x02c9",
        "vendor_part_id": 4099,
        "hw_ver": "0x1",
        "board_id": "MT_1090120019",
        "phys_port_cnt": 2,
    }
    assert first["ports"][0] == {
        "port": 1,
        "state": "PORT_ACTIVE",
        "state_code": 4,
        "physical_state": None,  # only printed by -v
        "max_mtu": 4096,
        "active_mtu": 4096,
        "link_layer": "InfiniBand",
        "sm_lid": 1,
        "port_lid": 22,
        "lmc": 0,
        "active_width": None,
        "active_speed": None,
        "rate_gbps": None,  # no -v: no width and speed to multiply
        "netdev": None,
        "gids": [],
    }
    assert [(p["sm_lid"], p["port_lid"]) for p in devs[1]["ports"]] == [(18, 32), (0, 0)]
    assert devs[1]["ports"][1]["state_code"] == 1


def test_mlx4_verbose_single_port_polling():
    (dev,) = devices("mlx4_ib_port_polling_verbose.txt")
    assert dev["name"] == "mlx4_1"
    assert dev["phys_port_cnt"] == 2  # -i 2 printed one of the two ports
    (port,) = dev["ports"]
    assert port["port"] == 2
    assert (port["state"], port["state_code"], port["physical_state"]) == ("PORT_DOWN", 1, "POLLING")
    assert (port["active_width"], port["active_speed"]) == ("4X", "2.5 Gbps")
    assert port["rate_gbps"] == 10.0  # 4 lanes x 2.5 Gbit/s (SDR)
    assert port["gids"] == [{"index": 0, "gid": "fe80:0000:0000:0000:7cfe:9003:00a5:95c2", "type": None}]
    # OFED-only device lines ("log atomic arg sizes (mask)", "ooo_rc_caps  = 0x0") do not leak anywhere.
    assert dev["board_id"] == "MT_1090120019"


def test_mlx5_ib_azure_vf():
    (dev,) = devices("mlx5_ib_azure_hbv3.txt")
    assert (dev["name"], dev["fw_ver"], dev["vendor_part_id"], dev["board_id"]) == (
        "mlx5_ib0",
        "20.31.1014",
        4124,
        "MT_0000000223",
    )
    (port,) = dev["ports"]
    assert (port["state"], port["link_layer"], port["sm_lid"], port["port_lid"]) == (
        "PORT_ACTIVE",
        "InfiniBand",
        549,
        958,
    )
    assert (port["max_mtu"], port["active_mtu"]) == (4096, 4096)


def test_mlx5_ib_and_roce_on_one_host():
    devs = devices("mlx5_ib_and_roce_ofed.txt")
    assert summary(devs) == [
        ("mlx5_1", [(1, "PORT_ACTIVE", "InfiniBand", 4096)]),
        ("mlx5_3", [(1, "PORT_DOWN", "Ethernet", 1024)]),
    ]
    assert devs[1]["node_guid"] == "0000:0000:0000:0001"
    assert devs[1]["board_id"] == "PEG0000000001"


def test_mlx5_roce_port_down():
    (dev,) = devices("mlx5_roce_port_down.txt")
    assert (dev["name"], dev["vendor_part_id"]) == ("mlx5_12", 4125)
    assert summary([dev]) == [("mlx5_12", [(1, "PORT_DOWN", "Ethernet", 1024)])]
    assert dev["ports"][0]["max_mtu"] == 4096


def test_erdma():
    (dev,) = devices("erdma_alibaba.txt")
    assert (dev["name"], dev["transport"], dev["vendor_id"], dev["vendor_part_id"]) == (
        "erdma_0",
        "eRDMA",
        "0x1ded",
        4223,
    )
    assert dev["board_id"] is None  # eRDMA exposes none
    assert summary([dev]) == [("erdma_0", [(1, "PORT_ACTIVE", "Ethernet", 4096)])]


def test_rxe_verbose_untyped_gids():
    (dev,) = devices("rxe_verbose_centos7.txt")
    assert (dev["name"], dev["vendor_id"], dev["board_id"], dev["phys_port_cnt"]) == (
        "rxe0",
        "0x0000",
        None,
        1,
    )
    (port,) = dev["ports"]
    assert (port["state"], port["physical_state"], port["link_layer"]) == (
        "PORT_ACTIVE",
        "LINK_UP",
        "Ethernet",
    )
    assert (port["max_mtu"], port["active_mtu"], port["active_width"], port["active_speed"]) == (
        4096,
        1024,
        "1X",
        "2.5 Gbps",
    )
    assert port["rate_gbps"] == 2.5
    assert port["gids"] == [
        {"index": 0, "gid": "fe80:0000:0000:0000:b208:75ff:fe5f:b85e", "type": None},
        {"index": 1, "gid": "0000:0000:0000:0000:0000:ffff:0a0b:0bfb", "type": None},
    ]


def test_rxe_legacy_without_link_layer():
    (dev,) = devices("rxe_legacy_no_link_layer.txt")
    (port,) = dev["ports"]
    assert (port["state"], port["link_layer"], port["active_mtu"]) == ("PORT_ACTIVE", None, 1024)
    assert dev["sys_image_guid"] == "0000:0000:0000:0000"


def test_failed_to_open_lines_around_a_device():
    devs = devices("mlx4_vf_failed_to_open.txt")
    assert summary(devs) == [("mlx4_2", [(1, "PORT_ACTIVE", "InfiniBand", 4096)])]
    assert (devs[0]["ports"][0]["sm_lid"], devs[0]["ports"][0]["port_lid"]) == (2, 1)


@pytest.mark.parametrize("name", ["no_devices_with_warnings.txt", "no_devices_no_config_dir.txt"])
def test_no_devices(name):
    assert devices(name) == []


def test_gid_fragment_without_device_is_ignored_but_gid_lines_parse():
    text = (IBV / "mlx5_bond_roce_gids_fragment.txt").read_text()
    assert parse_ibv_devinfo(text) == []  # GID lines with no hca_id before them belong to nothing
    gids = [parse_gid_line(line) for line in text.splitlines()]
    assert gids == [
        None,  # the phys_state line
        {"index": 0, "gid": "fe80:0000:0000:0000:0ac0:ebff:feda:1cfb", "type": "RoCE v1"},
        {"index": 1, "gid": "fe80::ac0:ebff:feda:1cfb", "type": "RoCE v2"},
        {"index": 2, "gid": "0000:0000:0000:0000:0000:ffff:c800:d106", "type": "RoCE v1"},
        {"index": 3, "gid": "::ffff:200.0.209.6", "type": "RoCE v2"},
    ]


def test_gid_counts_per_fixture():
    counts = {
        path.name: sum(len(p["gids"]) for d in parse_ibv_devinfo(path.read_text()) for p in d["ports"])
        for path in sorted(IBV.glob("*.txt"))
    }
    assert counts == {
        "erdma_alibaba.txt": 0,
        "mlx4_ib_port_polling_verbose.txt": 1,
        "mlx4_ib_two_hcas.txt": 0,
        "mlx4_vf_failed_to_open.txt": 0,
        "mlx5_bond_roce_gids_fragment.txt": 0,
        "mlx5_ib_and_roce_ofed.txt": 0,
        "mlx5_ib_azure_hbv3.txt": 0,
        "mlx5_roce_port_down.txt": 0,
        "no_devices_no_config_dir.txt": 0,
        "no_devices_with_warnings.txt": 0,
        "rxe_legacy_no_link_layer.txt": 0,
        "rxe_verbose_centos7.txt": 2,
    }


def test_every_fixture_is_documented():
    documented = (IBV / "SOURCES.md").read_text() + (LINKS / "SOURCES.md").read_text()
    for path in [*IBV.glob("*.txt"), *LINKS.glob("*.txt")]:
        assert f"`{path.name}`" in documented, f"{path} has no entry in SOURCES.md"


# --- odd input never raises ----------------------------------------------------------------------


# Values ibv_devinfo itself prints for out-of-range enums ("invalid MTU (0)", "invalid state (9)") and
# values no version prints, to show nothing raises on them.
BAD_VALUES = (
    "hca_id:\tmlx5_0\n\tvendor_part_id:\t\tnot-a-number\n\t\tport:\t1\n"
    "\t\t\tmax_mtu:\t\tinvalid MTU (0)\n\t\t\tport_lmc:\t\tzz\n\t\t\tstate:\t\t\tinvalid state (9)\n"
)


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "\n\n",
        "No IB devices found\n",
        "hca_id:",
        "hca_id:\tmlx5_0\n\t\tport:\tone\n",
        "port:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",  # a port with no device
        "GID[  0]:\t\tfe80::1, RoCE v2\n",
        "\x00\xff binary \ufffd garbage ::::: ((( )))\n",
        BAD_VALUES,
    ],
)
def test_garbage_never_raises(text):
    result = parse_ibv_devinfo(text)
    assert isinstance(result, list)
    json.dumps(result)  # facts must be JSON-serialisable


def test_garbage_values_become_none():
    (dev,) = parse_ibv_devinfo(BAD_VALUES)
    assert dev["vendor_part_id"] is None
    (port,) = dev["ports"]
    assert (port["max_mtu"], port["lmc"], port["state"], port["state_code"]) == (
        None,
        None,
        "invalid state",
        9,
    )


def test_truncated_output_keeps_what_was_printed():
    text = (IBV / "mlx5_ib_and_roce_ofed.txt").read_text()
    cut = text[: text.index("\t\t\tactive_mtu:\t\t1024")]  # stop in the middle of mlx5_3's port
    devs = parse_ibv_devinfo(cut)
    assert summary(devs) == [
        ("mlx5_1", [(1, "PORT_ACTIVE", "InfiniBand", 4096)]),
        ("mlx5_3", [(1, "PORT_DOWN", None, None)]),
    ]


# --- rdma link -----------------------------------------------------------------------------------


def test_rdma_link_roce_and_ib():
    links = parse_rdma_link((LINKS / "roce_and_ib_disabled.txt").read_text())
    assert links == [
        {
            "device": "mlx5_0",
            "port": 1,
            "state": "ACTIVE",
            "physical_state": "LINK_UP",
            "netdev": "ens3f0np0",
        },
        {"device": "mlx5_1", "port": 1, "state": "DOWN", "physical_state": "DISABLED", "netdev": None},
    ]


def test_rdma_link_two_roce_ports():
    links = parse_rdma_link((LINKS / "mlx5_roce_two_ports.txt").read_text())
    assert [(x["device"], x["port"], x["netdev"]) for x in links] == [
        ("mlx5_0", 1, "enp4s0f0np0"),
        ("mlx5_1", 1, "enp4s0f1np1"),
    ]


def test_rdma_link_ib_sriov_host():
    links = parse_rdma_link((LINKS / "ib_sriov_mixed.txt").read_text())
    assert len(links) == 9
    assert [x["device"] for x in links if x["state"] == "DOWN"] == ["mlx5_1", "mlx5_3", "mlx5_5", "mlx5_7"]
    assert {x["physical_state"] for x in links if x["state"] == "DOWN"} == {"DISABLED"}
    assert [(x["device"], x["netdev"]) for x in links if x["netdev"]] == [("mlx5_4", "enp97s0f0")]


def test_rdma_link_old_format_and_wrapped_record():
    # Constructed after two formats seen in linux-rdma mailing-list posts (tests/data/rdma_link/SOURCES.md):
    # early iproute2 printed "IDX/PORT: DEV/PORT:", and a long record may wrap onto an indented line.
    text = (
        "0/1: ibp0s9/1: subnet_prefix fe80:0000:0000:0000 lid 13397 sm_lid 49151 lmc 0 state ACTIVE "
        "physical_state LINK_UP\n"
        "link mlx5_0/1 subnet_prefix fe80:0000:0000:0000 lid 66 sm_lid 3 lmc 0\n"
        "\tstate ACTIVE physical_state LINK_UP netdev ibp196s0f0\n"
    )
    assert parse_rdma_link(text) == [
        {"device": "ibp0s9", "port": 1, "state": "ACTIVE", "physical_state": "LINK_UP", "netdev": None},
        {
            "device": "mlx5_0",
            "port": 1,
            "state": "ACTIVE",
            "physical_state": "LINK_UP",
            "netdev": "ibp196s0f0",
        },
    ]


@pytest.mark.parametrize(
    "line",
    [
        "",
        "link",
        "link mlx5_0",
        "link /1 state ACTIVE",
        "link mlx5_0/x state ACTIVE",
        "Failed to open NETLINK_RDMA",
    ],
)
def test_rdma_link_garbage_lines(line):
    assert parse_rdma_link_line(line) is None
    assert parse_rdma_link(line) == []


def test_rdma_link_key_at_end_without_value():
    assert parse_rdma_link_line("link rxe0/1 state") == {
        "device": "rxe0",
        "port": 1,
        "state": None,
        "physical_state": None,
        "netdev": None,
    }


# --- merge ---------------------------------------------------------------------------------------


def test_merge_adds_netdev_and_missing_physical_state():
    # The two samples come from different hosts; what matters is the join on (device, port).
    devs = devices("mlx5_ib_and_roce_ofed.txt")  # mlx5_1 (IB), mlx5_3 (RoCE), no -v
    links = parse_rdma_link((LINKS / "roce_and_ib_disabled.txt").read_text())  # mlx5_0, mlx5_1
    merged = merge_rdma_links(devs, links)
    by_name = {d["name"]: d["ports"][0] for d in merged}
    assert (by_name["mlx5_1"]["netdev"], by_name["mlx5_1"]["physical_state"]) == (None, "DISABLED")
    assert (by_name["mlx5_3"]["netdev"], by_name["mlx5_3"]["physical_state"]) == (None, None)
    # The input is not modified.
    assert devs[0]["ports"][0]["physical_state"] is None


def test_merge_keeps_physical_state_printed_by_ibv_devinfo():
    devs = devices("rxe_verbose_centos7.txt")
    links = [{"device": "rxe0", "port": 1, "state": "ACTIVE", "physical_state": "POLLING", "netdev": "ens33"}]
    (dev,) = merge_rdma_links(devs, links)
    assert (dev["ports"][0]["netdev"], dev["ports"][0]["physical_state"]) == ("ens33", "LINK_UP")
    assert dev["ports"][0]["gids"] == devs[0]["ports"][0]["gids"]


def test_merge_with_no_links_or_no_devices():
    devs = devices("erdma_alibaba.txt")
    assert merge_rdma_links(devs, []) == devs
    assert merge_rdma_links([], parse_rdma_link((LINKS / "mlx5_roce_two_ports.txt").read_text())) == []


# --- checks used by the module -------------------------------------------------------------------


def test_inactive_ports():
    devs = devices("mlx4_ib_two_hcas.txt") + devices("mlx5_roce_port_down.txt")
    assert inactive_ports(devs) == ["mlx4_1/2: PORT_DOWN", "mlx4_0/2: PORT_DOWN", "mlx5_12/1: PORT_DOWN"]
    assert inactive_ports(devices("erdma_alibaba.txt")) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("mlx5_0:1", ("mlx5_0", 1)),
        ("mlx5_0/2", ("mlx5_0", 2)),
        (" erdma_0 ", ("erdma_0", None)),
        ("mlx5_0:", None),
        (":1", None),
        ("mlx5_0:x", None),
        ("", None),
    ],
)
def test_parse_expected_port(spec, expected):
    assert parse_expected_port(spec) == expected


def test_port_problems_all_active():
    assert port_problems(devices("erdma_alibaba.txt")) == []
    assert port_problems(devices("mlx4_ib_two_hcas.txt"), ["mlx4_1:1", "mlx4_0:1"]) == []


def test_port_problems_names_device_port_and_state():
    devs = devices("mlx4_ib_two_hcas.txt")
    assert port_problems(devs, ["mlx4_1"]) == [
        "mlx4_1 port 2 is PORT_DOWN (link layer InfiniBand): no link: check the cable/transceiver and the switch port"
    ]
    assert port_problems(devs, ["mlx4_1:2", "mlx4_1"]) == port_problems(devs, ["mlx4_1:2"])  # reported once


def test_port_problems_missing_device_and_port():
    devs = devices("mlx5_ib_and_roce_ofed.txt")
    assert port_problems(devs, ["mlx5_9:1", "mlx5_1:2", "mlx5_1:1"]) == [
        "expected RDMA device mlx5_9 not found (devices present: mlx5_1, mlx5_3)",
        "expected mlx5_1 port 2 not found (mlx5_1 has ports: 1)",
    ]


def test_port_problems_with_no_devices():
    assert port_problems([], ["mlx5_0:1"]) == ["expected RDMA device mlx5_0 not found (devices present: none)"]
    (problem,) = port_problems([])
    assert "no RDMA devices" in problem


def test_describe_port_hints():
    (dev,) = devices("mlx4_ib_port_polling_verbose.txt")
    assert describe_port("mlx4_1", dev["ports"][0]) == (
        "mlx4_1 port 2 is PORT_DOWN (physical state POLLING, link layer InfiniBand): "
        "no link: check the cable/transceiver and the switch port"
    )
    disabled = dict(dev["ports"][0], physical_state="DISABLED", netdev="ib0")
    assert "bring ib0 up" in describe_port("mlx4_1", disabled)
    init = dict(dev["ports"][0], state="PORT_INIT", physical_state="LINK_UP")
    assert "subnet manager" in describe_port("mlx4_1", init)


# --- the same file runs on the oldest Python the targets may have ----------------------------------


@pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} not installed (set RDMAFORGE_PY38)")
def test_parser_runs_on_python38():
    script = (
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location('p', sys.argv[1])\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(json.dumps([m.parse_ibv_devinfo(open(f).read()) for f in sys.argv[2:]]))\n"
    )
    fixtures = sorted(IBV.glob("*.txt"))
    proc = subprocess.run(
        [str(PY38), "-c", script, str(PARSER), *map(str, fixtures)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(proc.stdout) == [parse_ibv_devinfo(f.read_text()) for f in fixtures]


def test_only_the_fabrics_devices_are_judged():
    """Review round 27a: rdma_core judged every device. An eRDMA node whose erdma driver did not load but with any
    other active device (Soft-RoCE's rxe0 here) passed; a healthy erdma_0 beside a storage NIC that is down failed.
    The pattern is seed 000's device name (erdma_0) as the profile names it."""
    rxe_only = devices("rxe_verbose_centos7.txt")
    assert port_problems(rxe_only) == []  # every device judged: the false pass the pattern prevents
    assert port_problems(rxe_only, pattern="erdma*") == [
        "ibv_devinfo reports no erdma* RDMA device (it lists only rxe0, not the fabric's): check the fabric's driver "
        "is loaded (lsmod | grep _ib)"
    ]
    with_storage_nic = devices("erdma_alibaba.txt") + devices("mlx5_roce_port_down.txt")
    assert port_problems(with_storage_nic) != []
    assert port_problems(with_storage_nic, pattern="erdma*") == []
    # The kernel's devices (no user-space provider) count only when they are the fabric's.
    assert port_problems([], kernel_devices=["mlx5_0"], pattern="erdma*")[0].startswith(
        "ibv_devinfo reports no erdma* RDMA device:")


def test_a_port_on_the_other_link_layer_fails():
    both = devices("mlx5_ib_and_roce_ofed.txt")  # mlx5_1 on InfiniBand (active), mlx5_3 on Ethernet (down)
    assert port_problems(both, ["mlx5_1:1"], pattern="mlx5*", link_layer="InfiniBand") == []
    assert port_problems(both, ["mlx5_1:1"], pattern="mlx5*", link_layer="Ethernet") == [
        "mlx5_1 port 1 is on link layer InfiniBand, not the fabric's Ethernet"]
    problems = port_problems(both, pattern="mlx5*", link_layer="InfiniBand")
    assert "mlx5_3 port 1 is on link layer Ethernet, not the fabric's InfiniBand" in problems
