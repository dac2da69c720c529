"""Seed 004's tuning on a node, when the inventory switches it on: the huge page arguments in the boot loader
configuration (exactly once) and the per-NIC policy routing. Read-only; what is expected comes from the inventory
and the roles' documented defaults (rdmaforge/infra_expectations.py), not from rdmaforge.tuning, which planned it."""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

import pytest

from rdmaforge.infra_expectations import eni_mtu, fabric_of, gpus_on_node, literal, secondary_nics, setting
from rdmaforge.plain_data import ansible_bool


def enabled(hostvars: dict[str, Any], name: str) -> bool:
    return ansible_bool(literal(hostvars, name, False))


def skip_unless_enabled(hostvars: dict[str, Any], name: str) -> None:
    """Skip, naming why, unless the inventory switches ``name`` on: a template testinfra cannot render is not
    judged, rather than read as false."""
    if "{{" in str(hostvars.get(name, "")):
        pytest.skip(f"not judged: {name} is a template ({hostvars[name]}) that testinfra does not render")
    if not enabled(hostvars, name):
        pytest.skip(f"{name} is false for this node")


def planned_pages(host: Any, hostvars: dict[str, Any]) -> tuple[int, str]:
    """The pages the node should reserve, and where that number comes from: hugepages_count, else seed 004's rule
    (50 on an 8-GPU node, otherwise GPUs x 5 + 10) for the GPUs nvidia-smi -L lists, else lspci (preflight's
    sources, in its order), else none."""
    given = literal(hostvars, "hugepages_count", None)
    if given not in (None, ""):
        return int(given), f"hugepages_count={given}"
    gpus, tool = gpus_on_node(host)
    # Seed 004's rule, written here (rdmaforge.tuning plans the change; a check that reuses it proves nothing).
    return (50 if gpus == 8 else gpus * 5 + 10), f"seed 004's rule for {gpus} GPU(s) ({tool})"


