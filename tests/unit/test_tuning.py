"""rdmaforge.tuning (hugepages and eni roles): seed 004's page count, boot loader decisions, the ENI plan,
the state check, the lab's grub-mkconfig stand-in (run for real with sh) and the eni role's templates."""

from __future__ import annotations

import configparser
import subprocess
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from rdmaforge import inventory_checks, tuning
from rdmaforge.lab import bootloader
from rdmaforge.paths import PROJECT_ROOT

DEBIAN_GRUB = PROJECT_ROOT / "tests" / "data" / "grub" / "debian_default_grub"
ARGS = tuning.hugepages_kernel_args(50)


@pytest.mark.parametrize(("gpus", "override", "expected"), [(8, None, 50), (4, None, 30), (0, None, 10), (1, None, 15),
                                                            (16, None, 90), (8, 64, 64), (2, "", 20)])  # fmt: skip
def test_seed_004_page_count(gpus: int, override: Any, expected: int) -> None:
    assert tuning.hugepages_count(gpus, override) == expected


def test_kernel_args_order_and_spelling() -> None:
    assert list(ARGS.items()) == [("default_hugepagesz", "1G"), ("hugepagesz", "1G"), ("hugepages", "50")]


def test_boot_loader_kinds() -> None:
    assert tuning.boot_loader(True, True, True, [])["kind"] == "grubby"
    assert tuning.boot_loader(True, False, False, ["/boot/grub/grub.cfg"])["kind"] == "grub"
    none = tuning.boot_loader(True, False, False, [], "systemd-nspawn")
    assert none["kind"] == "none"
    assert "generated grub.cfg" in none["reason"] and "systemd-nspawn" in none["reason"]
    assert "/etc/default/grub is missing" in tuning.boot_loader(False, False, False, [])["reason"]


@pytest.mark.parametrize(
    ("family", "major", "efi", "cfgs", "expected"),
    [
        ("Debian", 12, True, ["/boot/efi/EFI/debian/grub.cfg"], "/boot/grub/grub.cfg"),
        ("RedHat", 8, False, ["/boot/grub2/grub.cfg"], "/boot/grub2/grub.cfg"),
        ("RedHat", 8, True, ["/boot/efi/EFI/BOOT/grub.cfg", "/boot/efi/EFI/rocky/grub.cfg"],
         "/boot/efi/EFI/rocky/grub.cfg"),
        ("RedHat", 3, True, ["/boot/efi/EFI/alinux/grub.cfg"], "/boot/efi/EFI/alinux/grub.cfg"),
        ("RedHat", 9, True, ["/boot/efi/EFI/rocky/grub.cfg", "/boot/grub2/grub.cfg"], "/boot/grub2/grub.cfg"),
    ],
)  # fmt: skip
def test_grub_config_output(family: str, major: int, efi: bool, cfgs: list[str], expected: str) -> None:
    assert tuning.grub_config_output(family, major, efi, cfgs) == expected
    assert tuning.grub_config_output(family, major, efi, cfgs, "/x/grub.cfg") == "/x/grub.cfg"


def test_grub_mkconfig_argv() -> None:
    assert tuning.grub_mkconfig_argv("Debian", "/boot/grub/grub.cfg") == ["grub-mkconfig", "-o", "/boot/grub/grub.cfg"]
    assert tuning.grub_mkconfig_argv("RedHat", "/boot/grub2/grub.cfg")[0] == "grub2-mkconfig"
    assert tuning.grub_mkconfig_argv("Debian", "x", ["/lab/mk", "-o", "y"]) == ["/lab/mk", "-o", "y"]


