"""`rdmaforge doctor` judges each node against its inventory: nodes that are all wrong in the same way are not
healthy, an accepted deviation is printed as accepted, and each off-plan value is that node's problem.

The lab-like node below is what a lab node reports (eRDMA fabric without RDMA hardware, memlock 8192 KiB, no
GPU, 1 GiB pages configured but never reserved in a container, ENIs at the eni role's default MTU 1400)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge import doctor, doctor_checks, fabrics, tuning
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.role_defaults import collection_filters
from rdmaforge.runner.exit_codes import ExitCode
from tests.unit.redefined_defaults import redefine_default
from tests.unit.test_doctor import NODE, nic, port

ACCEPT = {"memlock": "no CAP_SYS_RESOURCE in the lab", "rdma": "the lab has no RDMA NICs",
          "hugepages": "a container boots no kernel of its own",
          "plugin_host": "a lab node is not on Alibaba Cloud"}  # fmt: skip
#: cloud-init's AliYun datasource detects an ECS instance by this DMI product name; QEMU's q35 machine reports the
#: other (a real DMI value of a host that is not ECS).
ECS_PRODUCT = "Alibaba Cloud ECS"
QEMU_PRODUCT = "Standard PC (Q35 + ICH9, 2009)"

LAB_LD_CACHE = [
    "\tlibnccl.so.2 (libc6,x86-64) => /opt/nccl/current/lib/libnccl.so.2",
    "\tlibnccl.so (libc6,x86-64) => /opt/nccl/current/lib/libnccl.so",
    "\tlibnccl-net.so (libc6,x86-64) => /opt/rdmaforge/nccl-plugin/lib/libnccl-net.so",
]

LAB_NODE: dict[str, Any] = {
    "clock": ["1700000000.100000", "1700000000.104000000"],
    "rdma_devices": [],
    "nics": [nic("eth0"), nic("eth1", 1400), nic("eth2", 1400)],
    "default_route_interface": "eth0",
    "hugepages": {"by_size": {"2048": {"nr": 0}, "1048576": {"nr": 0}}},
    "grub_defaults": ['GRUB_CMDLINE_LINUX="default_hugepagesz=1G hugepagesz=1G hugepages=10"\n'],
    "memlock": "8192",
    "nvidia_smi": None,
    "lspci": "",
    "nccl_manifest": {"id": "nccl-2.29.7-cuda13.0-sm_80-funcsc3dfaac5", "version": "2.29.7", "cuda": "13.0"},
    "nccl_libs": ["libnccl.so.2", "libnccl.so.2.29.7"],  # a lab node's /opt/nccl/current/lib (find libnccl.so.*)
    "plugin_present": True,
    "plugin_target": "/opt/rdmaforge/nccl-plugin/aiacc-2.0.1/libnccl-net.so.0.0.0",  # nccl_plugin's layout
    "plugin_symbols": "0000000000001000 T ncclNetPlugin_v6\n",
    "dmi_product_name": None,  # a container: /sys has no DMI
    "plugin_link": "/opt/rdmaforge/nccl-plugin/lib/libnccl-net.so",
    "nccl_home": "/opt/nccl/current",
    # The net plugin API versions NCCL 2.29.7's loader looks up, as doctor read them on a real H100 node
    # (tests/data/device-h100-toolkit/doctor-node.json).
    "nccl_loader_apis": [6, 7, 8, 9, 10, 11],
    # `ldconfig -p | grep libnccl` on a converged lab node (2026-11-28).
    "ld_cache_nccl": LAB_LD_CACHE,
    "inventory": {
        "rdmaforge_fabric": "erdma",
        "rdma_require_active_ports": False,
        "hugepages_enabled": True,
        "eni_enabled": True,
        "nccl_build_only_funcs": "AllReduce Sum f32 RING SIMPLE",
        "doctor_expected_gpus": 0,
        "doctor_accept": ACCEPT,
        "nccl_plugin_aiacc_outside_alibaba_cloud": True,
    },
}


def lab(n: int = 2, **inventory: Any) -> dict[str, dict[str, Any]]:
    nodes = {}
    for i in range(1, n + 1):
        node = copy.deepcopy(LAB_NODE)
        node["inventory"].update(inventory)
        nodes[f"node{i}"] = node
    return nodes


def statuses(diagnosis: doctor.Diagnosis, host: str) -> dict[str, str]:
    return {c.check: c.status for c in diagnosis.checks if c.host == host}


def test_the_lab_is_healthy_with_its_deviations_accepted() -> None:
    nodes = lab()
    for node in nodes.values():
        node["dmi_product_name"] = QEMU_PRODUCT  # read, and not ECS: the deviation doctor_accept covers
    diagnosis = doctor.diagnose(nodes)
    assert diagnosis.exit_code == ExitCode.OK, doctor.render(diagnosis)
    assert statuses(diagnosis, "node1") == {
        "rdma": "accepted", "port_rate": "not_checked", "memlock": "accepted", "mtu": "ok",
        "hugepages": "accepted", "hugepages_boot": "ok",
        "gpus": "ok", "nccl": "ok", "plugin": "ok", "plugin_host": "accepted", "clock": "ok",
    }  # fmt: skip
    text = doctor.render(diagnosis)
    assert "  node1: memlock accepted: 8192 KiB (expected unlimited): memlock of a non-interactive login is 8192 " in (
        text
    )
    assert "accepted by the inventory: no CAP_SYS_RESOURCE in the lab" in text
    assert "  node1: rdma accepted: none (expected erdma* with every port ACTIVE): no erdma* RDMA device" in text
    assert "healthy: 2 node(s)" in text and "not healthy" not in text
    # The lab's containers have no DMI under /sys (LAB_NODE): the name is not read, but the lab inventory declares
    # the nodes outside Alibaba Cloud (nccl_plugin_aiacc_outside_alibaba_cloud), which is what the acceptance covers.
    declared = doctor.diagnose(lab())
    assert statuses(declared, "node1")["plugin_host"] == "accepted" and declared.exit_code == ExitCode.OK
    # Without that declaration nothing tells whether a node is an ECS instance: not judged, never accepted (review
    # round 41a: the unread name was accepted, exit 0).
    unknown = doctor.diagnose(lab(nccl_plugin_aiacc_outside_alibaba_cloud=False))
    host = {c.host: c for c in unknown.checks if c.check == "plugin_host"}["node1"]
    assert (host.status, host.expected) == ("not_checked", repr(ECS_PRODUCT))
    assert unknown.exit_code == ExitCode.INCOMPLETE
    assert "the DMI product name could not be read" in host.reason


def test_nodes_all_wrong_the_same_way_are_not_healthy() -> None:
    """The issue's case: memlock 8192 KiB and no RDMA device on every node of an eRDMA fabric; no skew at all."""
    diagnosis = doctor.diagnose(lab(doctor_accept={}))
    assert diagnosis.findings == []  # the nodes agree with each other
    assert diagnosis.exit_code == ExitCode.UNHEALTHY
    assert {(c.host, c.check) for c in diagnosis.problems} == {
        (h, c) for h in ("node1", "node2") for c in ("rdma", "memlock", "hugepages", "plugin_host")
    }
    text = doctor.render(diagnosis)
    assert "healthy:" not in text.replace("not healthy:", "")
    assert "not healthy: 8 problem(s) against the inventory, 0 skew finding(s)" in text
    memlock = next(c for c in diagnosis.problems if c.check == "memlock")
    assert (memlock.expected, memlock.actual) == ("unlimited", "8192 KiB")


