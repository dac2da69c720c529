"""`rdmaforge doctor`'s expectations: each node against what its inventory and fabric profile imply.

Each check of a node ends as one of:

- ``ok``: measured, and what the inventory implies;
- ``problem``: measured, and not what the inventory implies (expected vs actual);
- ``accepted``: not what the inventory implies, but listed in ``doctor_accept`` as a known, accepted deviation
  (the lab's memlock and missing RDMA devices), printed as such with the inventory's reason;
- ``not_checked``: not judged. With ``expected`` None there is nothing to compare with (a tcp fabric has no
  memlock rule); with an ``expected`` the inventory expects something the node's value could not be read for (no
  GPU count, no clock), so doctor cannot call the node healthy (rdmaforge.doctor: not judged, exit 5).

Expected values come from the node's inventory variables (written into the node's doctor file by
playbooks/doctor.yml), falling back to the roles' documented defaults (roles/*/defaults/main.yml), and from the
fabric profile table (rdmaforge.fabrics). Pure functions; rdmaforge.doctor renders them.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, cast

from rdmaforge import fabrics, tuning
from rdmaforge.nccl_build import (
    MANIFEST_NAME,
    arch_for,
    build_id,
    read_manifest,
    source_difference,
    uncovered_caps,
)
from rdmaforge.node_facts import count_gpus, parse_compute_caps
from rdmaforge.parsers import ld_cache
from rdmaforge.parsers.hugepages import size_kb
from rdmaforge.parsers.kernel_cmdline import (
    CmdlineError,
    arg_key,
    arg_value,
    effective_value,
    same_value,
    split_cmdline,
)
from rdmaforge.parsers.nccl_env import plugin_api_versions
from rdmaforge.parsers.rdma_devinfo import Device, Port, judge_port_rates, select_ports
from rdmaforge.plain_data import ansible_bool, show, whole_number
from rdmaforge.role_defaults import defaults, evaluated_default

CheckStatus = Literal["ok", "problem", "accepted", "not_checked"]

#: Fabric profiles that use RDMA (rdmaforge.fabrics): memlock must be unlimited, RDMA devices must be present.
RDMA_FABRICS = fabrics.RDMA_NAMES
#: The RDMA device names each RDMA fabric brings (ibv_devinfo's hca_id): erdma_N on eRDMA, mlx5_N on the rest.
RDMA_DEVICE_PATTERNS = fabrics.device_patterns()
#: The checks of one node, in table order.
CHECKS = ("rdma", "port_rate", "memlock", "mtu", "hugepages", "hugepages_boot", "gpus", "nccl", "plugin", "plugin_host",
          "clock")  # fmt: skip

#: Inventory variables the doctor role copies into each node's file (doctor_inventory_names in its defaults: a test
#: keeps the two lists equal); the rest of the names come from role defaults.
DEFAULTS_OF = {
    "rdmaforge_fabric": None,
    "rdma_require_active_ports": "rdma_core",
    "rdma_core_min_port_rate_gbps": "rdma_core",
    "rdma_core_expected_ports": "rdma_core",
    "hugepages_enabled": "hugepages",
    "hugepages_count": "hugepages",
    "hugepages_size": "hugepages",
    "eni_enabled": "eni",
    "eni_interfaces": "eni",
    "eni_interface_patterns": "eni",
    "eni_mtu": "eni",
    "eni_jumbo_frames": "eni",
    "eni_per_gpu": "eni",
    "nccl_build_version": "nccl_build",
    "nccl_cuda_archs": "nccl_build",
    "nccl_build_only_funcs": "nccl_build",
    "nccl_build_source": "nccl_build",
    "nccl_build_git_commit": "nccl_build",
    "nccl_build_git_url": "nccl_build",
    "nccl_build_git_ref": "nccl_build",
    "nccl_build_tarball_sha256": "nccl_build",
    "nccl_plugin_provider": "nccl_plugin",
    "nccl_plugin_aiacc_outside_alibaba_cloud": "nccl_plugin",
    "doctor_expected_gpus": None,
    "rdmaforge_gpus_per_node": None,
    "doctor_accept": None,
}
#: What a check shows as its value when the node did not give one: acceptances never cover it.
NOT_READ = "?"


class Unread(str):
    """A check's shown value that holds something the node did not give, in whole or in part (a port rate not
    reported, a DMI product name not readable): the explicit signal that doctor_accept never covers it (judge_node),
    whatever the text reads (review round 41a: "mlx5_0:1 rate unknown" was accepted, as only "?" was refused)."""

    __slots__ = ()


@dataclass(frozen=True)
class Check:
    host: str
    check: str
    status: CheckStatus
    actual: str
    expected: str | None
    reason: str
    #: What an ``ok`` check left unjudged by the inventory's choice, printed for the cluster (doctor.render).
    not_judged: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def inventory_of(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """The inventory values the doctor role wrote into the node's file."""
    given = node.get("inventory")
    return given if isinstance(given, Mapping) else {}


def variable(node: Mapping[str, Any], name: str) -> Any:
    """The inventory's value, else the role's default (default_for)."""
    given = inventory_of(node)
    return given[name] if name in given else default_for(node, name)


