"""The sizes nccl-tests' -b and -e take, as its parsesize reads them (nccl-tests 2.19.6 src/common.cu): a number
(a double), then, optionally, one unit letter K, M or G (1024-based, either case) read as the first character after
it; what follows that letter is ignored (512MB reads as 512M), and any other first letter refuses the size. Seed
000 writes ``-b 1B``: parsesize takes the 'B' for an unknown unit and the run stops with "invalid size specified for
'minbytes'" before any GPU work (the real function, compiled from the shared source tarball, in
tests/unit/test_nccl_tests_sizes.py). rdmaforge takes the seed's spelling and passes nccl-tests what it reads.
A size under one byte is refused too: nccl-tests doubles the size from -b (common.cu), and from 0 it never ends.
"""

from __future__ import annotations

import re

#: A size as people write it: a number in ASCII digits (sscanf reads no other: a full-width ５１２ is no number to
#: it), an optional K/M/G (any case), an optional B or iB.
_SIZE = re.compile(r"\s*(?P<number>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[KMGkmg]?)(?:[iI]?[Bb])?\s*\Z")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
ALLOWED = ("a number of bytes, 1 or more, with an optional K, M or G (1024-based; a trailing B or iB is allowed), "
           "e.g. 8, 1B, 512M, 1.5G")


def nccl_tests_size(value: object) -> str:
    """``value`` as nccl-tests' -b/-e read it: '1B' -> '1', '512MB' -> '512M', 8 -> '8'. ValueError naming what is
    allowed for anything else (under one byte, a negative number, another unit, no number)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{value!r} is no size; allowed: {ALLOWED}")
    found = _SIZE.match(str(value))
    if found is None:
        raise ValueError(f"{value!r} is no size; allowed: {ALLOWED}")
    unit = found["unit"].upper()
    if float(found["number"]) * _UNITS[unit] < 1:
        raise ValueError(f"{value!r} is under one byte, and nccl-tests, doubling the size from it, would never end; "
                         f"allowed: {ALLOWED}")  # fmt: skip
    number = found["number"].lstrip("0") or "0"
    return f"{'0' + number if number.startswith('.') else number}{unit}"


def size_bytes(value: object) -> int:
    """The bytes of a size nccl_tests_size accepts."""
    text = nccl_tests_size(value)
    unit = text[-1] if text[-1].isalpha() else ""
    return int(float(text.rstrip("KMG")) * _UNITS[unit])  # size_t, as nccl-tests casts it
