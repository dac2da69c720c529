"""Huge page state from ``/proc/meminfo``, ``/sys/kernel/mm/hugepages`` and ``/proc/mounts``.

The one implementation behind the ``hugepages_facts`` Ansible module (shipped to targets as
``module_utils/rdmaforge_hugepages.py``, a symlink to this file): standard-library only, Python 3.8.

``/proc/meminfo`` predates multiple page sizes: its ``HugePages_*`` lines describe the *default* size
(``Hugepagesize``) only, and ``Hugetlb`` (kernel 4.16+) is the memory of all sizes together. The
per-size truth is ``/sys/kernel/mm/hugepages/hugepages-<N>kB/{nr,free,resv,surplus}_hugepages``. When
that directory cannot be read (no hugetlb support, a restricted /sys) the default size from meminfo
is all there is, and the facts say so by holding only that size.

The verdict (``evaluate``) is written for a person and never claims more than the numbers show: a
kernel that was asked for 1 GiB pages but reserved none says exactly that.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:  # annotations only; never evaluated at runtime (Python 3.8 targets)
    from collections.abc import Mapping

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMGTP]?)(I?B)?\s*$", re.IGNORECASE)
_SYSFS_DIR_RE = re.compile(r"^hugepages-(\d+)kB$")
_UNITS_KB = {"": None, "K": 1, "M": 1024, "G": 1024**2, "T": 1024**3, "P": 1024**4}
# sysfs file -> key in a pool record
_POOL_FILES = (
    ("nr_hugepages", "nr"),
    ("free_hugepages", "free"),
    ("resv_hugepages", "rsvd"),
    ("surplus_hugepages", "surp"),
)


class Pool(TypedDict):
    nr: int | None
    free: int | None
    rsvd: int | None
    surp: int | None


class Mount(TypedDict):
    path: str
    pagesize_kb: int | None


class HugepageFacts(TypedDict):
    default_size_kb: int | None
    total: int | None
    free: int | None
    rsvd: int | None
    surp: int | None
    hugetlb_kb: int | None
    mem_total_kb: int | None
    by_size: dict[str, Pool]
    mounts: list[Mount]
    cmdline_pages: dict[str, int]


# --- sizes -----------------------------------------------------------------------------------------


def size_kb(text: str | int | None, bare_unit: str | None = None) -> int | None:
    """Size in kB of ``"1G"``, ``"1GB"``, ``"1GiB"``, ``"2M"``, ``"2048kB"``, ``"1048576 kB"``.

    A number without a unit is read in ``bare_unit`` (``"B"`` for the kernel's own ``pagesize=`` and
    ``hugepagesz=``, which take bytes) or rejected (``None``) when ``bare_unit`` is not given. Sizes
    that are not whole kB are ``None``.
    """
    if text is None:
        return None
    match = _SIZE_RE.match(str(text))
    if match is None:
        return None
    number, unit = int(match.group(1)), match.group(2).upper()
    if unit == "":
        if match.group(3) or bare_unit is None:
            return None  # "512B", or a bare number where a unit is required
        if bare_unit.upper() == "B":
            return number // 1024 if number % 1024 == 0 else None
        unit = bare_unit.upper()
    factor = _UNITS_KB.get(unit)
    return number * factor if factor else None


def describe_size(kb: int) -> str:
    """``1048576`` -> ``"1 GiB"``, ``2048`` -> ``"2 MiB"``, ``64`` -> ``"64 KiB"``."""
    for unit, factor in (("TiB", 1024**3), ("GiB", 1024**2), ("MiB", 1024)):
        if kb >= factor and kb % factor == 0:
            return f"{kb // factor} {unit}"
    return f"{kb} KiB"


# --- /proc/meminfo ---------------------------------------------------------------------------------


def parse_meminfo(text: str | None) -> dict[str, int]:
    """``{"HugePages_Total": 50, "Hugepagesize": 1048576, ...}``: kB values in kB, counts as counts.

    Lines that are not ``Name: number [kB]`` are skipped, so ``grep Huge`` excerpts and pasted
    fragments parse too. A repeated name keeps its first value.
    """
    values: dict[str, int] = {}
    for line in (text or "").splitlines():
        match = re.match(r"^\s*([A-Za-z0-9_()]+):\s+(\d+)(?:\s*kB)?\s*$", line)
        if match is not None:
            values.setdefault(match.group(1), int(match.group(2)))
    return values


# --- /sys/kernel/mm/hugepages ----------------------------------------------------------------------


def sysfs_size_kb(dirname: str) -> int | None:
    """``"hugepages-1048576kB"`` -> ``1048576``; anything else -> ``None``."""
    match = _SYSFS_DIR_RE.match(dirname)
    return int(match.group(1)) if match else None


def _read_int(path: str) -> int | None:
    try:
        with open(path) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def read_sysfs_pools(path: str) -> dict[str, Pool] | None:
    """``{"1048576": {nr, free, rsvd, surp}, ...}`` from ``path`` (/sys/kernel/mm/hugepages); ``None``
    when the directory cannot be listed. Keys are strings (they become JSON object keys anyway)."""
    try:
        names = os.listdir(path)
    except OSError:
        return None
    pools: dict[str, Pool] = {}
    for name in sorted(names, key=lambda n: sysfs_size_kb(n) or 0):
        size = sysfs_size_kb(name)
        if size is None:
            continue
        values = {key: _read_int(os.path.join(path, name, filename)) for filename, key in _POOL_FILES}
        pools[str(size)] = {"nr": values["nr"], "free": values["free"], "rsvd": values["rsvd"], "surp": values["surp"]}
    return pools


# --- /proc/mounts ----------------------------------------------------------------------------------


def _unescape_mount_path(path: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash in paths as octal escapes (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def parse_mounts(text: str | None, default_size_kb: int | None = None) -> list[Mount]:
    """hugetlbfs mounts in ``/proc/mounts`` text, each with its page size in kB.

    The kernel prints ``pagesize=2M``/``1G`` (or a byte count when mounted so). Kernels before 4.15
    print no ``pagesize`` for a default-size mount: such a mount gets ``default_size_kb``.
    """
    mounts: list[Mount] = []
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[2] != "hugetlbfs":
            continue
        pagesize: int | None = default_size_kb
        for option in fields[3].split(","):
            if option.startswith("pagesize="):
                pagesize = size_kb(option[len("pagesize=") :], bare_unit="B")
        mounts.append({"path": _unescape_mount_path(fields[1]), "pagesize_kb": pagesize})
    return mounts


# --- /proc/cmdline ---------------------------------------------------------------------------------


def cmdline_pages(cmdline: str | None, default_size_kb: int | None = None) -> dict[str, int]:
    """Pages the kernel command line asks for, by size: ``{"1048576": 50}``.

    ``hugepages=N`` counts for the ``hugepagesz=`` before it, or for the default size
    (``default_hugepagesz=``, else ``default_size_kb``) when none precedes it. The per-node form
    ``hugepages=0:2,1:2`` is summed. Unparsable values are skipped.
    """
    tokens = (cmdline or "").split()
    if "--" in tokens:
        tokens = tokens[: tokens.index("--")]
    default = default_size_kb
    for token in tokens:
        name, _, value = token.partition("=")
        if name.replace("-", "_") == "default_hugepagesz":
            default = size_kb(value, bare_unit="B") or default
    pages: dict[str, int] = {}
    current: int | None = None
    for token in tokens:
        name, _, value = token.partition("=")
        name = name.replace("-", "_")
        if name == "hugepagesz":
            current = size_kb(value, bare_unit="B")
        elif name == "hugepages":
            count = _page_count(value)
            size = current if current is not None else default
            if count is not None and size is not None:
                pages[str(size)] = count
    return pages


def _page_count(value: str) -> int | None:
    if value.isdigit():
        return int(value)
    total = 0
    for part in value.split(","):
        node, _, count = part.partition(":")
        if not (node.isdigit() and count.isdigit()):
            return None
        total += int(count)
    return total


# --- facts and verdict -----------------------------------------------------------------------------


def build_facts(
    meminfo_text: str | None,
    pools: Mapping[str, Pool] | None,
    mounts_text: str | None,
    cmdline: str | None = None,
) -> HugepageFacts:
    """The ``hugepages`` fact. Without sysfs ``pools``, ``by_size`` holds the default size from meminfo."""
    meminfo = parse_meminfo(meminfo_text)
    default_size = meminfo.get("Hugepagesize")
    by_size: dict[str, Pool] = dict(pools) if pools else {}
    if not by_size and default_size is not None and "HugePages_Total" in meminfo:
        by_size[str(default_size)] = {
            "nr": meminfo.get("HugePages_Total"),
            "free": meminfo.get("HugePages_Free"),
            "rsvd": meminfo.get("HugePages_Rsvd"),
            "surp": meminfo.get("HugePages_Surp"),
        }
    return {
        "default_size_kb": default_size,
        "total": meminfo.get("HugePages_Total"),
        "free": meminfo.get("HugePages_Free"),
        "rsvd": meminfo.get("HugePages_Rsvd"),
        "surp": meminfo.get("HugePages_Surp"),
        "hugetlb_kb": meminfo.get("Hugetlb"),
        "mem_total_kb": meminfo.get("MemTotal"),
        "by_size": by_size,
        "mounts": parse_mounts(mounts_text, default_size),
        "cmdline_pages": cmdline_pages(cmdline, default_size),
    }


def _pages_of(facts: HugepageFacts, size: int) -> int | None:
    pool = facts["by_size"].get(str(size))
    if pool is not None:
        return pool["nr"]
    if size == facts["default_size_kb"]:
        return facts["total"]
    return None


def evaluate(facts: HugepageFacts, expected_pages: int | None, expected_size_kb: int | None) -> tuple[bool, str]:
    """``(satisfied, reason)``: whether exactly ``expected_pages`` pages of ``expected_size_kb`` (default:
    the default size) are reserved, and why not in plain words. Only a size given: at least one page."""
    size = expected_size_kb if expected_size_kb is not None else facts["default_size_kb"]
    if size is None:
        return False, "/proc/meminfo has no Hugepagesize line: this kernel has no hugetlbfs support (CONFIG_HUGETLBFS)"
    offered = sorted(int(s) for s in facts["by_size"])
    total = _pages_of(facts, size)
    label = f"HugePages_Total for {size} kB pages"
    if total is None and str(size) in facts["by_size"]:
        return False, (f"the kernel has a pool of {size} kB ({describe_size(size)}) huge pages, but its page count "
                       f"(hugepages-{size}kB/nr_hugepages) could not be read: not judged as reserved")  # fmt: skip
    if total is None:
        sizes = ", ".join(f"{s} kB" for s in offered) or "none"
        hint = " (1 GiB pages need CPU support: the pdpe1gb flag on x86)" if size == 1024**2 else ""
        return False, f"the kernel offers no {size} kB ({describe_size(size)}) huge pages{hint}; sizes offered: {sizes}"
    if expected_pages is None and expected_size_kb is None:
        return True, f"{label} is {total} (nothing expected)"
    wanted = 1 if expected_pages is None else expected_pages
    if (expected_pages is None and total >= 1) or total == wanted:
        return True, f"{label} is {total}, as expected"
    header = f"{label} is {total}, expected {wanted if expected_pages is not None else 'at least 1'}"
    requested = facts["cmdline_pages"].get(str(size))
    if total > wanted:
        return False, (
            f"{header}: more pages are reserved than expected (vm.nr_hugepages, a hugepages= kernel argument "
            "with a larger count, or pages added at runtime through sysfs)"
        )
    if requested is not None and requested < wanted and total >= requested:
        # The kernel reserved what its boot asked for: the count planned since is for the next boot.
        return False, (f"{header}: the running kernel's command line asks for {requested} (hugepages={requested}), "
                       f"and {total} are reserved; reboot pending after the GRUB change?")  # fmt: skip
    if total == 0:
        cause = (
            "the kernel could not reserve them (not enough contiguous memory, or a container sharing the host's kernel)"
        )
        if requested is None:
            cause = (
                "the running kernel's command line does not ask for this size (reboot pending after the GRUB "
                "change?), or " + cause
            )
        return False, f"{header}: {cause}"
    memory = facts["mem_total_kb"]
    memory_note = f", MemTotal is {memory / 1024**2:.1f} GiB" if memory else ""
    return False, (
        f"{header}: the kernel reserved only {total} of them ({describe_size(total * size)} of "
        f"{describe_size(wanted * size)}): memory too fragmented or too small{memory_note}"
    )


__all__ = [
    "HugepageFacts",
    "Mount",
    "Pool",
    "build_facts",
    "cmdline_pages",
    "describe_size",
    "evaluate",
    "parse_meminfo",
    "parse_mounts",
    "read_sysfs_pools",
    "size_kb",
    "sysfs_size_kb",
]
