"""Seed 004's tuning on a node, when the inventory switches it on: the huge page arguments in the boot loader
configuration (exactly once) and the per-NIC policy routing. Read-only; the same logic as the roles
(rdmaforge.tuning) decides what is expected."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from rdmaforge import tuning


def literal(hostvars: dict[str, Any], name: str, default: Any) -> Any:
    """An inventory value, or the role's default when it is unset or still a template (testinfra does not render)."""
    value = hostvars.get(name)
    return default if value is None or "{{" in str(value) else value


def enabled(hostvars: dict[str, Any], name: str) -> bool:
    return str(literal(hostvars, name, False)).lower() in ("true", "yes", "1")


def test_hugepage_arguments_configured_once(host: Any, hostvars: dict[str, Any]) -> None:
    if not enabled(hostvars, "hugepages_enabled"):
        pytest.skip("hugepages_enabled is false for this node")
    size = str(literal(hostvars, "hugepages_size", "1G"))
    if host.exists("grubby") and host.file("/boot/loader/entries").is_directory:
        text = host.check_output("grubby --info=ALL")
        lines = re.findall(r'^args="?(.*?)"?$', text, re.M)
    else:
        cfg = str(literal(hostvars, "hugepages_grub_cfg", "") or "/boot/grub/grub.cfg")
        lines = re.findall(r"^\s*linux\S*\s+\S+(.*)$", host.file(cfg).content_string, re.M)
    assert lines, "no kernel line in the boot loader configuration"
    for line in lines:
        tokens = line.split()
        for key in ("default_hugepagesz", "hugepagesz"):
            assert tokens.count(f"{key}={size}") == 1, line
        assert len([t for t in tokens if t.startswith("hugepages=")]) == 1, line
    drop_in = host.file("/etc/systemd/system/dev-hugepages.mount.d/rdmaforge.conf")
    if enabled(hostvars, "hugepages_mount") or hostvars.get("hugepages_mount") is None:
        assert f"pagesize={size}" in drop_in.content_string


def test_policy_routing_per_secondary_nic(host: Any, hostvars: dict[str, Any]) -> None:
    if not enabled(hostvars, "eni_enabled"):
        pytest.skip("eni_enabled is false for this node")
    ip = "PATH=$PATH:/sbin:/usr/sbin ip -j"
    links = json.loads(host.check_output(f"{ip} addr show"))
    nics = [
        {
            "name": link["ifname"],
            "mtu": link.get("mtu"),
            "ipv4": [
                {"address": a["local"], "prefixlen": a["prefixlen"]} for a in link["addr_info"] if a["family"] == "inet"
            ],
        }
        for link in links
        if link["ifname"] != "lo"
    ]
    defaults = json.loads(host.check_output(f"{ip} route show default"))
    default_dev = defaults[0]["dev"] if defaults else ""
    names = tuning.eni_names(
        nics,
        default_dev,
        literal(hostvars, "eni_interface_patterns", list(tuning.DEFAULT_ENI_PATTERNS)),
        literal(hostvars, "eni_interfaces", []),
    )
    mtu = tuning.eni_mtu(
        str(literal(hostvars, "rdmaforge_fabric", "tcp")),
        enabled(hostvars, "eni_jumbo_frames"),
        literal(hostvars, "eni_mtu", None),
    )
    plan = tuning.eni_plan(
        host.backend.get_hostname(),
        nics,
        names,
        int(literal(hostvars, "eni_route_table_base", 1001)),
        int(literal(hostvars, "eni_rule_priority_base", 1001)),
        mtu,
        literal(hostvars, "eni_addresses", {}),
        literal(hostvars, "eni_gateways", {}),
    )
    assert plan["problems"] == []
    tables = {e["name"]: host.run(f"{ip} route show table {e['table']}").stdout for e in plan["enis"]}
    rules = json.loads(host.check_output(f"{ip} rule show"))
    assert tuning.eni_state_problems(plan["enis"], rules, tables, defaults, nics) == []