def default_for(node: Mapping[str, Any], name: str) -> Any:
    """The role's default, a template evaluated for the node (its inventory values and fabric) as the role does
    (rdmaforge.role_defaults.evaluated_default); None for a name no role defaults."""
    role = DEFAULTS_OF.get(name)
    return evaluated_default(name, {**inventory_of(node), "rdmaforge_fabric": fabric_of(node)}, role) if role else None


def fabric_of(node: Mapping[str, Any]) -> str:
    return str(variable(node, "rdmaforge_fabric") or "tcp")


# --- one check each ---------------------------------------------------------------------------------------


def check_memlock(node: Mapping[str, Any]) -> tuple[CheckStatus, str, str | None, str]:
    fabric = fabric_of(node)
    actual = str(node.get("memlock") if node.get("memlock") is not None else NOT_READ).strip() or NOT_READ
    if fabric not in RDMA_FABRICS:
        return "not_checked", actual, None, f"fabric {fabric} does not use RDMA"
    login, training = node.get("memlock_user"), node.get("training_user")
    if login and training and login != training:
        # pam_limits gives each user (and root apart from '*') lines of its own: the login's limit says nothing
        # of the training user's, which a node whose '*' line covers the login but not root trained without.
        return "not_checked", actual, "unlimited", (
            f"`ulimit -l` was read for the login user {show(login)}, not for the training user {show(training)} "
            "(ssh_trust_user), whose logins doctor does not make; rdmaforge verify judges that user's limit")
    if actual == NOT_READ:
        return "problem", actual, "unlimited", "`ulimit -l` of a non-interactive login gave no answer"
    if actual == "unlimited":
        return "ok", actual, "unlimited", "RDMA may pin any amount of memory"
    if not actual.isdigit():  # a login banner or an error in place of the number: no limit was read
        reason = f"`ulimit -l` of a non-interactive login answered {show(actual)}, no limit"
        return "problem", NOT_READ, "unlimited", reason
    return (
        "problem",
        f"{actual} KiB",
        "unlimited",
        (f"memlock of a non-interactive login is {actual} KiB; fabric {fabric} needs unlimited (RDMA pins memory)"),
    )


def expected_ports(
    devices: Sequence[Mapping[str, Any]], listed: Sequence[str]
) -> tuple[list[tuple[str, Port]], list[str]]:
    """The ports rdma_core_expected_ports names among ``devices`` (every port when it names none), by rdma_core's
    own selection (rdma_devinfo.select_ports), and what it names that is not there."""
    readable = [{"name": str(d.get("name")), "ports": [p for p in d.get("ports") or [] if isinstance(p, Mapping)]}
                for d in devices]  # fmt: skip
    return select_ports(cast("list[Device]", readable), listed)


def check_rdma(node: Mapping[str, Any]) -> tuple[CheckStatus, str, str | None, str]:
    fabric = fabric_of(node)
    devices = node.get("rdma_devices") or []
    names = [str(d.get("name")) for d in devices]
    actual = ",".join(names) or "none"
    if fabric not in fabrics.NAMES:  # preflight's checks (which doctor runs first) refuse it; never "no RDMA"
        return "problem", actual, None, (f"rdmaforge_fabric={show(fabric)} is not a fabric profile; allowed: "
                                         f"{', '.join(fabrics.NAMES)}")  # fmt: skip
    if fabric not in RDMA_FABRICS:
        return "not_checked", actual, None, f"fabric {fabric} does not use RDMA"
    pattern = RDMA_DEVICE_PATTERNS[fabric]
    matching = [d for d in devices if fnmatch.fnmatch(str(d.get("name")), pattern)]
    expected = f"{pattern} with every port ACTIVE"
    if not matching:
        return "problem", actual, expected, f"no {pattern} RDMA device, which fabric {fabric} needs"
    if node.get("rdma_source") == "sysfs":
        # The kernel's driver has them; libibverbs (ibv_devinfo) listed none or is not installed: NCCL opens devices
        # through libibverbs, so it would find none and fall back to sockets.
        tool = "ibv_devinfo is not installed" if node.get("rdma_tool_present") is False else "ibv_devinfo listed none"
        return "problem", actual, expected, (f"only the kernel lists them (/sys/class/infiniband): {tool}, so the RDMA "
                                             "user-space (libibverbs and its provider) NCCL opens them through does "
                                             "not see them")  # fmt: skip
    # rdma_core_expected_ports: the rails that must exist (and be ACTIVE), by rdma_core's own selection.
    listed = [str(p) for p in variable(node, "rdma_core_expected_ports") or []]
    selected, missing = expected_ports(matching, listed)
    if listed:
        expected = f"{', '.join(listed)} (rdma_core_expected_ports) ACTIVE"
    if missing:
        return "problem", actual, expected, "; ".join(missing)
    # A port of the other link layer (a VPI HCA left in Ethernet mode on InfiniBand, or the reverse) takes the
    # profile's NCCL settings (GID index, HCA names) for a network it is not on. A port whose link layer was not
    # read is not judged here.
    wanted = fabrics.port_link_layers().get(fabric)
    other = [f"{name}:{p.get('port')} {p.get('link_layer')}" for name, p in selected
             if wanted and p.get("link_layer") not in (None, "", wanted)]  # fmt: skip
    if other:
        return (
            "problem",
            actual,
            f"{pattern} ports of link layer {wanted}",
            (f"fabric {fabric} runs over {wanted}, but these ports are on another link layer: {', '.join(other)}"),
        )
    inactive = [f"{name}:{p.get('port')} {p.get('state') or 'state not read'}" for name, p in selected
                if p.get("state") != "PORT_ACTIVE"]  # fmt: skip
    if not ansible_bool(variable(node, "rdma_require_active_ports")):
        # Not judged, but never hidden: a rail that is down is named, so "ok" is read as "the devices are there".
        down = f"; not ACTIVE {PARTLY_NOT_JUDGED}: {', '.join(inactive)}" if inactive else ""
        return "ok", actual, pattern, (f"{len(matching)} {pattern} device(s); port states not judged "
                                       f"(rdma_require_active_ports is false){down}")  # fmt: skip
    devices_without = [str(d.get("name")) for d in matching if not d.get("ports")] if not listed else []
    if inactive or not selected or devices_without:
        what = inactive + [f"{name} has no port" for name in devices_without]
        return "problem", actual, expected, "not ACTIVE: " + (", ".join(what) or "no port at all")
    return "ok", actual, expected, f"{len(matching)} device(s), {len(selected)} port(s) ACTIVE"


