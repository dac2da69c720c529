"""Seed 001's port check: ``ibstat`` read by rdmaforge.parsers.rdma_devinfo, compared with ibv_devinfo, and each
port's link rate judged by doctor's ``port_rate`` check.

The outputs are real (tests/data/ibstat/SOURCES.md names each source); expected values are read off those files.
"""

from __future__ import annotations

import copy
import json
import subprocess
from typing import Any

import pytest

from rdmaforge import doctor_checks
from rdmaforge.parsers.rdma_devinfo import (
    ibstat_errors,
    merge_ibstat,
    parse_ibstat,
    parse_ibv_devinfo,
    port_problems,
    port_rate_gbps,
    read_sysfs_devices,
)
from rdmaforge.paths import PROJECT_ROOT
from tests.unit.test_rdma_devinfo import PARSER, PY38

DATA = PROJECT_ROOT / "tests" / "data"
IBSTAT = DATA / "ibstat"


def cas(name: str) -> list:
    return parse_ibstat((IBSTAT / name).read_text())


def ports(parsed: list) -> list[tuple]:
    """(device, port, state, physical state, rate, link layer) of every port: the shape most tests compare."""
    return [(c["name"], p["port"], p["state"], p["physical_state"], p["rate_gbps"], p["link_layer"])
            for c in parsed for p in c["ports"]]  # fmt: skip


# --- the parser on real outputs --------------------------------------------------------------------------------


def test_two_roce_cx6dx_ports_space_indented() -> None:
    parsed = cas("mlx5_roce_cx6dx_two_ports.txt")
    assert ports(parsed) == [
        ("mlx5_0", 1, "PORT_ACTIVE", "LINK_UP", 100.0, "Ethernet"),
        ("mlx5_1", 1, "PORT_ACTIVE", "LINK_UP", 100.0, "Ethernet"),
    ]
    first = parsed[0]
    assert (first["node_type"], first["ca_type"], first["number_of_ports"], first["fw_ver"], first["hw_ver"]) == (
        "CA", "MT4125", 1, "22.32.2004", "0",
    )  # fmt: skip
    assert (first["node_guid"], first["sys_image_guid"]) == ("0x0c42a103001dd12a", "0x0c42a103001dd12a")
    port = first["ports"][0]
    assert (port["base_lid"], port["lmc"], port["sm_lid"], port["capability_mask"], port["port_guid"]) == (
        0, 0, 0, "0x00010000", "0x0e42a1fffe1dd12a",
    )  # fmt: skip


def test_tabs_debug_lines_and_a_cut_off_port() -> None:
    parsed = cas("mlx4_ib_two_ports_debug_ibwarn.txt")
    assert [c["name"] for c in parsed] == ["mlx4_0"]  # the ibwarn lines before it are not a device
    assert ports(parsed) == [
        ("mlx4_0", 1, "PORT_DOWN", "DISABLED", 10.0, "InfiniBand"),
        ("mlx4_0", 2, "PORT_ACTIVE", "LINK_UP", 56.0, None),  # the source stops after Rate
    ]
    assert (parsed[0]["number_of_ports"], parsed[0]["ports"][0]["base_lid"], parsed[0]["ports"][0]["sm_lid"]) == (
        2, 38, 13,
    )  # fmt: skip
    assert ibstat_errors((IBSTAT / "mlx4_ib_two_ports_debug_ibwarn.txt").read_text()) == []  # ibwarn is not a failure


def test_link_up_but_state_down() -> None:
    (ca,) = cas("mlx5_ib_hdr_state_down_linkup.txt")
    assert ports([ca]) == [("mlx5_7", 1, "PORT_DOWN", "LINK_UP", 200.0, "InfiniBand")]
    assert ca["ports"][0]["base_lid"] == 65535


def test_elided_values_and_an_ibpanic() -> None:
    text = (IBSTAT / "mlx5_ib_hdr_then_ibpanic.txt").read_text()
    (ca,) = parse_ibstat(text)
    assert ports([ca]) == [("mlx5_7", 1, "PORT_ACTIVE", "LINK_UP", 200.0, "InfiniBand")]
    assert (ca["ca_type"], ca["node_guid"], ca["ports"][0]["base_lid"]) == ("...", "...", 13305)
    assert ibstat_errors(text) == [
        "ibpanic: [1323906] main: stat of IB device 'mlx5_8' failed: No such file or directory"
    ]