def test_one_node_off_the_eni_mtu_plan_is_that_nodes_problem() -> None:
    nodes = lab(3)
    nodes["node3"]["nics"][1]["mtu"] = 1300
    diagnosis = doctor.diagnose(nodes)
    mtu = {c.host: c for c in diagnosis.checks if c.check == "mtu"}
    assert mtu["node3"].status == "problem" and mtu["node1"].status == mtu["node2"].status == "ok"
    assert mtu["node3"].expected == "eth1,eth2=1400" and "eth1=1300" in mtu["node3"].reason
    assert diagnosis.exit_code == ExitCode.UNHEALTHY
    # Jumbo frames on eRDMA plan 8500: every node is then off the plan, though they agree.
    jumbo = doctor.diagnose(lab(eni_jumbo_frames=True))
    assert {c.host for c in jumbo.problems if c.check == "mtu"} == {"node1", "node2"}


def test_huge_pages_configured_off_the_plan() -> None:
    nodes = lab()
    nodes["node2"]["grub_defaults"] = ['GRUB_CMDLINE_LINUX="default_hugepagesz=1G hugepagesz=1G hugepages=7"\n']
    diagnosis = doctor.diagnose(nodes)
    boot = {c.host: c for c in diagnosis.checks if c.check == "hugepages_boot"}
    # No GPU: seed 004's rule plans 0 x 5 + 10 = 10 pages.
    # in the order the kernel reads them
    assert boot["node1"].status == "ok" and boot["node1"].expected == "hugepagesz=1G hugepages=10"
    assert boot["node2"].status == "problem" and "hugepages=7" in boot["node2"].reason
    # An explicit count in the inventory is the plan.
    assert {c.host for c in doctor.diagnose(lab(hugepages_count=7)).problems} == {"node1", "node2"}


def test_gpu_count_nccl_build_and_plugin_against_the_inventory() -> None:
    nodes = lab(3)
    nodes["node1"]["inventory"]["doctor_expected_gpus"] = 8
    nodes["node2"]["nccl_manifest"]["id"] = "nccl-2.28.3-cuda13.0-sm_80-funcsc3dfaac5"
    nodes["node3"]["plugin_symbols"] = ""
    for node in nodes.values():
        node["dmi_product_name"] = QEMU_PRODUCT  # plugin_host accepted: a DMI name not read never is
    problems = {(c.host, c.check): c for c in doctor.diagnose(nodes).problems}
    assert set(problems) == {("node1", "gpus"), ("node2", "nccl"), ("node3", "plugin")}
    assert problems["node1", "gpus"].reason == "0 GPU(s) found, 8 expected (doctor_expected_gpus)"
    # The nccl_build role's defaults (version 2.29.7, sm_80) are the plan when the inventory sets none.
    assert problems["node2", "nccl"].expected == "2.29.7-cuda13.0-sm_80-funcsc3dfaac5"
    assert "exports no ncclNetPlugin_vN symbol" in problems["node3", "plugin"].reason


def test_a_node_where_no_tool_counted_gpus_is_not_judged_as_having_none() -> None:
    """The lab's inventory expects 0 GPUs. A node where neither nvidia-smi nor lspci answered has no count: taking
    that for 0 would say ok; so would the huge page plans, which follow the GPU count."""
    nodes = lab(2)
    nodes["node2"]["lspci"] = None
    checks = {(c.host, c.check): c for c in doctor.diagnose(nodes).checks}
    assert checks["node1", "gpus"].status == "ok"
    assert checks["node2", "gpus"].status == "not_checked"
    assert "neither nvidia-smi, lspci nor the PCI tree in sysfs answered" in checks["node2", "gpus"].reason
    for name in ("hugepages", "hugepages_boot"):
        assert checks["node2", name].status == "not_checked", checks["node2", name]
    assert doctor.node_row(nodes["node2"])["gpus"] == "?"
    # Without pciutils the PCI tree in sysfs counts them (preflight's node_probe.yml reads it for both).
    nodes["node2"]["sysfs_gpus"] = 0
    checks = {(c.host, c.check): c for c in doctor.diagnose(nodes).checks}
    assert checks["node2", "gpus"].status == "ok" and checks["node2", "hugepages_boot"].status == "ok"
    # A count the inventory sets is a plan of its own: the boot arguments are judged against it.
    nodes = lab(1, hugepages_count=10)
    nodes["node1"]["lspci"] = None
    checks = {c.check: c for c in doctor.diagnose(nodes).checks}
    assert checks["hugepages_boot"].status == "ok" and checks["gpus"].status == "not_checked"


def test_not_checked_says_why() -> None:
    nodes = lab(1)
    del nodes["node1"]["inventory"]["doctor_expected_gpus"]
    nodes["node1"]["inventory"].update(rdmaforge_fabric="tcp", hugepages_enabled=False, eni_enabled=False)
    checks = {c.check: c for c in doctor.diagnose(nodes).checks}
    assert checks["gpus"].status == "not_checked" and "doctor_expected_gpus" in checks["gpus"].reason
    assert checks["memlock"].status == checks["rdma"].status == "not_checked"
    assert checks["mtu"].reason == "eni_enabled is false: no MTU is planned"
    # tcp has no plugin by default (the nccl_plugin role's rule): a registered one is a problem.
    assert checks["plugin"].status == "problem"


def test_an_unknown_acceptance_is_named() -> None:
    diagnosis = doctor.diagnose(lab(1, doctor_accept={**ACCEPT, "memlok": "typo"}))
    assert diagnosis.exit_code == ExitCode.UNHEALTHY
    assert any("doctor_accept names 'memlok', which is not a check; allowed: rdma, port_rate, memlock" in f.reason
               for f in diagnosis.findings)  # fmt: skip