def test_grub_cfg_missing_args() -> None:
    good = "menuentry 'a' {\n\tlinux /vmlinuz ro quiet default_hugepagesz=1G hugepagesz=1G hugepages=50\n}\n"
    assert tuning.grub_cfg_missing_args(good, ARGS) == []
    stale = good.replace("hugepages=50", "hugepages=32")
    assert tuning.grub_cfg_missing_args(stale, ARGS) == ["hugepages=50"]
    twice = good.replace("hugepages=50", "hugepages=50 hugepages=50")
    assert tuning.grub_cfg_missing_args(twice, ARGS) == ["hugepages=50"]
    # one entry (recovery) lacking them is enough to say so; a file with no kernel line lacks everything
    assert tuning.grub_cfg_missing_args(good + "\tlinux16 /vmlinuz ro single\n", ARGS) == list(
        f"{k}={v}" for k, v in ARGS.items()
    )
    assert tuning.grub_cfg_missing_args("", ARGS) == ["default_hugepagesz=1G", "hugepagesz=1G", "hugepages=50"]


# The entries /etc/grub.d/20_memtest86+ of Debian's memtest86+ 6.10-4 writes (BIOS, then EFI): memtest86+ comes
# with Ubuntu Server, and its images take no kernel command line of ours. iPXE's grub-ipxe entry likewise.
MEMTEST_ENTRIES = (
    'menuentry "Memory test (memtest86+x64.bin)" {\n        linux   /boot/memtest86+x64.bin\n}\n'
    "menuentry 'Memory test (memtest86+x64.bin, serial console)' {\n"
    "        linux\t/boot/memtest86+x64.bin console=ttyS0,115200\n}\n"
    'menuentry "Memory test (memtest86+x64.efi)" {\n        linuxefi        /memtest86+x64.efi\n}\n'
    "menuentry 'Network boot (iPXE)' --users '' --class network {\n        linux16 /boot/ipxe.lkrn\n}\n"
)


def test_memtest_and_ipxe_entries_are_no_kernel_lines() -> None:
    """Every memtest86+ entry 'lacked' the arguments: on Ubuntu Server the hugepages role regenerated grub.cfg, then
    failed its own check, and its rescue left the new grub.cfg (carrying the arguments) in place."""
    kernel = "/boot/vmlinuz-6.8.0-49-generic ro quiet default_hugepagesz=1G hugepagesz=1G hugepages=50"
    good = f"menuentry 'a' {{\n\tlinux {kernel}\n}}\n"
    assert tuning.grub_cfg_missing_args(good + MEMTEST_ENTRIES, ARGS) == []
    assert tuning.grub_cfg_carried_args(MEMTEST_ENTRIES, list(ARGS)) == []
    # Only memtest and iPXE images are skipped: a kernel image of another name is still checked.
    other = good + "menuentry 'b' {\n\tlinux /boot/kernel-6.6.0-gentoo ro\n}\n"
    assert tuning.grub_cfg_missing_args(other, ARGS) == [f"{k}={v}" for k, v in ARGS.items()]
    # A grub.cfg whose only entries are memtest's has no kernel line: it lacks everything.
    assert tuning.grub_cfg_missing_args(MEMTEST_ENTRIES, ARGS) == [f"{k}={v}" for k, v in ARGS.items()]


@pytest.mark.parametrize(
    ("before", "recorded", "dropped"),
    [
        # A 2M pool set by hand (for DPDK): hugepages= before any hugepagesz= counts default-size (2M) pages.
        ("console=ttyS0,115200n8 hugepages=1024", [], ["1024 pages of 2M (hugepages=1024)"]),
        ("hugepagesz=2M hugepages=1024 console=tty0", [], ["1024 pages of 2M (hugepagesz=2M hugepages=1024)"]),
        ("hugepagesz=1G hugepages=4 hugepagesz=2M hugepages=512", [],
         ["512 pages of 2M (hugepagesz=1G hugepages=4 hugepagesz=2M hugepages=512)"]),
        ("default-hugepagesz=2M quiet", [], ["the default huge page size 2M (default_hugepagesz=2M)"]),
        # Seed 004's own spelling of the 1G pool: the same pool, which the role rewrites as the kernel documents it.
        ("default_hugepagesz=1GB hugepagesz=1GB hugepages=50", [], []),
        # The role's own 2M pool of an earlier run (hugepages_size was 2M): its record names it.
        ("default_hugepagesz=2M hugepagesz=2M hugepages=100", ["default_hugepagesz=2M", "hugepagesz=2M",
                                                              "hugepages=100"], []),
        ("quiet splash hugepages=0", [], []),
        ("", [], []),
    ],
)
def test_huge_page_reservations_set_by_hand_that_the_role_would_drop(
    before: str, recorded: list[str], dropped: list[str]
) -> None:
    """The role replaced a hand-set 2M pool with its 1G one without a word (removed_duplicates was empty), and
    withdrawing the 1G pool later never brought the 2M pool back."""
    assert tuning.hugepages_other_pools(before, "1G", recorded) == dropped


