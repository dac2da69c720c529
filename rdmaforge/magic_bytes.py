"""File formats told by their first bytes: the compressions and Unicode byte-order marks that rdmaforge's readers
read or name (nccl-tests logs in nccl_tests/source.py, stored JSON documents in stored.py). One table for both."""

from __future__ import annotations

import codecs

GZIP = b"\x1f\x8b"
BZIP2 = b"BZh"
XZ = b"\xfd7zXZ\x00"
ZSTD = b"\x28\xb5\x2f\xfd"
ZIP = b"PK\x03\x04"

#: Byte-order marks and the codec each stands for; UTF-32's first (UTF-16-LE's mark is the start of UTF-32-LE's).
BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