def kernel_size(text: str) -> int | None:
    """Bytes, as the kernel reads hugepagesz= (memparse: a number, then K, M, G or T, and anything after ignored)."""
    match = re.match(r"(\d+)([KMGTkmgt]?)", text)
    return int(match.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[match.group(2).lower()] if match else None


def test_hugepage_arguments_configured_once(host: Any, hostvars: dict[str, Any]) -> None:
    skip_unless_enabled(hostvars, "hugepages_enabled")
    size = str(literal(hostvars, "hugepages_size", "1G"))
    if host.exists("grubby") and host.file("/boot/loader/entries").is_directory:
        text = host.check_output("grubby --info=ALL")
        lines = re.findall(r'^args="?(.*?)"?$', text, re.M)
    else:
        cfg = str(literal(hostvars, "hugepages_grub_cfg", "") or "/boot/grub/grub.cfg")
        # The Linux kernels' lines: memtest86+ (Ubuntu Server installs it) is booted by a linux line too, without
        # kernel arguments of Linux.
        lines = [args for image, args in re.findall(r"^\s*linux\S*\s+(\S+)(.*)$", host.file(cfg).content_string, re.M)
                 if not re.search(r"memtest[^/]*$|\.lkrn$", image, re.I)]  # fmt: skip
    assert lines, "no kernel line in the boot loader configuration"
    count, source = planned_pages(host, hostvars)
    for line in lines:
        tokens = line.split()
        # Each once: the kernel keeps the first default_hugepagesz and ignores the rest.
        for key in ("default_hugepagesz", "hugepagesz"):
            values = [t.partition("=")[2] for t in tokens if t.startswith(f"{key}=")]
            # as the kernel reads a size: seed 004's 1GB is the role's 1G
            assert [kernel_size(v) for v in values] == [kernel_size(size)], (
                f"{key}={values} on a kernel line; the plan is {key}={size}: {line}")
        pages = [t for t in tokens if t.startswith("hugepages=")]
        assert pages == [f"hugepages={count}"], f"{pages} on a kernel line; {source} plans hugepages={count}: {line}"
    mount = hostvars.get("hugepages_mount")
    if isinstance(mount, str) and "{{" in mount:
        pytest.skip("not judged: the hugetlbfs mount's drop-in: hugepages_mount is a template testinfra leaves as is")
    drop_in_file = host.file("/etc/systemd/system/dev-hugepages.mount.d/rdmaforge.conf")
    if enabled(hostvars, "hugepages_mount") or mount is None:
        drop_in = drop_in_file.content_string
        options = [line.strip() for line in drop_in.splitlines() if line.strip().startswith("Options=")]
        assert any(f"pagesize={size}" in option.split("=", 1)[1].split(",") for option in options), drop_in
    else:  # hugepages_mount: false leaves hugetlbfs at systemd's own page size
        assert not drop_in_file.exists, "hugepages_mount is false, yet rdmaforge's page-size drop-in is there"


def test_policy_routing_per_secondary_nic(host: Any, hostvars: dict[str, Any]) -> None:
    """Per secondary NIC, in order: table base+i, rule `from ADDRESS lookup TABLE` at priority base+i, the subnet
    route (and the gateway's default route) in that table, no default route via it in the main table, and the
    planned MTU. Expected values come from the inventory and the eni role's documented defaults."""
    skip_unless_enabled(hostvars, "eni_enabled")
    ip = "PATH=$PATH:/sbin:/usr/sbin ip -j"
    links = json.loads(host.check_output(f"{ip} addr show"))
    addresses = {
        link["ifname"]: [f"{a['local']}/{a['prefixlen']}" for a in link["addr_info"] if a["family"] == "inet"]
        for link in links
    }
    mtus = {link["ifname"]: link.get("mtu") for link in links}
    defaults = json.loads(host.check_output(f"{ip} route show default"))
    default_dev = defaults[0]["dev"] if defaults else ""
    fabric = fabric_of(hostvars)  # a template is not judged: read as tcp, it planned MTU 1400 on erdma
    names = secondary_nics([n for n in addresses if n != "lo"], default_dev, hostvars)
    assert names, "eni_enabled but no secondary NIC"
    table_base = int(setting(hostvars, "eni", "eni_route_table_base"))
    priority_base = int(setting(hostvars, "eni", "eni_rule_priority_base"))
    planned_addresses = setting(hostvars, "eni", "eni_addresses") or {}
    gateways = setting(hostvars, "eni", "eni_gateways") or {}
    mtu = eni_mtu(hostvars, fabric)
    rules = {(str(r.get("src", "")), str(r.get("table", "")), int(r.get("priority", -1)))
             for r in json.loads(host.check_output(f"{ip} rule show"))}  # fmt: skip
    wrong = []
    for index, name in enumerate(names):
        table, priority = table_base + index, priority_base + index
        planned = planned_addresses.get(name)
        has = [ipaddress.IPv4Interface(a) for a in addresses.get(name, [])]
        if planned and ipaddress.IPv4Interface(planned) not in has:
            # The rule and routes below are written from the plan: traffic from the address the NIC really has
            # would not use them.
            wrong.append(f"{name}: eni_addresses plans {planned}, the NIC has {addresses.get(name) or 'no address'}")
        interface = ipaddress.IPv4Interface(planned or addresses[name][0])
        if (str(interface.ip), str(table), priority) not in rules:
            wrong.append(f"{name}: no rule 'from {interface.ip} lookup {table}' at priority {priority}")
        run = host.run(f"{ip} route show table {table}")
        routes = json.loads(run.stdout) if run.rc == 0 and run.stdout.strip() else []
        if not any(r.get("dst") == str(interface.network) and r.get("dev") == name for r in routes):
            wrong.append(f"{name}: table {table} has no route to {interface.network} dev {name}")
        gateway = gateways.get(name)
        if gateway and not any(r.get("dst") == "default" and r.get("gateway") == gateway for r in routes):
            wrong.append(f"{name}: table {table} has no default route via {gateway}")
        if any(r.get("dev") == name for r in defaults):
            wrong.append(f"{name}: the main table has a default route via it")
        if mtus.get(name) != mtu:
            wrong.append(f"{name}: MTU {mtus.get(name)}, planned {mtu}")
    assert not wrong, wrong