def test_grub_cfg_carried_args() -> None:
    tokens = ["default_hugepagesz=1G", "hugepagesz=1G", "hugepages=50"]
    carrying = "menuentry 'a' {\n\tlinux /vmlinuz ro quiet default_hugepagesz=1G hugepagesz=1G hugepages=50\n}\n"
    assert tuning.grub_cfg_carried_args(carrying, tokens) == tokens
    clean = "menuentry 'a' {\n\tlinux /vmlinuz ro quiet\n}\n"
    assert tuning.grub_cfg_carried_args(clean, tokens) == []
    # one entry still carrying one of them is enough; another value of the key is not what was withdrawn
    recovery = clean + "\tlinux16 /vmlinuz ro single hugepages=50\n"
    assert tuning.grub_cfg_carried_args(recovery, tokens) == ["hugepages=50"]
    assert tuning.grub_cfg_carried_args(clean.replace("quiet", "quiet hugepages=32"), tokens) == []
    # an argument named only in a comment or a menu title is not on a kernel line
    assert tuning.grub_cfg_carried_args("# hugepages=50\nmenuentry 'hugepages=50' {\n}\n", tokens) == []


def test_lab_standin_reads_defaults_and_dropins_like_grub_mkconfig(tmp_path: Path) -> None:
    """The stand-in really runs (sh) on Debian's real /etc/default/grub plus a drop-in."""
    root = tmp_path / "root"
    (root / "etc" / "default" / "grub.d").mkdir(parents=True)
    grub = DEBIAN_GRUB.read_text().replace('GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="hugepages=50"')
    (root / "etc" / "default" / "grub").write_text(grub)
    (root / "etc" / "default" / "grub.d" / "60-x.cfg").write_text('GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt"\n')
    bootloader.install(root)
    assert tuning.grub_cfg_missing_args((root / "boot" / "grub" / "grub.cfg").read_text(), ARGS) == list(
        f"{k}={v}" for k, v in ARGS.items()
    )
    script = root / bootloader.STANDIN.lstrip("/")
    text = script.read_text().replace("/etc/default", str(root / "etc" / "default"))
    script.write_text(text)
    out = tmp_path / "grub.cfg"
    subprocess.run(["sh", str(script), "-o", str(out)], check=True)
    lines = [line for line in out.read_text().splitlines() if line.strip().startswith("linux")]
    assert len(lines) == 2
    assert all("hugepages=50 iommu=pt" in line for line in lines)
    assert "quiet" in lines[0] and "single" in lines[1]


def test_lab_initial_grub_cfg_matches_what_the_standin_writes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc" / "default").mkdir(parents=True)
    (root / "etc" / "default" / "grub").write_text(DEBIAN_GRUB.read_text())
    bootloader.install(root)
    script = root / bootloader.STANDIN.lstrip("/")
    script.write_text(script.read_text().replace("/etc/default", str(root / "etc" / "default")))
    out = tmp_path / "grub.cfg"
    subprocess.run(["sh", str(script), "-o", str(out)], check=True)
    kernel_lines = [line for line in out.read_text().splitlines() if "linux" in line]
    initial = [line for line in bootloader.INITIAL_GRUB_CFG.splitlines() if "linux" in line]
    assert kernel_lines == initial


