"""`rdmaforge doctor`: rows from the per-node files, skew across nodes, the table, and the playbook for real
against this machine in check mode. Expectations against the inventory: tests/unit/test_doctor_checks.py."""

from __future__ import annotations

import copy
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge import doctor, doctor_checks
from rdmaforge.cli import main
from rdmaforge.commands import doctor as doctor_command
from rdmaforge.runner.exit_codes import ExitCode


def port(number: int, state: str = "PORT_ACTIVE", physical: str = "LINK_UP", rate: float = 200.0) -> dict[str, Any]:
    """A port as the rdma_devices module reports it (4X HDR: 200 Gbit/s, the infiniband profile's line rate)."""
    return {"port": number, "state": state, "physical_state": physical, "rate_gbps": rate}


def nic(name: str, mtu: int = 1500) -> dict[str, Any]:
    return {"name": name, "mtu": mtu, "virtual": False}


NODE: dict[str, Any] = {
    "host": "node1",
    "clock": ["1700000000.100000", "1700000000.112500000"],
    "rdma_devices": [{"name": "mlx5_0", "ports": [port(1)]}, {"name": "mlx5_1", "ports": [port(1)]}],
    "nics": [nic("eth0"), nic("eth1", 9000), nic("eth2", 9000)],
    "hugepages": {"by_size": {"2048": {"nr": 0}, "1048576": {"nr": 50}}},
    "memlock": "unlimited\n",
    "nvidia_smi": "\n".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})" for i in range(8)),
    # nvidia-smi --query-gpu=compute_cap, one line a GPU (a real H100: tests/data/device-h100-toolkit).
    "compute_caps": "\n".join(["9.0"] * 8),
    "lspci": None,
    "nccl_manifest": {"id": "nccl-2.29.7-cuda13.0-sm_90-funcsc3dfaac5", "version": "2.29.7", "cuda": "13.0"},
    "nccl_libs": ["libnccl.so.2", "libnccl.so.2.29.7"],
    "plugin_present": True,
    "plugin_target": "/opt/rdmaforge/nccl-plugin/aiacc-2.0.1/libnccl-net.so.0.0.0",
    "plugin_symbols": "0000000000012340 T ncclNetPlugin_v6\n0000000000012380 T ncclNetPlugin_v8\n",
    "dmi_product_name": "Alibaba Cloud ECS",  # where AIACC can initialise (cloud-init's ECS detection value)
    "plugin_link": "/opt/rdmaforge/nccl-plugin/lib/libnccl-net.so",
    "nccl_home": "/opt/nccl/current",
    # The net plugin API versions NCCL 2.29.7's loader looks up, as doctor read them on a real H100 node
    # (tests/data/device-h100-toolkit/doctor-node.json).
    "nccl_loader_apis": [6, 7, 8, 9, 10, 11],
    "ld_cache_nccl": [
        "\tlibnccl.so.2 (libc6,x86-64) => /opt/nccl/current/lib/libnccl.so.2",
        "\tlibnccl-net.so (libc6,x86-64) => /opt/rdmaforge/nccl-plugin/lib/libnccl-net.so",
    ],
    "default_route_interface": "eth0",
    "grub_defaults": [
        'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="default_hugepagesz=1G hugepagesz=1G hugepages=50"\n'
    ],
    # What the node's inventory says it should be: an 8-GPU InfiniBand node with seed 004's tuning.
    "inventory": {
        "rdmaforge_fabric": "infiniband",
        "nccl_plugin_provider": "aiacc",
        "doctor_expected_gpus": 8,
        "hugepages_enabled": True,
        "eni_enabled": True,
        "eni_mtu": 9000,
        "nccl_build_version": "2.29.7",
        "nccl_cuda_archs": ["sm_90"],
        "nccl_build_only_funcs": "AllReduce Sum f32 RING SIMPLE",
    },
}


def cluster(n: int = 3) -> dict[str, dict[str, Any]]:
    return {f"node{i}": {**copy.deepcopy(NODE), "host": f"node{i}"} for i in range(1, n + 1)}


def test_node_row_reads_every_column() -> None:
    assert doctor.node_row(NODE) == {
        "rdma": "mlx5_0,mlx5_1",
        "ports": "2/2 active",
        "rates": "200",
        "mtu": "eth0=1500 eth1=9000 eth2=9000",
        "memlock": "unlimited",
        "hugepages": "50x1G",
        "gpus": "8",
        "enis": "2",  # eth1, eth2: eth0 carries the default route (no ENI)
        "nccl": "2.29.7-cuda13.0-sm_90-funcsc3dfaac5",
        "plugin": "aiacc 2.0.1",
        "clock": "+0.013s",
    }


def test_the_enis_column_counts_the_secondary_nics_only() -> None:
    """The column counted every NIC, the default route's too: a node with one ENI per GPU showed 9 for 8. It counts
    the eni role's ENIs now: not the default route's NIC, only eni_interfaces the node has, unknown when unread."""
    node = copy.deepcopy(NODE)
    node["nics"] = [nic("eth0"), *(nic(f"eth{i}") for i in range(1, 9))]
    assert doctor.node_row(node)["enis"] == "8"
    node["inventory"]["eni_interfaces"] = ["eth1", "eth2", "eth12"]  # eth12 is not there
    assert doctor.node_row(node)["enis"] == "2"
    assert doctor.node_row({**node, "nics_error": "ip -j link: not found"})["enis"] == "?"


