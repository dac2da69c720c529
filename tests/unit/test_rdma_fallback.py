"""NCCL settings that send an RDMA fabric's traffic over TCP sockets without an error are refused before any
connection: NCCL_IB_DISABLE nonzero with no net plugin (NCCL's own networks are then IB, off, and Socket:
src/net.cc, src/transport/net_ib.cc), and NCCL_NET naming a socket network. With a net plugin (AIACC on eRDMA,
seed 000) NCCL_IB_DISABLE turns off only NCCL's internal IB transport, so it stays allowed there.

NCCL reads the value with strtoll (src/misc/param.cc): the C library's own strtoll is the oracle for which texts
turn IB off."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge import inventory_checks as checks
from rdmaforge.inventory_checks import NodeInput
from rdmaforge.parsers import nccl_env
from rdmaforge.runner.exit_codes import ExitCode

_LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_LIBC.strtoll.restype = ctypes.c_longlong
_LIBC.strtoll.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]


def ncclloadparam(text: str, default: int = 0) -> int:
    """What NCCL's ncclLoadParam stores for ``text``: the default when empty or when strtoll sets errno."""
    if not text:
        return default
    ctypes.set_errno(0)
    value = _LIBC.strtoll(text.encode(), None, 0)
    return default if ctypes.get_errno() else int(value)


@pytest.mark.parametrize("text", [
    "1", "0", "", " 1", "\t2", "-1", "+0", "true", "false", "yes", "1abc", "0x10", "0x", "0X1f", "010", "08", "00",
    "99999999999999999999", "-99999999999999999999", "9223372036854775807", "0.5", "1e3", " ", "1 ",
])  # fmt: skip
def test_the_value_is_read_as_nccl_reads_it(text: str) -> None:
    assert nccl_env.nccl_integer(text) == ncclloadparam(text)


@pytest.mark.parametrize(("value", "text"), [(True, "1"), (False, "0"), (1, "1"), (0, "0"), (None, "")])
def test_yaml_values_are_read_as_the_text_nccl_conf_gets(value: object, text: str) -> None:
    # role nccl_env writes a YAML true as 1 (nccl_env.merge): NCCL reads that line's text
    assert nccl_env.merge({}, {"NCCL_IB_DISABLE": value}).get("NCCL_IB_DISABLE", "") == text
    assert nccl_env.nccl_integer(value) == ncclloadparam(text)


@pytest.mark.parametrize(("env", "plugin", "settings"), [
    ({"NCCL_IB_DISABLE": "1"}, "none", ["NCCL_IB_DISABLE"]),
    ({"NCCL_IB_DISABLE": "0x1"}, "none", ["NCCL_IB_DISABLE"]),
    ({"NCCL_IB_DISABLE": "true"}, "none", []),  # strtoll reads 0: IB stays on
    ({"NCCL_IB_DISABLE": "0"}, "none", []),
    ({"NCCL_IB_DISABLE": "1"}, "aiacc", []),  # the plugin's network carries RDMA
    ({"NCCL_IB_DISABLE": "1"}, "harp", []),
    ({"NCCL_NET": "Socket"}, "none", ["NCCL_NET"]),
    ({"NCCL_NET": "socket"}, "aiacc", ["NCCL_NET"]),  # strcasecmp
    ({"NCCL_NET": "AIACC-2.0-Socket"}, "aiacc", ["NCCL_NET"]),  # the plugin's socket variant (seed 003)
    ({"NCCL_NET": "IB"}, "none", []),
    ({"NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1"}, "none", ["NCCL_NET", "NCCL_IB_DISABLE"]),
])  # fmt: skip
def test_the_settings_that_fall_back_to_sockets(env: dict[str, str], plugin: str, settings: list[str]) -> None:
    assert [f.setting for f in nccl_env.rdma_fallbacks(env, plugin)] == settings


def report(fabric: str, **values: Any) -> list[str]:
    nodes = [NodeInput("node1", "198.18.0.2", fabric, values={"rdmaforge_fabric": fabric, **values})]
    return checks.inventory_report(nodes).get("node1", [])


@pytest.mark.parametrize("fabric", ["infiniband", "roce", "acs_type1"])
def test_ib_disabled_on_an_rdma_fabric_without_a_plugin_is_refused(fabric: str) -> None:
    (line,) = report(fabric, nccl_env_overrides={"NCCL_IB_DISABLE": 1})
    assert line.startswith(f"node1: nccl_env_overrides (rdmaforge_fabric={fabric}, nccl_plugin_provider=none): "
                           "NCCL_IB_DISABLE='1' turns off NCCL's IB (verbs) transport")  # fmt: skip
    assert "TCP sockets" in line and "allowed: NCCL_IB_DISABLE unset or 0" in line
    assert report(fabric, nccl_env_overrides={"NCCL_IB_DISABLE": 0}) == []
    assert report(fabric) == []


