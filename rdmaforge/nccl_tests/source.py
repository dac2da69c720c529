"""Reading an nccl-tests output incrementally: files, stdin, gzip, and the text encodings logs come in.

``open_text`` yields the input as blocks of whole lines (each block ends with a newline except maybe the
last, or a piece of a line longer than LONG_LINE), so a parser never holds more than one block: memory stays
bounded whatever the input's size.
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
#: Characters of one line held before it is passed on in pieces (bounds memory on a file without newlines).
LONG_LINE = 8 << 20
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
    yield from _blocks(head, stream, name, encoding)


def _read_some(stream: BinaryIO, name: str) -> bytes:
    try:
        return stream.read(BLOCK)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputError(f"{name}: the gzip data is corrupt or cut short ({exc}); {ACCEPTED}") from exc
    except OSError as exc:  # a read error carries no file name (/proc/self/mem: EIO): name it here
        raise InputError(f"{name}: cannot be read ({exc.strerror or exc}); expected nccl-tests output") from exc


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


def _blocks(head: bytes, stream: BinaryIO, name: str, encoding: str) -> Iterator[str]:
    """Decoded text in blocks that end at a line break; a line longer than LONG_LINE is passed on in pieces
    (so memory stays bounded: for a log such a line is noise, for a one-line JSON document the pieces join)."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    pending = decoder.decode(head)
    while True:
        data = _read_some(stream, name)
        if not data:
            break
        text = pending + decoder.decode(data)
        cut = text.rfind("\n") + 1
        if cut == 0 and len(text) >= LONG_LINE:
            cut = len(text)
        block, pending = text[:cut], text[cut:]
        if block:
            yield block
    pending += decoder.decode(b"", final=True)
    if pending:
        yield pending


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