def test_node_row_of_a_bare_node() -> None:
    bare = {"host": "n", "clock": ["sudo: banner", "5.0", "4.0"], "nics": [nic("eth0")], "memlock": None,
            "lspci": '17:00.0 "0302" "10de" "20b2" -ra1 "10de" "1463"', "nccl_libs": ["libnccl.so.2.18.3"]}  # fmt: skip
    row = doctor.node_row(bare)
    assert (row["rdma"], row["ports"], row["mtu"], row["memlock"], row["hugepages"]) == ("none", "-", "1500", "?", "0")
    assert (row["gpus"], row["nccl"], row["plugin"], row["clock"]) == ("1", "2.18.3", "none", "-1.000s")
    assert (
        doctor.node_row({"plugin_present": True, "plugin_target": "/usr/local/tfabric/tools/lib/libnccl-net.so"})[
            "plugin"
        ]
        == "-> /usr/local/tfabric/tools/lib/libnccl-net.so"
    )


def test_a_healthy_cluster_has_no_findings() -> None:
    diagnosis = doctor.diagnose(cluster())
    assert diagnosis.findings == [] and diagnosis.problems == [] and diagnosis.exit_code == ExitCode.OK
    assert {c.status for c in diagnosis.checks} == {"ok"}, [c for c in diagnosis.checks if c.status != "ok"]
    text = doctor.render(diagnosis)
    assert ("healthy: 3 node(s) meet their inventory's expectations and agree on RDMA devices, port rates (Gb/s), MTU, "
            "memlock, hugepages, GPUs, ENIs, NCCL and plugin (") in text  # fmt: skip
    # The inventory sets no rdma_core_min_port_rate_gbps: the rates' level is named as not judged
    assert text.rstrip().endswith("not judged: port rates against a number (rdma_core_min_port_rate_gbps is not set: "
                                  "each node's ports were compared with each other and the nodes' rates with the "
                                  "other nodes')"), text  # fmt: skip
    assert "  not judged on 3 node(s) (node1, node2, node3): port rates against a number" in text


def test_a_fleet_whose_every_port_trained_down_alike_is_not_called_judged_on_its_rate() -> None:
    """Review round 15b: with no rdma_core_min_port_rate_gbps, HDR ports that all trained down to 100 Gb/s agree with
    each other and with the other nodes, so the cluster was "healthy" with nothing said about the rate's level. The
    level is named as not judged now; with a floor it is judged, and the note goes."""
    slow = cluster(2)
    for node in slow.values():
        for device in node["rdma_devices"]:
            for port in device["ports"]:
                port["rate_gbps"] = 100.0
    diagnosis = doctor.diagnose(slow)
    assert diagnosis.exit_code == ExitCode.OK
    assert {c.not_judged for c in diagnosis.checks if c.check == "port_rate"} == {doctor_checks.RATES_WITHOUT_FLOOR}
    assert "not judged: port rates against a number" in doctor.render(diagnosis).splitlines()[-1]
    for node in slow.values():
        node["inventory"]["rdma_core_min_port_rate_gbps"] = 200
    floored = doctor.diagnose(slow)
    assert floored.exit_code == ExitCode.UNHEALTHY
    assert [c.reason for c in floored.checks if c.check == "port_rate"] == ["below the minimum: mlx5_0:1 at 100 Gb/s, "
                                                                            "mlx5_1:1 at 100 Gb/s"] * 2  # fmt: skip
    assert "not judged on" not in doctor.render(floored)


def test_skew_flags_the_minority_node_per_column() -> None:
    nodes = cluster(4)
    nodes["node2"]["nics"][1]["mtu"] = 1400  # one MTU different
    nodes["node3"]["nccl_manifest"] = {"id": "nccl-2.28.3-cuda12.8-sm_90-funcsc3dfaac5"}  # another NCCL build
    nodes["node4"]["rdma_devices"][1]["ports"][0] = port(1, "PORT_DOWN", "DISABLED")  # one port down
    diagnosis = doctor.diagnose(nodes)
    found = {(f.host, f.column): f for f in diagnosis.findings}
    assert set(found) == {("node2", "mtu"), ("node3", "nccl")}
    assert found["node2", "mtu"].expected == "eth0=1500 eth1=9000 eth2=9000"
    assert found["node2", "mtu"].reason == (
        "MTU is 'eth0=1500 eth1=1400 eth2=9000' where 3 of 4 nodes have 'eth0=1500 eth1=9000 eth2=9000'"
    )
    # The same three are problems against each node's own inventory; the down port is judged by the rdma check.
    problems = {(c.host, c.check): c for c in diagnosis.problems}
    assert set(problems) == {("node2", "mtu"), ("node3", "nccl"), ("node4", "rdma")}
    assert problems["node4", "rdma"].reason == "not ACTIVE: mlx5_1:1 PORT_DOWN"
    assert diagnosis.exit_code == ExitCode.UNHEALTHY
    table = doctor.render(diagnosis)
    assert "1500 eth1=1400 eth2=9000 !" in table and "mlx5 x2 1/2 !" in table
    assert "  node3: NCCL is '2.28.3-cuda12.8-sm_90-funcsc3dfaac5' where 3 of 4 nodes have" in table


