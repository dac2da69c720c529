"""hugepages_facts: the parser (rdmaforge/parsers/hugepages.py) on real samples, and the module, run for real.

Samples (tests/data/meminfo, sources in SOURCES.md there) are real /proc/meminfo files: this
machine's, a 2011 SGI UV host with 32 x 1 GiB pages, a 2020 NUMA server with 2 MiB pages in use, a
CoreOS host with none. This machine's live /proc/meminfo and /sys/kernel/mm/hugepages are read at
test time too. Per-size pools other than this machine's come from fake sysfs trees built in tmp_path,
because meminfo alone only describes the default size.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rdmaforge.parsers.hugepages import (
    build_facts,
    cmdline_pages,
    describe_size,
    evaluate,
    parse_meminfo,
    parse_mounts,
    read_sysfs_pools,
    size_kb,
    sysfs_size_kb,
)
from rdmaforge.paths import PROJECT_ROOT
from tests.unit.adhoc import PY38, run_module

DATA = PROJECT_ROOT / "tests" / "data"
MEMINFO = DATA / "meminfo"
THIS_MACHINE = sorted(MEMINFO.glob("this_machine_*.txt"))[-1]
SGI_1G = MEMINFO / "lkml_2011_sgi_uv1_1g_32pages.txt"
NUMA_2M = MEMINFO / "lkml_2020_x86_numa_2m_50pages_surplus.txt"
COREOS = MEMINFO / "coreos_sosreport_2m_none.txt"
MOUNTS = DATA / "mounts" / "this_machine_hugetlbfs.txt"
LIVE_SYSFS = Path("/sys/kernel/mm/hugepages")
GIB = 1048576
ZERO_1G_REASON = (
    "HugePages_Total for 1048576 kB pages is 0, expected 50: the kernel could not reserve them "
    "(not enough contiguous memory, or a container sharing the host's kernel)"
)


def fake_sysfs(root: Path, pools: dict[int, tuple[int, int, int, int]]) -> Path:
    """/sys/kernel/mm/hugepages as the kernel lays it out: one directory per size, one file per counter."""
    for size, (nr, free, resv, surplus) in pools.items():
        directory = root / f"hugepages-{size}kB"
        directory.mkdir(parents=True)
        for name, value in (
            ("nr_hugepages", nr),
            ("free_hugepages", free),
            ("resv_hugepages", resv),
            ("surplus_hugepages", surplus),
            ("nr_overcommit_hugepages", 0),
        ):
            (directory / name).write_text(f"{value}\n")
    return root


# --- meminfo ---------------------------------------------------------------------------------------


def pool_lines(total: int, free: int, rsvd: int, surp: int, size: int, **more: int) -> dict[str, int]:
    return {
        "HugePages_Total": total,
        "HugePages_Free": free,
        "HugePages_Rsvd": rsvd,
        "HugePages_Surp": surp,
        "Hugepagesize": size,
        **more,
    }


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        (SGI_1G, pool_lines(32, 32, 0, 0, GIB)),
        (NUMA_2M, pool_lines(50, 2, 0, 25, 2048, Hugetlb=102400)),
        (COREOS, pool_lines(0, 0, 0, 0, 2048, Hugetlb=0)),
    ],
)
def test_real_meminfo_samples(sample, expected):
    values = parse_meminfo(sample.read_text())
    assert {k: values[k] for k in expected} == expected
    assert values["MemTotal"] > 0
    assert "Active(anon)" in values  # names with parentheses parse too


def test_old_kernel_has_no_hugetlb_line():
    facts = build_facts(SGI_1G.read_text(), None, None)
    assert facts["hugetlb_kb"] is None
    assert facts["default_size_kb"] == GIB
    assert facts["mem_total_kb"] == 32395508


def test_this_machine_sample_and_live_meminfo():
    committed = parse_meminfo(THIS_MACHINE.read_text())
    live = parse_meminfo(Path("/proc/meminfo").read_text())
    for values in (committed, live):
        assert {"HugePages_Total", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp", "Hugepagesize"} <= set(values)
    # The default size does not change while the machine runs; the live pool equals sysfs's for that size.
    assert live["Hugepagesize"] == committed["Hugepagesize"]
    pools = read_sysfs_pools(str(LIVE_SYSFS))
    if pools is not None:
        assert pools[str(live["Hugepagesize"])]["nr"] == live["HugePages_Total"]


def test_grep_excerpts_and_noise_parse():
    text = "AnonHugePages:         0 kB\nHugePages_Total:       8\nnot a line\nHugepagesize:    1048576 kB\n"
    assert parse_meminfo(text) == {"AnonHugePages": 0, "HugePages_Total": 8, "Hugepagesize": GIB}
    assert parse_meminfo("") == parse_meminfo(None) == {}


# --- sizes, sysfs, mounts, cmdline -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bare", "expected"),
    [
        ("1G", None, GIB),
        ("1GB", None, GIB),
        ("1gib", None, GIB),
        ("1024M", None, GIB),
        ("2M", None, 2048),
        ("2048kB", None, 2048),
        ("1048576 kB", None, GIB),
        ("64K", None, 64),
        ("1048576", None, None),  # a unit is required here
        ("1073741824", "B", GIB),  # the kernel's own bare numbers are bytes
        ("1000", "B", None),  # not whole kB
        ("lots", None, None),
        (None, None, None),
    ],
)
def test_size_kb(text, bare, expected):
    assert size_kb(text, bare_unit=bare) == expected


def test_describe_size():
    assert [describe_size(s) for s in (GIB, 2048, 64, 524288)] == ["1 GiB", "2 MiB", "64 KiB", "512 MiB"]


def test_sysfs_directory_names():
    assert sysfs_size_kb("hugepages-1048576kB") == GIB
    assert sysfs_size_kb("hugepages-2048kB") == 2048
    assert sysfs_size_kb("hugepages") is None


def test_read_sysfs_pools(tmp_path):
    root = fake_sysfs(tmp_path / "hugepages", {2048: (512, 500, 3, 0), GIB: (50, 48, 0, 0)})
    (root / "README").write_text("not a pool")
    assert read_sysfs_pools(str(root)) == {
        "2048": {"nr": 512, "free": 500, "rsvd": 3, "surp": 0},
        "1048576": {"nr": 50, "free": 48, "rsvd": 0, "surp": 0},
    }
    assert read_sysfs_pools(str(tmp_path / "missing")) is None


@pytest.mark.skipif(not LIVE_SYSFS.is_dir(), reason="no /sys/kernel/mm/hugepages here")
def test_read_live_sysfs():
    pools = read_sysfs_pools(str(LIVE_SYSFS))
    assert pools
    for size, pool in pools.items():
        assert pool["nr"] == int((LIVE_SYSFS / f"hugepages-{size}kB" / "nr_hugepages").read_text())


def test_real_mount_lines():
    # pagesize=1024M is what the kernel prints for a 1 GiB mount; \040 is a space in the mount point.
    assert parse_mounts(MOUNTS.read_text()) == [
        {"path": "/tmp/rf-huge1g", "pagesize_kb": GIB},
        {"path": "/tmp/rf-huge2m", "pagesize_kb": 2048},
        {"path": "/tmp/rf huge default", "pagesize_kb": 2048},
    ]


def test_mount_without_pagesize_option_gets_the_default_size():
    # kernels before 4.15 print no pagesize= for hugetlbfs
    line = "hugetlbfs /dev/hugepages hugetlbfs rw,relatime 0 0\n"
    assert parse_mounts(line, default_size_kb=GIB) == [{"path": "/dev/hugepages", "pagesize_kb": GIB}]


@pytest.mark.parametrize(
    ("cmdline", "expected"),
    [
        # seed 004's arguments, with its "1GB" spelling
        ("ro quiet default_hugepagesz=1GB hugepagesz=1GB hugepages=50", {"1048576": 50}),
        # numactl issue #152: two sizes on one line
        ("default_hugepagesz=1G hugepagesz=1G hugepages=2 hugepagesz=2M hugepages=1024", {"1048576": 2, "2048": 1024}),
        ("ro hugepages=64", {"2048": 64}),  # no hugepagesz before it: the default size
        ("hugepages=8 default_hugepagesz=1G", {"1048576": 8}),  # default_hugepagesz counts wherever it is
        ("hugepagesz=1G hugepages=0:2,1:2", {"1048576": 4}),  # per-node form (kernel 5.16+)
        ("ro quiet -- hugepages=7", {}),  # init's arguments
        ("", {}),
    ],
)
def test_cmdline_pages(cmdline, expected):
    assert cmdline_pages(cmdline, default_size_kb=2048) == expected


# --- verdict ----------------------------------------------------------------------------------------


def test_1g_sample_satisfies_its_own_count(tmp_path):
    facts = build_facts(SGI_1G.read_text(), None, None, "default_hugepagesz=1G hugepagesz=1G hugepages=32")
    assert facts["by_size"] == {"1048576": {"nr": 32, "free": 32, "rsvd": 0, "surp": 0}}  # from meminfo
    assert evaluate(facts, 32, GIB) == (True, "HugePages_Total for 1048576 kB pages is 32, as expected")
    assert evaluate(facts, None, GIB) == (True, "HugePages_Total for 1048576 kB pages is 32, as expected")
    satisfied, reason = evaluate(facts, 50, GIB)
    assert not satisfied
    # the boot asked for 32 and got them: 50 is a count for the next boot, not memory the kernel could not find
    assert reason == (
        "HugePages_Total for 1048576 kB pages is 32, expected 50: the running kernel's command line asks for 32 "
        "(hugepages=32), and 32 are reserved; reboot pending after the GRUB change?"
    )
    asked = build_facts(SGI_1G.read_text(), None, None, "default_hugepagesz=1G hugepagesz=1G hugepages=50")
    assert evaluate(asked, 50, GIB) == (False, (
        "HugePages_Total for 1048576 kB pages is 32, expected 50: the kernel reserved only 32 of them "
        "(32 GiB of 50 GiB): memory too fragmented or too small, MemTotal is 30.9 GiB"
    ))  # fmt: skip


def test_a_pool_whose_count_cannot_be_read_is_not_taken_for_a_size_not_offered(tmp_path):
    """A 1 GiB pool whose nr_hugepages is empty (a restricted /sys): the verdict said "the kernel offers no 1 GiB
    pages ... sizes offered: 2048 kB, 1048576 kB", contradicting itself."""
    sysfs = fake_sysfs(tmp_path / "hp", {2048: (0, 0, 0, 0), GIB: (0, 0, 0, 0)})
    (sysfs / "hugepages-1048576kB" / "nr_hugepages").write_text("")
    facts = build_facts(COREOS.read_text(), read_sysfs_pools(str(sysfs)), None)
    satisfied, reason = evaluate(facts, 50, GIB)
    assert not satisfied and "offers no" not in reason
    assert reason == ("the kernel has a pool of 1048576 kB (1 GiB) huge pages, but its page count "
                      "(hugepages-1048576kB/nr_hugepages) could not be read: not judged as reserved")  # fmt: skip


