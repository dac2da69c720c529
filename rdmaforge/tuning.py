"""Kernel and network tuning decisions (seed 004, Tencent TACO/HARP): huge page counts, the boot loader's
generated configuration, and the per-ENI policy-routing plan.

Pure functions over facts, shared by the ``hugepages`` and ``eni`` roles (through
``filter_plugins/rdmaforge_tuning.py``) and the unit tests.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rdmaforge.parsers.hugepages import size_kb
from rdmaforge.parsers.kernel_cmdline import arg_key, arg_value, effective_value, same_value, split_cmdline
from rdmaforge.plain_data import whole_number

# --- huge pages --------------------------------------------------------------------------------------


def hugepages_count(gpu_count: int, override: int | None = None) -> int:
    """Seed 004: 50 one-GiB pages on an 8-GPU node, otherwise GPUs x 5 + 10; ``override`` wins (a whole number as
    the argument spec takes it: 40, 40.0 or "40"; ValueError for anything else)."""
    if override is not None and str(override) != "":
        number = whole_number(override)
        if number is None:
            raise ValueError(f"hugepages_count={override!r} is not a whole number of pages")
        return number
    gpus = int(gpu_count or 0)
    return 50 if gpus == 8 else gpus * 5 + 10


def hugepages_pages_for(gpu_count: int | None, override: int | None = None) -> int | None:
    """hugepages_count for the hugepages role: None when seed 004's rule needs the GPU count and it is unknown
    (``rdmaforge_node.gpu_count`` null: preflight could not read it), which the role refuses; never the rule's
    pages for 0 GPUs."""
    if gpu_count is None and (override is None or str(override) == ""):
        return None
    return hugepages_count(gpu_count or 0, override)


def hugepages_kernel_args(count: int, size: str = "1G") -> dict[str, str]:
    """The arguments in the order the kernel needs them: hugepages= counts pages of the hugepagesz= before it."""
    return {"default_hugepagesz": size, "hugepagesz": size, "hugepages": str(int(count))}


#: The default huge page size when no default_hugepagesz= is given (x86-64's, where rdmaforge's nodes run).
ARCH_DEFAULT_HUGEPAGE_SIZE = "2M"


def hugepages_pools(tokens: Sequence[str]) -> dict[str, str]:
    """The pages each size gets from kernel arguments, read as the kernel reads them: ``hugepages=N`` counts pages
    of the ``hugepagesz=`` before it; one before any ``hugepagesz=`` counts pages of the default size
    (``default_hugepagesz=``, else the architecture's). ``hugepages=50 hugepagesz=1G`` reserves 50 pages of 2M."""
    defaults = [arg_value(t) for t in tokens if arg_key(t) == "default_hugepagesz"]
    default = str(defaults[-1] or ARCH_DEFAULT_HUGEPAGE_SIZE) if defaults else ARCH_DEFAULT_HUGEPAGE_SIZE
    pools: dict[str, str] = {}
    current: str | None = None
    for token in tokens:
        key, value = arg_key(token), arg_value(token)
        if key == "hugepagesz":
            current = str(value)
        elif key == "hugepages":
            pools[current if current is not None else default] = str(value)
    return pools


def grub_dropin_is_empty(text: str, variable: str = "GRUB_CMDLINE_LINUX") -> bool:
    """Whether a GRUB drop-in adds nothing: comments, blank lines and ``VAR="$VAR"`` only, which is what the
    kernel_cmdline module leaves of the hugepages role's drop-in once its arguments are off (the withdrawal left that
    file behind, and reset said rdmaforge's files were gone: review round 37b)."""
    kept = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    if any(not re.match(rf"(export\s+)?{re.escape(variable)}=", line) for line in kept):
        return False
    before = "rdmaforge-before"
    return effective_value([f'{variable}="{before}"\n', text], variable).strip() == before


def hugepages_other_pools(before: str, size: str, recorded: Sequence[str] = ()) -> list[str]:
    """What the boot arguments ``before`` reserve or set that the hugepages role's change would drop, and that the
    role did not set itself (``recorded``: the arguments its record names): huge page pools of another size than
    ``size`` (``hugepages=1024`` before any ``hugepagesz=`` is a pool of the default size, 2M on x86), and a
    ``default_hugepagesz=`` of another size. The role keeps one pool and each key once, so such a pool would go.
    Each entry as a person reads it, e.g. ``1024 pages of 2M (hugepages=1024)``; [] when nothing would be lost or
    ``before`` cannot be read (the kernel_cmdline module says why)."""
    try:
        tokens = split_cmdline(before)
    except ValueError:
        return []
    ours = {size_kb(size, "B")} | {size_kb(s, "B") for s in hugepages_pools(list(recorded))}
    recorded_defaults = {size_kb(arg_value(t), "B") for t in recorded if arg_key(t) == "default_hugepagesz"}
    relevant = [t for t in tokens if arg_key(t) in ("hugepages", "hugepagesz", "default_hugepagesz")]
    found = []
    for pool, count in hugepages_pools(relevant).items():
        if count != "0" and size_kb(pool, "B") not in ours:
            found.append(f"{count} pages of {pool} ({' '.join(relevant)})")
    defaults = [str(arg_value(t)) for t in relevant if arg_key(t) == "default_hugepagesz"]
    if defaults and size_kb(defaults[-1], "B") not in {size_kb(size, "B"), *recorded_defaults}:
        found.append(f"the default huge page size {defaults[-1]} (default_hugepagesz={defaults[-1]})")
    return found


def hugepages_memory_problem(
    host: str,
    pages: int,
    size: str,
    memtotal_mb: int | None,
    max_fraction: float,
    count: int | None = None,
    gpu_count: int | None = None,
) -> str:
    """'' when ``pages`` huge pages of ``size`` fit in ``max_fraction`` of the node's memory (``memtotal_mb``, as
    Ansible's ansible_memtotal_mb reports /proc/meminfo's MemTotal), else a message naming the host, the variables,
    the memory and the most pages allowed. A node whose memory is unknown is not judged here ('')."""
    if memtotal_mb is None or str(memtotal_mb) == "" or int(memtotal_mb) <= 0:
        return ""
    kb = size_kb(size)
    if kb is None:
        return ""  # not a size: the argument spec's choices refuse it
    page_mib = kb / 1024
    memory = int(memtotal_mb)
    fraction = float(max_fraction)
    allowed = int(memory * fraction // page_mib)
    if int(pages) <= allowed:
        return ""
    if count is not None and str(count) != "":
        source = f"hugepages_count={count}"
    else:
        gpus = "an unknown number of" if gpu_count is None else int(gpu_count)  # unknown is never 0 GPUs
        source = f"hugepages_count=null (seed 004's rule for {gpus} GPU(s): {int(pages)} pages)"
    return (
        f"{host}: {source} x hugepages_size={size} reserves {int(int(pages) * page_mib)} MiB at boot, more than "
        f"hugepages_max_memory_fraction={fraction:g} of the node's {memory} MiB of memory (ansible_memtotal_mb); "
        f"allowed: at most {allowed} pages of {size} ({int(allowed * page_mib)} MiB) on this node. Set on the kernel "
        "command line, a reservation this large can leave the node unable to boot or to run anything but the "
        "kernel. Nothing was changed: lower hugepages_count, or raise hugepages_max_memory_fraction."
    )


# --- boot loader ------------------------------------------------------------------------------------

_LINUX_LINE = re.compile(r"^\s*(linux|linux16|linuxefi)\s+(\S+)(.*)$")
#: Images grub's linux commands load that are not Linux: memtest86+ (/etc/grub.d/20_memtest86+, installed with
#: Ubuntu Server: memtest86+.bin, memtest86+x64.efi) and iPXE (grub-ipxe: ipxe.lkrn). Their lines carry no kernel
#: command line of ours; any other image counts as a kernel, so an unknown one is checked, never skipped.
_NOT_LINUX = re.compile(r"(memtest[^/]*|[^/]*\.lkrn)$", re.IGNORECASE)


def _kernel_lines(grub_cfg: str) -> list[str]:
    """The arguments of each line of a generated grub.cfg that boots a Linux kernel."""
    found = []
    for match in map(_LINUX_LINE.match, grub_cfg.splitlines()):
        if match and not _NOT_LINUX.search(match.group(2)):
            found.append(match.group(3))
    return found


def boot_loader(
    grub_defaults: bool,
    grubby: bool,
    bls_entries: bool,
    grub_cfgs: Sequence[str],
    virtualization: str = "",
) -> dict[str, str]:
    """Which boot loader configuration a host has: ``grubby`` (BLS entries, RHEL 8+), ``grub`` (a generated
    grub.cfg from /etc/default/grub) or ``none``, with a plain reason for ``none``."""
    if grubby and bls_entries:
        return {"kind": "grubby", "reason": "grubby with Boot Loader Specification entries"}
    if grub_defaults and grub_cfgs:
        return {"kind": "grub", "reason": f"GRUB 2, configuration {grub_cfgs[0]}"}
    what = "/etc/default/grub" if not grub_defaults else "a generated grub.cfg under /boot"
    where = f" (virtualization: {virtualization})" if virtualization else ""
    return {
        "kind": "none",
        "reason": f"no boot loader configuration: {what} is missing{where}; a container boots no kernel of its own",
    }


def grub_config_output(
    os_family: str, major_version: int | str, efi: bool, grub_cfgs: Sequence[str], override: str = ""
) -> str:
    """The grub.cfg that grub-mkconfig must write: Debian/Ubuntu /boot/grub/grub.cfg; RHEL BIOS, and RHEL 9+
    EFI (whose ESP grub.cfg only chains to it), /boot/grub2/grub.cfg; RHEL 7/8 EFI the ESP's own file."""
    if override:
        return override
    if os_family == "Debian":
        return "/boot/grub/grub.cfg"
    if efi and int(major_version or 0) < 9:
        esp = [p for p in grub_cfgs if p.startswith("/boot/efi/EFI/") and "/EFI/BOOT/" not in p.upper()]
        if esp:
            return sorted(esp)[0]
    return "/boot/grub2/grub.cfg"


def grub_mkconfig_argv(os_family: str, output: str, override: Sequence[str] = ()) -> list[str]:
    """The command that regenerates ``output`` (update-grub is grub-mkconfig -o /boot/grub/grub.cfg)."""
    if override:
        return [*override]
    tool = "grub-mkconfig" if os_family == "Debian" else "grub2-mkconfig"
    return [tool, "-o", output]


def _occurrences(tokens: Sequence[str], wanted: str) -> int:
    """How often ``tokens`` (one kernel line) hold the argument ``wanted``: its key as the kernel reads keys, its
    value as spelt or, for a huge page size, as the kernel reads it (seed 004's 1GB is 1G)."""
    key = arg_key(wanted)
    return sum(1 for token in tokens if arg_key(token) == key and same_value(key, arg_value(token), arg_value(wanted)))


def grub_cfg_missing_args(grub_cfg: str, args: Mapping[str, Any]) -> list[str]:
    """Arguments (``key=value``) missing from any kernel line of a generated grub.cfg; every line is missing
    all of them when the file has no kernel line (nothing was generated)."""
    wanted = [f"{k}={v}" for k, v in args.items()]
    lines = [split_cmdline(line) for line in _kernel_lines(grub_cfg)]
    if not lines:
        return wanted
    missing: list[str] = []
    for token in wanted:
        if any(_occurrences(line, token) != 1 for line in lines) and token not in missing:
            missing.append(token)
    return missing


def grub_cfg_carried_args(grub_cfg: str, tokens: Sequence[str]) -> list[str]:
    """The arguments (``key=value`` as written) that some kernel line of a generated grub.cfg still carries, in any
    spelling the kernel reads alike: what a withdrawal must have taken off every line."""
    lines = [split_cmdline(line) for line in _kernel_lines(grub_cfg)]
    return [token for token in dict.fromkeys(tokens) if any(_occurrences(line, token) for line in lines)]


# --- ENIs and policy routing ------------------------------------------------------------------------

DEFAULT_ENI_PATTERNS = ("eth*", "ens*", "enp*", "eno*")


def eni_names(
    nics: Sequence[Mapping[str, Any]],
    default_interface: str,
    patterns: Sequence[str] = DEFAULT_ENI_PATTERNS,
    explicit: Sequence[str] = (),
) -> list[str]:
    """The secondary NICs: ``explicit`` when given, else every NIC matching ``patterns`` but the one that
    carries the default route, in name order (eth1 before eth2 before eth10)."""
    if explicit:
        return list(explicit)

    def order(name: str) -> tuple[str, int]:
        m = re.match(r"^(.*?)(\d+)$", name)
        return (m.group(1), int(m.group(2))) if m else (name, -1)

    names = [
        str(n["name"])
        for n in nics
        if n.get("name") != default_interface and any(fnmatch.fnmatch(str(n["name"]), p) for p in patterns)
    ]
    return sorted(names, key=order)


def eni_gpu_problem(
    host: str, enis: Sequence[str], gpu_count: int | None, gpu_source: str = "", nics_error: str | None = None
) -> str:
    """'' when TACO's one-ENI-per-GPU holds, else a message naming both numbers; a GPU count that is unknown (None:
    preflight could not read it) cannot be matched, and is said so rather than taken for 0 GPUs."""
    listed = ", ".join(enis) if enis else "none"
    if nics_error:
        listed += f"; the NICs could not be read: {nics_error}"
    if gpu_count is None:
        return (
            f"{host}: eni_per_gpu is true, so every GPU needs its own secondary NIC, but the node's GPU count is "
            f"unknown (rdmaforge_node.gpu_count null: preflight could not read it, or did not run), so its "
            f"{len(enis)} secondary NIC(s) ({listed}) cannot be checked against it. Run preflight on a node whose "
            "GPUs it can read (nvidia-smi, lspci or the PCI tree in sysfs), or set eni_per_gpu: false."
        )
    gpus = int(gpu_count)
    if len(enis) == gpus:
        return ""
    source = f" (from {gpu_source})" if gpu_source else ""
    return (
        f"{host}: eni_per_gpu is true, so every GPU needs its own secondary NIC, but the node has "
        f"{len(enis)} secondary NIC(s) ({listed}) and {gpus} GPU(s){source}. Attach or detach ENIs until "
        f"the numbers match, list the NICs in eni_interfaces, or set eni_per_gpu: false."
    )


def eni_mtu(fabric: str, jumbo_frames: bool, override: int | None = None) -> int:
    """Alibaba's guidance: eRDMA with jumbo frames 8500; otherwise 1400 (LL128-safe); ``override`` wins (a whole
    number as the argument spec takes it: 9000, 9000.0 or "9000.0"; ValueError naming the variable otherwise)."""
    if override is not None and str(override) != "":
        number = whole_number(override)
        if number is None:
            raise ValueError(f"eni_mtu={override!r} is not a whole number of bytes")
        return number
    return 8500 if fabric == "erdma" and jumbo_frames else 1400


def _ipv4_of(nic: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(address, prefix length) of each IPv4 address in a ``nic_facts`` record."""
    return [(str(entry["address"]), int(entry["prefixlen"])) for entry in nic.get("ipv4") or []]


def eni_plan(
    host: str,
    nics: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    table_base: int,
    priority_base: int,
    mtu: int,
    addresses: Mapping[str, str] | None = None,
    gateways: Mapping[str, str] | None = None,
    default_interface: str = "",
    chosen_by_pattern: bool = False,
) -> dict[str, Any]:
    """One routing table and one ``from <address>`` rule per secondary NIC, in ``names`` order.

    Returns ``{"enis": [...], "problems": [...]}``; each problem names the host, the NIC and what to do. No
    secondary NIC at all is a problem too: a plan of nothing would configure nothing and its check would pass over
    zero NICs (doctor's mtu check calls the same node a problem). So is a NIC named twice, and the NIC that
    carries the default route (``default_interface``), which eni_interfaces may name: the plan would take its
    DHCP address and its main-table default route, cutting the node off its management network. With
    ``chosen_by_pattern`` (eni_interfaces empty: the names matched eni_interface_patterns) and no default route
    known, the management NIC cannot be told from the others (eth0 matches eth*): nothing is planned."""
    by_name = {str(n["name"]): n for n in nics}
    addresses = addresses or {}
    gateways = gateways or {}
    enis: list[dict[str, Any]] = []
    problems: list[str] = []
    if not names:
        others = ", ".join(sorted(by_name)) or "none"
        problems.append(f"{host}: eni_enabled is true but no secondary NIC (ENI) was found (the node's NICs: "
                        f"{others}; the default route's is never one); attach ENIs, name them in eni_interfaces or "
                        "eni_interface_patterns, or set eni_enabled: false")  # fmt: skip
    if chosen_by_pattern and not default_interface and names:
        problems.append(f"{host}: the node has no default route, so its management NIC cannot be told from the "
                        f"secondary ones eni_interface_patterns matched ({', '.join(names)}); name the secondary "
                        "NICs in eni_interfaces")  # fmt: skip
        return {"enis": [], "problems": problems}
    twice = sorted({name for name in names if list(names).count(name) > 1})
    if twice:
        problems.append(f"{host}: eni_interfaces lists {', '.join(twice)} more than once; list each secondary NIC once")
        names = list(dict.fromkeys(names))
    for index, name in enumerate(names):
        nic = by_name.get(name)
        if nic is None:
            problems.append(f"{host}: eni_interfaces lists {name}, which the node does not have")
            continue
        if default_interface and name == default_interface:
            problems.append(f"{host}: eni_interfaces lists {name}, which carries the node's default route (its "
                            "management NIC); configuring it as a secondary NIC would take its address and default "
                            "route away: leave it out of eni_interfaces")  # fmt: skip
            continue
        if name in addresses:
            try:
                iface = ipaddress.IPv4Interface(addresses[name])
            except ValueError as exc:  # preflight's inventory check names it first; the filter alone must not crash
                problems.append(f"{host}: eni_addresses.{name}={addresses[name]!r} is not an IPv4 address/prefix "
                                f"({exc})")  # fmt: skip
                continue
            address, prefixlen = str(iface.ip), iface.network.prefixlen
        else:
            found = _ipv4_of(nic)
            if not found:
                problems.append(
                    f"{host}: secondary NIC {name} has no IPv4 address; give it one (eni_addresses: "
                    f"{{{name}: ADDRESS/PREFIX}}) or leave it out with eni_interfaces"
                )
                continue
            address, prefixlen = found[0]
        network = ipaddress.IPv4Interface(f"{address}/{prefixlen}").network
        gateway = gateways.get(name, "")
        try:
            outside = bool(gateway) and ipaddress.IPv4Address(gateway) not in network
        except ValueError as exc:
            problems.append(f"{host}: eni_gateways.{name}={gateway!r} is not an IPv4 address ({exc})")
            continue
        if outside:
            problems.append(f"{host}: eni_gateways.{name} {gateway} is outside {name}'s subnet {network}")
            continue
        enis.append(
            {
                "name": name,
                "mac": nic.get("mac"),
                "address": address,
                "prefixlen": prefixlen,
                "network": str(network),
                "gateway": gateway,
                "table": table_base + index,
                "priority": priority_base + index,
                "mtu": mtu,
            }
        )
    return {"enis": enis, "problems": problems}


def _rule_text(eni: Mapping[str, Any]) -> str:
    return f"from {eni['address']} lookup {eni['table']} priority {eni['priority']}"


def _rule_keys(ip_rule_json: Sequence[Mapping[str, Any]]) -> set[tuple[str, str, int]]:
    return {(str(r.get("src", "")), str(r.get("table", "")), int(r.get("priority", -1))) for r in ip_rule_json}


def _planned_key(eni: Mapping[str, Any]) -> tuple[str, str, int]:
    return str(eni["address"]), str(eni["table"]), int(eni["priority"])


def ip_rules_missing(ip_rule_json: Sequence[Mapping[str, Any]], enis: Sequence[Mapping[str, Any]]) -> list[str]:
    """The planned rules that ``ip -j rule show`` does not list (``from ADDRESS lookup TABLE``)."""
    have = _rule_keys(ip_rule_json)
    return [_rule_text(e) for e in enis if _planned_key(e) not in have]


#: How many tables and rule priorities above their bases count as the eni role's: one per secondary NIC.
ENI_SPAN = 256


def eni_withdraw_plan(
    ip_rule_json: Sequence[Mapping[str, Any]], table_base: int, priority_base: int
) -> dict[str, list[Any]]:
    """The policy rules and routing tables the eni role set, from ``ip -j rule show``: a rule counts only when both
    its priority and its table are in the role's ranges (``eni_rule_priority_base``, ``eni_route_table_base``, plus
    one per NIC), so rules other tools added stay. Returns ``{"rules": [...], "tables": [...]}``: each rule as the
    arguments of ``ip rule del`` that select it alone (priority, source and table; ``ip rule del priority P`` would
    delete the first rule of that priority, which may be another tool's), and the tables to flush."""
    rules: list[list[str]] = []
    tables: list[int] = []
    for rule in ip_rule_json:
        try:
            priority, table = int(rule.get("priority", -1)), int(str(rule.get("table", "")))
        except ValueError:  # "main", "local", "default": never the role's
            continue
        if priority_base <= priority < priority_base + ENI_SPAN and table_base <= table < table_base + ENI_SPAN:
            source = str(rule.get("src") or "all")
            if source != "all" and rule.get("srclen") is not None:
                source += f"/{rule['srclen']}"
            rules.append(["priority", str(priority), "from", source, "table", str(table)])
            if table not in tables:
                tables.append(table)
    return {"rules": rules, "tables": sorted(tables)}


def _routes(value: Sequence[Mapping[str, Any]] | str | None) -> list[Mapping[str, Any]]:
    """Routes as ``ip -j route`` lists them; its output for a table that does not exist is an error text, i.e. none."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return []
        return [r for r in parsed if isinstance(r, Mapping)] if isinstance(parsed, list) else []
    return list(value or [])


def _same_network(dst: object, network: str) -> bool:
    """A route's ``dst`` as ``ip -j route`` prints it is ``network``: a host route prints no /32 ("10.0.1.5"), which
    the check read as a missing route, so a /32 ENI failed every converge (review round 37b)."""
    try:
        return ipaddress.ip_network(str(dst), strict=False) == ipaddress.ip_network(network, strict=False)
    except ValueError:  # "default", or a dst that is no network
        return False


def eni_problems_by_nic(
    enis: Sequence[Mapping[str, Any]],
    rules: Sequence[Mapping[str, Any]],
    tables: Mapping[str, Sequence[Mapping[str, Any]] | str | None],
    main_defaults: Sequence[Mapping[str, Any]],
    nics: Sequence[Mapping[str, Any]],
) -> dict[str, list[str]]:
    """What the kernel holds that differs from the plan, per secondary NIC (plan order, [] for a NIC in place), from
    ``ip -j rule``, ``ip -j route show table N`` (per NIC name), ``ip -j route show default`` and the NIC facts."""
    have = _rule_keys(rules)
    mtus = {str(n["name"]): n.get("mtu") for n in nics}
    default_devs = {str(r.get("dev", "")) for r in main_defaults}
    by_nic: dict[str, list[str]] = {}
    for eni in enis:
        name = str(eni["name"])
        problems = by_nic.setdefault(name, [])
        if _planned_key(eni) not in have:
            problems.append(f"rule missing: {_rule_text(eni)}")
        routes = _routes(tables.get(name))
        if not any(_same_network(r.get("dst"), eni["network"]) and r.get("dev") == name for r in routes):
            problems.append(f"table {eni['table']} has no route to {eni['network']} via {name}")
        if eni.get("gateway") and not any(
            r.get("dst") == "default" and r.get("gateway") == eni["gateway"] for r in routes
        ):  # fmt: skip
            problems.append(f"table {eni['table']} has no default route via {eni['gateway']}")
        if name in default_devs:
            problems.append(f"the main table has a default route via {name}")
        if mtus.get(name) != eni["mtu"]:
            problems.append(f"{name} has MTU {mtus.get(name)}, not {eni['mtu']}")
    return by_nic


def eni_state_problems(
    enis: Sequence[Mapping[str, Any]],
    rules: Sequence[Mapping[str, Any]],
    tables: Mapping[str, Sequence[Mapping[str, Any]] | str | None],
    main_defaults: Sequence[Mapping[str, Any]],
    nics: Sequence[Mapping[str, Any]],
) -> list[str]:
    """Every NIC's problems (eni_problems_by_nic), the missing rules first; [] when everything is in place."""
    problems = [p for nic in eni_problems_by_nic(enis, rules, tables, main_defaults, nics).values() for p in nic]
    return [p for p in problems if p.startswith("rule missing: ")] + [
        p for p in problems if not p.startswith("rule missing: ")
    ]


def eni_drifted(
    enis: Sequence[Mapping[str, Any]],
    rules: Sequence[Mapping[str, Any]],
    tables: Mapping[str, Sequence[Mapping[str, Any]] | str | None],
    main_defaults: Sequence[Mapping[str, Any]],
    nics: Sequence[Mapping[str, Any]],
) -> list[str]:
    """The secondary NICs whose live state differs from the plan (eni_problems_by_nic), in plan order: the ones the
    eni role applies its configuration to again when their files were already right (a rule or route deleted by
    hand, an MTU changed)."""
    by_nic = eni_problems_by_nic(enis, rules, tables, main_defaults, nics)
    return [name for name, problems in by_nic.items() if problems]


def restore_plan(files_changed: Sequence[str], backup_files: Sequence[str]) -> list[dict[str, str | None]]:
    """How to undo a kernel_cmdline change: each changed file with its backup (Ansible's backup_local names
    them ``<path>.<pid>.<timestamp>~``), or ``None`` for a file the change created (to be removed)."""
    plan: list[dict[str, str | None]] = []
    for path in files_changed:
        # Exactly PATH.PID.YYYY-MM-DD@HH:MM:SS~: a prefix match took /etc/default/grub.d/x.cfg's backup for
        # /etc/default/grub's (and restored the drop-in's text over it).
        named = re.compile(re.escape(path) + r"\.\d+\.\d{4}-\d{2}-\d{2}@\d{2}:\d{2}:\d{2}~")
        backup = next((b for b in backup_files if named.fullmatch(b)), None)
        plan.append({"path": path, "backup": backup})
    return plan