def test_a_tie_flags_every_node_of_the_column() -> None:
    nodes = cluster(2)
    nodes["node2"]["memlock"] = "8192"
    findings = doctor.find_skew({h: doctor.node_row(n) for h, n in nodes.items()})
    assert [(f.host, f.column, f.expected) for f in findings] == [
        ("node1", "memlock", None),
        ("node2", "memlock", None),
    ]
    assert findings[0].reason == "memlock differs across nodes with no majority: 'unlimited' on node1; '8192' on node2"


def test_majority() -> None:
    assert doctor.majority(["a", "a", "b"]) == "a"
    assert doctor.majority(["a", "b"]) is None
    assert doctor.majority([]) is None


def test_clock_offset_beyond_the_limit_and_unreachable_and_failed_nodes() -> None:
    nodes = cluster(3)
    nodes["node3"]["clock"] = ["1700000000.0", "1700000003.5"]
    diagnosis = doctor.diagnose(nodes, unreachable=["node4"], failed={"node2": "Read the huge pages: boom"})
    reasons = {(f.host, f.column): f.reason for f in diagnosis.findings}
    clock = {c.host: c for c in diagnosis.checks if c.check == "clock"}
    assert clock["node3"].status == "problem" and clock["node1"].status == "ok"
    assert clock["node3"].reason == "clock is +3.500s off the controller's (limit 1.0s)"
    assert reasons["node2", "check"] == "a doctor check failed: Read the huge pages: boom"
    assert diagnosis.exit_code == ExitCode.UNREACHABLE
    table = doctor.render(diagnosis)
    assert "node4" in table and "UNREACHABLE" in table and "  node4: unreachable" in table
    assert doctor.diagnose(nodes, failed={"node2": "boom"}).exit_code == ExitCode.HOST_FAILED
    relaxed = doctor.diagnose(nodes, max_clock_offset=5.0)
    assert relaxed.findings == [] and relaxed.problems == [] and relaxed.exit_code == ExitCode.OK


@pytest.mark.parametrize(
    ("clock", "status", "shown", "reason"),
    [
        # A node whose clock says 1e300 seconds since the epoch: off, and said in a few characters (not 301 digits).
        (["1700000000.0", "1e300"], "problem", "+1e+300s", "clock is +1e+300s off the controller's (limit 1.0s)"),
        # "nan" is a float to Python, and no limit is exceeded by it: never judged ok.
        (["1700000000.0", "nan"], "not_checked", "?", "the node's clock could not be read"),
        (["1700000000.0", "inf"], "not_checked", "?", "the node's clock could not be read"),
    ],
)
def test_an_absurd_clock_is_short_and_never_ok(clock: list[str], status: str, shown: str, reason: str) -> None:
    nodes = cluster(3)
    nodes["node3"]["clock"] = clock
    diagnosis = doctor.diagnose(nodes)
    check = next(c for c in diagnosis.checks if c.check == "clock" and c.host == "node3")
    assert (check.status, check.reason) == (status, reason)
    assert doctor.node_row(nodes["node3"])["clock"] == shown