def test_zero_pages_reserved_is_reported_honestly(tmp_path):
    # What the lab sees: 1 GiB pages asked for on the command line, none reserved (shared kernel).
    sysfs = fake_sysfs(tmp_path / "hp", {2048: (0, 0, 0, 0), GIB: (0, 0, 0, 0)})
    cmdline = "ro default_hugepagesz=1G hugepagesz=1G hugepages=50"
    facts = build_facts(THIS_MACHINE.read_text(), read_sysfs_pools(str(sysfs)), None, cmdline)
    assert evaluate(facts, 50, GIB) == (False, ZERO_1G_REASON)
    # Not even asked for: most likely the reboot has not happened yet.
    facts = build_facts(THIS_MACHINE.read_text(), read_sysfs_pools(str(sysfs)), None, "ro quiet")
    satisfied, reason = evaluate(facts, 50, GIB)
    assert not satisfied
    assert "the running kernel's command line does not ask for this size (reboot pending" in reason


def test_more_pages_than_expected_and_surplus_sample():
    facts = build_facts(NUMA_2M.read_text(), None, None)
    assert (facts["total"], facts["free"], facts["surp"], facts["hugetlb_kb"]) == (50, 2, 25, 102400)
    assert evaluate(facts, 50, 2048)[0] is True
    satisfied, reason = evaluate(facts, 40, 2048)
    assert not satisfied
    assert reason.startswith("HugePages_Total for 2048 kB pages is 50, expected 40: more pages are reserved")