def test_the_table_fits_120_columns_and_json_has_every_check() -> None:
    nodes = {**lab(3), "gpu-node-017": copy.deepcopy(NODE)}
    diagnosis = doctor.diagnose(nodes)
    table = doctor.render(diagnosis).split("\n\n")[0]
    assert max(len(line) for line in table.splitlines()) <= doctor.TABLE_WIDTH, table
    assert "2.29.7 cu13.0" in table and "aiacc 2.0.1" in table  # versions, not ids or paths
    per_node = json.loads(json.dumps(diagnosis.per_node()))
    assert set(per_node["node1"]["checks"]) == {"rdma", "port_rate", "memlock", "mtu", "hugepages", "hugepages_boot",
                                                "gpus",
                                                "nccl", "plugin", "plugin_host", "clock"}  # fmt: skip
    assert per_node["node1"]["checks"]["memlock"]["status"] == "accepted"


@pytest.mark.parametrize("size", ["1G", "2M"])
def test_reserved_pages_are_read_at_the_planned_size(size: str) -> None:
    nodes = lab(1, hugepages_size=size, doctor_accept={})
    kb = {"1G": "1048576", "2M": "2048"}[size]
    nodes["node1"]["hugepages"]["by_size"][kb]["nr"] = 10
    nodes["node1"]["grub_defaults"] = [f'GRUB_CMDLINE_LINUX="hugepagesz={size} hugepages=10"']
    checks = {c.check: c for c in doctor.diagnose(nodes).checks}
    assert checks["hugepages"].status == "ok" and checks["hugepages_boot"].status == "ok"


def test_the_plugin_must_export_an_api_the_installed_nccl_loads() -> None:
    """The versions NCCL's loader looks up (the nccl_net_api module reads them from libnccl) against the plugin's
    exports: the lab's NCCL 2.29.7 with AIACC 2.0.1 shares v6 (the nccl_plugin role's own lab finding)."""
    shared = lab(1)
    shared["node1"]["nccl_loader_apis"] = [6, 7, 8, 9, 10]
    plugin = {c.check: c for c in doctor.diagnose(shared).checks}["plugin"]
    assert plugin.status == "ok" and plugin.reason == "exports v6, which ld.so gives NCCL; the installed NCCL loads v6"
    disjoint = lab(1)
    disjoint["node1"]["nccl_loader_apis"] = [8, 9, 10]
    plugin = {c.check: c for c in doctor.diagnose(disjoint).checks}["plugin"]
    assert plugin.status == "problem" and plugin.expected == "aiacc, exporting one of v8, v9, v10"
    assert "the plugin exports v6: no common version" in plugin.reason


def test_doctor_plans_the_same_enis_as_the_eni_role() -> None:
    """doctor and the eni role share one rule (tuning.eni_names): the default-route NIC left out, natural order,
    eni_interfaces when the inventory lists them."""
    from rdmaforge import doctor_checks, tuning

    node = copy.deepcopy(LAB_NODE)
    node["nics"] = [nic("eth0"), nic("eth10", 1400), nic("eth2", 1400), nic("docker0")]
    assert doctor_checks.eni_names(node) == ["eth2", "eth10"]
    assert doctor_checks.eni_names(node) == tuning.eni_names(node["nics"], "eth0")
    node["inventory"]["eni_interfaces"] = ["eth10"]
    assert doctor_checks.eni_names(node) == ["eth10"]


def test_the_aiacc_plugin_host_must_be_an_alibaba_cloud_ecs_instance() -> None:
    """Preflight refuses AIACC off ECS unless told to install it anyway; doctor judges a provisioned node the same
    way, so a plugin that cannot initialise is never called ok."""
    nodes = lab(4, doctor_accept={})
    nodes["node1"]["dmi_product_name"] = ECS_PRODUCT + "\n"
    nodes["node2"]["dmi_product_name"] = QEMU_PRODUCT
    nodes["node4"]["inventory"]["nccl_plugin_provider"] = "none"
    nodes["node4"].update(plugin_present=False, plugin_symbols="")
    checks = {(c.host, c.check): c for c in doctor.diagnose(nodes).checks}
    assert checks["node1", "plugin_host"].status == "ok"
    assert checks["node1", "plugin_host"].expected == repr(ECS_PRODUCT)
    qemu = checks["node2", "plugin_host"]
    assert qemu.status == "problem" and qemu.actual == repr(QEMU_PRODUCT)
    assert f"the DMI product name is {QEMU_PRODUCT!r}: not an Alibaba Cloud ECS instance" in qemu.reason
    assert qemu.reason.endswith("(installed anyway: nccl_plugin_aiacc_outside_alibaba_cloud is true)")
    unreadable = checks["node3", "plugin_host"]  # the lab's inventory declares it outside Alibaba Cloud
    assert unreadable.status == "problem" and unreadable.actual == "not readable; declared outside Alibaba Cloud"
    assert checks["node4", "plugin_host"].status == "not_checked"
    assert checks["node4", "plugin_host"].reason == "nccl_plugin_provider is none: only AIACC needs Alibaba Cloud"
    # The ECS node's plugin column carries no mark; the others' do.
    table = doctor.render(doctor.diagnose(nodes)).split("\n\n")[0].splitlines()
    marks = {line.split()[0]: line for line in table[2:]}
    assert "aiacc 2.0.1 !" not in marks["node1"] and "aiacc 2.0.1 !" in marks["node2"]


def test_without_the_override_the_reason_does_not_claim_one() -> None:
    nodes = lab(1, doctor_accept={}, nccl_plugin_aiacc_outside_alibaba_cloud=False)
    nodes["node1"]["dmi_product_name"] = QEMU_PRODUCT
    host = {c.check: c for c in doctor.diagnose(nodes).checks}["plugin_host"]
    assert host.status == "problem" and "installed anyway" not in host.reason


def test_the_plugin_provider_the_inventory_does_not_set_is_the_nccl_plugin_roles_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nccl_plugin_provider's default is role nccl_plugin's Jinja, evaluated for the node, not restated: with the
    role's default changed to aiacc on roce only, an erdma lab node is to have no plugin; the inventory still wins."""
    redefine_default(tmp_path, monkeypatch, "nccl_plugin", "nccl_plugin_provider",
                     "{{ 'aiacc' if rdmaforge_fabric | default('tcp') == 'roce' else 'none' }}")  # fmt: skip
    nodes = lab(2, doctor_accept={})
    nodes["node2"]["inventory"]["nccl_plugin_provider"] = "aiacc"
    checks = {(c.host, c.check): c for c in doctor.diagnose(nodes).checks}
    assert checks["node1", "plugin_host"].reason == "nccl_plugin_provider is none: only AIACC needs Alibaba Cloud"
    assert checks["node1", "plugin"].status == "problem"  # the lab node's AIACC library, where none is planned
    assert checks["node2", "plugin_host"].status == "problem"  # the lab is no ECS instance
    assert checks["node2", "plugin"].status == "ok"