def test_doctor_playbook_for_real_against_this_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN", "memory")  # this machine's facts stay out of .cache/facts
    # Install prefixes of the inventory's own: the doctor role must look where nccl_build and nccl_plugin put things.
    nccl_current = tmp_path / "nccl" / "current"
    (nccl_current / "lib").mkdir(parents=True)
    (nccl_current / ".rdmaforge-build.json").write_text(json.dumps({"id": "nccl-2.29.7-cuda13.0-sm_90"}))
    (nccl_current / "lib" / "libnccl.so.2.29.7").write_bytes(b"")
    (tmp_path / "plugin" / "lib").mkdir(parents=True)
    (tmp_path / "plugin" / "lib" / "libnccl-net.so").write_bytes(b"")
    hosts = {
        "localhost": {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "rdmaforge_fabric": "tcp",
            "doctor_expected_gpus": 0,
            "doctor_accept": {"plugin": "whatever this machine has"},
            "nccl_build_prefix_root": str(tmp_path / "nccl"),
            "nccl_plugin_prefix": str(tmp_path / "plugin"),
        },
        "ghost": {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_user": "nobody", "rdmaforge_fabric": "tcp"},
    }
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    runs = tmp_path / "runs"
    code = main(["doctor", "-i", str(inventory), "--runs-dir", str(runs), "--junit", str(tmp_path / "junit.xml")])
    out = capsys.readouterr().out
    assert code == ExitCode.UNREACHABLE, out
    run_dir = next(runs.iterdir())
    node = json.loads((run_dir / "doctor" / "localhost.json").read_text())
    assert node["host"] == "localhost" and node["nics"] and doctor.clock_offset(node["clock"]) is not None
    assert abs(doctor.clock_offset(node["clock"]) or 0) < 5
    # The inventory's own values travel with the node (what it is judged by); unset ones are left to the roles.
    assert node["inventory"] == {"rdmaforge_fabric": "tcp", "doctor_expected_gpus": 0,
                                 "doctor_accept": {"plugin": "whatever this machine has"}}  # fmt: skip
    assert node["memlock"] not in (None, "")  # `ulimit -l` of this login
    assert doctor_checks.build_manifest(node) == ({"id": "nccl-2.29.7-cuda13.0-sm_90"}, None)
    assert node["nccl_libs"] == ["libnccl.so.2.29.7"]
    assert node["plugin_present"] is True
    recap = json.loads((run_dir / "recap.json").read_text())
    assert recap["hosts"]["localhost"]["changed"] == 0  # read-only, run in check mode
    assert recap["unreachable"] == ["ghost"] and "localhost" in recap["rows"]
    assert recap["nodes"]["localhost"]["checks"]["gpus"]["expected"] == "0"
    assert "--check" in json.loads((run_dir / "ansible" / "command").read_text())["command"]
    assert "localhost" in out and "ghost" in out and "UNREACHABLE" in out
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")}
    assert cases["ghost"].find("error") is not None


def test_the_role_copies_the_inventory_names_the_checks_read() -> None:
    from rdmaforge.doctor_checks import DEFAULTS_OF
    from rdmaforge.role_defaults import defaults

    assert defaults("doctor")["doctor_inventory_names"] == list(DEFAULTS_OF)


def test_an_installed_build_without_the_gpus_arch_is_a_problem() -> None:
    from rdmaforge.doctor_checks import check_nccl

    # The H100's own answer to the query the doctor role sends (tests/data/device-h100, compute_cap column).
    nodes = cluster(2)
    for node in nodes.values():
        node["compute_caps"] = "9.0\n"
    assert check_nccl(nodes["node1"])[0] == "ok"  # NODE's build is sm_90
    nodes["node2"]["inventory"]["nccl_cuda_archs"] = ["sm_80"]  # seed 000's list, installed on an H100
    nodes["node2"]["nccl_manifest"] = {"id": "nccl-2.29.7-cuda13.0-sm_80-funcsc3dfaac5", "cuda": "13.0",
                                       "archs": ["sm_80"]}  # fmt: skip
    status, actual, expected, reason = check_nccl(nodes["node2"])
    assert (status, actual) == ("problem", "2.29.7-cuda13.0-sm_80-funcsc3dfaac5")
    assert expected == "an arch for compute capability 9.0" and "add sm_90 to nccl_cuda_archs" in reason


def test_nics_that_could_not_be_read_leave_the_mtu_not_checked() -> None:
    from rdmaforge.doctor_checks import check_mtu

    node = copy.deepcopy(NODE)
    node["nics"], node["nics_error"] = [], "ip not found: install iproute2 (or set ip_path)"  # seen on a GPU machine
    status, actual, expected, reason = check_mtu(node)
    # The inventory plans an MTU for the ENIs, which were not read: not judged, so the node is not called healthy.
    assert (status, actual, expected) == ("not_checked", "unknown", "ENIs at 9000")
    assert reason == "the node's NICs could not be read: ip not found: install iproute2 (or set ip_path)"


def test_doctor_playbook_without_iproute2_still_checks_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A GPU machine lent to a session had no `ip` binary. An ip_path that names no file is now refused (an inventory
    # typo); an ip too old for -j is the node's own lack, not failed, and stands in for it here.
    monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN", "memory")
    old_ip = tmp_path / "old-ip"
    old_ip.write_text("#!/bin/sh\necho 'Option \"-j\" is unknown, try \"ip -help\".' >&2\nexit 255\n")
    old_ip.chmod(0o755)
    hosts = {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                           "rdmaforge_fabric": "tcp", "eni_enabled": True, "doctor_expected_gpus": 0,
                           "preflight_ip_path": str(old_ip)}}  # fmt: skip
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    main(["doctor", "-i", str(inventory), "--runs-dir", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    node = json.loads((next((tmp_path / "runs").iterdir()) / "doctor" / "localhost.json").read_text())
    assert node["nics"] == [] and node["nics_error"] == (
        f'{old_ip} -j addr show failed with exit status 255: Option "-j" is unknown, try "ip -help". '
        "(JSON output needs iproute2 4.14 or later)")  # fmt: skip
    assert re.search(r"mtu not checked: unknown \(expected ENIs at [0-9]+\): the node's NICs could not be read: "
                     + re.escape(f"{old_ip} -j addr show failed"), out), out
    assert node["clock"] and node["memlock"]  # the checks after it still ran


def test_a_node_whose_every_rail_trained_down_is_skew_not_a_quiet_pass() -> None:
    """Within node3 the two ports agree (100 and 100), so its own port_rate check has nothing to say; against its
    peers (200 Gb/s HDR rails) it is the odd one out, and the table marks its RDMA cell."""
    nodes = cluster(3)
    nodes["node3"]["rdma_devices"] = [{"name": f"mlx5_{i}", "ports": [port(1, rate=100.0)]} for i in (0, 1)]
    diagnosis = doctor.diagnose(nodes)
    assert [(f.host, f.column, f.reason) for f in diagnosis.findings] == [
        ("node3", "rates", "port rates (Gb/s) is '100' where 2 of 3 nodes have '200'")
    ]
    assert diagnosis.exit_code == ExitCode.UNHEALTHY
    port_rate = next(c for c in diagnosis.checks if c.host == "node3" and c.check == "port_rate")
    assert port_rate.status == "ok"  # the node agrees with itself: only the comparison across nodes catches it
    node3 = next(line for line in doctor.render(diagnosis).splitlines() if line.startswith("node3 "))
    assert "mlx5 x2 2/2 !" in node3
    assert "  node3: port rates (Gb/s) is '100' where 2 of 3 nodes have '200'" in doctor.render(diagnosis)


@pytest.mark.parametrize("limit", [float("nan"), float("inf"), -1.0])
def test_a_clock_limit_that_is_no_finite_number_judges_nothing(limit: float) -> None:
    """Against nan every comparison is false: a node 500 s off was 'ok, within nans'."""
    nodes = cluster(2)
    nodes["node2"]["clock"] = ["1700000000.0", "1700000500.0"]
    with pytest.raises(ValueError, match="clock offset limit must be a finite number of seconds, 0 or more"):
        doctor.diagnose(nodes, max_clock_offset=limit)
    assert doctor.diagnose(nodes, max_clock_offset=0.0).exit_code == ExitCode.UNHEALTHY


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "1e999", "soon"])
def test_max_clock_offset_must_be_a_finite_number_of_seconds(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(yaml.safe_dump({"all": {"hosts": {"node1": {}}}}))
    with pytest.raises(SystemExit) as exited:
        main(["doctor", "-i", str(hosts), "--runs-dir", str(tmp_path / "runs"), f"--max-clock-offset={value}"])
    assert exited.value.code == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "argument --max-clock-offset:" in err and repr(value) in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_no_node_judged_is_not_healthy() -> None:
    diagnosis = doctor.diagnose({})
    assert diagnosis.exit_code == ExitCode.INCOMPLETE
    text = doctor.render(diagnosis)
    assert "healthy:" not in text.replace("no node is judged healthy", "")
    assert text.endswith("not judged: doctor read no node's result, so no node is judged healthy")


def test_a_node_without_a_result_is_named_not_judged(tmp_path: Path) -> None:
    """doctor.yml writes <host>.json per node; a node the run covered whose file is missing or unreadable was
    silently left out, and the others were 'healthy'."""
    nodes = cluster(3)
    (tmp_path / "node1.json").write_text(json.dumps(nodes["node1"]))
    (tmp_path / "node2.json").write_text('{"host": "node2", "memlock": ')  # cut short
    read, unread = doctor_command.read_nodes(tmp_path, ["node1", "node2", "node3"])
    assert list(read) == ["node1"] and list(unread) == ["node2", "node3"]
    assert unread["node3"] == f"doctor wrote no result for it ({tmp_path / 'node3.json'} is missing)"
    assert unread["node2"].startswith(f"its result {tmp_path / 'node2.json'} cannot be read (JSONDecodeError")
    diagnosis = doctor.diagnose(read, not_judged=unread)
    assert diagnosis.exit_code == ExitCode.INCOMPLETE
    text = doctor.render(diagnosis)
    assert f"  node3: not judged: {unread['node3']}" in text
    assert "\nnot judged: 2 node(s) without a result (node2, node3); on the 1 judged: 0 problem(s)" in text
    assert diagnosis.per_node()["node3"]["status"] == "not_judged"
    cases = {c.name: c for c in doctor_command.host_cases(diagnosis, {})}
    assert cases["node3"].outcome == "error" and cases["node3"].message.startswith("not judged: doctor wrote no")
    # A problem on a judged node outranks the node without a result (exit 6), which is still named and counted.
    nodes["node1"]["memlock"] = "64"
    worse = doctor.diagnose({"node1": nodes["node1"]}, not_judged=unread)
    assert worse.exit_code == ExitCode.UNHEALTHY and worse.problems
    text = doctor.render(worse)
    assert "not healthy: 1 problem(s) against the inventory" in text and "2 not judged" in text, text
    assert "  node3: not judged: doctor wrote no result for it" in text, text


# The role's argument spec failing on `doctor -e doctor_expected_gpus=abc` (events trimmed from the run's job_events).
ARGUMENT_ERROR = ("argument 'doctor_expected_gpus' is of type str and we were unable to convert to int: \"'abc'\" "
                  "cannot be converted to an int")  # fmt: skip
ARGUMENT_SPEC_EVENTS: list[dict[str, Any]] = [
    {"event": "playbook_on_play_start", "event_data": {"name": "Doctor | read RDMA ports (changes nothing)"}},
    {"event": "playbook_on_task_start", "event_data": {"name": "doctor : Validating arguments against arg spec"}},
    {"event": "runner_on_start", "event_data": {"host": "erdma-node1"}},
    {"event": "runner_on_failed", "event_data": {
        "host": "erdma-node1", "role": "doctor", "ignore_errors": None,
        "task": "Validating arguments against arg spec 'main' - Read-only health of a node",
        "task_action": "ansible.builtin.validate_argument_spec",
        "resolved_action": "ansible.builtin.validate_argument_spec",
        "res": {"msg": f"Validation of arguments failed:\n{ARGUMENT_ERROR}", "argument_errors": [ARGUMENT_ERROR],
                "changed": False, "exception": "(traceback unavailable)", "_ansible_no_log": False}}},
    {"event": "playbook_on_stats", "event_data": {"ok": {}, "failures": {"erdma-node1": 1}, "dark": {},
                                                  "processed": {"erdma-node1": 1}}},
]  # fmt: skip


def test_a_run_stopped_on_the_argument_spec_names_the_argument_and_contacted_no_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """doctor -e doctor_expected_gpus=abc printed "Validation of arguments failed:" without the variable, then
    "no node answered" and "0 unreachable", though the run stopped before any task went to a node."""
    from rdmaforge.runner import execute
    from rdmaforge.runner.events import EventLog
    from rdmaforge.runner.recap import from_stats

    def fake_run(request: Any, run_dir: Path, on_event: Any = None, scrubbed: Any = None,
                 read: Any = None) -> execute.Outcome:  # fmt: skip
        log = EventLog()
        for event in ARGUMENT_SPEC_EVENTS:
            log.handle(event)
            if on_event is not None:
                on_event(event)
        return execute.Outcome("failed", 2, log, from_stats(log.stats, log.hosts), run_dir / "ansible", 0.1)

    monkeypatch.setattr(execute, "run", fake_run)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": {
        "erdma-node1": {"ansible_host": "127.0.0.1", "ansible_port": 9}}}}}}))  # fmt: skip
    runs = tmp_path / "runs"
    code = main(["doctor", "-i", str(inventory), "--runs-dir", str(runs)])
    out = capsys.readouterr().out
    assert code == ExitCode.HOST_FAILED, out
    assert f"  FAILED erdma-node1: Validation of arguments failed:\n    {ARGUMENT_ERROR}\n" in out
    assert f"Read-only health of a node: Validation of arguments failed:\n    {ARGUMENT_ERROR}\n" in out  # the recap
    assert "no node answered" not in out and "0 unreachable" not in out
    assert "not judged: the run stopped before contacting the nodes: a check on the controller failed for " \
           "erdma-node1" in out  # fmt: skip
    recap = json.loads((next(runs.iterdir()) / "recap.json").read_text())
    assert recap["stopped_before_contact"] is True and recap["healthy"] is False
    assert recap["problems"][0]["message"] == f"Validation of arguments failed:\n{ARGUMENT_ERROR}"