def test_three_cas_one_disabled_and_cut_off() -> None:
    assert ports(cas("mlx5_roce_cx7_and_disabled_cx6dx.txt")) == [
        ("mlx5_0", 1, "PORT_ACTIVE", "LINK_UP", 200.0, "Ethernet"),
        ("mlx5_1", 1, "PORT_ACTIVE", "LINK_UP", 200.0, "Ethernet"),
        ("mlx5_10", 1, "PORT_DOWN", "DISABLED", None, None),
    ]


def test_lines_without_indentation() -> None:
    assert ports(cas("mlx4_ib_qdr_unindented.txt")) == [("mlx4_0", 1, "PORT_ACTIVE", "LINK_UP", 40.0, "InfiniBand")]


def test_no_device_is_no_ca() -> None:
    """ibstat on a host without a device prints nothing and exits 0: that is no CA, not a healthy port."""
    assert parse_ibstat("") == [] and parse_ibstat(None) == []
    assert parse_ibstat("ibpanic: [12] main: can't init UMAD library\n") == []


@pytest.mark.parametrize(
    "text",
    ["CA 'x'\n\tPort one:\n\t\tRate: fast\n", "Port 1:\nState: Active\n", "CA ''\n", "\x00\xff" * 50, "CA 'a'\n" * 3],
)
def test_odd_text_never_raises(text: str) -> None:
    for ca in parse_ibstat(text):
        assert isinstance(ca["name"], str) and ca["name"]
        assert all(p["rate_gbps"] is None for p in ca["ports"])


def test_rate_forms_of_ibstat_c() -> None:
    """ibstat.c prints Rate as a whole number, as 2.5 for 1X SDR, and with "(FDR10)" for FDR10."""
    text = "CA 'mlx4_0'\n\tPort 1:\n\t\tRate: 2.5\n\tPort 2:\n\t\tRate: 40 (FDR10)\n"
    assert [p["rate_gbps"] for p in parse_ibstat(text)[0]["ports"]] == [2.5, 40.0]


# --- rates from ibv_devinfo -v and from the kernel's rate file -------------------------------------------------


@pytest.mark.parametrize(
    ("width", "speed", "rate"),
    [("4X", "25.0 Gbps", 100.0), ("4X", "50.0 Gbps", 200.0), ("4X", "14.0 Gbps", 56.0), ("1X", "2.5 Gbps", 2.5),
     ("4X", "invalid speed", None), (None, "25.0 Gbps", None), ("4X", None, None), ("wide", "25.0 Gbps", None)],
)  # fmt: skip
def test_rate_from_width_and_lane_speed(width: str | None, speed: str | None, rate: float | None) -> None:
    assert port_rate_gbps(width, speed) == rate


def test_sysfs_rate_file_as_ibstatus_prints_it(tmp_path) -> None:
    """ibstatus prints the kernel's rate file; the sysfs reader parses the same text (from the real ibstatus copy)."""
    lines = (IBSTAT / "ibstatus_mlx5_roce_edr_fragment.txt").read_text().splitlines()
    rates = [line.split("rate:", 1)[1].strip() for line in lines if line.strip().startswith("rate:")]
    assert rates == ["100 Gb/sec (4X EDR)", "100 Gb/sec (4X EDR)"]
    for index, rate in enumerate(rates):
        port_dir = tmp_path / f"mlx5_{index}" / "ports" / "1"
        port_dir.mkdir(parents=True)
        (port_dir / "state").write_text("4: ACTIVE\n")
        (port_dir / "rate").write_text(rate + "\n")
    assert [d["ports"][0]["rate_gbps"] for d in read_sysfs_devices(str(tmp_path))] == [100.0, 100.0]


# --- ibstat next to ibv_devinfo ----------------------------------------------------------------------------------


def _phys_state_line(port: dict) -> str:
    """ibv_devinfo's phys_state line for ibstat's physical state (ibstat's parse names it as ibv_devinfo does)."""
    return f"\t\t\tphys_state:\t\t{port['physical_state']} (0)\n" if port.get("physical_state") else ""


def devinfo_like(parsed: list, *, rate_from_devinfo: float | None = None) -> list:
    """ibv_devinfo records for the CAs ibstat listed (the same devices seen by the other tool)."""
    text = "".join(
        f"hca_id:\t{c['name']}\n\ttransport:\t\t\tInfiniBand (0)\n"
        + "".join(f"\t\tport:\t{p['port']}\n\t\t\tstate:\t\t\t{p['state']} (4)\n" + _phys_state_line(p)
                  for p in c["ports"])
        for c in parsed
    )
    devices = parse_ibv_devinfo(text)
    for device in devices:
        for port in device["ports"]:
            port["rate_gbps"] = rate_from_devinfo
    return devices