# --- ENIs -----------------------------------------------------------------------------------------

NICS = [
    {"name": "eth0", "mtu": 1500, "ipv4": [{"address": "198.18.0.11", "prefixlen": 24}], "mac": "aa:00"},
    {"name": "eth10", "mtu": 1500, "ipv4": [{"address": "198.18.10.11", "prefixlen": 24}], "mac": "aa:10"},
    {"name": "eth2", "mtu": 1500, "ipv4": [{"address": "198.18.2.11", "prefixlen": 24}], "mac": "aa:02"},
    {"name": "eth1", "mtu": 1500, "ipv4": [{"address": "198.18.1.11", "prefixlen": 24}], "mac": "aa:01"},
    {"name": "docker0", "mtu": 1500, "ipv4": [{"address": "172.17.0.1", "prefixlen": 16}], "mac": "aa:d0"},
]


def test_eni_names_skip_default_route_and_sort_naturally() -> None:
    assert tuning.eni_names(NICS, "eth0") == ["eth1", "eth2", "eth10"]
    assert tuning.eni_names(NICS, "eth0", ["eth1*"]) == ["eth1", "eth10"]
    assert tuning.eni_names(NICS, "eth0", explicit=["eth2"]) == ["eth2"]


def test_eni_gpu_problem_names_both_numbers() -> None:
    assert tuning.eni_gpu_problem("n1", ["eth1", "eth2"], 2) == ""
    msg = tuning.eni_gpu_problem("node1", ["eth1", "eth2"], 0, "none")
    assert "node1" in msg and "2 secondary NIC(s) (eth1, eth2)" in msg and "0 GPU(s) (from none)" in msg
    assert "eni_per_gpu" in msg


def test_an_unknown_gpu_count_is_no_match_for_any_number_of_enis() -> None:
    """A null count (preflight could not read it) passed as 0 GPUs: a node without ENIs matched it, and one with
    ENIs was told it has 0 GPUs. It is said to be unknown, for any number of ENIs."""
    for enis in ([], ["eth1", "eth2"]):
        msg = tuning.eni_gpu_problem("node1", enis, None, "none")
        assert msg.startswith("node1: eni_per_gpu is true, so every GPU needs its own secondary NIC, but the node's "
                              "GPU count is unknown (rdmaforge_node.gpu_count null"), msg
        assert "0 GPU(s)" not in msg


def test_hugepages_seed_rule_needs_a_known_gpu_count() -> None:
    """Seed 004's rule sizes the pages by the GPUs: with the count unknown it gives no number (the role refuses it),
    never the 10 pages of a node without GPUs; hugepages_count set, or a measured 0 (the lab), still give one."""
    assert tuning.hugepages_pages_for(None) is None
    assert tuning.hugepages_pages_for(None, 12) == 12
    assert tuning.hugepages_pages_for(0) == 10 and tuning.hugepages_pages_for(8) == 50
    from tests.unit.test_filter_docs import FILTERS

    assert FILTERS["rdmaforge_hugepages_pages_for"](None, None) is None


@pytest.mark.parametrize(("fabric", "jumbo", "override", "mtu"),
                         [("erdma", True, None, 8500), ("erdma", False, None, 1400), ("tcp", True, None, 1400),
                          ("erdma", True, 9000, 9000), ("tcp", False, "9000.0", 9000),
                          ("tcp", False, 9000.0, 9000)])  # fmt: skip
def test_eni_mtu(fabric: str, jumbo: bool, override: int | None, mtu: int) -> None:
    # "9000.0": the argument spec's int takes it (and preflight with it); int() raised, and doctor stopped (exit 70)
    assert tuning.eni_mtu(fabric, jumbo, override) == mtu