def test_the_healthy_fixture_and_real_doctor_results_have_the_shape_doctor_reads() -> None:
    """The unit tests' healthy node and the doctor results of real runs (an H200 and an H100 machine, tests/data)
    are what doctor.yml writes: none of them is refused."""
    from rdmaforge.doctor_result import shape_problem

    assert shape_problem(NODE) is None
    for sample in ("device-h200", "device-h100-toolkit"):
        result = json.loads((Path(__file__).parents[1] / "data" / sample / "doctor-node.json").read_text())
        assert shape_problem(result) is None, sample


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("rdma_devices", "mlx5_0", "rdma_devices is 'mlx5_0', expected a list"),
        ("nccl_loader_apis", ["v8"], "nccl_loader_apis[0] is 'v8', expected a whole number 0 or more"),
        ("hugepages", {"by_size": [50]}, "hugepages.by_size is [50], expected an object"),
        ("nics", [{"name": "eth1", "mtu": "9000"}], "nics[0].mtu is '9000', expected a whole number 0 or more or null"),
        # A blank split the MTU cell's name=mtu items and crashed the table (review round 21b)
        ("nics", [{"name": "eth 1", "mtu": 9000}],
         "nics[0].name is 'eth 1', expected an interface name (1-15 characters, no blank, '/' or ':', not . or ..)"),
        ("memlock", ["unlimited"], "memlock is [\"unlimited\"], expected text or a whole number 0 or more or null"),
        ("sysfs_gpus", "eight",
         "sysfs_gpus is 'eight', expected a whole number 0 or more (or its digits as text), or null"),
        # A port without its number crashed the run (KeyError 'port') where rdma_core_expected_ports names the rails
        # (review round 41a)
        ("rdma_devices", [{"name": "mlx5_0", "ports": [{"state": "PORT_ACTIVE"}]}],
         'rdma_devices[0].ports[0] is {"state": "PORT_ACTIVE"}, expected an object with port'),
    ],
)
def test_a_result_field_of_another_shape_leaves_the_node_not_judged(
    tmp_path: Path, field: str, value: object, said: str
) -> None:
    """A field of another type (a hand-edited file, another rdmaforge version) crashed the whole run with a
    traceback (AttributeError, ValueError), so no node got a verdict; or a string was read letter by letter."""
    nodes = cluster(2)
    nodes["node1"][field] = value
    for host, node in nodes.items():
        (tmp_path / f"{host}.json").write_text(json.dumps(node))
    read, unread = doctor_command.read_nodes(tmp_path, ["node1", "node2"])
    assert list(read) == ["node2"]
    assert unread == {"node1": f"its result {tmp_path / 'node1.json'} is not what doctor.yml writes: {said}"}
    diagnosis = doctor.diagnose(read, not_judged=unread)
    assert diagnosis.exit_code == ExitCode.INCOMPLETE
    assert diagnosis.per_node()["node1"]["status"] == "not_judged"


