"""The rdma_devices module, run for real by Ansible on localhost from the project root.

There is no RDMA hardware here, so ``ibv_devinfo`` and ``rdma`` are test doubles: small scripts
named ``fake_ibv_devinfo`` / ``fake_rdma`` that print a real captured output (tests/data) and exit
the way the real tools do. Everything else is real: the rdmaforge.cluster collection from ansible.cfg's
collections_path (its module_utils/rdma_devinfo.py is rdmaforge/parsers/rdma_devinfo.py, which Ansible must
ship to the target), AnsiballZ, argument validation and the JSON result. The tests share their ansible-playbook
runs (tests/unit/shared_runs.py): each yields the module calls it needs.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from rdmaforge.parsers.rdma_devinfo import merge_rdma_links, parse_ibv_devinfo, parse_rdma_link
from rdmaforge.paths import PROJECT_ROOT
from tests.unit.adhoc import PY38
from tests.unit.shared_runs import Task, module_task, shared_runs

IBV = PROJECT_ROOT / "tests" / "data" / "ibv_devinfo"
LINKS = PROJECT_ROOT / "tests" / "data" / "rdma_link"


def fake_tool(directory: Path, name: str, stdout: Path | None = None, stderr: str = "", rc: int = 0) -> Path:
    """An executable that records its arguments, prints ``stdout``'s content and ``stderr``, exits ``rc``."""
    script = directory / name
    lines = ["#!/bin/sh", f'echo "$@" > "{directory / (name + ".args")}"']
    if stdout is not None:
        lines.append(f'cat "{stdout}"')
    if stderr:
        lines.append(f"printf '%s\\n' {json.dumps(stderr)} >&2")
    lines.append(f"exit {rc}")
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return script


def rdma_devices(args: dict[str, Any], *, check: bool = False, python: Path | None = None) -> Task:
    """The task ``ansible localhost -m rdmaforge.cluster.rdma_devices -a '<args>'`` runs."""
    return module_task("rdma_devices", args, check=check, python=python)


def fake_rdma(directory: Path) -> Path:
    """A fake ``rdma`` printing the RoCE + IB sample, so no test depends on this machine's iproute2."""
    return fake_tool(directory, "fake_rdma", LINKS / "roce_and_ib_disabled.txt")


def expected_devices(ibv_fixture: str, link_fixture: str | None) -> list:
    devices = parse_ibv_devinfo((IBV / ibv_fixture).read_text())
    if link_fixture is None:
        return devices
    return merge_rdma_links(devices, parse_rdma_link((LINKS / link_fixture).read_text()))


@shared_runs
def test_facts_from_ibv_devinfo_and_rdma_link(case):
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "mlx5_ib_and_roce_ofed.txt")
    failed, result, _ = yield rdma_devices({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link)})
    assert not failed, result
    expected = expected_devices("mlx5_ib_and_roce_ofed.txt", "roce_and_ib_disabled.txt")
    assert result["ansible_facts"] == {"rdma_devices": expected}
    assert result["devices"] == expected
    assert [d["name"] for d in result["devices"]] == ["mlx5_1", "mlx5_3"]
    assert result["devices"][0]["ports"][0]["physical_state"] == "DISABLED"  # filled in from rdma link
    assert result["inactive_ports"] == ["mlx5_3/1: PORT_DOWN"]
    assert result["tool_present"] is True
    assert result["changed"] is False
    assert (case / "fake_ibv_devinfo.args").read_text().split() == ["-v"]
    assert (case / "fake_rdma.args").read_text().split() == ["link", "show"]


@shared_runs
def test_verbose_output_carries_gids(case):
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "rxe_verbose_centos7.txt")
    failed, result, _ = yield rdma_devices({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link)})
    assert not failed, result
    (port,) = result["ansible_facts"]["rdma_devices"][0]["ports"]
    assert [g["gid"] for g in port["gids"]] == [
        "fe80:0000:0000:0000:b208:75ff:fe5f:b85e",
        "0000:0000:0000:0000:0000:ffff:0a0b:0bfb",
    ]
    assert (port["physical_state"], port["active_width"], port["netdev"]) == ("LINK_UP", "1X", None)