def counted_defaults(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names doctor_checks evaluates a role default of, in order, from now on."""
    calls: list[str] = []
    real = doctor_checks.evaluated_default

    def counted(name: str, values: Any, role: str | None = None) -> Any:
        calls.append(name)
        return real(name, values, role)

    monkeypatch.setattr(doctor_checks, "evaluated_default", counted)
    return calls


def test_the_plugin_provider_is_the_inventorys_else_the_role_default_evaluated_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """For every fabric profile, the provider of a node whose inventory leaves it unset or empty is the profile's
    net plugin (rdmaforge.fabrics' table), from one evaluation of the role's default; the inventory's own value
    needs none."""
    calls = counted_defaults(monkeypatch)
    for profile in fabrics.PROFILES:
        for inventory in ({}, {"nccl_plugin_provider": ""}, {"nccl_plugin_provider": None}):
            node = {"inventory": {"rdmaforge_fabric": profile.name, **inventory}}
            calls.clear()
            assert doctor_checks.plugin_provider(node) == profile.net_plugin, (profile.name, inventory)
            assert calls == ["nccl_plugin_provider"], (profile.name, inventory)
        calls.clear()
        assert doctor_checks.plugin_provider({"inventory": {"rdmaforge_fabric": profile.name,
                                                            "nccl_plugin_provider": "harp"}}) == "harp"  # fmt: skip
        assert calls == []


def test_a_plugin_provider_default_read_once_with_the_nodes_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A role default that comes out empty is not evaluated a second time, and a default naming another of the
    role's variables is evaluated with the node's inventory value of it, also where the inventory's provider is
    empty."""
    redefine_default(tmp_path, monkeypatch, "nccl_plugin", "nccl_plugin_provider", "")
    calls = counted_defaults(monkeypatch)
    assert doctor_checks.plugin_provider({"inventory": {"rdmaforge_fabric": "erdma"}}) == ""
    assert calls == ["nccl_plugin_provider"]
    redefine_default(tmp_path / "again", monkeypatch, "nccl_plugin", "nccl_plugin_provider",
                     "{{ 'aiacc' if nccl_plugin_aiacc_outside_alibaba_cloud else 'none' }}")  # fmt: skip
    node = {"inventory": {"rdmaforge_fabric": "tcp", "nccl_plugin_provider": "",
                          "nccl_plugin_aiacc_outside_alibaba_cloud": True}}  # fmt: skip
    assert doctor_checks.plugin_provider(node) == "aiacc"
    assert doctor_checks.check_plugin_host(node)[2] is not None  # judged as an AIACC host


def test_what_the_ld_so_cache_gives_programs_is_judged() -> None:
    """A plugin link or an NCCL build that ld.so does not hand out is never loaded: doctor says so."""
    nodes = lab(4, doctor_accept=ACCEPT)
    # node1: the plugin's ld.so.conf.d entry removed and ldconfig run (no libnccl-net.so in the cache).
    nodes["node1"]["ld_cache_nccl"] = LAB_LD_CACHE[:2]
    # node2: Debian's libnccl2 package found first for libnccl.so.2.
    nodes["node2"]["ld_cache_nccl"] = ["\tlibnccl.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so.2"]
    # node3: rdmaforge installs no plugin, but another package put a libnccl-net.so into the cache.
    nodes["node3"]["inventory"]["nccl_plugin_provider"] = "none"
    nodes["node3"].update(plugin_present=False, plugin_symbols="")
    nodes["node3"]["ld_cache_nccl"] = ["\tlibnccl-net.so (libc6,x86-64) => /usr/lib/libnccl-net.so"]
    del nodes["node4"]["ld_cache_nccl"]  # a node file without the reading: judged without it, and says so
    checks = {(c.host, c.check): c for c in doctor.diagnose(nodes).checks}
    missing = checks["node1", "plugin"]
    assert missing.status == "problem" and missing.reason.startswith(
        "the ld.so cache has no libnccl-net.so, so NCCL does not load /opt/rdmaforge/nccl-plugin/lib/libnccl-net.so"
    )
    assert checks["node1", "nccl"].status == "ok"
    debian = checks["node2", "nccl"]
    assert debian.status == "problem"
    assert "find libnccl.so.2 at /lib/x86_64-linux-gnu/libnccl.so.2, not the cluster's build under /opt/nccl/" in (
        debian.reason
    )
    assert checks["node2", "plugin"].status == "problem"  # that cache has no plugin either
    other = checks["node3", "plugin"]
    assert other.status == "problem" and "/usr/lib/libnccl-net.so" in other.reason
    # node4: what the cache gives was not read, so neither check is ok (review round 36: both were, and unprinted).
    unread = checks["node4", "plugin"]
    assert unread.status == "not_checked" and unread.reason.endswith(
        "not judged: the ld.so cache was not read, so whether NCCL finds this plugin was not checked"), unread
    nccl = checks["node4", "nccl"]
    assert (nccl.status, nccl.reason) == ("not_checked", "the cluster's NCCL build; not judged: the ld.so cache was "
                                          "not read, so whether programs load this build was not checked")  # fmt: skip


def test_a_manifest_without_its_library_is_a_problem() -> None:
    nodes = lab(1)
    nodes["node1"]["nccl_libs"] = ["libnccl.so.2"]  # the versioned library deleted, its link left dangling
    nccl = {c.check: c for c in doctor.diagnose(nodes).checks}["nccl"]
    assert (
        nccl.status == "problem"
        and nccl.reason == "the build's manifest is there but its lib/ has no libnccl.so.2.29.7"
    )


def rdma_node(fabric: str, device: str, **inventory: Any) -> dict[str, Any]:
    """NODE on ``fabric`` with one RDMA device whose port is down (its inventory leaves rdma_require_active_ports
    unset unless ``inventory`` sets it)."""
    node = copy.deepcopy(NODE)
    node["rdma_devices"] = [{"name": device, "ports": [port(1, "PORT_DOWN", "DISABLED")]}]
    node["inventory"].update(rdmaforge_fabric=fabric, **inventory)
    return node


def test_whether_ports_must_be_active_is_role_rdma_cores_default_evaluated_for_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rdma_require_active_ports defaults to role rdma_core's Jinja (true on RDMA fabrics), evaluated for the node:
    doctor read a template default as "required" by hand. With the default changed to InfiniBand only, an eRDMA
    node with a port down is not held to active ports, an InfiniBand one still is; the inventory's value wins."""
    down = ("problem", "erdma_0", "erdma* with every port ACTIVE", "not ACTIVE: erdma_0:1 PORT_DOWN")
    assert doctor_checks.check_rdma(rdma_node("erdma", "erdma_0")) == down  # the role's own default: required
    redefine_default(tmp_path, monkeypatch, "rdma_core", "rdma_require_active_ports",
                     "{{ rdma_core_profile == 'infiniband' }}")  # fmt: skip
    assert doctor_checks.check_rdma(rdma_node("erdma", "erdma_0")) == (
        "ok", "erdma_0", "erdma*",
        "1 erdma* device(s); port states not judged (rdma_require_active_ports is false); not ACTIVE (not judged): "
        "erdma_0:1 PORT_DOWN",
    )  # fmt: skip
    assert doctor_checks.check_rdma(rdma_node("infiniband", "mlx5_0"))[3] == "not ACTIVE: mlx5_0:1 PORT_DOWN"
    assert doctor_checks.check_rdma(rdma_node("erdma", "erdma_0", rdma_require_active_ports=True)) == down



def test_a_rail_that_is_down_is_named_when_port_states_are_not_required() -> None:
    """With rdma_require_active_ports false, a node with one of two rails down got "ok: 2 device(s); port states not
    required" and a port rate line of the one active port: the down rail was shown nowhere. Both lines name it now,
    as not judged (the inventory's choice), and the active rail is still judged."""
    node = rdma_node("infiniband", "mlx5_0", rdma_require_active_ports=False, rdma_core_min_port_rate_gbps=100)
    node["rdma_devices"] = [
        {"name": "mlx5_0", "ports": [port(1, "PORT_ACTIVE", "LINK_UP", rate=200)]},
        {"name": "mlx5_1", "ports": [port(1, "PORT_DOWN", "DISABLED")]},
    ]
    status, _, _, reason = doctor_checks.check_rdma(node)
    assert status == "ok" and reason.endswith("not ACTIVE (not judged): mlx5_1:1 PORT_DOWN"), reason
    status, actual, _, reason = doctor_checks.check_port_rate(node)
    assert status == "ok" and actual == "mlx5_0:1 200 Gb/s", actual
    assert reason.endswith("; no rate judged for mlx5_1:1 (not ACTIVE)"), reason
    # Only the rails rdma_core_expected_ports names: a down port outside them is no rail of the node's.
    node["inventory"]["rdma_core_expected_ports"] = ["mlx5_0"]
    assert "not ACTIVE" not in doctor_checks.check_rdma(node)[3]
    assert "not ACTIVE" not in doctor_checks.check_port_rate(node)[3]


@pytest.mark.parametrize(("fabric", "device", "layer", "other"), [
    ("infiniband", "mlx5_0", "InfiniBand", "Ethernet"),  # a VPI HCA left in Ethernet mode on an IB fabric
    ("roce", "mlx5_0", "Ethernet", "InfiniBand"),
])  # fmt: skip
def test_a_port_on_another_link_layer_than_the_fabrics_is_a_problem(
    fabric: str, device: str, layer: str, other: str
) -> None:
    """The IB link layer was not checked: a ConnectX port left in Ethernet mode on an InfiniBand fabric got its
    profile's NCCL settings and "ok". The link layer ibv_devinfo (or sysfs) reads is compared with the profile's;
    a port whose link layer was not read is not judged on it."""
    node = rdma_node(fabric, device, rdma_require_active_ports=True)
    node["rdma_devices"] = [{"name": "mlx5_0", "ports": [dict(port(1), link_layer=layer)]},
                            {"name": "mlx5_1", "ports": [dict(port(1), link_layer=other)]}]  # fmt: skip
    status, _, expected, reason = doctor_checks.check_rdma(node)
    assert (status, expected) == ("problem", f"mlx5* ports of link layer {layer}"), reason
    assert reason.endswith(f"these ports are on another link layer: mlx5_1:1 {other}"), reason
    node["rdma_devices"][1]["ports"][0].pop("link_layer")
    assert doctor_checks.check_rdma(node)[0] == "ok"

ENI_MTU_EXPRESSION = (
    "rdmaforge_fabric | default('tcp') | rdmaforge.cluster.rdmaforge_eni_mtu(eni_jumbo_frames | bool, eni_mtu)"
)


def test_the_planned_mtu_is_the_eni_roles_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The eni role plans the MTU with the rdmaforge_eni_mtu filter (tuning.eni_mtu); doctor restated its rule
    (8500 for eRDMA with jumbo frames, else 1400). Alibaba's guidance (8500 with jumbo frames on eRDMA, else 1400),
    the inventory's eni_mtu winning; and with the filter's rule changed, doctor follows it."""
    assert ENI_MTU_EXPRESSION in (PROJECT_ROOT / "roles" / "eni" / "vars" / "main.yml").read_text()
    assert collection_filters()["rdmaforge_eni_mtu"] is tuning.eni_mtu
    assert doctor_checks.planned_mtu(lab(1)["node1"]) == 1400
    assert doctor_checks.planned_mtu(lab(1, eni_jumbo_frames=True)["node1"]) == 8500
    assert doctor_checks.planned_mtu(lab(1, eni_jumbo_frames="yes", eni_mtu=9000)["node1"]) == 9000
    assert doctor_checks.planned_mtu(lab(1, eni_jumbo_frames=True, rdmaforge_fabric="tcp")["node1"]) == 1400
    monkeypatch.setattr(tuning, "eni_mtu", lambda fabric, jumbo_frames, override=None: 9001 if jumbo_frames else 1401)
    assert doctor_checks.planned_mtu(lab(1, eni_jumbo_frames="yes")["node1"]) == 9001


# --- exploratory findings: false passes, crashes, messages ------------------------------------------------------


def healthy_ib(**inventory: Any) -> dict[str, dict[str, Any]]:
    """Two copies of test_doctor's healthy 8-GPU InfiniBand node, with ``inventory`` values over its own."""
    nodes = {}
    for host in ("node1", "node2"):
        node = copy.deepcopy(NODE)
        node["inventory"].update(inventory)
        nodes[host] = node
    return nodes


def check_of(diagnosis: doctor.Diagnosis, host: str, name: str) -> doctor_checks.Check:
    return next(c for c in diagnosis.checks if c.host == host and c.check == name)


def test_the_healthy_node_is_healthy() -> None:
    # the baseline the cases below damage in one place each
    assert doctor.diagnose(healthy_ib()).exit_code == ExitCode.OK


def test_a_rail_listed_in_rdma_core_expected_ports_that_is_missing_is_a_problem() -> None:
    """rdma_core's own check fails such a node; doctor said healthy (it never read the list)."""
    listed = ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"]
    diagnosis = doctor.diagnose(healthy_ib(rdma_core_expected_ports=listed))
    rdma = check_of(diagnosis, "node1", "rdma")
    assert rdma.status == "problem" and "expected RDMA device mlx5_2 not found" in rdma.reason, rdma
    assert diagnosis.exit_code == ExitCode.UNHEALTHY
    assert check_of(doctor.diagnose(healthy_ib(rdma_core_expected_ports=listed[:2])), "node1", "rdma").status == "ok"


def test_a_device_without_a_port_beside_an_active_one_is_a_problem() -> None:
    nodes = healthy_ib()
    nodes["node1"]["rdma_devices"].append({"name": "mlx5_2", "ports": []})
    rdma = check_of(doctor.diagnose(nodes), "node1", "rdma")
    assert rdma.status == "problem" and "mlx5_2 has no port" in rdma.reason, rdma


@pytest.mark.parametrize("texts", [
    # a later assignment replaces the earlier one, as the shell that sources the file does
    ['GRUB_CMDLINE_LINUX="default_hugepagesz=1G hugepagesz=1G hugepages=50"\nGRUB_CMDLINE_LINUX="quiet splash"\n'],
    # the drop-in, sourced after /etc/default/grub, resets it
    ['GRUB_CMDLINE_LINUX="default_hugepagesz=1G hugepagesz=1G hugepages=50"\n', 'GRUB_CMDLINE_LINUX=""\n'],
    # hugepages= before hugepagesz=: the kernel gives the 50 pages to the default size, 2M
    ['GRUB_CMDLINE_LINUX="hugepages=50 hugepagesz=1G"\n'],
])  # fmt: skip
def test_boot_arguments_are_read_as_the_shell_and_the_kernel_read_them(texts: list[str]) -> None:
    nodes = healthy_ib()
    nodes["node1"]["grub_defaults"] = texts
    boot = check_of(doctor.diagnose(nodes), "node1", "hugepages_boot")
    assert boot.status == "problem", boot
    assert check_of(doctor.diagnose(nodes), "node2", "hugepages_boot").status == "ok"


@pytest.mark.parametrize("spelling", ["1GB", "1024M", "1048576K"])
def test_seed_004s_spelling_of_the_page_size_is_the_plan(spelling: str) -> None:
    """Seed 004 writes hugepagesz=1GB; the kernel's memparse reads it as 1G and the role leaves it as it is: doctor
    called it a problem, which no converge could clear (review round 37b)."""
    nodes = healthy_ib()
    nodes["node1"]["grub_defaults"] = [f'GRUB_CMDLINE_LINUX="default_hugepagesz={spelling} hugepagesz={spelling} '
                                       'hugepages=50"\n']  # fmt: skip
    boot = check_of(doctor.diagnose(nodes), "node1", "hugepages_boot")
    assert boot.status == "ok", boot
    nodes["node1"]["grub_defaults"] = ['GRUB_CMDLINE_LINUX="default_hugepagesz=2M hugepagesz=2M hugepages=50"\n']
    assert check_of(doctor.diagnose(nodes), "node1", "hugepages_boot").status == "problem"


def test_the_drop_in_that_appends_to_the_variable_is_the_plan() -> None:
    nodes = healthy_ib()
    nodes["node1"]["grub_defaults"] = ['GRUB_CMDLINE_LINUX="quiet"\n',
                                       'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX default_hugepagesz=1G hugepagesz=1G '
                                       'hugepages=50"\n']  # fmt: skip
    assert check_of(doctor.diagnose(nodes), "node1", "hugepages_boot").status == "ok"


def test_the_kernels_reading_of_huge_page_arguments() -> None:
    # Documentation/admin-guide/kernel-parameters.txt: hugepages= after hugepagesz= counts pages of that size; as the
    # first HugeTLB parameter, pages of the default size
    assert tuning.hugepages_pools(["hugepagesz=1G", "hugepages=50"]) == {"1G": "50"}
    assert tuning.hugepages_pools(["hugepages=50", "hugepagesz=1G"]) == {"2M": "50"}
    assert tuning.hugepages_pools(["default_hugepagesz=1G", "hugepages=50"]) == {"1G": "50"}
    assert tuning.hugepages_pools(["hugepagesz=2M", "hugepages=512", "hugepagesz=1G", "hugepages=4"]) == {
        "2M": "512", "1G": "4"}  # fmt: skip


@pytest.mark.parametrize(("target", "provider"), [
    ("/usr/local/tfabric/tools/lib/libnccl-net.so", "aiacc"),  # Tencent's library where AIACC is planned
    ("/opt/rdmaforge/nccl-plugin/aiacc-1.0.0/libnccl-net.so", "aiacc"),  # another AIACC release
    ("/opt/rdmaforge/nccl-plugin/aiacc-2.0.1/libnccl-net.so", "harp"),  # AIACC where HARP is planned
])  # fmt: skip
def test_a_plugin_link_that_leads_elsewhere_than_the_providers_library_is_a_problem(target: str, provider: str) -> None:
    """The link's target and the provider's library compared by device and inode (plugin_files, the two stat
    results): AIACC installed where harp was planned was 'ok'."""
    nodes = healthy_ib(nccl_plugin_provider=provider)
    expected = {"aiacc": "/opt/rdmaforge/nccl-plugin/aiacc-2.0.1/libnccl-net.so",
                "harp": "/usr/local/tfabric/tools/lib/libnccl-net.so"}[provider]  # fmt: skip
    for node in nodes.values():
        files = [{"exists": True, "inode": 11, "dev": 2049}, {"exists": True, "inode": 12, "dev": 2049}]
        node.update(plugin_target=target, plugin_expected=expected, plugin_files=files)
    plugin = check_of(doctor.diagnose(nodes), "node1", "plugin")
    assert plugin.status == "problem", plugin
    assert plugin.reason == (f"/opt/rdmaforge/nccl-plugin/lib/libnccl-net.so leads to {target}, not to {expected}, the "
                             f"library nccl_plugin_provider {provider} registers")  # fmt: skip
    for node in nodes.values():
        node["plugin_files"][1]["inode"] = 11  # one file: the link leads there
    assert check_of(doctor.diagnose(nodes), "node1", "plugin").status == "ok"
    for node in nodes.values():
        node["plugin_files"][1]["exists"] = False  # the provider's library is not there at all
    assert check_of(doctor.diagnose(nodes), "node1", "plugin").status == "problem"


@pytest.mark.parametrize("fabric", ["ib", "InfiniBand", "rocev2"])
def test_a_fabric_doctor_does_not_know_is_a_problem_not_no_rdma(fabric: str) -> None:
    nodes = healthy_ib(rdmaforge_fabric=fabric)
    rdma = check_of(doctor.diagnose(nodes), "node1", "rdma")
    assert rdma.status == "problem" and f"rdmaforge_fabric={fabric!r} is not a fabric profile" in rdma.reason


def test_eni_per_gpu_with_unreadable_nics_expects_no_count() -> None:
    nodes = healthy_ib(doctor_expected_gpus=None, eni_per_gpu=True)
    for node in nodes.values():
        node.update(nics=[], nics_error="ip: command not found", nvidia_smi=None, lspci="")  # 0 GPUs counted
    gpus = check_of(doctor.diagnose(nodes), "node1", "gpus")
    assert gpus.status == "not_checked" and "the node's NICs could not be read" in gpus.reason, gpus


@pytest.mark.parametrize(("variable", "value"), [("doctor_expected_gpus", "8.0"), ("hugepages_count", "50.0")])
def test_a_count_as_the_argument_spec_takes_it_is_read_not_a_crash(variable: str, value: str) -> None:
    """int("8.0") stopped doctor with a traceback after every node was read; the spec's int takes it as 8."""
    assert doctor.diagnose(healthy_ib(**{variable: value})).exit_code == ExitCode.OK


@pytest.mark.parametrize("reason", ["", "   ", None, 7])
def test_an_acceptance_without_a_reason_accepts_nothing(reason: object) -> None:
    nodes = healthy_ib(doctor_accept={"memlock": reason})
    for node in nodes.values():
        node["memlock"] = "64"
    assert check_of(doctor.diagnose(nodes), "node1", "memlock").status == "problem"


def test_an_unread_value_is_never_the_majority() -> None:
    """Two nodes whose GPUs were not counted outvoted the one that counted 8: it was named the odd one out."""
    nodes = {**healthy_ib(), "node3": copy.deepcopy(NODE)}
    for host in ("node1", "node2"):
        nodes[host].update(nvidia_smi=None, lspci=None, sysfs_gpus=None)
    diagnosis = doctor.diagnose(nodes)
    assert [f for f in diagnosis.findings if f.column == "gpus"] == [], diagnosis.findings


def test_the_verdict_line_counts_what_made_the_run_unhealthy() -> None:
    nodes = healthy_ib(doctor_accept={"memlok": "typo"})
    text = doctor.render(doctor.diagnose(nodes))
    assert "2 doctor_accept entries naming no check" in text.splitlines()[-1], text.splitlines()[-1]


@pytest.mark.parametrize(("variables", "says"), [
    ({"rdmaforge_fabric": "ib"}, "node1: rdmaforge_fabric='ib' is not a known fabric profile"),
    ({"doctor_accept": "memlock=lab"},  # the spec's dict takes key=value text; doctor got the text
     "node1: doctor_accept='memlock=lab' is not a mapping"),
    ({"doctor_accept": {"memlok": "typo"}}, "node1: doctor_accept names 'memlok', which is no doctor check (did you "
                                            "mean 'memlock'?)"),
    ({"doctor_accept": {"memlock": ""}}, "node1: doctor_accept.memlock='' gives no reason"),
    ({"eni_mtu": "jumbo"}, "eni_mtu"),
])  # fmt: skip
def test_doctor_checks_the_inventory_as_preflight_does_before_any_connection(
    tmp_path: Path, variables: dict[str, Any], says: str
) -> None:
    """The hosts are loopback addresses at a closed port (9): the run stops on the controller's inventory check,
    before the first task that connects, so no node is unreachable."""
    import subprocess
    import sys

    import yaml

    hosts = {f"node{i}": {"ansible_host": f"127.0.0.{i}", "ansible_port": 9} for i in (1, 2)}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": {"rdmaforge_fabric": "tcp", **variables},
                                                 "children": {"cluster": {"hosts": hosts}}}}))  # fmt: skip
    runs = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "-m", "rdmaforge.cli", "doctor", "-i", str(inventory), "--runs-dir",
                           str(runs)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stdout[-3000:] + proc.stderr[-2000:]  # the inventory's
    assert says in proc.stdout, proc.stdout[-3000:]
    (run_dir,) = runs.iterdir()
    recap = json.loads((run_dir / "recap.json").read_text())
    assert recap.get("unreachable") in ([], None), recap