def test_an_eni_mtu_that_is_no_number_names_the_variable() -> None:
    with pytest.raises(ValueError, match="eni_mtu='jumbo' is not a whole number of bytes"):
        tuning.eni_mtu("tcp", False, "jumbo")


def test_an_eni_plan_never_takes_the_default_route_nic_nor_a_nic_twice() -> None:
    """eni_interfaces: [eth0, eth1] with eth0 carrying the default route gave eth0 a static address, MTU 1400 and
    no main-table default route (netplan apply then cut the node off); [eth1, eth1] passed one ENI per GPU on a
    2-GPU node with two tables and two rules for one NIC."""
    plan = tuning.eni_plan("n1", NICS, ["eth0", "eth1"], 1001, 1001, 1400, default_interface="eth0")
    assert [e["name"] for e in plan["enis"]] == ["eth1"]
    assert plan["problems"] == [
        "n1: eni_interfaces lists eth0, which carries the node's default route (its management NIC); configuring it "
        "as a secondary NIC would take its address and default route away: leave it out of eni_interfaces"
    ]
    twice = tuning.eni_plan("n1", NICS, ["eth1", "eth1"], 1001, 1001, 1400, default_interface="eth0")
    assert twice["problems"] == ["n1: eni_interfaces lists eth1 more than once; list each secondary NIC once"]
    assert [(e["name"], e["table"]) for e in twice["enis"]] == [("eth1", 1001)]
    found = inventory_checks.eni_interface_problems("n1", {"eni_interfaces": ["eth1", "eth2", "eth1"]})
    assert [p.message for p in found] == [
        "n1: eni_interfaces=[\"eth1\", \"eth2\", \"eth1\"] lists eth1 more than once; allowed: each secondary NIC once "
        "(one routing table and one rule per NIC)"
    ]
    assert inventory_checks.eni_interface_problems("n1", {"eni_interfaces": ["eth1", "eth2"]}) == []


def test_eni_plan_tables_rules_and_problems() -> None:
    plan = tuning.eni_plan("n1", NICS, ["eth1", "eth2"], 1001, 1001, 1400, gateways={"eth1": "198.18.1.1"})
    assert plan["problems"] == []
    first, second = plan["enis"]
    assert first == {"name": "eth1", "mac": "aa:01", "address": "198.18.1.11", "prefixlen": 24,
                     "network": "198.18.1.0/24", "gateway": "198.18.1.1", "table": 1001, "priority": 1001,
                     "mtu": 1400}  # fmt: skip
    assert (second["table"], second["priority"], second["gateway"]) == (1002, 1002, "")
    # the network comes from the address and its prefix length, not from a /24 guess
    wide = [{"name": "eth1", "ipv4": [{"address": "10.0.0.5", "prefixlen": 20}]}]
    assert tuning.eni_plan("n1", wide, ["eth1"], 1, 1, 1400)["enis"][0]["network"] == "10.0.0.0/20"
    bad = tuning.eni_plan(
        "n1",
        [*NICS, {"name": "eth3", "ipv4": []}],
        ["eth3", "eth9", "eth1"],
        1001,
        1001,
        1400,
        gateways={"eth1": "10.0.0.1"},
    )
    assert bad["enis"] == []
    assert any("eth3 has no IPv4 address" in p and "eni_addresses" in p for p in bad["problems"])
    assert any("eth9, which the node does not have" in p for p in bad["problems"])
    assert any("eni_gateways.eth1 10.0.0.1 is outside" in p for p in bad["problems"])
    static = tuning.eni_plan(
        "n1", [{"name": "eth3", "ipv4": []}], ["eth3"], 5, 5, 1400, addresses={"eth3": "10.1.0.9/24"}
    )
    assert static["enis"][0]["address"] == "10.1.0.9"