@shared_runs
def test_require_active_names_missing_and_down_ports(case):
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "mlx5_ib_and_roce_ofed.txt")
    args = {
        "ibv_devinfo_path": str(ibv),
        "rdma_path": str(rdma_link),
        "require_active": True,
        "expected_ports": ["mlx5_1:1", "mlx5_3", "mlx5_9:1"],
    }
    failed, result, _ = yield rdma_devices(args)
    assert failed
    assert result["msg"] == (
        "RDMA ports not ready: expected RDMA device mlx5_9 not found (devices present: mlx5_1, mlx5_3); "
        "mlx5_3 port 1 is PORT_DOWN (link layer Ethernet): "
        "no link: check the cable/transceiver and the switch port"
    )
    # The facts still come back, so a rescue block can report them.
    assert [d["name"] for d in result["devices"]] == ["mlx5_1", "mlx5_3"]


@shared_runs
def test_require_active_without_expected_checks_every_port(case):
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "mlx4_ib_two_hcas.txt")
    failed, result, _ = yield rdma_devices(
        {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "require_active": True}
    )
    assert failed
    assert "mlx4_1 port 2 is PORT_DOWN" in result["msg"]
    assert "mlx4_0 port 2 is PORT_DOWN" in result["msg"]
    assert "port 1" not in result["msg"]


@shared_runs
def test_require_active_passes_when_expected_ports_are_up(case):
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "mlx4_ib_two_hcas.txt")
    args = {
        "ibv_devinfo_path": str(ibv),
        "rdma_path": str(rdma_link),
        "require_active": True,
        "expected_ports": ["mlx4_1:1", "mlx4_0/1"],
    }
    failed, result, _ = yield rdma_devices(args)
    assert not failed, result
    assert result["inactive_ports"] == ["mlx4_1/2: PORT_DOWN", "mlx4_0/2: PORT_DOWN"]  # reported, not fatal


@shared_runs
def test_erdma_all_active(case):
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "erdma_alibaba.txt")
    failed, result, _ = yield rdma_devices(
        {
            "ibv_devinfo_path": str(ibv),
            "rdma_path": str(rdma_link),
            "require_active": True,
            "expected_ports": ["erdma_0"],
        }
    )
    assert not failed, result
    assert result["devices"][0]["transport"] == "eRDMA"
    assert result["inactive_ports"] == []


@shared_runs
def test_device_pattern_keeps_the_fabrics_devices(case):
    """Review round 27a: a storage NIC that is down does not fail an eRDMA node, and an eRDMA node with no eRDMA
    device fails even where another device is active."""
    rdma_link = fake_rdma(case)
    mixed = case / "erdma_and_storage.txt"
    mixed.write_text((IBV / "erdma_alibaba.txt").read_text() + (IBV / "mlx5_roce_port_down.txt").read_text())
    ibv = fake_tool(case, "fake_ibv_devinfo", mixed)
    args = {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "require_active": True}
    every, erdma, infiniband = yield [
        rdma_devices(args),
        rdma_devices({**args, "device_pattern": "erdma*", "link_layer": "Ethernet"}),
        rdma_devices({**args, "device_pattern": "mlx5*", "link_layer": "InfiniBand"}),
    ]
    assert every[0] and "mlx5_12 port 1 is PORT_DOWN" in every[1]["msg"]
    assert not erdma[0], erdma[1]
    assert erdma[1]["fabric_devices"] == ["erdma_0"] and every[1]["fabric_devices"] == ["erdma_0", "mlx5_12"]
    assert infiniband[0]
    assert "mlx5_12 port 1 is on link layer Ethernet, not the fabric's InfiniBand" in infiniband[1]["msg"]