#: In an ``ok`` check's reason: a part of it was not judged (the inventory turned it off); rdmaforge.doctor prints it.
PARTLY_NOT_JUDGED = "(not judged)"


#: What check_port_rate expects where a port's rate was not reported and nothing else sets an expectation.
RATES_REPORTED = "a rate reported for every active port"
#: What a node's one port rate is held to where the inventory sets no rdma_core_min_port_rate_gbps (doctor's skew).
OTHER_NODES_RATES = "a rate, to compare with the other nodes'"


def check_port_rate(node: Mapping[str, Any]) -> tuple[CheckStatus, str, str | None, str]:
    """Each active port's link rate (ibv_devinfo -v, ibstat): against rdma_core_min_port_rate_gbps when the inventory
    sets one, else against the node's other ports (rdma_devinfo.judge_port_rates, which verify's suite calls too)."""
    fabric = fabric_of(node)
    if fabric not in RDMA_FABRICS:
        return "not_checked", "-", None, f"fabric {fabric} does not use RDMA"
    pattern = RDMA_DEVICE_PATTERNS[fabric]
    listed = variable(node, "rdma_core_expected_ports") or []
    verdict = judge_port_rates(node.get("rdma_devices"), pattern, variable(node, "rdma_core_min_port_rate_gbps"),
                               listed)  # fmt: skip
    # Only active ports have a rate: the others are named as not judged here, not left out of the line.
    devices = [d for d in node.get("rdma_devices") or [] if fnmatch.fnmatch(str(d.get("name")), pattern)]
    selected, _ = expected_ports(devices, [str(p) for p in listed])
    inactive = [f"{name}:{p.get('port')}" for name, p in selected if p.get("state") != "PORT_ACTIVE"]
    reason = verdict.reason + (f"; no rate judged for {', '.join(inactive)} (not ACTIVE)" if inactive else "")
    actual = Unread(verdict.actual) if verdict.unread else verdict.actual
    if verdict.unread and verdict.status != "problem":
        # A port whose rate was not reported may be the one that trained down: not judged, as verify's suite has it,
        # and with an expectation, so the run is not judged either: with one rate left there was nothing to compare,
        # no expectation, and a 2-rail node with a rail unread was healthy, exit 0 (review round 41a).
        return "not_checked", actual, verdict.expected or RATES_REPORTED, reason
    return verdict.status, actual, verdict.expected, reason


def eni_names(node: Mapping[str, Any]) -> list[str]:
    """The secondary NICs the ENI plan covers, by the eni role's own rule (tuning.eni_names) on this node's NICs."""
    return tuning.eni_names(
        node.get("nics") or [],
        str(node.get("default_route_interface") or ""),
        [str(p) for p in variable(node, "eni_interface_patterns") or []],
        [str(n) for n in variable(node, "eni_interfaces") or []],
    )


def planned_mtu(node: Mapping[str, Any]) -> int:
    """The MTU the eni role plans: its rdmaforge_eni_mtu filter (tuning.eni_mtu) of the fabric, eni_jumbo_frames
    and eni_mtu, as roles/eni/vars/main.yml plans it (eni_mtu's default is null: the filter's rule)."""
    jumbo_frames = ansible_bool(variable(node, "eni_jumbo_frames"))
    return tuning.eni_mtu(fabric_of(node), jumbo_frames, variable(node, "eni_mtu"))