def test_a_build_of_another_release_is_a_problem_even_when_its_manifest_names_no_cuda() -> None:
    nodes = healthy_ib()
    for node in nodes.values():
        node["nccl_manifest"] = {"id": "nccl-2.18.3-sm_90", "version": "2.18.3"}  # an older, hand-made manifest
    nccl = check_of(doctor.diagnose(nodes), "node1", "nccl")
    assert nccl.status == "problem" and nccl.reason == "installed NCCL 2.18.3, the cluster's is 2.29.7", nccl


def test_libnccl_from_another_build_under_the_same_root_is_not_the_clusters() -> None:
    """ld.so handing out /opt/nccl/previous/lib/libnccl.so.2 was 'the cluster's NCCL build': build_once registers
    <root>/current/lib."""
    nodes = healthy_ib()
    for node in nodes.values():
        node["ld_cache_nccl"] = ["\tlibnccl.so.2 (libc6,x86-64) => /opt/nccl/previous/lib/libnccl.so.2",
                                 *node["ld_cache_nccl"][1:]]  # fmt: skip
    nccl = check_of(doctor.diagnose(nodes), "node1", "nccl")
    assert nccl.status == "problem" and "not the cluster's build under /opt/nccl/current/" in nccl.reason, nccl


def test_a_build_whose_archs_were_not_compared_with_the_gpus_is_not_judged() -> None:
    """Review round 36: nvidia-smi listed the GPUs but not their compute capabilities (drivers before 510 refuse
    --query-gpu=compute_cap): the check was ok and the cluster healthy (exit 0), the note unprinted, for a build
    whose kernels the GPUs might not load."""
    nodes = healthy_ib()
    for node in nodes.values():
        node["compute_caps"] = None
    diagnosis = doctor.diagnose(nodes)
    nccl = check_of(diagnosis, "node1", "nccl")
    assert nccl.status == "not_checked" and nccl.reason.endswith(
        "not judged: the GPUs' compute capabilities were not read, so whether the build's archs cover them was not "
        "checked"), nccl
    assert diagnosis.exit_code == ExitCode.INCOMPLETE
    text = doctor.render(diagnosis)
    assert "  node1: nccl not checked: " in text and "healthy:" not in text.replace("not healthy:", ""), text
    # Read, the same GPUs are judged: the build (sm_90) covers compute capability 9.0, and not 7.0 (a V100).
    for node in nodes.values():
        node["compute_caps"] = "9.0"
    assert check_of(doctor.diagnose(nodes), "node1", "nccl").status == "ok"
    for node in nodes.values():
        node["compute_caps"] = "7.0"
    assert check_of(doctor.diagnose(nodes), "node1", "nccl").status == "problem"


