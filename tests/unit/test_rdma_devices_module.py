"""The rdma_devices module, run for real by ``ansible localhost`` from the project root.

There is no RDMA hardware here, so ``ibv_devinfo`` and ``rdma`` are test doubles: small scripts
named ``fake_ibv_devinfo`` / ``fake_rdma`` that print a real captured output (tests/data) and exit
the way the real tools do. Everything else is real: the rdmaforge.cluster collection from ansible.cfg's
collections_path (its module_utils/rdma_devinfo.py is rdmaforge/parsers/rdma_devinfo.py, which Ansible must
ship to the target), AnsiballZ, argument validation and the JSON result.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaforge.parsers.rdma_devinfo import merge_rdma_links, parse_ibv_devinfo, parse_rdma_link
from rdmaforge.paths import PROJECT_ROOT

IBV = PROJECT_ROOT / "tests" / "data" / "ibv_devinfo"
LINKS = PROJECT_ROOT / "tests" / "data" / "rdma_link"
ANSIBLE = Path(sys.executable).parent / "ansible"
HOST_RESULT = re.compile(r"^localhost \| [A-Z]+!? => ", re.MULTILINE)
PY38 = Path(os.environ.get("RDMAFORGE_PY38", "/root/.pyenv/versions/3.8.18/bin/python3.8"))


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


def run_module(args: dict, *extra: str, python: Path | None = None) -> tuple[int, dict, str]:
    """(exit status, module result, stderr) of ``ansible localhost -m rdmaforge.cluster.rdma_devices -a '<args>'``."""
    argv = [
        str(ANSIBLE), "localhost", "-i", "localhost,", "-c", "local",
        "-e", f"ansible_python_interpreter={python or sys.executable}",
        "-m", "rdmaforge.cluster.rdma_devices", "-a", json.dumps(args), *extra,
    ]  # fmt: skip
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg"),
        "ANSIBLE_CACHE_PLUGIN": "memory",  # keep returned facts out of the shared .cache/facts
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
    }
    proc = subprocess.run(argv, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120)
    # The default callback prints "localhost | SUCCESS => {...}" (or "FAILED! =>", after an [ERROR] summary).
    match = HOST_RESULT.search(proc.stdout)
    assert match, f"no host result in the output:\n{proc.stdout}\n{proc.stderr}"
    return proc.returncode, json.loads(proc.stdout[match.end() :]), proc.stderr


@pytest.fixture
def rdma_link(tmp_path):
    """A fake ``rdma`` printing the RoCE + IB sample, so no test depends on this machine's iproute2."""
    return fake_tool(tmp_path, "fake_rdma", LINKS / "roce_and_ib_disabled.txt")


def expected_devices(ibv_fixture: str, link_fixture: str | None) -> list:
    devices = parse_ibv_devinfo((IBV / ibv_fixture).read_text())
    if link_fixture is None:
        return devices
    return merge_rdma_links(devices, parse_rdma_link((LINKS / link_fixture).read_text()))


def test_facts_from_ibv_devinfo_and_rdma_link(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "mlx5_ib_and_roce_ofed.txt")
    rc, result, _ = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link)})
    assert rc == 0, result
    expected = expected_devices("mlx5_ib_and_roce_ofed.txt", "roce_and_ib_disabled.txt")
    assert result["ansible_facts"] == {"rdma_devices": expected}
    assert result["devices"] == expected
    assert [d["name"] for d in result["devices"]] == ["mlx5_1", "mlx5_3"]
    assert result["devices"][0]["ports"][0]["physical_state"] == "DISABLED"  # filled in from rdma link
    assert result["inactive_ports"] == ["mlx5_3/1: PORT_DOWN"]
    assert result["tool_present"] is True
    assert result["changed"] is False
    assert (tmp_path / "fake_ibv_devinfo.args").read_text().split() == ["-v"]
    assert (tmp_path / "fake_rdma.args").read_text().split() == ["link", "show"]


def test_verbose_output_carries_gids(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "rxe_verbose_centos7.txt")
    rc, result, _ = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link)})
    assert rc == 0, result
    (port,) = result["ansible_facts"]["rdma_devices"][0]["ports"]
    assert [g["gid"] for g in port["gids"]] == [
        "fe80:0000:0000:0000:b208:75ff:fe5f:b85e",
        "0000:0000:0000:0000:0000:ffff:0a0b:0bfb",
    ]
    assert (port["physical_state"], port["active_width"], port["netdev"]) == ("LINK_UP", "1X", None)