def test_eni_plan_of_a_node_without_a_secondary_nic_is_a_problem_not_an_empty_plan() -> None:
    """A captured machine (tests/data/ip) whose only NIC matching the patterns carries the default route: no ENI.
    An empty plan would configure nothing and the role's check of it would pass over zero NICs."""
    from tests.unit.test_node_facts import nic_probe_of_a_real_capture

    probe = nic_probe_of_a_real_capture()
    names = tuning.eni_names(probe["nics"], str(probe["default_route_interface"]))
    assert names == []
    plan = tuning.eni_plan("n1", probe["nics"], names, 1001, 1001, 1500)
    assert plan["enis"] == []
    assert len(plan["problems"]) == 1, plan
    assert plan["problems"][0].startswith("n1: eni_enabled is true but no secondary NIC (ENI) was found")
    assert "eth0" in plan["problems"][0] and "eni_enabled: false" in plan["problems"][0]

def test_eni_state_problems() -> None:
    enis = tuning.eni_plan("n1", NICS, ["eth1"], 1001, 1001, 1500, gateways={"eth1": "198.18.1.1"})["enis"]
    rules = [{"priority": 0, "src": "all", "table": "local"}, {"priority": 1001, "src": "198.18.1.11", "table": "1001"}]
    tables = {
        "eth1": [{"dst": "198.18.1.0/24", "dev": "eth1"}, {"dst": "default", "gateway": "198.18.1.1", "dev": "eth1"}]
    }
    main = [{"dst": "default", "gateway": "198.18.0.1", "dev": "eth0"}]
    assert tuning.eni_state_problems(enis, rules, tables, main, NICS) == []
    problems = tuning.eni_state_problems(
        enis, rules[:1], {"eth1": []}, [*main, {"dst": "default", "dev": "eth1"}], [{"name": "eth1", "mtu": 9000}]
    )
    assert problems == [
        "rule missing: from 198.18.1.11 lookup 1001 priority 1001",
        "table 1001 has no route to 198.18.1.0/24 via eth1",
        "table 1001 has no default route via 198.18.1.1",
        "the main table has a default route via eth1",
        "eth1 has MTU 9000, not 1500",
    ]


def test_eni_drifted_names_the_nics_whose_live_state_differs_and_problems_list_missing_rules_first() -> None:
    """Two NICs: eth1 in place, eth2 without its rule and with another MTU. Only eth2 is applied again; the
    problems of both NICs keep the order verify.yml reports them in (every missing rule first)."""
    nics = [{"name": "eth1", "mtu": 1400, "ipv4": [{"address": "198.18.1.11", "prefixlen": 24}]},
            {"name": "eth2", "mtu": 1400, "ipv4": [{"address": "198.18.2.11", "prefixlen": 24}]}]  # fmt: skip
    enis = tuning.eni_plan("n1", nics, ["eth1", "eth2"], 1001, 1001, 1400)["enis"]
    rules = [{"priority": 1001, "src": "198.18.1.11", "table": "1001"},
             {"priority": 1002, "src": "198.18.2.11", "table": "1002"}]  # fmt: skip
    tables = {"eth1": [{"dst": "198.18.1.0/24", "dev": "eth1"}], "eth2": [{"dst": "198.18.2.0/24", "dev": "eth2"}]}
    assert tuning.eni_drifted(enis, rules, tables, [], nics) == []
    drifted_nics = [nics[0], {**nics[1], "mtu": 1300}]
    assert tuning.eni_drifted(enis, rules[:1], tables, [], drifted_nics) == ["eth2"]
    no_routes = {"eth1": [], "eth2": []}
    assert tuning.eni_drifted(enis, [], no_routes, [], drifted_nics) == ["eth1", "eth2"]
    assert tuning.eni_state_problems(enis, [], no_routes, [], drifted_nics) == [
        "rule missing: from 198.18.1.11 lookup 1001 priority 1001",
        "rule missing: from 198.18.2.11 lookup 1002 priority 1002",
        "table 1001 has no route to 198.18.1.0/24 via eth1",
        "table 1002 has no route to 198.18.2.0/24 via eth2",
        "eth2 has MTU 1300, not 1400",
    ]