def test_a_socket_profile_on_an_rdma_fabric_is_named_by_its_variable() -> None:
    # nccl_env_profile tcp and acs_type2 carry NCCL_IB_DISABLE: 1 (roles/nccl_env/defaults/main.yml)
    for profile in ("tcp", "acs_type2"):
        (line,) = report("infiniband", nccl_env_profile=profile)
        assert line.startswith(f"node1: nccl_env_profile='{profile}' (rdmaforge_fabric=infiniband, "
                               "nccl_plugin_provider=none): NCCL_IB_DISABLE='1'")  # fmt: skip
    # the override that removes the setting makes the profile's other settings usable
    assert report("infiniband", nccl_env_profile="tcp", nccl_env_overrides={"NCCL_IB_DISABLE": None}) == []


def test_an_accelerator_that_disables_ib_is_named() -> None:
    accelerators = {"none": {}, "mine": {"NCCL_IB_DISABLE": 1}}
    (line,) = report("roce", nccl_env_accelerators=accelerators, nccl_env_accelerator="mine")
    assert line.startswith("node1: nccl_env_accelerator='mine' (rdmaforge_fabric=roce")


def test_erdma_with_its_plugin_may_disable_ib_but_not_without_it() -> None:
    # seed 000: eRDMA's traffic goes through the AIACC plugin, the fabric's default nccl_plugin_provider
    assert report("erdma", nccl_env_overrides={"NCCL_IB_DISABLE": 1}) == []
    (line,) = report("erdma", nccl_env_overrides={"NCCL_IB_DISABLE": 1}, nccl_plugin_provider="none")
    assert "nccl_plugin_provider=none" in line and "NCCL_IB_DISABLE='1'" in line
    (net,) = report("erdma", nccl_env_overrides={"NCCL_NET": "Socket"})
    assert "NCCL_NET='Socket' makes NCCL use a TCP socket network on an RDMA fabric" in net


@pytest.mark.parametrize("fabric", ["tcp", "acs_type2"])
def test_socket_fabrics_are_not_judged_by_this_rule(fabric: str) -> None:
    assert report(fabric, nccl_env_overrides={"NCCL_IB_DISABLE": 1, "NCCL_NET": "Socket"}) == []


def test_render_refuses_the_same_settings() -> None:
    from tests.unit.test_workloads import cluster_plan, host

    plan = cluster_plan(host("n1", "infiniband", variables={"nccl_env_overrides": {"NCCL_IB_DISABLE": 1}}),
                        kinds=["mpijob"])  # fmt: skip
    lines = [p for p in plan.problems if "NCCL_IB_DISABLE" in p]
    assert lines == [
        "n1: NCCL settings (rdmaforge_fabric=infiniband, nccl_plugin_provider=none): NCCL_IB_DISABLE='1' turns off "
        "NCCL's IB (verbs) transport, and with no net plugin to carry RDMA NCCL would use TCP sockets on an RDMA "
        "fabric; allowed: NCCL_IB_DISABLE unset or 0 (nccl_env_overrides, workload_manifests_env), or a net plugin "
        "(nccl_plugin_provider)"
    ], plan.problems
    assert plan.files == []
    # erdma's AIACC plugin carries RDMA on the hosts, whose rule then passes; the MPIJob's pods lack the hosts'
    # plugin, and are judged without it (73ca1b3, review round 37a).
    plugin = cluster_plan(host("n1", "erdma", variables={"nccl_env_overrides": {"NCCL_IB_DISABLE": 1}}),
                          kinds=["mpijob"])  # fmt: skip
    lines = [p for p in plugin.problems if "NCCL_IB_DISABLE" in p]
    assert len(lines) == 1 and lines[0].startswith("n1: NCCL settings in the MPIJob's pods (rdmaforge_fabric=erdma)")


def test_provision_stops_before_any_node_is_reached(tmp_path: Path) -> None:
    """Through preflight for real, on loopback hosts at a closed port (9): the run stops on the inventory report,
    before the first task that connects, so no node is unreachable and none changed."""
    nodes = {f"node{i}": {"ansible_host": f"127.0.0.{i}", "ansible_port": 9} for i in (1, 2)}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"rdmaforge_fabric": "infiniband", "nccl_env_overrides": {"NCCL_IB_DISABLE": 1}},
        "children": {"cluster": {"hosts": nodes}},
    }}))  # fmt: skip
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "rdmaforge.cli", "provision", "-i", str(inventory), "--runs-dir", str(runs)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-2000:]  # the inventory's
    for node in nodes:
        assert f"{node}: nccl_env_overrides (rdmaforge_fabric=infiniband, nccl_plugin_provider=none): " in proc.stdout
    (run_dir,) = runs.iterdir()
    recap = json.loads((run_dir / "recap.json").read_text())["hosts"]
    assert {host: (counts["unreachable"], counts["changed"]) for host, counts in recap.items() if host in nodes} == {
        node: (0, 0) for node in nodes
    }, recap