@shared_runs
def test_no_devices_is_not_an_error(case):
    rdma_link = fake_rdma(case)
    # Like the real tool: warnings and "No IB devices found" on stderr, exit status 255, nothing on stdout.
    stderr = (IBV / "no_devices_with_warnings.txt").read_text().strip()
    ibv = fake_tool(case, "fake_ibv_devinfo", None, stderr=stderr, rc=255)
    failed, result, err = yield rdma_devices({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link)})
    assert not failed, result
    assert result["ansible_facts"] == {"rdma_devices": []}
    assert (result["devices"], result["inactive_ports"], result["tool_present"]) == ([], [], True)
    assert "exited with" not in err
    assert not (case / "fake_rdma.args").exists()  # nothing to map to netdevs


def fake_sysfs_from_sample(root: Path, *samples: str) -> list:
    """A test double of /sys/class/infiniband (there is no RDMA hardware here) holding what real ``ibv_devinfo``
    outputs say, in the kernel's formats: port states as ``CODE: NAME``, LIDs in hex. Returns the samples' devices
    as ibv_devinfo's parser reads them: what the module must report from sysfs."""
    devices = []
    for sample in samples:
        text = (IBV / sample).read_text()
        physical_codes = iter(re.findall(r"phys_state:\s*.*?\((\d+)\)", text))  # verbose output only, in port order
        for device in parse_ibv_devinfo(text):
            device_dir = root / device["name"]
            (device_dir / "ports").mkdir(parents=True)
            for name, key in (("fw_ver", "fw_ver"), ("node_guid", "node_guid"), ("sys_image_guid", "sys_image_guid"),
                              ("board_id", "board_id"), ("hw_rev", "hw_ver")):  # fmt: skip
                if device[key] is not None:
                    (device_dir / name).write_text(f"{device[key]}\n")
            for port in device["ports"]:
                port_dir = device_dir / "ports" / str(port["port"])
                port_dir.mkdir()
                (port_dir / "state").write_text(f"{port['state_code']}: {str(port['state']).removeprefix('PORT_')}\n")
                if port["physical_state"] is not None:
                    (port_dir / "phys_state").write_text(f"{next(physical_codes)}: {port['physical_state']}\n")
                if port["link_layer"] is not None:
                    (port_dir / "link_layer").write_text(f"{port['link_layer']}\n")
                (port_dir / "lid").write_text(f"{port['port_lid']:#x}\n")
                (port_dir / "sm_lid").write_text(f"{port['sm_lid']:#x}\n")
            devices.append(device)
    return devices


SYSFS_PORT_KEYS = ("port", "state", "state_code", "physical_state", "link_layer", "sm_lid", "port_lid")
SYSFS_DEVICE_KEYS = ("name", "fw_ver", "node_guid", "sys_image_guid", "board_id", "hw_ver")


@shared_runs
def test_sysfs_answers_when_ibv_devinfo_fails(case):
    """A bare host's case (rdma-core not installed yet, or its ibv_devinfo broken): the kernel's sysfs answers, in
    ibv_devinfo's vocabulary, so preflight, doctor and rdma_core read one shape."""
    sysfs = case / "sys-class-infiniband"
    want = fake_sysfs_from_sample(sysfs, "mlx5_ib_and_roce_ofed.txt", "mlx4_ib_port_polling_verbose.txt")
    broken = "Failed to get IB devices list: Function not implemented"
    ibv = fake_tool(case, "fake_ibv_devinfo", None, stderr=broken, rc=1)
    rdma = fake_tool(case, "fake_rdma", None, stderr="Failed to open NETLINK_RDMA socket", rc=1)
    args = {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma), "sysfs_root": str(sysfs)}
    found, required = yield [rdma_devices(args), rdma_devices({**args, "require_active": True})]
    failed, result, err = found
    assert not failed, result
    assert result["source"] == "sysfs" and result["tool_present"] is True
    got = {d["name"]: d for d in result["devices"]}
    assert sorted(got) == sorted(d["name"] for d in want)
    for device in want:
        assert {k: got[device["name"]][k] for k in SYSFS_DEVICE_KEYS} == {k: device[k] for k in SYSFS_DEVICE_KEYS}
        assert [{k: p[k] for k in SYSFS_PORT_KEYS} for p in got[device["name"]]["ports"]] == [
            {k: p[k] for k in SYSFS_PORT_KEYS} for p in device["ports"]
        ]
        assert got[device["name"]]["phys_port_cnt"] == len(device["ports"])
    assert "exited with 1" in err  # the broken tool is still named
    # The ports that are not active are named as ibv_devinfo's would be, and require_active fails on them.
    down = [f"{d['name']}/{p['port']}: {p['state']}" for d in want for p in d["ports"] if p["state"] != "PORT_ACTIVE"]
    assert down and sorted(result["inactive_ports"]) == sorted(down)
    refused, failed, _ = required
    assert refused and failed["msg"].startswith("RDMA ports not ready: "), failed