def test_a_plugin_whose_loading_was_not_read_is_not_judged() -> None:
    """Review round 36: with the ld.so cache or the NCCL loader's API versions unread, the plugin check was ok
    (symbols alone), and with nccl_plugin_provider none, ok without a look at what the cache gives NCCL."""
    nodes = healthy_ib()
    del nodes["node1"]["nccl_loader_apis"]
    loader = check_of(doctor.diagnose(nodes), "node1", "plugin")
    assert loader.status == "not_checked" and loader.reason.endswith(
        "not judged: the installed NCCL's loader versions were not read, so whether it loads one of them was not "
        "checked"), loader
    nodes = healthy_ib(nccl_plugin_provider="none")
    for node in nodes.values():
        node.update(plugin_present=False, plugin_symbols="", ld_cache_nccl=None)
    none = check_of(doctor.diagnose(nodes), "node1", "plugin")
    assert none.status == "not_checked" and "whether it gives NCCL another libnccl-net.so was not checked" in (
        none.reason), none
    for node in nodes.values():
        node["ld_cache_nccl"] = ["\tlibnccl.so.2 (libc6,x86-64) => /opt/nccl/current/lib/libnccl.so.2"]
    assert check_of(doctor.diagnose(nodes), "node1", "plugin").status == "ok"