def check_mtu(node: Mapping[str, Any]) -> tuple[CheckStatus, str, str | None, str]:
    nics = {str(n.get("name")): n.get("mtu") for n in node.get("nics") or []}
    actual = " ".join(f"{name}={mtu}" for name, mtu in sorted(nics.items())) or "none"
    if not ansible_bool(variable(node, "eni_enabled")):
        return "not_checked", actual, None, "eni_enabled is false: no MTU is planned"
    if node.get("nics_error"):
        return "not_checked", "unknown", f"ENIs at {planned_mtu(node)}", (
            f"the node's NICs could not be read: {node['nics_error']}")
    mtu = planned_mtu(node)
    names = eni_names(node)
    if not names:
        return "problem", actual, f"ENIs at {mtu}", "no secondary NIC (ENI) found for the ENI plan"
    missing = [n for n in names if n not in nics]
    off = [f"{n}={nics[n]}" for n in names if n in nics and str(nics[n]) != str(mtu)]
    expected = f"{','.join(names)}={mtu}"
    if missing or off:
        what = ([f"{', '.join(missing)} missing"] if missing else []) + ([f"{' '.join(off)}"] if off else [])
        return "problem", actual, expected, f"ENI MTU off the plan ({mtu}): " + "; ".join(what)
    return "ok", actual, expected, f"every ENI at the planned MTU {mtu}"


#: How expected_gpus says the inventory's value is no count.
NO_COUNT = " is no count"


def expected_gpus(node: Mapping[str, Any]) -> tuple[int | None, str]:
    """The GPU count the inventory implies and where it comes from; (None, why) when it implies none here. A count
    is read as the argument spec's int takes it ("8.0" is 8; preflight refuses what is no count)."""
    for name in ("doctor_expected_gpus", "rdmaforge_gpus_per_node"):
        given = variable(node, name)
        if given not in (None, ""):
            count = whole_number(given)
            if count is None:
                return None, f"{name}={show(given)}{NO_COUNT}"
            return count, name
    if ansible_bool(variable(node, "eni_per_gpu")) and ansible_bool(variable(node, "eni_enabled")):
        if node.get("nics_error"):  # no NIC read is no ENI count, never 0 GPUs
            return None, f"eni_per_gpu counts the ENIs, but the node's NICs could not be read: {node['nics_error']}"
        return len(eni_names(node)), "eni_per_gpu (one GPU per ENI)"
    return None, "the inventory sets no GPU count (doctor_expected_gpus, rdmaforge_gpus_per_node)"


# A node where neither tool answered has an unknown GPU count: judging it as 0 would pass doctor_expected_gpus: 0.
GPUS_NOT_COUNTED = "the GPUs were not counted: neither nvidia-smi, lspci nor the PCI tree in sysfs answered on the node"
#: What a node's GPU count is held to where the inventory sets none: the same count as the other nodes'.
OTHER_NODES_COUNT = "a count, to compare with the other nodes'"
UNKNOWN_PLAN = f"no plan to judge against: it follows the GPU count, and {GPUS_NOT_COUNTED}"


def gpu_reading(node: Mapping[str, Any]) -> tuple[int | None, str]:
    """The node's GPU count as preflight counts them (node_facts.count_gpus) and which tool gave it; (None, "none")
    when nothing answered (not 0 GPUs)."""
    nvidia_smi = node.get("nvidia_smi") or None  # an empty answer from nvidia-smi lists no GPU: lspci is asked
    sysfs = whole_number(node.get("sysfs_gpus"))
    return count_gpus(nvidia_smi, node.get("lspci"), sysfs)


def check_gpus(node: Mapping[str, Any], count: int | None) -> tuple[CheckStatus, str, str | None, str]:
    expected, source = expected_gpus(node)
    if expected is None and source.endswith(NO_COUNT):
        # The inventory names a count doctor cannot read (preflight refuses it first in a run; diagnose() is also
        # called on its own): a problem of the inventory, never a node that passes for want of an expectation.
        shown = NOT_READ if count is None else str(count)
        return "problem", shown, "a GPU count", f"{source}; allowed: a whole number of GPUs, 0 or more"
    if count is None:
        # Without an inventory count, the count is still expected: the other nodes' (doctor's skew check), which an
        # unread one is never compared with. Not judged, then, never a node that agrees (review round 21b).
        wanted = OTHER_NODES_COUNT if expected is None else str(expected)
        return "not_checked", NOT_READ, wanted, GPUS_NOT_COUNTED
    tool = gpu_reading(node)[1]
    if count > 0 and tool != "nvidia-smi":
        # The cards are on the bus, the driver did not answer: no CUDA program (NCCL, the training) can use them.
        return "problem", str(count), None if expected is None else str(expected), (
            f"nvidia-smi did not answer, while {tool} sees {count} NVIDIA GPU(s): the driver is not loaded or not "
            "working, so no CUDA program can use them")  # fmt: skip
    if expected is None:
        return "not_checked", str(count), None, source
    if count != expected:
        return "problem", str(count), str(expected), f"{count} GPU(s) found, {expected} expected ({source})"
    return "ok", str(count), str(expected), f"{count} GPU(s), as {source} says"


def planned_pages(node: Mapping[str, Any], gpus: int) -> int:
    """The pages the hugepages role reserves: hugepages_count, else seed 004's rule (rdmaforge.tuning)."""
    override = variable(node, "hugepages_count")
    return tuning.hugepages_count(gpus, None if override in (None, "") else override)