# --- the eni role's templates, rendered as Ansible would (ansible_managed aside) ------------------


def render(name: str, **context: Any) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROJECT_ROOT / "roles" / "eni" / "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
    )
    role_vars = yaml.safe_load((PROJECT_ROOT / "roles" / "eni" / "vars" / "main.yml").read_text())
    return env.get_template(name).render(ansible_managed="managed", **role_vars, **context)


PLAN = tuning.eni_plan("n1", NICS, ["eth1", "eth2"], 1001, 1001, 1400, gateways={"eth1": "198.18.1.1"})


def test_networkd_unit() -> None:
    text = render("eni.network.j2", eni=PLAN["enis"][0])
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text.replace("[Route]", "[Route-X]", 1))  # two [Route] sections: networkd allows it
    assert parser["Match"]["Name"] == "eth1"
    assert parser["Link"]["MTUBytes"] == "1400"
    assert parser["Network"]["Address"] == "198.18.1.11/24"
    assert "Gateway" not in parser["Network"]  # no default route in the main table
    assert dict(parser["Route-X"]) == {"Destination": "198.18.1.0/24", "Scope": "link",
                                       "PreferredSource": "198.18.1.11", "Table": "1001"}  # fmt: skip
    assert dict(parser["Route"]) == {"Gateway": "198.18.1.1", "Table": "1001"}
    assert dict(parser["RoutingPolicyRule"]) == {"From": "198.18.1.11/32", "Table": "1001", "Priority": "1001"}
    assert "Gateway" not in render("eni.network.j2", eni=PLAN["enis"][1])


def test_netplan_document() -> None:
    doc = yaml.safe_load(render("netplan.yaml.j2", eni_plan=PLAN))
    eth1 = doc["network"]["ethernets"]["eth1"]
    assert eth1["addresses"] == ["198.18.1.11/24"] and eth1["mtu"] == 1400 and eth1["dhcp4"] is False
    assert eth1["routing-policy"] == [{"from": "198.18.1.11", "table": 1001, "priority": 1001}]
    assert {"to": "default", "via": "198.18.1.1", "table": 1001} in eth1["routes"]
    assert [r["to"] for r in doc["network"]["ethernets"]["eth2"]["routes"]] == ["198.18.2.0/24"]


def test_networkmanager_keyfile() -> None:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(render("eni.nmconnection.j2", eni=PLAN["enis"][0]))
    assert parser["connection"]["interface-name"] == "eth1"
    assert parser["connection"]["id"] == "rdmaforge-eni-eth1"  # the name the handler brings up
    assert parser["ethernet"]["mtu"] == "1400"
    ipv4 = parser["ipv4"]
    assert ipv4["never-default"] == "true" and ipv4["address1"] == "198.18.1.11/24"
    assert ipv4["route1_options"] == "table=1001,src=198.18.1.11"
    assert ipv4["route2"] == "0.0.0.0/0,198.18.1.1"
    assert ipv4["routing-rule1"] == "priority 1001 from 198.18.1.11/32 table 1001"


def test_eni_state_problems_reads_ip_output_text() -> None:
    """`ip -j route show table N` prints an error text, not JSON, for a table that does not exist."""
    enis = tuning.eni_plan("n1", NICS, ["eth1"], 1001, 1001, 1500)["enis"]
    missing = "[Error: ipv4: FIB table does not exist.\nDump terminated\n"
    assert "table 1001 has no route to 198.18.1.0/24 via eth1" in tuning.eni_state_problems(
        enis, [], {"eth1": missing}, [], NICS
    )
    good = '[{"dst":"198.18.1.0/24","dev":"eth1","scope":"link"}]'
    assert (
        tuning.eni_state_problems(
            enis, [{"priority": 1001, "src": "198.18.1.11", "table": "1001"}], {"eth1": good}, [], NICS
        )
        == []
    )


