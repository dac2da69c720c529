"""The sizes the benchmark passes to nccl-tests' -b and -e, against nccl-tests' own parsesize.

parsesize is compiled here from the real nccl-tests 2.19.6 source (../shared/sources, the tarball the lab mirror
serves; src/common.cu), with the system's C compiler: the function alone, called once per size. Seed 000's
``-b 1B`` is what it refuses ("invalid size specified for 'minbytes'", before any GPU work); every size
rdmaforge passes must be one it reads, to the bytes rdmaforge means.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from rdmaforge.nccl_tests.sizes import nccl_tests_size, size_bytes
from rdmaforge.role_defaults import defaults
from tests.unit.test_nccl_tests_command import composed

TARBALL = "nccl-tests-2.19.6.tar.gz"


@pytest.fixture(scope="module")
def parsesize(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A program that prints parsesize(argument) for each argument, built from nccl-tests' own function."""
    if shutil.which("cc") is None:
        message = "no C compiler on this machine to build nccl-tests' parsesize"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    with tarfile.open(shared_dir / "sources" / TARBALL) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/src/common.cu"))
        source = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
    function = re.search(r"^static double parsesize\(const char \*value\) \{.*?^\}$", source, re.M | re.S)
    assert function, "nccl-tests' common.cu has no parsesize"
    out = tmp_path_factory.mktemp("parsesize")
    (out / "parsesize.c").write_text("#include <stdio.h>\n" + function.group(0) + "\n"
                                     "int main(int c, char **v) { for (int i = 1; i < c; i++) "
                                     "printf(\"%.0f\\n\", parsesize(v[i])); return 0; }\n")  # fmt: skip
    subprocess.run(["cc", "-o", str(out / "parsesize"), str(out / "parsesize.c")], check=True, capture_output=True)
    return out / "parsesize"


def read(program: Path, *values: str) -> list[float]:
    return [float(line) for line in subprocess.run([str(program), *values], check=True, capture_output=True,
                                                    text=True).stdout.split()]  # fmt: skip


def test_the_seeds_1b_is_what_nccl_tests_refuses(parsesize: Path) -> None:
    assert read(parsesize, "1B", "512M") == [-1.0, 512 * 2**20]


@pytest.mark.parametrize(("size", "meant"), [("1B", 1), ("8", 8), ("512M", 512 * 2**20), ("512MB", 512 * 2**20),
                                            ("1GiB", 2**30), ("1g", 2**30), ("1.5G", 3 * 2**29), ("0.5K", 512),
                                            (" 16k ", 16 * 2**10)])  # fmt: skip
def test_every_size_rdmaforge_passes_is_read_by_nccl_tests_as_meant(parsesize: Path, size: str, meant: int) -> None:
    """The bytes each spelling means (1024-based units), read back by nccl-tests' own parsesize."""
    (bytes_read,) = read(parsesize, nccl_tests_size(size))
    assert bytes_read == meant == size_bytes(size)


def test_the_role_passes_nccl_tests_sizes_it_reads(parsesize: Path) -> None:
    """The role's real task, with its defaults (seed 000's 1B and 512M): -b and -e as nccl-tests reads them."""
    argv = composed(8, 2)
    given = [argv[argv.index("-b") + 1], argv[argv.index("-e") + 1]]
    assert given == ["1", "512M"], argv
    assert read(parsesize, *given) == [size_bytes(defaults("benchmark")["benchmark_min_bytes"]),
                                       size_bytes(defaults("benchmark")["benchmark_max_bytes"])]  # fmt: skip


@pytest.mark.parametrize("size", ["8X", "-1", "", "1 T", True, 1.5, "５１２M"])
def test_what_is_no_size_is_refused_naming_what_is_allowed(size: object) -> None:
    """Full-width digits (a Chinese input method's) are no number to sscanf (review round 24)."""
    with pytest.raises(ValueError, match=r"is no size; allowed: a number of bytes, 1 or more, with an optional K"):
        nccl_tests_size(size)


@pytest.mark.parametrize("size", ["0", "0.5", 0])
def test_a_size_under_one_byte_is_refused(size: object) -> None:
    """nccl-tests doubles the size from -b (src/common.cu): from 0 its loop never ends, and every collective hung
    until benchmark_timeout (review round 24)."""
    with pytest.raises(ValueError, match=r"is under one byte, and nccl-tests, doubling the size from it, would never "):
        nccl_tests_size(size)