def test_a_damaged_build_manifest_is_the_nodes_nccl_problem_in_a_real_doctor_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manifest cut short (a full disk during an install) made the role's from_json fail the node's whole
    result: 'a doctor check failed' with a template error, and none of its other checks. It is now the nccl check's
    problem, with the rest of the node judged."""
    monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN", "memory")
    nccl_current = tmp_path / "nccl" / "current"
    (nccl_current / "lib").mkdir(parents=True)
    (nccl_current / ".rdmaforge-build.json").write_text('{"id": "nccl-2.29.7-cu')
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "rdmaforge_fabric": "tcp",
            "doctor_expected_gpus": 0, "doctor_accept": {"plugin": "whatever this machine has"},
            "nccl_build_prefix_root": str(tmp_path / "nccl")}  # fmt: skip
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": {"localhost": host}}}}}))
    code = main(["doctor", "-i", str(inventory), "--runs-dir", str(tmp_path / "runs"), "--json"])
    recap = json.loads(capsys.readouterr().out)
    assert code == ExitCode.UNHEALTHY, recap
    nccl = recap["nodes"]["localhost"]["checks"]["nccl"]
    assert nccl["status"] == "problem"
    assert nccl["reason"].startswith("current/.rdmaforge-build.json is not JSON (JSONDecodeError: ")
    assert nccl["reason"].endswith(": the install is damaged")
    assert recap["nodes"]["localhost"]["checks"]["gpus"]["status"] == "ok"  # the rest of the node was judged


# --- review round 21b: what the healthy line claims, and which code wins -------------------------------------------


def test_a_gpu_count_not_read_where_the_inventory_sets_none_is_not_judged() -> None:
    """Without doctor_expected_gpus, a node whose GPUs no tool counted was healthy, "agreeing on GPUs" with peers
    that counted 8 (its "?" is left out of the comparison): the other nodes' count is what it is held to."""
    nodes = cluster(3)
    for node in nodes.values():
        node["inventory"].pop("doctor_expected_gpus")
    nodes["node3"].update(nvidia_smi=None, lspci=None)
    diagnosis = doctor.diagnose(nodes)
    assert diagnosis.exit_code == ExitCode.INCOMPLETE, doctor.render(diagnosis)
    assert diagnosis.per_node()["node3"]["status"] == "not_judged"
    assert diagnosis.per_node()["node1"]["status"] == "ok"
    text = doctor.render(diagnosis)
    assert "healthy" not in text.splitlines()[-1] and "node3 gpus" in text.splitlines()[-1], text