@pytest.mark.parametrize("rate", [float("nan"), 0, -200.0, float("inf")])
def test_a_port_rate_no_link_runs_at_is_not_read_as_a_rate(rate: float) -> None:
    """NaN passed a floor of 200 Gb/s (no comparison with it is true); two ports at 0 Gb/s were 'ok'."""
    nodes = healthy_ib(rdma_core_min_port_rate_gbps=200)
    for node in nodes.values():
        node["rdma_devices"][0]["ports"][0]["rate_gbps"] = rate
    port_rate = check_of(doctor.diagnose(nodes), "node1", "port_rate")
    assert port_rate.status == "problem" and "rate not reported for mlx5_0:1" in port_rate.reason, port_rate


@pytest.mark.parametrize(
    ("manifest", "held"),
    [
        ("nccl-2.29.7", "holds 'nccl-2.29.7', not a JSON object"),
        (["nccl-2.29.7"], "holds [\"nccl-2.29.7\"], not a JSON object"),
        ({"id": "nccl-2.29.7-cuda13.0-sm_80-funcsc3dfaac5", "version": "2.29.7", "cuda": "13.0", "archs": "sm_80"},
         "has archs 'sm_80', not a list of names"),
    ],
)
def test_a_build_manifest_that_is_no_manifest_is_the_nodes_problem(manifest: object, held: str) -> None:
    """current/.rdmaforge-build.json is the node's own file: valid JSON that is not the object nccl_build writes
    crashed the run (AttributeError on .get); archs as text were compared letter by letter. Both the text and the
    object (results of older versions) are read."""
    nodes = lab(2)
    nodes["node1"]["nccl_manifest"] = json.dumps(manifest)  # the file's text, as doctor.yml gives it
    diagnosis = doctor.diagnose(nodes)
    nccl = {(c.host, c.check): c for c in diagnosis.checks}
    assert nccl["node1", "nccl"].status == "problem"
    assert nccl["node1", "nccl"].reason == f"current/.rdmaforge-build.json {held}: the install is damaged"
    assert nccl["node2", "nccl"].status == "ok"
    assert diagnosis.rows["node1"]["nccl"] == "damaged"
    if not isinstance(manifest, str):  # as an older result holds it, parsed (text is the file's text)
        nodes["node1"]["nccl_manifest"] = manifest
        reason = doctor_checks.check_nccl(nodes["node1"])[3]
        assert reason == f"current/.rdmaforge-build.json {held}: the install is damaged"