@shared_runs
def test_ibv_devinfo_that_answers_wins_over_sysfs(case):
    rdma_link = fake_rdma(case)
    sysfs = case / "sys-class-infiniband"
    fake_sysfs_from_sample(sysfs, "mlx4_ib_port_polling_verbose.txt")
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "erdma_alibaba.txt")
    failed, result, _ = yield rdma_devices(
        {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "sysfs_root": str(sysfs)}
    )
    assert not failed, result
    assert result["source"] == "ibv_devinfo"
    assert [d["name"] for d in result["devices"]] == [d["name"] for d in expected_devices("erdma_alibaba.txt", None)]


@shared_runs
def test_no_devices_with_require_active_fails(case):
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", None, stderr="No IB devices found", rc=255)
    failed, result, _ = yield rdma_devices(
        {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "require_active": True}
    )
    assert failed
    assert "reports no RDMA devices" in result["msg"]


@shared_runs
def test_partial_failure_keeps_devices_and_warns(case):
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "mlx4_vf_failed_to_open.txt", rc=1)
    failed, result, err = yield rdma_devices({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link)})
    assert not failed, result
    assert [d["name"] for d in result["devices"]] == ["mlx4_2"]
    assert "exited with 1; using the devices it printed" in err


@shared_runs
def test_rdma_tool_failing_only_warns(case):
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "erdma_alibaba.txt")
    rdma = fake_tool(case, "fake_rdma", None, stderr="Failed to open NETLINK_RDMA socket", rc=1)
    failed, result, err = yield rdma_devices({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma)})
    assert not failed, result
    assert result["devices"][0]["ports"][0]["netdev"] is None
    assert "Failed to open NETLINK_RDMA socket" in err


@shared_runs
def test_check_mode_reports_the_same(case):
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "mlx5_ib_azure_hbv3.txt")
    failed, result, _ = yield rdma_devices({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link)}, check=True)
    assert not failed, result
    assert result["changed"] is False
    assert result["ansible_facts"]["rdma_devices"] == expected_devices("mlx5_ib_azure_hbv3.txt", None)


@shared_runs
def test_missing_explicit_path_fails(case):
    failed, result, _ = yield rdma_devices({"ibv_devinfo_path": str(case / "nope")})
    assert failed
    assert result["msg"] == f"ibv_devinfo_path={case / 'nope'} is not an executable file"


@shared_runs
def test_bad_expected_port_fails(case):
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "erdma_alibaba.txt")
    failed, result, _ = yield rdma_devices(
        {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "expected_ports": ["erdma_0:one"]}
    )
    assert failed
    assert result["msg"] == "expected_ports entries must be DEVICE or DEVICE:PORT, got: erdma_0:one"


def _ibv_devinfo_installed() -> bool:
    sbin = ["/sbin", "/usr/sbin", "/usr/local/sbin"]  # get_bin_path looks there too
    return shutil.which("ibv_devinfo") is not None or any(Path(d, "ibv_devinfo").exists() for d in sbin)