def unknown_plan(node: Mapping[str, Any], gpus: int | None) -> bool:
    """True when the planned pages follow the GPU count (no hugepages_count) and the GPUs were not counted."""
    return gpus is None and variable(node, "hugepages_count") in (None, "")


def check_hugepages(node: Mapping[str, Any], gpus: int | None) -> tuple[CheckStatus, str, str | None, str]:
    size = str(variable(node, "hugepages_size") or "1G")
    pools = (node.get("hugepages") or {}).get("by_size") or {}
    kb = size_kb(size, "B")  # a bare number is bytes, as the kernel's hugepagesz= reads it
    if kb is None:  # preflight (which doctor runs first) refuses it
        return "problem", "?", None, f"hugepages_size={show(size)} is not a page size (e.g. 1G or 2M)"
    reserved = whole_number((pools.get(str(kb)) or {}).get("nr")) or 0
    actual = f"{reserved}x{size}"
    if not ansible_bool(variable(node, "hugepages_enabled")):
        return "not_checked", actual, None, "hugepages_enabled is false"
    if unknown_plan(node, gpus):
        return "not_checked", actual, f"the planned pages of {size}", UNKNOWN_PLAN
    expected = planned_pages(node, gpus or 0)
    if reserved != expected:
        return "problem", actual, f"{expected}x{size}", f"{reserved} pages of {size} reserved, {expected} planned"
    return "ok", actual, f"{expected}x{size}", f"{expected} pages of {size} reserved as planned"


def boot_arguments(texts: Sequence[str]) -> list[str]:
    """The kernel arguments the next boot gets from GRUB defaults files sourced in order (/etc/default/grub, then
    the drop-in): GRUB_CMDLINE_LINUX, then GRUB_CMDLINE_LINUX_DEFAULT, each its value after the last assignment (a
    later one replaces an earlier one, $VAR expanded), as the kernel_cmdline module reads them. CmdlineError for a
    line it cannot read."""
    return [token for variable in ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")
            for token in split_cmdline(effective_value(texts, variable))]  # fmt: skip


def check_hugepages_boot(node: Mapping[str, Any], gpus: int | None) -> tuple[CheckStatus, str, str | None, str]:
    size = str(variable(node, "hugepages_size") or "1G")
    texts = [str(t) for t in node.get("grub_defaults") or [] if t]
    try:
        tokens = boot_arguments(texts)
    except CmdlineError as exc:
        return "problem", "unreadable", None, f"the GRUB defaults cannot be read as the shell reads them: {exc}"
    counts = [arg_value(t) for t in tokens if arg_key(t) == "hugepages"]
    actual = " ".join(f"hugepages={c}" for c in counts) or "none"
    if not ansible_bool(variable(node, "hugepages_enabled")):
        return "not_checked", actual, None, "hugepages_enabled is false"
    if not texts:
        return "not_checked", actual, f"hugepagesz={size} hugepages=<planned>", (
            "no /etc/default/grub was read (a BLS or grubby host: see rdmaforge verify)")
    if unknown_plan(node, gpus):
        return "not_checked", actual, f"hugepagesz={size} hugepages=<planned>", UNKNOWN_PLAN
    planned = planned_pages(node, gpus or 0)
    expected = f"hugepagesz={size} hugepages={planned}"
    sizes = [arg_value(t) for t in tokens if arg_key(t) == "hugepagesz"]
    found = " ".join(t for t in tokens if arg_key(t) in ("hugepages", "hugepagesz", "default_hugepagesz"))
    # Sizes as the kernel reads them: seed 004's 1GB is the role's 1G (the role leaves it as it is; review round 37b).
    if counts != [str(planned)] or len(sizes) != 1 or not same_value("hugepagesz", sizes[0], size):
        found = found or "no huge page argument"
        return "problem", actual, expected, f"the boot loader configuration has {found}, the plan is {expected}"
    pools = tuning.hugepages_pools(tokens)
    if next((n for s, n in pools.items() if same_value("hugepagesz", s, size)), None) != str(planned):
        sized = ", ".join(f"{n} of {s}" for s, n in pools.items())
        why = (f"the boot loader configuration has {found}: the kernel reads it as {sized} (hugepages= counts pages "
               f"of the hugepagesz= before it); the plan is {expected}")  # fmt: skip
        return "problem", actual, expected, why
    return "ok", actual, expected, "the next boot reserves the planned pages"


MANIFEST = f"current/{MANIFEST_NAME}"