def test_size_the_kernel_does_not_offer(tmp_path):
    facts = build_facts(
        COREOS.read_text(), read_sysfs_pools(str(fake_sysfs(tmp_path / "hp", {2048: (0, 0, 0, 0)}))), None
    )
    satisfied, reason = evaluate(facts, 50, GIB)
    assert not satisfied
    assert reason == (
        "the kernel offers no 1048576 kB (1 GiB) huge pages (1 GiB pages need CPU support: the pdpe1gb flag on x86); "
        "sizes offered: 2048 kB"
    )


def test_nothing_expected_is_satisfied():
    facts = build_facts(COREOS.read_text(), None, None)
    assert evaluate(facts, None, None) == (True, "HugePages_Total for 2048 kB pages is 0 (nothing expected)")
    assert evaluate(facts, 0, None) == (True, "HugePages_Total for 2048 kB pages is 0, as expected")


def test_no_hugetlb_support():
    facts = build_facts("MemTotal: 1024 kB\n", None, None)
    assert facts["by_size"] == {}
    assert evaluate(facts, 1, None) == (
        False,
        "/proc/meminfo has no Hugepagesize line: this kernel has no hugetlbfs support (CONFIG_HUGETLBFS)",
    )


# --- the module, for real ----------------------------------------------------------------------------