@pytest.mark.skipif(_ibv_devinfo_installed(), reason="ibv_devinfo is installed here; this covers hosts without it")
@shared_runs
def test_tool_absent_is_not_an_error_even_with_require_active(case):
    failed, result, _ = yield rdma_devices({"require_active": True, "expected_ports": ["mlx5_0:1"]})
    assert not failed, result
    assert result["tool_present"] is False
    assert result["ansible_facts"] == {"rdma_devices": []}
    assert "ibv_devinfo not found" in result["msg"]
    assert result["source"] == "none"  # and no /sys/class/infiniband here either (the default sysfs_root)


@pytest.mark.skipif(_ibv_devinfo_installed(), reason="ibv_devinfo is installed here; this covers hosts without it")
@shared_runs
def test_ports_not_ready_from_sysfs_without_ibv_devinfo_are_named(case):
    """Review round 25a: without ibv_devinfo the result's own msg (where the devices came from) went to fail_json
    beside the port message: "got multiple values for keyword argument 'msg'", a traceback instead of the ports."""
    sysfs = case / "sys-class-infiniband"
    want = fake_sysfs_from_sample(sysfs, "mlx5_ib_and_roce_ofed.txt")
    down = [f"{d['name']} port {p['port']}" for d in want for p in d["ports"] if p["state"] != "PORT_ACTIVE"]
    failed, result, _ = yield rdma_devices({"sysfs_root": str(sysfs), "require_active": True})
    assert failed and result["source"] == "sysfs", result
    assert result["msg"].startswith("RDMA ports not ready: "), result
    assert down and all(port in result["msg"] for port in down), result["msg"]
    assert "ibv_devinfo not found" in result["msg"]


@pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} not installed (set RDMAFORGE_PY38)")
@shared_runs
def test_runs_with_python38_on_the_target(case):
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "mlx5_ib_and_roce_ofed.txt")
    failed, result, _ = yield rdma_devices({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link)}, python=PY38)
    assert not failed, result
    assert result["devices"] == expected_devices("mlx5_ib_and_roce_ofed.txt", "roce_and_ib_disabled.txt")


# --- ibstat (infiniband-diags): seed 001's port check ------------------------------------------------------------
IBSTAT = PROJECT_ROOT / "tests" / "data" / "ibstat"


@shared_runs
def test_ibstat_on_a_host_without_devices_says_no_ca(case):
    """Both tools as on a lab node with the infiniband profile: ibv_devinfo's "No IB devices found" (255) and
    ibstat's empty output (0). The result says ibstat ran and listed nothing; nothing reads as a healthy port."""
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", None, stderr="No IB devices found", rc=255)
    ibstat = fake_tool(case, "fake_ibstat", None)
    args = {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "ibstat_path": str(ibstat),
            "sysfs_root": str(case / "none")}  # fmt: skip
    found, required = yield [rdma_devices(args), rdma_devices({**args, "require_active": True})]
    failed, result, _ = found
    assert not failed, result
    assert result["devices"] == [] and result["source"] == "ibv_devinfo"
    assert result["ibstat"] == {"path": str(ibstat), "rc": 0, "cas": [], "errors": [], "notes": []}
    assert (case / "fake_ibstat.args").read_text().split() == []  # plain `ibstat`, as seed 001 runs it
    refused, failed, _ = required
    assert refused and "reports no RDMA devices" in failed["msg"]