def build_manifest(node: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """The installed build's manifest ({} when there is none), and why it cannot be read when it is not the object
    the nccl_build role writes (nccl_build.read_manifest): a damaged file is the node's problem, never a crash.
    doctor.yml gives the file's text; results of older versions give it parsed."""
    return read_manifest(node.get("nccl_manifest"), MANIFEST)


def source_problem(node: Mapping[str, Any], manifest: Mapping[str, Any]) -> str:
    """Why the installed build is not from the source the inventory names ('' when it is, or when the manifest is
    from before sources were recorded). As build_once compares its cache (nccl_build.source_difference): the pin
    (the git commit, or the tarball's sha256), else an unpinned git source's URL and ref."""
    kind = str(variable(node, "nccl_build_source") or "git")
    pin = str(variable(node, "nccl_build_git_commit" if kind == "git" else "nccl_build_tarball_sha256") or "")
    # unpinned, the URL and ref are the source (review round 42: a fork's build of the same id was "ok")
    url, ref = (str(variable(node, name) or "") for name in ("nccl_build_git_url", "nccl_build_git_ref"))
    differs = source_difference(manifest, kind, pin, url, ref)
    if not differs:
        return ""
    if differs.startswith("built from a "):
        return "the installed build is from" + differs.removeprefix("built from")
    return f"the installed build is from{differs.removeprefix('built from')}: converge to build it again"


def check_nccl(node: Mapping[str, Any]) -> tuple[CheckStatus, str, str | None, str]:
    manifest, damaged = build_manifest(node)
    if damaged:
        return "problem", "damaged", f"NCCL {variable(node, 'nccl_build_version') or ''}".strip(), damaged
    version = str(variable(node, "nccl_build_version") or "")
    archs = [str(a) for a in variable(node, "nccl_cuda_archs") or []]
    funcs = str(variable(node, "nccl_build_only_funcs") or "")
    if not manifest.get("id"):
        return "problem", "none", f"NCCL {version}", f"no rdmaforge NCCL build installed ({MANIFEST})"
    installed = str(manifest["id"]).removeprefix("nccl-")
    # The CUDA release is the builder's (detected, not planned): the manifest's, else the one in the id.
    named = re.search(r"-cuda([^-]+)-", str(manifest["id"]))
    cuda = str(manifest.get("cuda") or (named.group(1) if named else ""))
    if not cuda:
        # The release can still be compared: a build of another NCCL release is wrong whatever its CUDA.
        given = str(manifest.get("version") or installed.split("-", 1)[0])
        if version and given != version:
            return "problem", installed, f"NCCL {version}", f"installed NCCL {given}, the cluster's is {version}"
        return "not_checked", installed, f"NCCL {version}".strip(), (
            "the installed build's manifest does not say its CUDA release, so its build id was not compared")
    expected = build_id(version, cuda, archs, funcs)
    if installed != expected:
        return "problem", installed, expected, f"installed NCCL build {installed}, the cluster's build is {expected}"
    # The id names release, CUDA and archs, not the source: a build of another commit (a moved tag rebuilt under
    # the same id) or of another tarball is told by the manifest's record of its source.
    other_source = source_problem(node, manifest)
    if other_source:
        return "problem", installed, expected, other_source
    # The manifest alone is not the library: the build's libnccl.so.<version> must be there too.
    library = f"libnccl.so.{manifest.get('version') or version}"
    if "nccl_libs" in node and library not in (node.get("nccl_libs") or []):
        return "problem", installed, expected, f"the build's manifest is there but its lib/ has no {library}"
    # The build has no PTX: its kernels load only on GPUs its archs cover (one rank would still run: a copy).
    caps = parse_compute_caps(str(node.get("compute_caps") or ""))
    # What could not be read leaves that part not judged, and the check with it: never ok (review round 36).
    unread: list[str] = []
    if not caps and (gpu_reading(node)[0] or 0) > 0:  # nvidia-smi listed GPUs, not their compute capabilities
        unread.append("the GPUs' compute capabilities were not read, so whether the build's archs cover them was "
                      "not checked")  # fmt: skip
    uncovered = uncovered_caps([str(a) for a in manifest.get("archs") or archs], caps)
    if uncovered:
        wanted = ", ".join(arch_for(cap) for cap in uncovered)
        reason = f"the installed NCCL build has no kernels for this node's GPUs; add {wanted} to nccl_cuda_archs"
        return "problem", installed, f"an arch for compute capability {', '.join(uncovered)}", reason
    lines, home = node.get("ld_cache_nccl"), str(node.get("nccl_home") or "")
    if lines is None or not home:
        unread.append("the ld.so cache was not read, so whether programs load this build was not checked")
        return "not_checked", installed, expected, f"the cluster's NCCL build; not judged: {'; '.join(unread)}"
    found = ld_cache.resolve(lines, "libnccl.so.2")
    # build_once registers <root>/current/lib: a path under another build (previous, an older id) is not the one
    # the cluster runs, though it is under the same root.
    root = home.rstrip("/") + "/"
    if not found or not found.startswith(root):
        where = f"at {found}" if found else "nowhere"
        reason = f"programs that name no path find libnccl.so.2 {where}, not the cluster's build under {root}"
        return "problem", installed, expected, reason + " (its ld.so.conf.d entry is missing or ldconfig was not run)"
    given = f"the cluster's NCCL build, which ld.so gives programs ({found})"
    if unread:
        return "not_checked", installed, expected, f"{given}; not judged: {'; '.join(unread)}"
    return "ok", installed, expected, given


def plugin_provider(node: Mapping[str, Any]) -> str:
    """nccl_plugin_provider where the inventory sets it (not empty), else the nccl_plugin role's default evaluated
    for the node (the fabric profile's net plugin): once, by the one reader of defaults (default_for)."""
    given = inventory_of(node).get("nccl_plugin_provider")
    return str(given or default_for(node, "nccl_plugin_provider"))


def plugin_leads_to_expected(node: Mapping[str, Any]) -> bool | None:
    """Whether the registered link, followed, is the library nccl_plugin_provider registers (plugin_expected): the
    same device and inode, so symbolic links on either path do not matter. None when not compared (no provider's
    library, no plugin, or facts from before doctor read them)."""
    files = node.get("plugin_files")
    if not node.get("plugin_expected") or not isinstance(files, list) or len(files) != 2:
        return None
    link, expected = (f if isinstance(f, Mapping) else {} for f in files)
    if not (link.get("exists") and expected.get("exists")):
        return False
    return (link.get("inode"), link.get("dev")) == (expected.get("inode"), expected.get("dev"))


def check_plugin(node: Mapping[str, Any], summary: str) -> tuple[CheckStatus, str, str | None, str]:
    provider = plugin_provider(node)
    apis = plugin_api_versions(str(node.get("plugin_symbols") or ""))
    actual = summary + (f" v{','.join(map(str, apis))}" if apis else "")
    lines = node.get("ld_cache_nccl")
    # What NCCL's dlopen("libnccl-net.so") gets: the plugin NCCL really loads (None: the cache was not read).
    loaded = ld_cache.resolve(lines, "libnccl-net.so") if lines is not None else None
    if provider == "none":
        if node.get("plugin_present"):
            return "problem", actual, "none", "a net plugin is registered although nccl_plugin_provider is none"
        if loaded:
            return (
                "problem",
                actual,
                "none",
                f"ld.so gives every NCCL the net plugin {loaded}, although nccl_plugin_provider is none",
            )
        if lines is None:
            return "not_checked", actual, "none", ("no net plugin registered; not judged: the ld.so cache was not "
                                                   "read, so whether it gives NCCL another libnccl-net.so was not "
                                                   "checked")  # fmt: skip
        return "ok", actual, "none", "no net plugin, as nccl_plugin_provider says"
    expected = f"{provider}, exporting ncclNetPlugin_v*"
    if not node.get("plugin_present"):
        return "problem", actual, expected, f"no NCCL net plugin library; nccl_plugin_provider is {provider}"
    # Symbols nm could not read leave only that part not judged: the link and the ld.so cache, which were read, are
    # compared first (review round 41a: a dangling link was "not checked ... nothing else is a problem", exit 5).
    symbols_unread = "plugin_symbols" in node and node["plugin_symbols"] is None
    if not apis and not symbols_unread:
        return "problem", actual, expected, "the plugin exports no ncclNetPlugin_vN symbol: NCCL would not load it"
    link = str(node.get("plugin_link") or "")
    leads = plugin_leads_to_expected(node)
    if leads is False:
        target = node.get("plugin_target") or "a file that is no link"
        files = node.get("plugin_files") or [{}]
        if isinstance(files[0], Mapping) and not files[0].get("exists"):
            reason = f"{link} leads to {target}, which does not exist (a dangling link): NCCL cannot load it"
        else:
            reason = (f"{link} leads to {target}, not to {node.get('plugin_expected')}, the library "
                      f"nccl_plugin_provider {provider} registers")  # fmt: skip
        return "problem", actual, f"{provider} ({node.get('plugin_expected')})", reason
    if lines is not None and link and loaded != link:
        found = f"finds libnccl-net.so at {loaded}" if loaded else "has no libnccl-net.so"
        reason = f"the ld.so cache {found}, so NCCL does not load {link}"
        return "problem", actual, expected, reason + " (its ld.so.conf.d entry is missing or ldconfig was not run)"
    if symbols_unread:
        return "not_checked", actual, expected, ("the plugin's symbols could not be read (nm did not run: binutils "
                                                 "missing?), so whether NCCL loads it was not checked")
    loader = sorted({int(v) for v in node.get("nccl_loader_apis") or []})
    exported = f"v{', v'.join(map(str, apis))}"
    common = sorted(set(apis) & set(loader))
    if loader and not common:
        wanted = f"v{', v'.join(map(str, loader))}"
        return (
            "problem",
            actual,
            f"{provider}, exporting one of {wanted}",
            (
                f"the installed NCCL's loader looks up net plugin API {wanted}, the plugin exports {exported}: "
                "no common version, so NCCL would not use the plugin"
            ),
        )
    unread = [what for what, missing in (
        ("the ld.so cache was not read, so whether NCCL finds this plugin was not checked", lines is None),
        ("the installed NCCL's loader versions were not read, so whether it loads one of them was not checked",
         not loader),
    ) if missing]  # fmt: skip
    if unread:
        return "not_checked", actual, expected, f"exports net plugin API {exported}; not judged: {'; '.join(unread)}"
    return "ok", actual, expected, f"exports {exported}, which ld.so gives NCCL; the installed NCCL loads v{common[-1]}"


def check_plugin_host(node: Mapping[str, Any]) -> tuple[CheckStatus, str, str | None, str]:
    """The AIACC plugin checks its licence with Alibaba Cloud's metadata service: only an ECS instance (its DMI
    product name, the one preflight's nccl_plugin validation requires) can initialise it."""
    provider = plugin_provider(node)
    product = str(node.get("dmi_product_name") or "").strip()
    actual = repr(product) if product and product != "NA" else Unread("not readable")
    if provider != "aiacc":
        return "not_checked", actual, None, f"nccl_plugin_provider is {provider}: only AIACC needs Alibaba Cloud"
    ecs = str(defaults("nccl_plugin", "vars")["nccl_plugin_aiacc_dmi_product"])
    if product == ecs:
        return "ok", actual, repr(ecs), "an Alibaba Cloud ECS instance, where the AIACC plugin can initialise"
    declared_outside = ansible_bool(variable(node, "nccl_plugin_aiacc_outside_alibaba_cloud"))
    if isinstance(actual, Unread):
        if not declared_outside:
            # Nothing tells whether this is an ECS instance (no DMI, as in a container): not judged.
            return "not_checked", actual, repr(ecs), (
                "the DMI product name could not be read (/sys/devices/virtual/dmi/id/product_name), so whether this "
                "is an Alibaba Cloud ECS instance, where the AIACC plugin can initialise, is not known"
            )
        # The inventory itself says the host is outside Alibaba Cloud (as the lab's containers are): the plugin
        # cannot pass its licence check whatever DMI would say, so this is the inventory's own statement, which
        # doctor_accept may cover (an ECS host read as one would only be better than that).
        return "problem", "not readable; declared outside Alibaba Cloud", repr(ecs), (
            "the inventory declares this host outside Alibaba Cloud (nccl_plugin_aiacc_outside_alibaba_cloud is "
            "true) and its DMI product name could not be read: the AIACC plugin cannot pass its licence check "
            "there, and NCCL does not use it"
        )
    reason = (
        f"the DMI product name is {actual}: not an Alibaba Cloud ECS instance, so the AIACC plugin cannot pass "
        "its licence check and NCCL does not use it"
    )
    if declared_outside:
        reason += " (installed anyway: nccl_plugin_aiacc_outside_alibaba_cloud is true)"
    return "problem", actual, repr(ecs), reason


def judge_node(
    host: str,
    node: Mapping[str, Any],
    row: Mapping[str, str],
    gpus: int | None,
    clock: Callable[[], tuple[CheckStatus, str, str | None, str]],
) -> list[Check]:
    """Every check of one node, with the inventory's acceptances applied."""
    results = {
        "rdma": check_rdma(node),
        "port_rate": check_port_rate(node),
        "memlock": check_memlock(node),
        "mtu": check_mtu(node),
        "hugepages": check_hugepages(node, gpus),
        "hugepages_boot": check_hugepages_boot(node, gpus),
        "gpus": check_gpus(node, gpus),
        "nccl": check_nccl(node),
        "plugin": check_plugin(node, row.get("plugin", "")),
        "plugin_host": check_plugin_host(node),
        "clock": clock(),
    }
    accept = variable(node, "doctor_accept") or {}
    checks = []
    for name in CHECKS:
        status, actual, expected, reason = results[name]
        reason_given = isinstance(accept, Mapping) and isinstance(accept.get(name), str) and accept[name].strip()
        if status == "problem" and reason_given and (isinstance(actual, Unread) or actual == NOT_READ):
            # An acceptance covers a deviation someone measured and wrote down, not a value no one read.
            reason += f"; not accepted (doctor_accept's {name} covers a measured value, and this one was not read)"
        elif status == "problem" and reason_given:  # no reason, no acceptance (preflight's checks refuse it too)
            status, reason = "accepted", f"{reason}; accepted by the inventory: {accept[name]}"
        # str(): the marker has done its work; what is printed and serialised is plain text.
        checks.append(Check(host, name, status, str(actual), expected, reason, partly_judged(node, name, status)))
    return checks


#: An ok port_rate without rdma_core_min_port_rate_gbps compared the node's ports with each other: a fleet whose every
#: port trained down alike passes that, so the level itself is named as not judged.
RATES_WITHOUT_FLOOR = ("port rates against a number (rdma_core_min_port_rate_gbps is not set: each node's ports were "
                       "compared with each other and the nodes' rates with the other nodes')")


def partly_judged(node: Mapping[str, Any], name: str, status: CheckStatus) -> str:
    """What an ok check ``name`` did not judge on ``node`` because the inventory sets no expectation for it."""
    if name == "port_rate" and status == "ok" and variable(node, "rdma_core_min_port_rate_gbps") in (None, ""):
        return RATES_WITHOUT_FLOOR
    return ""


def unknown_acceptances(node: Mapping[str, Any]) -> list[str]:
    accept = variable(node, "doctor_accept") or {}
    return sorted(str(k) for k in accept if k not in CHECKS) if isinstance(accept, Mapping) else ["(not a mapping)"]


def summarize(checks: Sequence[Check]) -> dict[str, int]:
    counts = dict.fromkeys(("ok", "problem", "accepted", "not_checked"), 0)
    for check in checks:
        counts[check.status] += 1
    return counts