def test_merge_takes_ibstats_rate_when_ibv_devinfo_has_none() -> None:
    parsed = cas("mlx5_roce_cx6dx_two_ports.txt")
    merged, notes = merge_ibstat(devinfo_like(parsed), parsed)
    assert [p["rate_gbps"] for d in merged for p in d["ports"]] == [100.0, 100.0]
    assert notes == []


def test_merge_reports_disagreements_and_keeps_the_lower_rate() -> None:
    parsed = cas("mlx5_roce_cx7_and_disabled_cx6dx.txt")  # 200, 200 and a Down port
    devices = devinfo_like(parsed, rate_from_devinfo=100.0)
    devices[2]["ports"][0]["state"] = "PORT_ACTIVE"  # ibv_devinfo saying otherwise than ibstat
    devices = devices[1:]  # and not seeing mlx5_0 at all
    merged, notes = merge_ibstat(devices, parsed)
    assert [p["rate_gbps"] for d in merged for p in d["ports"]] == [100.0, 100.0]
    assert notes == [
        "ibstat lists mlx5_0, which ibv_devinfo does not",
        "mlx5_1 port 1: ibv_devinfo's width x speed gives 100 Gb/s, ibstat's Rate 200",
        "mlx5_10 port 1: ibv_devinfo says PORT_ACTIVE, ibstat says PORT_DOWN",
    ]
    assert merged[1]["ports"][0]["state"] == "PORT_ACTIVE"  # reported, not resolved: ibv_devinfo's state stays


def test_min_rate_fails_a_slow_port_and_an_unknown_one() -> None:
    parsed = cas("mlx4_ib_two_ports_debug_ibwarn.txt")  # port 2 active at 56 (FDR)
    devices, _ = merge_ibstat(devinfo_like(parsed), parsed)
    assert port_problems(devices, ["mlx4_0:2"], min_rate_gbps=56) == []
    (slow,) = port_problems(devices, ["mlx4_0:2"], min_rate_gbps=100)
    assert slow.startswith("mlx4_0 port 2 runs at 56 Gb/s, below the 100 Gb/s expected: the link trained down")
    (unknown,) = port_problems(devinfo_like(parsed), ["mlx4_0:2"], min_rate_gbps=56)
    assert "mlx4_0 port 2: its link rate is unknown" in unknown


# --- doctor's port_rate check ------------------------------------------------------------------------------------


def node_of(parsed: list, fabric: str, **inventory: Any) -> dict[str, Any]:
    devices, _ = merge_ibstat(devinfo_like(parsed), parsed)
    return {"rdma_devices": devices, "inventory": {"rdmaforge_fabric": fabric, **inventory}}


def test_port_rate_ok_when_ports_agree() -> None:
    status, actual, expected, reason = doctor_checks.check_port_rate(
        node_of(cas("mlx5_roce_cx6dx_two_ports.txt"), "roce")
    )
    assert status == "ok" and actual == "mlx5_0:1 100 Gb/s, mlx5_1:1 100 Gb/s"
    assert expected == "every active port at the node's fastest, 100 Gb/s"
    assert "compared with each other" in reason


def test_port_rate_catches_a_port_that_trained_down() -> None:
    parsed = copy.deepcopy(cas("mlx5_roce_cx7_and_disabled_cx6dx.txt"))
    parsed[1]["ports"][0]["rate_gbps"] = 100.0  # mlx5_1 trained down to 100 while mlx5_0 runs at 200
    status, _, _, reason = doctor_checks.check_port_rate(node_of(parsed, "roce"))
    assert status == "problem"
    # the Down port is not judged, and said so
    assert (
        reason
        == "trained down: mlx5_1:1 at 100 Gb/s while others run at 200 Gb/s; no rate judged for mlx5_10:1 (not ACTIVE)"
    )


