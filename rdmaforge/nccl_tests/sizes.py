"""The sizes nccl-tests' -b and -e take, as its parsesize reads them (nccl-tests 2.19.6 src/common.cu): a number
with an optional K, M or G (1024-based, either case), and nothing else. Seed 000 writes ``-b 1B``: parsesize reads
the 'B' as an unknown unit and the run stops with "invalid size specified for 'minbytes'" before any GPU work (the
real function, compiled from the shared source tarball, in tests/unit/test_nccl_tests_sizes.py). rdmaforge takes
the seed's spelling, and sizes written with a byte suffix (512MB, 1GiB), and passes nccl-tests what it reads.
"""

from __future__ import annotations

import re

#: A size as people write it: a number (parsesize reads a double: 1.5G), an optional K/M/G (any case), an optional B
#: or iB.
_SIZE = re.compile(r"\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGkmg]?)(?:[iI]?[Bb])?\s*\Z")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
ALLOWED = ("a number of bytes with an optional K, M or G (1024-based; a trailing B or iB is allowed), e.g. 8, 1B, "
           "512M, 1.5G")


def nccl_tests_size(value: object) -> str:
    """``value`` as nccl-tests' -b/-e read it: '1B' -> '1', '512MB' -> '512M', 8 -> '8'. ValueError naming what is
    allowed for anything else (a negative number, another unit, no number)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{value!r} is no size; allowed: {ALLOWED}")
    found = _SIZE.match(str(value))
    if found is None:
        raise ValueError(f"{value!r} is no size; allowed: {ALLOWED}")
    number = found["number"].lstrip("0") or "0"
    return f"{'0' + number if number.startswith('.') else number}{found['unit'].upper()}"


def size_bytes(value: object) -> int:
    """The bytes of a size nccl_tests_size accepts."""
    text = nccl_tests_size(value)
    unit = text[-1] if text[-1].isalpha() else ""
    return int(float(text.rstrip("KMG")) * _UNITS[unit])  # size_t, as nccl-tests casts it