def test_require_active_names_missing_and_down_ports(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "mlx5_ib_and_roce_ofed.txt")
    args = {
        "ibv_devinfo_path": str(ibv),
        "rdma_path": str(rdma_link),
        "require_active": True,
        "expected_ports": ["mlx5_1:1", "mlx5_3", "mlx5_9:1"],
    }
    rc, result, _ = run_module(args)
    assert rc != 0
    assert result["msg"] == (
        "RDMA ports not ready: expected RDMA device mlx5_9 not found (devices present: mlx5_1, mlx5_3); "
        "mlx5_3 port 1 is PORT_DOWN (link layer Ethernet): "
        "no link: check the cable/transceiver and the switch port"
    )
    # The facts still come back, so a rescue block can report them.
    assert [d["name"] for d in result["devices"]] == ["mlx5_1", "mlx5_3"]


def test_require_active_without_expected_checks_every_port(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "mlx4_ib_two_hcas.txt")
    rc, result, _ = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "require_active": True})
    assert rc != 0
    assert "mlx4_1 port 2 is PORT_DOWN" in result["msg"]
    assert "mlx4_0 port 2 is PORT_DOWN" in result["msg"]
    assert "port 1" not in result["msg"]


def test_require_active_passes_when_expected_ports_are_up(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "mlx4_ib_two_hcas.txt")
    args = {
        "ibv_devinfo_path": str(ibv),
        "rdma_path": str(rdma_link),
        "require_active": True,
        "expected_ports": ["mlx4_1:1", "mlx4_0/1"],
    }
    rc, result, _ = run_module(args)
    assert rc == 0, result
    assert result["inactive_ports"] == ["mlx4_1/2: PORT_DOWN", "mlx4_0/2: PORT_DOWN"]  # reported, not fatal


def test_erdma_all_active(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "erdma_alibaba.txt")
    rc, result, _ = run_module(
        {
            "ibv_devinfo_path": str(ibv),
            "rdma_path": str(rdma_link),
            "require_active": True,
            "expected_ports": ["erdma_0"],
        }
    )
    assert rc == 0, result
    assert result["devices"][0]["transport"] == "eRDMA"
    assert result["inactive_ports"] == []


def test_no_devices_is_not_an_error(tmp_path, rdma_link):
    # Like the real tool: warnings and "No IB devices found" on stderr, exit status 255, nothing on stdout.
    stderr = (IBV / "no_devices_with_warnings.txt").read_text().strip()
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", None, stderr=stderr, rc=255)
    rc, result, err = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link)})
    assert rc == 0, result
    assert result["ansible_facts"] == {"rdma_devices": []}
    assert (result["devices"], result["inactive_ports"], result["tool_present"]) == ([], [], True)
    assert "exited with" not in err
    assert not (tmp_path / "fake_rdma.args").exists()  # nothing to map to netdevs


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


def test_sysfs_answers_when_ibv_devinfo_fails(tmp_path):
    """A bare host's case (rdma-core not installed yet, or its ibv_devinfo broken): the kernel's sysfs answers, in
    ibv_devinfo's vocabulary, so preflight, doctor and rdma_core read one shape."""
    sysfs = tmp_path / "sys-class-infiniband"
    want = fake_sysfs_from_sample(sysfs, "mlx5_ib_and_roce_ofed.txt", "mlx4_ib_port_polling_verbose.txt")
    broken = "Failed to get IB devices list: Function not implemented"
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", None, stderr=broken, rc=1)
    rdma = fake_tool(tmp_path, "fake_rdma", None, stderr="Failed to open NETLINK_RDMA socket", rc=1)
    rc, result, err = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma), "sysfs_root": str(sysfs)})
    assert rc == 0, result
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
    rc, failed, _ = run_module(
        {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma), "sysfs_root": str(sysfs), "require_active": True}
    )
    assert rc != 0 and failed["msg"].startswith("RDMA ports not ready: "), failed