def test_an_interface_name_with_an_equals_sign_keeps_its_mtu_in_the_table() -> None:
    """Linux allows '=' in a name (ip link add a=b type dummy): the cell split it at the first '=' and showed b=9000
    as the MTU of a."""
    node = copy.deepcopy(NODE)
    node["nics"] = [{"name": "eth0", "mtu": 9000}, {"name": "a=b", "mtu": 1500}, {"name": "eth2", "mtu": 1500}]
    assert doctor.display("mtu", doctor.node_row(node)["mtu"]) == "1500 eth0=9000"


def test_the_healthy_line_names_no_column_that_some_node_has_no_reading_in() -> None:
    """Every active port's rate unknown: the rates column is "-" everywhere, and the line said the nodes "agree on
    ... port rates". (Such a run is not judged now, rates unread being unmeasured: test_doctor_false_passes.) The
    NICs not read where no ENI is planned leave the ENIs column without a reading, and the checks healthy."""
    nodes = cluster(2)
    for node in nodes.values():
        node["nics_error"] = "ip -j link: not found"
        node["inventory"]["eni_enabled"] = False
    diagnosis = doctor.diagnose(nodes)
    verdict = doctor.render(diagnosis).splitlines()[-1]
    assert diagnosis.exit_code == ExitCode.OK and verdict.startswith("healthy: "), verdict
    assert " agree on RDMA devices, port rates (Gb/s), MTU, memlock, hugepages, GPUs, NCCL and plugin (" in verdict
    assert verdict.endswith("; ENIs not compared: no reading on node1, node2"), verdict


def test_a_problem_on_a_judged_node_outranks_a_node_without_a_result() -> None:
    nodes = cluster(3)
    nodes["node1"]["memlock"] = "65536"
    diagnosis = doctor.diagnose(nodes, not_judged={"node4": "doctor wrote no result for it"})
    assert diagnosis.exit_code == ExitCode.UNHEALTHY
    verdict = doctor.render(diagnosis).splitlines()[-1]
    assert verdict.startswith("not healthy: 1 problem(s)") and "1 not judged" in verdict, verdict


def test_a_line_break_in_a_nodes_value_prints_no_line_of_its_own() -> None:
    """A value read on a node (the plugin's link target, the NCCL manifest's id) went into the table and the check
    lines as it was: a line break in it printed a line that could read as doctor's own verdict."""
    nodes = cluster(2)
    forged = "x\n\nhealthy: 2 node(s) meet their inventory's expectations"
    nodes["node2"]["plugin_target"] = f"/opt/{forged}/libnccl-net.so"
    nodes["node2"]["nccl_manifest"] = {**nodes["node2"]["nccl_manifest"], "id": forged}
    text = doctor.render(doctor.diagnose(nodes))
    assert [line for line in text.splitlines() if line.startswith("healthy")] == [], text
    assert "x\\x0a\\x0ahealthy: 2 node(s)" in text, text