@shared_runs
def test_ibstat_rates_and_disagreements_reach_the_result(case):
    """Two real outputs from two different hosts, put side by side to exercise the comparison: ibv_devinfo (no -v,
    so no rates) lists mlx5_1 and mlx5_3, ibstat lists mlx5_0 and mlx5_1 at 100 Gbit/s."""
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "mlx5_ib_and_roce_ofed.txt")
    ibstat = fake_tool(case, "fake_ibstat", IBSTAT / "mlx5_roce_cx6dx_two_ports.txt")
    args = {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "ibstat_path": str(ibstat)}
    found, too_slow, fast_enough = yield [
        rdma_devices(args),
        rdma_devices({**args, "require_active": True, "expected_ports": ["mlx5_1:1"], "min_rate_gbps": 200}),
        rdma_devices({**args, "require_active": True, "expected_ports": ["mlx5_1:1"], "min_rate_gbps": 100}),
    ]
    failed, result, err = found
    assert not failed, result
    rates = {(d["name"], p["port"]): p["rate_gbps"] for d in result["devices"] for p in d["ports"]}
    assert rates == {("mlx5_1", 1): 100.0, ("mlx5_3", 1): None}
    assert result["ibstat"]["cas"] == ["mlx5_0", "mlx5_1"]
    assert result["ibstat"]["notes"] == [
        "ibstat lists mlx5_0, which ibv_devinfo does not",
        "ibstat does not list mlx5_3, which ibv_devinfo does (is ib_umad loaded?)",
    ]
    assert "ibstat lists mlx5_0, which ibv_devinfo does not" in err  # each note is a warning too
    refused, failed, _ = too_slow
    assert refused
    assert failed["msg"] == (
        "RDMA ports not ready: mlx5_1 port 1 runs at 100 Gb/s, below the 200 Gb/s expected: the link trained down "
        "(check the cable or transceiver and the switch port's speed)"
    )
    refused, passed, _ = fast_enough
    assert not refused, passed


@shared_runs
def test_ibstat_that_panics_is_named(case):
    rdma_link = fake_rdma(case)
    ibv = fake_tool(case, "fake_ibv_devinfo", None, stderr="No IB devices found", rc=255)
    ibstat = fake_tool(case, "fake_ibstat", IBSTAT / "mlx5_ib_hdr_then_ibpanic.txt", rc=255)
    failed, result, err = yield rdma_devices({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link),
                                  "ibstat_path": str(ibstat), "sysfs_root": str(case / "none")})  # fmt: skip
    assert not failed, result
    assert result["ibstat"]["rc"] == 255 and result["ibstat"]["cas"] == ["mlx5_7"]
    assert result["ibstat"]["errors"] == [
        "ibpanic: [1323906] main: stat of IB device 'mlx5_8' failed: No such file or directory"
    ]
    assert f"{ibstat} exited with 255: ibpanic: [1323906] main: stat of IB device 'mlx5_8' failed" in " ".join(
        err.split()
    )


@shared_runs
def test_min_rate_must_be_positive_and_ibstat_path_must_exist(case):
    ibv = fake_tool(case, "fake_ibv_devinfo", IBV / "mlx5_ib_and_roce_ofed.txt")
    zero, no_ibstat = yield [
        rdma_devices({"ibv_devinfo_path": str(ibv), "min_rate_gbps": 0}),
        rdma_devices({"ibv_devinfo_path": str(ibv), "ibstat_path": str(case / "no-ibstat")}),
    ]
    failed, result, _ = zero
    assert failed and result["msg"] == "min_rate_gbps must be a positive number of Gbit/s, got 0.0"
    failed, result, _ = no_ibstat
    assert failed and result["msg"] == f"ibstat_path={case / 'no-ibstat'} is not an executable file"