def test_ibv_devinfo_that_answers_wins_over_sysfs(tmp_path, rdma_link):
    sysfs = tmp_path / "sys-class-infiniband"
    fake_sysfs_from_sample(sysfs, "mlx4_ib_port_polling_verbose.txt")
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "erdma_alibaba.txt")
    rc, result, _ = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "sysfs_root": str(sysfs)})
    assert rc == 0, result
    assert result["source"] == "ibv_devinfo"
    assert [d["name"] for d in result["devices"]] == [d["name"] for d in expected_devices("erdma_alibaba.txt", None)]


def test_no_devices_with_require_active_fails(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", None, stderr="No IB devices found", rc=255)
    rc, result, _ = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "require_active": True})
    assert rc != 0
    assert "reports no RDMA devices" in result["msg"]


def test_partial_failure_keeps_devices_and_warns(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "mlx4_vf_failed_to_open.txt", rc=1)
    rc, result, err = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link)})
    assert rc == 0, result
    assert [d["name"] for d in result["devices"]] == ["mlx4_2"]
    assert "exited with 1; using the devices it printed" in err


def test_rdma_tool_failing_only_warns(tmp_path):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "erdma_alibaba.txt")
    rdma = fake_tool(tmp_path, "fake_rdma", None, stderr="Failed to open NETLINK_RDMA socket", rc=1)
    rc, result, err = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma)})
    assert rc == 0, result
    assert result["devices"][0]["ports"][0]["netdev"] is None
    assert "Failed to open NETLINK_RDMA socket" in err


def test_check_mode_reports_the_same(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "mlx5_ib_azure_hbv3.txt")
    rc, result, _ = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link)}, "--check")
    assert rc == 0, result
    assert result["changed"] is False
    assert result["ansible_facts"]["rdma_devices"] == expected_devices("mlx5_ib_azure_hbv3.txt", None)


def test_missing_explicit_path_fails(tmp_path):
    rc, result, _ = run_module({"ibv_devinfo_path": str(tmp_path / "nope")})
    assert rc != 0
    assert result["msg"] == f"ibv_devinfo_path={tmp_path / 'nope'} is not an executable file"


def test_bad_expected_port_fails(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "erdma_alibaba.txt")
    rc, result, _ = run_module(
        {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "expected_ports": ["erdma_0:one"]}
    )
    assert rc != 0
    assert result["msg"] == "expected_ports entries must be DEVICE or DEVICE:PORT, got: erdma_0:one"


def _ibv_devinfo_installed() -> bool:
    sbin = ["/sbin", "/usr/sbin", "/usr/local/sbin"]  # get_bin_path looks there too
    return shutil.which("ibv_devinfo") is not None or any(Path(d, "ibv_devinfo").exists() for d in sbin)


@pytest.mark.skipif(_ibv_devinfo_installed(), reason="ibv_devinfo is installed here; this covers hosts without it")
def test_tool_absent_is_not_an_error_even_with_require_active():
    rc, result, _ = run_module({"require_active": True, "expected_ports": ["mlx5_0:1"]})
    assert rc == 0, result
    assert result["tool_present"] is False
    assert result["ansible_facts"] == {"rdma_devices": []}
    assert "ibv_devinfo not found" in result["msg"]
    assert result["source"] == "none"  # and no /sys/class/infiniband here either (the default sysfs_root)


@pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} not installed (set RDMAFORGE_PY38)")
def test_runs_with_python38_on_the_target(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "mlx5_ib_and_roce_ofed.txt")
    rc, result, _ = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link)}, python=PY38)
    assert rc == 0, result
    assert result["devices"] == expected_devices("mlx5_ib_and_roce_ofed.txt", "roce_and_ib_disabled.txt")


# --- ibstat (infiniband-diags): seed 001's port check ------------------------------------------------------------
IBSTAT = PROJECT_ROOT / "tests" / "data" / "ibstat"


