"""Reading an nccl-tests output incrementally: files, stdin, gzip, and the text encodings logs come in.

``open_text`` yields the input as blocks of whole lines (each block ends with a newline except maybe the
last), so a parser never holds more than one block: memory stays bounded whatever the input's size.
Encodings: UTF-8 with or without a BOM (undecodable bytes become U+FFFD), UTF-16/UTF-32 with a BOM.
Input that cannot be a log (NUL bytes without a BOM: binary, or UTF-16 without a BOM) raises InputError,
whose message names the file and what was expected.
"""

from __future__ import annotations

import codecs
import gzip
import io
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from rdmaforge.errors import UserError

#: Bytes read per block: large reads keep the per-call overhead negligible.
BLOCK = 4 << 20
#: A line longer than this is cut (the rest of it is skipped): no nccl-tests or NCCL line comes close.
MAX_LINE = 1 << 20
#: Share of NUL bytes in the first 64 KiB above which the input is binary (or UTF-16 without a BOM): a log
#: with a few stray NULs (a crash while writing) is still read; a sparse file, /dev/zero or an ELF is not.
_NUL_SHARE = 0.1
_NUL_MIN = 16
_SNIFF = 64 << 10
_GZIP_MAGIC = b"\x1f\x8b"
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


class InputError(UserError):
    """The input cannot be read as an nccl-tests output; the message names it and says what is accepted."""


ACCEPTED = "accepted: nccl-tests text output or its -J JSON, UTF-8 (BOM optional) or UTF-16/32 with a BOM, gzip allowed"


def open_text(raw: BinaryIO, name: str) -> Iterator[str]:
    """Blocks of text of ``raw`` (gzip-decompressed and decoded), each ending at a line break."""
    head = _read_some(raw, name)
    stream: BinaryIO = raw
    if head.startswith(_GZIP_MAGIC):
        stream = gzip.GzipFile(fileobj=_Prepend(head, raw), mode="rb")  # type: ignore[assignment]
        head = _read_some(stream, name)
    encoding, skip = _encoding(head, name)
    head = head[skip:]
    if encoding == "utf-8":
        yield from _utf8_blocks(head, stream, name)
    else:
        yield from _other_blocks(head, stream, name, encoding)


def _read_some(stream: BinaryIO, name: str, size: int = BLOCK) -> bytes:
    try:
        return stream.read(size)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputError(f"{name}: the gzip data is corrupt or cut short ({exc}); {ACCEPTED}") from exc


def _encoding(head: bytes, name: str) -> tuple[str, int]:
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding, len(bom)
    sniff = head[:_SNIFF]
    nuls = sniff.count(0)
    if nuls >= _NUL_MIN and nuls > _NUL_SHARE * len(sniff):
        if nuls * 3 > len(sniff) and sniff[1::2].count(0) * 2 > len(sniff) // 2 > sniff[::2].count(0) * 2:
            what = "looks like UTF-16 without a byte-order mark (save it as UTF-8)"
        else:
            what = f"holds binary data ({nuls} NUL bytes in the first {len(sniff)})"
        raise InputError(f"{name}: {what}, not an nccl-tests log; {ACCEPTED}")
    return "utf-8", 0


def _utf8_blocks(head: bytes, stream: BinaryIO, name: str) -> Iterator[str]:
    # A newline byte is never part of a multi-byte UTF-8 sequence: cutting after one never splits a character.
    pending = head
    while True:
        data = _read_some(stream, name)
        if not data:
            break
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            pending = _cap(pending + data)
            continue
        block = pending + data[:cut]
        pending = data[cut:]
        yield _cap_lines(block.decode("utf-8", errors="replace"))
    if pending:
        yield _cap_lines(pending.decode("utf-8", errors="replace"))


def _other_blocks(head: bytes, stream: BinaryIO, name: str, encoding: str) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    pending = decoder.decode(head)
    while True:
        data = _read_some(stream, name)
        if not data:
            break
        text = pending + decoder.decode(data)
        cut = text.rfind("\n") + 1
        block, pending = text[:cut], text[cut:]
        if len(pending) > MAX_LINE:
            pending = pending[:MAX_LINE]
        if block:
            yield _cap_lines(block)
    pending += decoder.decode(b"", final=True)
    if pending:
        yield _cap_lines(pending)


def _cap(pending: bytes) -> bytes:
    """A line without a newline for more than MAX_LINE bytes keeps only its first MAX_LINE bytes."""
    return pending[:MAX_LINE] if len(pending) > MAX_LINE else pending


def _cap_lines(block: str) -> str:
    if len(block) <= MAX_LINE or block.find("\n", 0, len(block)) == -1:
        return block[:MAX_LINE]
    return block


class _Prepend(io.RawIOBase):
    """A binary stream that yields ``head`` before the rest of ``stream`` (the sniffed bytes go back)."""

    def __init__(self, head: bytes, stream: BinaryIO) -> None:
        self._head = head
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            count = min(len(buffer), len(self._head))
            buffer[:count] = self._head[:count]
            self._head = self._head[count:]
            return count
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