def test_a_build_from_another_source_than_the_pinned_one_is_a_problem() -> None:
    """The build id names release, CUDA and archs: a tag moved to another commit was built again under the same id,
    and doctor said "the cluster's NCCL build" on nodes still running the old commit. The manifest's record of its
    source (build_once writes it) is compared with the inventory's pin."""
    defaults = yaml.safe_load((PROJECT_ROOT / "roles" / "nccl_build" / "defaults" / "main.yml").read_text())
    pin = str(defaults["nccl_build_git_commit"])  # the role's pin, the one the lab's inventory leaves as it is
    nodes = lab(1)
    manifest = nodes["node1"]["nccl_manifest"]
    manifest["source"] = {"kind": "git", "commit": pin, "pinned": True}
    assert {c.check: c for c in doctor.diagnose(nodes).checks}["nccl"].status == "ok"
    manifest["source"]["commit"] = "0123456789abcdef0123456789abcdef01234567"
    nccl = {c.check: c for c in doctor.diagnose(nodes).checks}["nccl"]
    assert nccl.status == "problem" and nccl.reason == (
        f"the installed build is from commit 0123456789ab, the cluster pins {pin[:12]} (nccl_build_git_commit): "
        "converge to build it again"
    ), nccl.reason
    # a tarball build: its sha256 against nccl_build_tarball_sha256
    nodes["node1"]["inventory"].update(nccl_build_source="tarball", nccl_build_tarball_sha256="ab" * 32)
    manifest["source"] = {"kind": "tarball", "sha256": "ab" * 32, "pinned": True}
    assert {c.check: c for c in doctor.diagnose(nodes).checks}["nccl"].status == "ok"
    manifest["source"]["sha256"] = "cd" * 32
    assert "a tarball of sha256 cdcdcdcdcdcd, the cluster pins abababababab" in {
        c.check: c for c in doctor.diagnose(nodes).checks}["nccl"].reason  # fmt: skip


def test_an_unpinned_build_from_another_url_or_ref_is_a_problem() -> None:
    """Review round 42: build_once takes an unpinned cached build only for the URL and ref it was built from
    (9b2f401), but doctor compared pins alone and said ok for a node whose build of the same id came from a fork."""
    nodes = lab(1, nccl_build_git_commit="", nccl_build_git_url="https://git.example/nccl.git",
                nccl_build_git_ref="my-branch")  # fmt: skip
    manifest = nodes["node1"]["nccl_manifest"]
    manifest["source"] = {"kind": "git", "url": "https://git.example/nccl.git", "ref": "my-branch", "commit": "ab" * 20,
                          "pinned": False}  # fmt: skip
    assert {c.check: c for c in doctor.diagnose(nodes).checks}["nccl"].status == "ok"
    manifest["source"]["url"] = "https://git.example/fork/nccl.git"
    nccl = {c.check: c for c in doctor.diagnose(nodes).checks}["nccl"]
    assert nccl.status == "problem" and nccl.reason == (
        "the installed build is from https://git.example/fork/nccl.git at my-branch, the cluster's unpinned source is "
        "https://git.example/nccl.git at my-branch (nccl_build_git_url, nccl_build_git_ref): converge to build it "
        "again"), nccl.reason  # fmt: skip