def test_ibstat_on_a_host_without_devices_says_no_ca(tmp_path, rdma_link):
    """Both tools as on a lab node with the infiniband profile: ibv_devinfo's "No IB devices found" (255) and
    ibstat's empty output (0). The result says ibstat ran and listed nothing; nothing reads as a healthy port."""
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", None, stderr="No IB devices found", rc=255)
    ibstat = fake_tool(tmp_path, "fake_ibstat", None)
    rc, result, err = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link),
                                  "ibstat_path": str(ibstat), "sysfs_root": str(tmp_path / "none")})  # fmt: skip
    assert rc == 0, result
    assert result["devices"] == [] and result["source"] == "ibv_devinfo"
    assert result["ibstat"] == {"path": str(ibstat), "rc": 0, "cas": [], "errors": [], "notes": []}
    assert (tmp_path / "fake_ibstat.args").read_text().split() == []  # plain `ibstat`, as seed 001 runs it
    rc, failed, _ = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "ibstat_path": str(ibstat),
                                "sysfs_root": str(tmp_path / "none"), "require_active": True})  # fmt: skip
    assert rc != 0 and "reports no RDMA devices" in failed["msg"]


def test_ibstat_rates_and_disagreements_reach_the_result(tmp_path, rdma_link):
    """Two real outputs from two different hosts, put side by side to exercise the comparison: ibv_devinfo (no -v,
    so no rates) lists mlx5_1 and mlx5_3, ibstat lists mlx5_0 and mlx5_1 at 100 Gbit/s."""
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "mlx5_ib_and_roce_ofed.txt")
    ibstat = fake_tool(tmp_path, "fake_ibstat", IBSTAT / "mlx5_roce_cx6dx_two_ports.txt")
    args = {"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link), "ibstat_path": str(ibstat)}
    rc, result, err = run_module(args)
    assert rc == 0, result
    rates = {(d["name"], p["port"]): p["rate_gbps"] for d in result["devices"] for p in d["ports"]}
    assert rates == {("mlx5_1", 1): 100.0, ("mlx5_3", 1): None}
    assert result["ibstat"]["cas"] == ["mlx5_0", "mlx5_1"]
    assert result["ibstat"]["notes"] == [
        "ibstat lists mlx5_0, which ibv_devinfo does not",
        "ibstat does not list mlx5_3, which ibv_devinfo does (is ib_umad loaded?)",
    ]
    assert "ibstat lists mlx5_0, which ibv_devinfo does not" in err  # each note is a warning too
    rc, failed, _ = run_module({**args, "require_active": True, "expected_ports": ["mlx5_1:1"], "min_rate_gbps": 200})
    assert rc != 0
    assert failed["msg"] == (
        "RDMA ports not ready: mlx5_1 port 1 runs at 100 Gb/s, below the 200 Gb/s expected: the link trained down "
        "(check the cable or transceiver and the switch port's speed)"
    )
    rc, passed, _ = run_module({**args, "require_active": True, "expected_ports": ["mlx5_1:1"], "min_rate_gbps": 100})
    assert rc == 0, passed


def test_ibstat_that_panics_is_named(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", None, stderr="No IB devices found", rc=255)
    ibstat = fake_tool(tmp_path, "fake_ibstat", IBSTAT / "mlx5_ib_hdr_then_ibpanic.txt", rc=255)
    rc, result, err = run_module({"ibv_devinfo_path": str(ibv), "rdma_path": str(rdma_link),
                                  "ibstat_path": str(ibstat), "sysfs_root": str(tmp_path / "none")})  # fmt: skip
    assert rc == 0, result
    assert result["ibstat"]["rc"] == 255 and result["ibstat"]["cas"] == ["mlx5_7"]
    assert result["ibstat"]["errors"] == [
        "ibpanic: [1323906] main: stat of IB device 'mlx5_8' failed: No such file or directory"
    ]
    assert f"{ibstat} exited with 255: ibpanic: [1323906] main: stat of IB device 'mlx5_8' failed" in " ".join(
        err.split()
    )


def test_min_rate_must_be_positive_and_ibstat_path_must_exist(tmp_path, rdma_link):
    ibv = fake_tool(tmp_path, "fake_ibv_devinfo", IBV / "mlx5_ib_and_roce_ofed.txt")
    rc, result, _ = run_module({"ibv_devinfo_path": str(ibv), "min_rate_gbps": 0})
    assert rc != 0 and result["msg"] == "min_rate_gbps must be a positive number of Gbit/s, got 0.0"
    rc, result, _ = run_module({"ibv_devinfo_path": str(ibv), "ibstat_path": str(tmp_path / "no-ibstat")})
    assert rc != 0 and result["msg"] == f"ibstat_path={tmp_path / 'no-ibstat'} is not an executable file"