def test_port_rate_against_the_inventorys_minimum() -> None:
    parsed = cas("mlx5_roce_cx7_and_disabled_cx6dx.txt")
    assert doctor_checks.check_port_rate(node_of(parsed, "roce", rdma_core_min_port_rate_gbps=200))[0] == "ok"
    status, _, expected, reason = doctor_checks.check_port_rate(
        node_of(parsed, "roce", rdma_core_min_port_rate_gbps=400)
    )
    assert (status, expected) == ("problem", ">= 400 Gb/s on every active port")
    assert (
        reason
        == "below the minimum: mlx5_0:1 at 200 Gb/s, mlx5_1:1 at 200 Gb/s; no rate judged for mlx5_10:1 (not ACTIVE)"
    )


def test_port_rate_not_checked_without_anything_to_compare() -> None:
    one = node_of(cas("mlx4_ib_qdr_unindented.txt"), "infiniband", rdmaforge_fabric="roce")
    assert doctor_checks.check_port_rate(one)[0] == "not_checked"  # mlx4_0 is not mlx5*: no port of the fabric
    single = node_of(cas("mlx5_ib_hdr_then_ibpanic.txt"), "infiniband")
    status, _, _, reason = doctor_checks.check_port_rate(single)
    assert status == "not_checked" and "fewer than two port rates to compare" in reason
    assert doctor_checks.check_port_rate({"rdma_devices": [], "inventory": {"rdmaforge_fabric": "tcp"}})[0] == (
        "not_checked"
    )
    unknown = node_of(cas("mlx5_roce_cx6dx_two_ports.txt"), "roce", rdma_core_min_port_rate_gbps=100)
    for device in unknown["rdma_devices"]:
        device["ports"][0]["rate_gbps"] = None
    status, _, _, reason = doctor_checks.check_port_rate(unknown)
    assert status == "problem" and reason.startswith("rate not reported for mlx5_0:1, mlx5_1:1")


# --- the same file runs on the oldest Python the targets may have ------------------------------------------------


@pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} not installed (set RDMAFORGE_PY38)")
def test_ibstat_parser_runs_on_python38() -> None:
    script = (
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location('p', sys.argv[1])\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(json.dumps([m.parse_ibstat(open(f).read()) for f in sys.argv[2:]]))\n"
    )
    fixtures = sorted(IBSTAT.glob("*.txt"))
    proc = subprocess.run([str(PY38), "-c", script, str(PARSER), *map(str, fixtures)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert json.loads(proc.stdout) == [parse_ibstat(f.read_text()) for f in fixtures]


def test_port_rate_only_on_the_expected_ports() -> None:
    """rdma_core_expected_ports names the rails: a slower port outside them (a storage HCA) is not a rail that
    trained down."""
    parsed = copy.deepcopy(cas("mlx5_roce_cx7_and_disabled_cx6dx.txt"))
    parsed[1]["ports"][0]["rate_gbps"] = 100.0  # mlx5_1 slower than mlx5_0
    assert doctor_checks.check_port_rate(node_of(parsed, "roce"))[0] == "problem"
    status, actual, _, _ = doctor_checks.check_port_rate(node_of(parsed, "roce", rdma_core_expected_ports=["mlx5_0"]))
    assert (status, actual) == ("not_checked", "mlx5_0:1 200 Gb/s")  # one rail left: nothing to compare it with
    status, _, _, reason = doctor_checks.check_port_rate(
        node_of(parsed, "roce", rdma_core_expected_ports=["mlx5_10:1"])  # a port that is down
    )
    assert status == "not_checked"
    assert reason == (
        "no active mlx5* port among rdma_core_expected_ports ['mlx5_10:1'] to read a rate from; no rate judged "
        "for mlx5_10:1 (not ACTIVE)"
    )


@pytest.mark.parametrize("floor", [0, -100, "nan", "inf", "fast", True])
def test_port_rate_against_a_minimum_that_is_no_positive_rate_is_never_ok(floor: object) -> None:
    """rdma_core_min_port_rate_gbps 0 (or less, NaN) let every port through: doctor said "ok, none below 0 Gb/s" on
    two 200 Gb/s ports whatever they ran at; inventory_checks allows only a positive number (or null). A word crashed
    the check. Such a minimum is an inventory problem, named, never a pass."""
    parsed = cas("mlx5_roce_cx7_and_disabled_cx6dx.txt")
    status, _, _, reason = doctor_checks.check_port_rate(node_of(parsed, "roce", rdma_core_min_port_rate_gbps=floor))
    assert status == "problem"
    assert reason.startswith(f"rdma_core_min_port_rate_gbps={floor!r} is not a rate to judge against")
