"""Reading an nccl-tests output incrementally: files, stdin, gzip, bzip2, xz, and the text encodings logs come in.

``open_text`` yields the input as blocks of whole lines (each block ends with a newline except maybe the
last, or a piece of a line longer than LONG_LINE), so a parser never holds more than one block: memory stays
bounded whatever the input's size.
Encodings: UTF-8 with or without a BOM (undecodable bytes become U+FFFD), UTF-16/UTF-32 with a BOM.
Input that cannot be a log (NUL bytes without a BOM: binary, or UTF-16 without a BOM) raises InputError,
whose message names the file and what was expected.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import lzma
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

from rdmaforge import magic_bytes
from rdmaforge.errors import UserError

#: Bytes read per block: large reads keep the per-call overhead negligible.
BLOCK = 4 << 20
#: Characters of one line held before it is passed on in pieces (bounds memory on a file without newlines).
LONG_LINE = 8 << 20
#: Share of NUL bytes in the first 64 KiB above which the input is binary (or UTF-16 without a BOM): a log
#: with a few stray NULs (a crash while writing) is still read; a sparse file, /dev/zero or an ELF is not.
_NUL_SHARE = 0.1
_NUL_MIN = 16
#: The share of undecodable bytes and control characters above which a file without a BOM is binary, not a log.
_ODD_SHARE = 0.1
_SNIFF = 64 << 10
#: Compressions read transparently, by their magic bytes: what a log archived by logrotate or by hand is in.
_COMPRESSED: tuple[tuple[bytes, Callable[[BinaryIO], io.BufferedIOBase]], ...] = (
    (magic_bytes.GZIP, lambda raw: gzip.GzipFile(fileobj=raw, mode="rb")),
    (magic_bytes.BZIP2, lambda raw: bz2.BZ2File(raw, mode="rb")),
    (magic_bytes.XZ, lambda raw: lzma.LZMAFile(raw, mode="rb")),
)
#: Compressions the standard library cannot read: named, with the command that reads them.
_UNREADABLE: tuple[tuple[bytes, str], ...] = (
    (magic_bytes.ZSTD, "zstd-compressed (read it with: zstdcat FILE | rdmaforge nccl-report -)"),
    (magic_bytes.ZIP, "a zip archive (unzip it first)"),
)
_CORRUPT = (gzip.BadGzipFile, EOFError, zlib.error, lzma.LZMAError)
_BOMS = magic_bytes.BOMS


class InputError(UserError):
    """The input cannot be read as an nccl-tests output; the message names it and says what is accepted."""


ACCEPTED = ("accepted: nccl-tests text output or its -J JSON, UTF-8 (BOM optional) or UTF-16/32 with a BOM, "
            "gzip, bzip2 or xz allowed")


def open_text(raw: BinaryIO, name: str) -> Iterator[str]:
    """Blocks of text of ``raw`` (decompressed and decoded), each ending at a line break."""
    head = _read_some(raw, name)
    stream: BinaryIO = raw
    for magic, opener in _COMPRESSED:
        if head.startswith(magic):
            stream = opener(_Prepend(head, raw))  # type: ignore[arg-type,assignment]
            head = _read_some(stream, name)
            if any(head.startswith(inner) for inner, _ in _COMPRESSED):
                raise InputError(f"{name}: compressed twice (its {_compression(stream)} data holds compressed data "
                                 f"again): decompress it once; {ACCEPTED}")  # fmt: skip
            break
    else:
        for magic, what in _UNREADABLE:
            if head.startswith(magic):
                raise InputError(f"{name}: {what}, not an nccl-tests log; {ACCEPTED}")
    encoding, skip = _encoding(head, name)
    head = head[skip:]
    yield from _blocks(head, stream, name, encoding)


def _read_some(stream: BinaryIO, name: str) -> bytes:
    try:
        return stream.read(BLOCK)
    except (*_CORRUPT, OSError) as exc:
        compression = _compression(stream)
        if compression is not None:  # bad compressed data: bz2 raises OSError for it, gzip and xz their own errors
            raise InputError(f"{name}: the {compression} data is corrupt or cut short ({exc}); {ACCEPTED}") from exc
        if isinstance(exc, OSError):  # a read error carries no file name (/proc/self/mem: EIO): name it here
            raise InputError(f"{name}: cannot be read ({exc.strerror or exc}); expected nccl-tests output") from exc
        raise


def _compression(stream: BinaryIO) -> str | None:
    kinds = ((gzip.GzipFile, "gzip"), (bz2.BZ2File, "bzip2"), (lzma.LZMAFile, "xz"))
    return next((label for kind, label in kinds if isinstance(stream, kind)), None)


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
    # Binary data with few NUL bytes (an image, random or encrypted bytes): mostly bytes that are no UTF-8 or are
    # control characters no log prints (tab, line ends, form feed and the ESC of coloured output aside).
    text = sniff[: len(sniff) - 3].decode("utf-8", errors="replace") if len(sniff) > 3 else ""
    odd = sum(1 for char in text if char == "\ufffd" or (char < " " and char not in "\t\n\r\f\v\x1b"))
    if odd >= _NUL_MIN and odd > _ODD_SHARE * len(text):
        raise InputError(f"{name}: holds binary data ({odd} of the first {len(text)} characters are no UTF-8 text or "
                         f"are control characters), not an nccl-tests log; {ACCEPTED}")  # fmt: skip
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