@shared_runs
def test_a_listing_cut_short_is_completed_from_sysfs_or_refused(case):
    """ibv_devinfo stops at a port it cannot query (exit 255, 'Failed to query port 1 props'): it printed mlx5_3's
    header and no port of it, and would print no device after it. The module took the listing as complete, so
    require_active passed with mlx5_3 (whose port is down) judged as a device without ports. The kernel's sysfs
    completes it now; without sysfs, a device with fewer ports than its phys_port_cnt is refused."""
    text = (IBV / "mlx5_ib_and_roce_ofed.txt").read_text()
    cut = case / "cut.txt"
    cut.write_text(text[: text.index("\t\tport:", text.index("hca_id:\tmlx5_3"))])
    sysfs = case / "sys-class-infiniband"
    want = fake_sysfs_from_sample(sysfs, "mlx5_ib_and_roce_ofed.txt")
    ibv = fake_tool(case, "fake_ibv_devinfo", cut, stderr="Failed to query port 1 props", rc=255)
    rdma = fake_tool(case, "fake_rdma", None, stderr="Failed to open NETLINK_RDMA socket", rc=1)
    args = {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma), "require_active": True}
    completed, alone = yield [rdma_devices({**args, "sysfs_root": str(sysfs)}),
                              rdma_devices({**args, "sysfs_root": str(case / "none")})]  # fmt: skip
    failed, result, err = completed
    # the sample's mlx5_3 port 1 is PORT_DOWN: read from sysfs, it is judged
    assert failed and result["msg"].startswith("RDMA ports not ready: mlx5_3 port 1 is PORT_DOWN"), result
    assert [d["name"] for d in result["devices"]] == [d["name"] for d in want]
    assert "taken from " + str(sysfs) + ": mlx5_3" in " ".join(err.split()), err
    assert [len(d["ports"]) for d in result["devices"]] == [1, 1]
    failed, result, _ = alone
    assert failed and "mlx5_3 has 1 port(s) (phys_port_cnt), but only 0 could be read" in result["msg"], result


@shared_runs
def test_no_device_for_libibverbs_while_the_kernel_has_some_names_the_missing_provider(case):
    """libibverbs' real warnings ('no userspace device-specific driver found') then 'No IB devices found', while the
    kernel lists mlx5 devices: the failure said 'check the HCA driver is loaded', the one thing that was. It names
    the kernel's devices and the missing user-space provider now."""
    sysfs = case / "sys-class-infiniband"
    fake_sysfs_from_sample(sysfs, "mlx5_ib_and_roce_ofed.txt")
    stderr = (IBV / "no_devices_with_warnings.txt").read_text().strip()
    ibv = fake_tool(case, "fake_ibv_devinfo", None, stderr=stderr, rc=255)
    args = {"ibv_devinfo_path": str(ibv), "rdma_path": str(fake_rdma(case)), "sysfs_root": str(sysfs)}
    found, required = yield [rdma_devices(args), rdma_devices({**args, "require_active": True})]
    failed, result, err = found
    assert not failed and result["devices"] == [] and result["kernel_devices"] == ["mlx5_1", "mlx5_3"], result
    assert "user-space provider" in " ".join(err.split()), err
    failed, result, _ = required
    assert failed and "but the kernel has mlx5_1, mlx5_3" in result["msg"], result
    assert "HCA driver is loaded" not in result["msg"] and "ibverbs-providers" in result["msg"], result


@shared_runs
def test_an_ibv_devinfo_that_never_answers_is_killed_and_the_kernel_answers(case):
    """ibv_devinfo on a wedged HCA hangs while sshd answers: rdma_core's port check waited for ever before
    command_timeout. Killed at the deadline, it is read as a tool that failed: the kernel's sysfs answers."""
    sysfs = case / "sys-class-infiniband"
    want = fake_sysfs_from_sample(sysfs, "mlx5_ib_and_roce_ofed.txt")
    ibv = case / "fake_ibv_devinfo"
    ibv.write_text("#!/bin/sh\nexec sleep 3600\n")
    ibv.chmod(0o755)
    rdma = fake_tool(case, "fake_rdma", None, stderr="Failed to open NETLINK_RDMA socket", rc=1)
    args = {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma), "sysfs_root": str(sysfs), "command_timeout": 2}
    failed, result, err = yield rdma_devices(args)
    assert not failed, result
    assert result["source"] == "sysfs" and result["tool_present"] is True
    assert sorted(d["name"] for d in result["devices"]) == sorted(d["name"] for d in want)
    assert f"{ibv} -v exited with 124: {ibv} did not answer within 2 s (killed)" in err