def test_a_restore_plan_takes_each_files_own_backup_only() -> None:
    """Backups are PATH.PID.YYYY-MM-DD@HH:MM:SS~ (Ansible's backup_local): /etc/default/grub.d/...'s backup also
    starts with '/etc/default/grub.', and was taken for /etc/default/grub's."""
    changed = ["/etc/default/grub", "/etc/default/grub.d/60-rdmaforge.cfg"]
    backups = ["/etc/default/grub.d/60-rdmaforge.cfg.4242.2026-12-05@02:00:00~",
               "/etc/default/grub.4242.2026-12-05@02:00:00~"]
    assert tuning.restore_plan(changed, backups[:1]) == [
        {"path": "/etc/default/grub", "backup": None},
        {"path": "/etc/default/grub.d/60-rdmaforge.cfg", "backup": backups[0]},
    ]
    assert [step["backup"] for step in tuning.restore_plan(changed, backups)] == [backups[1], backups[0]]


def test_an_eni_plan_by_pattern_on_a_node_without_a_default_route_plans_nothing() -> None:
    """With no default route known, eth0 (the management NIC) matched eth* and was planned as an ENI: a static
    address and no default route on the NIC the node is managed through."""
    names = tuning.eni_names(NICS, "")
    assert names[0] == "eth0"  # the patterns cannot tell it apart
    plan = tuning.eni_plan("n1", NICS, names, 1001, 1001, 1400, default_interface="", chosen_by_pattern=True)
    assert plan == {"enis": [], "problems": [
        "n1: the node has no default route, so its management NIC cannot be told from the secondary ones "
        "eni_interface_patterns matched (eth0, eth1, eth2, eth10); name the secondary NICs in eni_interfaces"]}
    # Named in eni_interfaces, they are planned.
    listed = tuning.eni_plan("n1", NICS, ["eth1", "eth2"], 1001, 1001, 1400, default_interface="")
    assert [e["name"] for e in listed["enis"]] == ["eth1", "eth2"] and listed["problems"] == []


def test_an_eni_plan_names_an_address_that_is_no_ipv4_instead_of_crashing() -> None:
    """The filter raised AddressValueError naming neither host nor variable (preflight's inventory check refuses
    these first; a play using the role without it got the traceback)."""
    plan = tuning.eni_plan("n1", NICS, ["eth1", "eth2"], 1001, 1001, 1400, addresses={"eth1": "10.0.1.5/33"},
                           gateways={"eth2": "fe80::1"})  # fmt: skip
    assert plan["enis"] == []
    assert [p.split(" (")[0] for p in plan["problems"]] == [
        "n1: eni_addresses.eth1='10.0.1.5/33' is not an IPv4 address/prefix",
        "n1: eni_gateways.eth2='fe80::1' is not an IPv4 address"]


def test_grub_cfg_sizes_are_read_as_the_kernel_reads_them() -> None:
    """Seed 004's 1GB is the role's 1G in grub.cfg too (kernel_cmdline keeps the seed's spelling): a check for the
    exact text regenerated grub.cfg on every run and stopped the converge (review round 20)."""
    seed = "\tlinux /vmlinuz-6.1 root=/dev/sda1 ro default_hugepagesz=1GB hugepagesz=1GB hugepages=50\n"
    assert tuning.grub_cfg_missing_args(seed, ARGS) == []
    assert tuning.grub_cfg_carried_args(seed, ["hugepagesz=1G", "hugepages=50"]) == ["hugepagesz=1G", "hugepages=50"]
    two_mib = seed.replace(" hugepagesz=1GB", " hugepagesz=2M")
    assert tuning.grub_cfg_missing_args(two_mib, ARGS) == ["hugepagesz=1G"]
