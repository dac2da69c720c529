"""rdmaforge.parsers.ld_cache against this machine's real ld.so cache, with ldd as the independent answer."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from rdmaforge.parsers import ld_cache


def real_cache() -> list[str]:
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    return subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=True).stdout.splitlines()


def test_the_cache_gives_libc_where_the_loader_found_it() -> None:
    """ldd runs the real loader: the libc it maps for /bin/true (no RUNPATH) is the cache's answer."""
    ldd = subprocess.run(["ldd", "/bin/true"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"^\s*libc\.so\.6 => (\S+)", ldd, re.M)
    assert match, ldd
    assert ld_cache.resolve(real_cache(), "libc.so.6") == match.group(1)


def test_header_and_footer_are_not_entries() -> None:
    lines = real_cache()
    found = ld_cache.entries(lines)
    header = re.match(r"(\d+) libs found in cache", lines[0])
    assert header, lines[0]
    assert len(found) == int(header.group(1))
    assert all(entry.path.startswith("/") for entry in found)


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        # glibc prints the 32-bit entry without an ABI word; a 64-bit program gets the x86-64 one even when later.
        (["\tlibfoo.so.1 (libc6) => /usr/lib32/libfoo.so.1",
          "\tlibfoo.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libfoo.so.1"],
         "/usr/lib/x86_64-linux-gnu/libfoo.so.1"),
        # Two 64-bit entries: the first in the cache wins.
        (["\tlibfoo.so.1 (libc6,AArch64, OS ABI: Linux 3.7.0) => /opt/a/libfoo.so.1",
          "\tlibfoo.so.1 (libc6,AArch64) => /usr/lib/aarch64-linux-gnu/libfoo.so.1"], "/opt/a/libfoo.so.1"),
        (["\tlibfoo.so (libc6,x86-64) => /usr/lib/libfoo.so"], None),  # another name
        ([], None),
    ],
)  # fmt: skip
def test_resolve_picks_the_first_64_bit_entry(lines: list[str], expected: str | None) -> None:
    assert ld_cache.resolve(lines, "libfoo.so.1") == expected