@pytest.mark.parametrize("value", [True, 8.5, "eight"])
def test_an_inventory_gpu_count_that_is_no_count_is_a_problem_not_a_pass(value: object) -> None:
    """diagnose() on its own (preflight refuses these first in a run) called a node healthy when the inventory's
    count could not be read: no expectation, so nothing judged, so exit 0."""
    nodes = cluster(2)
    nodes["node1"]["inventory"]["doctor_expected_gpus"] = value
    diagnosis = doctor.diagnose(nodes)
    assert diagnosis.exit_code == ExitCode.UNHEALTHY, doctor.render(diagnosis)
    (problem,) = [c for c in diagnosis.problems if c.host == "node1"]
    assert problem.check == "gpus" and "is no count; allowed: a whole number of GPUs, 0 or more" in problem.reason


# --- review round 41a: nothing compared is no agreement, and no reading is no majority -------------------------------


def test_a_one_node_run_compares_nothing_and_says_so() -> None:
    """`--limit node1` with no inventory GPU count: a node that lost a GPU (7) was "healthy: 1 node(s) ... agree on
    ... GPUs", exit 0, though no other node's count was there to compare with. Its count is not judged now, and a
    healthy one-node run names every column as not compared."""
    nodes = cluster(1)
    nodes["node1"]["inventory"].pop("doctor_expected_gpus")
    nodes["node1"]["nvidia_smi"] = "\n".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})" for i in range(7))
    nodes["node1"]["inventory"]["hugepages_count"] = 50  # the plan does not follow the count that is not judged
    diagnosis = doctor.diagnose(nodes)
    gpus = next(c for c in diagnosis.checks if c.check == "gpus")
    assert (gpus.status, gpus.actual) == ("not_checked", "7")
    assert gpus.expected == "a count, to compare with the other nodes'"
    assert diagnosis.exit_code == ExitCode.INCOMPLETE, doctor.render(diagnosis)
    assert doctor.render(diagnosis).splitlines()[-1].startswith("not judged: 1 check(s) could not be measured, or "
                                                                "compared with another node (node1 gpus)")
    # With the inventory's count (the fixture's 8), the node is judged healthy, and nothing is said to agree.
    healthy = cluster(1)
    diagnosis = doctor.diagnose(healthy)
    verdict = doctor.render(diagnosis).splitlines()[-1]
    assert diagnosis.exit_code == ExitCode.OK and verdict.startswith("healthy: 1 node(s) "), verdict
    assert " agree on " not in verdict, verdict
    assert verdict.endswith("; RDMA devices, port rates (Gb/s), MTU, memlock, hugepages, GPUs, ENIs, NCCL and plugin "
                            "not compared: no other node to compare with"), verdict


def test_a_single_rail_rate_with_no_floor_and_no_peer_is_not_judged() -> None:
    """One rail per node and no rdma_core_min_port_rate_gbps: the node's one rate is judged only against the other
    nodes'. Alone (one node, or the others' rates not reported), nothing judged it: not judged, never healthy."""
    alone = cluster(1)
    alone["node1"]["rdma_devices"] = [{"name": "mlx5_0", "ports": [port(1, rate=100.0)]}]
    diagnosis = doctor.diagnose(alone)
    rate = next(c for c in diagnosis.checks if c.check == "port_rate")
    assert (rate.status, rate.expected) == ("not_checked", "a rate, to compare with the other nodes'")
    assert diagnosis.exit_code == ExitCode.INCOMPLETE, doctor.render(diagnosis)
    # With a peer that read its rate, the skew check compares the two: judged.
    pair = cluster(2)
    for node in pair.values():
        node["rdma_devices"] = [{"name": "mlx5_0", "ports": [port(1, rate=200.0)]}]
    assert doctor.diagnose(pair).exit_code == ExitCode.OK
    pair["node2"]["rdma_devices"][0]["ports"][0]["rate_gbps"] = 100.0
    assert doctor.diagnose(pair).exit_code == ExitCode.UNHEALTHY  # no majority: both flagged


def test_nodes_with_no_rate_reported_do_not_outvote_the_one_that_measured() -> None:
    """The rates column shows "-" for a node none of whose rates was reported: find_skew left out only "?", so two
    such nodes made "-" the majority and the one node that measured 200 Gb/s was flagged, exit 6."""
    nodes = cluster(3)
    for host in ("node1", "node2"):
        for device in nodes[host]["rdma_devices"]:
            for each in device["ports"]:
                each["rate_gbps"] = None
    diagnosis = doctor.diagnose(nodes)
    assert [f for f in diagnosis.findings if f.column == "rates"] == []
    assert doctor.find_skew({h: doctor.node_row(n) for h, n in nodes.items()}) == []
    statuses = {c.host: c.status for c in diagnosis.checks if c.check == "port_rate"}
    assert statuses == {"node1": "not_checked", "node2": "not_checked", "node3": "ok"}
    assert diagnosis.exit_code == ExitCode.INCOMPLETE, doctor.render(diagnosis)
    assert "(node1 port_rate, node2 port_rate)" in doctor.render(diagnosis).splitlines()[-1]