def test_module_on_this_machine():
    run = run_module("hugepages_facts", {})
    assert run.rc == 0, run.result
    facts = run.result["ansible_facts"]["hugepages"]
    assert run.result["hugepages"] == facts
    live = parse_meminfo(Path("/proc/meminfo").read_text())
    assert (facts["default_size_kb"], facts["total"]) == (live["Hugepagesize"], live["HugePages_Total"])
    if LIVE_SYSFS.is_dir():
        assert sorted(facts["by_size"], key=int) == sorted((p.name[10:-2] for p in LIVE_SYSFS.iterdir()), key=int)
    assert run.result["satisfied"] is True
    assert run.result["changed"] is False


def test_module_expecting_50_gib_pages_here_is_honest():
    pools = read_sysfs_pools(str(LIVE_SYSFS)) or {}
    have = pools.get(str(GIB), {}).get("nr")
    run = run_module("hugepages_facts", {"expected_pages": 50, "expected_size": "1G"})
    assert run.rc == 0, run.result
    assert run.result["satisfied"] is (have == 50)
    if have == 0:
        assert run.result["reason"].startswith("HugePages_Total for 1048576 kB pages is 0, expected 50: ")
    elif have is None:
        assert run.result["reason"].startswith("the kernel offers no 1048576 kB (1 GiB) huge pages")


def test_module_require_fails_with_the_reason(tmp_path):
    sysfs = fake_sysfs(tmp_path / "hp", {2048: (0, 0, 0, 0), GIB: (0, 0, 0, 0)})
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("BOOT_IMAGE=/vmlinuz ro default_hugepagesz=1G hugepagesz=1G hugepages=50\n")
    args = {
        "meminfo_path": str(THIS_MACHINE),
        "sysfs_path": str(sysfs),
        "mounts_path": str(MOUNTS),
        "cmdline_path": str(cmdline),
        "expected_pages": 50,
        "expected_size": "1G",
        "require": True,
    }
    run = run_module("hugepages_facts", args)
    assert run.rc != 0
    assert run.result["msg"] == ZERO_1G_REASON
    assert run.result["satisfied"] is False  # the facts come back with the failure
    assert run.result["hugepages"]["cmdline_pages"] == {"1048576": 50}


def test_module_on_the_1g_sample_with_a_matching_sysfs(tmp_path):
    sysfs = fake_sysfs(tmp_path / "hp", {2048: (0, 0, 0, 0), GIB: (32, 32, 0, 0)})
    args = {
        "meminfo_path": str(SGI_1G),
        "sysfs_path": str(sysfs),
        "mounts_path": str(MOUNTS),
        "cmdline_path": str(tmp_path / "no-cmdline"),
        "expected_pages": 32,
        "expected_size": "1GB",
        "require": True,
    }
    run = run_module("hugepages_facts", args, "--check")
    assert run.rc == 0, run.result
    facts = run.result["hugepages"]
    assert facts["by_size"]["1048576"] == {"nr": 32, "free": 32, "rsvd": 0, "surp": 0}
    assert facts["mounts"][0] == {"path": "/tmp/rf-huge1g", "pagesize_kb": GIB}
    assert facts["cmdline_pages"] == {}
    assert run.result["reason"] == "HugePages_Total for 1048576 kB pages is 32, as expected"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"expected_size": "1048576"}, "expected_size=1048576 is not a size with a unit: write 1G, 2M or 1048576kB"),
        ({"expected_pages": -1}, "expected_pages=-1 must be 0 or more"),
        ({"meminfo_path": "/nonexistent/meminfo"}, "meminfo_path=/nonexistent/meminfo cannot be read"),
    ],
)
def test_module_refuses_bad_options(args, message):
    run = run_module("hugepages_facts", args)
    assert run.rc != 0
    assert run.result["msg"] == message


@pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} not installed (set RDMAFORGE_PY38)")
def test_module_runs_with_python38_on_the_target(tmp_path):
    # No sysfs tree: the sample's default-size pool from meminfo is all there is.
    args = {"meminfo_path": str(NUMA_2M), "sysfs_path": str(tmp_path / "none"), "expected_pages": 50}
    run = run_module("hugepages_facts", args, python=PY38)
    assert run.rc == 0, run.result
    assert run.result["satisfied"] is True
    assert os.path.basename(str(PY38)).startswith("python3.8")
