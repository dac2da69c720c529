"""A run's rows, packed: a sweep of millions of rows costs ~130 bytes a row, spilled to a temporary file.

``RowStore`` behaves like the list of Row it replaces (len, iteration, indexing, slices, ``== []``), so the
parsers and every consumer keep one Row type; only the storage is compact. Up to SPILL bytes stay in memory.
"""

from __future__ import annotations

import math
import struct
import sys
import tempfile
from array import array
from collections.abc import Iterable, Iterator
from typing import IO, Any, overload

from rdmaforge.nccl_tests.model import Half, Row

# size, count, root (-1: none), flags (bit 0: in-place half present), type index, redop index (0: none),
# then time, algbw, busbw, wrong, rel_error of each half (NaN: none; the parsers keep only finite values).
_RECORD = struct.Struct("<qqqBHH10d")
_NONE = math.nan
_NO_HALF = (0.0, 0.0, 0.0, _NONE, _NONE)
SPILL = 16 << 20
_BATCH = 4096


#: How many invalid rows a run's status names by their size.
INVALID_NAMED = 5


def _no_measurement(size: int, time_us: float, algbw: float, busbw: float) -> bool:
    """Whether a half holds no measurement: a negative time or bandwidth (a broken timer, an overflow), or no time
    at all for a message of some bytes (nothing moves bytes between GPUs in zero microseconds)."""
    return time_us < 0 or algbw < 0 or busbw < 0 or (size > 0 and time_us == 0)


def record_column(chunk: bytes, offset: int, typecode: str) -> array[int]:
    """The field at ``offset`` of every packed record in ``chunk`` (little-endian, ``typecode`` "q" or "H") as an
    array: a slice a byte, so a column of thousands of records costs a few operations, not a Python loop."""
    width = array(typecode).itemsize
    count = len(chunk) // _RECORD.size
    data = bytearray(width * count)
    for byte in range(width):
        data[byte::width] = chunk[offset + byte : count * _RECORD.size : _RECORD.size]
    values = array(typecode)
    values.frombytes(data)
    if sys.byteorder != "little":
        values.byteswap()
    return values


def _opt(value: float | None) -> float:
    return _NONE if value is None else value


def _back(value: float) -> float | None:
    return None if value != value else value


class RowStore:
    """Rows in arrival order, packed with struct and spilled to a temporary file beyond SPILL bytes."""

    def __init__(self, rows: Iterable[Row] = ()) -> None:
        self._names: list[str | None] = [None]
        self._index: dict[str | None, int] = {None: 0}
        self._buffer = bytearray()
        self._file: IO[bytes] | None = None
        self._count = 0
        #: Rows with #wrong > 0, counted as they arrive (a status must not re-read a spilled sweep).
        self.wrong_rows = 0
        #: Rows that hold no measurement (_no_measurement; a negative size or count; a time or bandwidth that is not a
        #: number, noted without being stored), counted as they arrive, and the sizes of the first INVALID_NAMED of
        #: them (the C accelerator declines such rows: they all come here).
        self.invalid_rows = 0
        self.invalid_sizes: list[int] = []
        #: Sum and count of every half's busbw: nccl-tests' "Avg bus bandwidth" is their mean.
        self.busbw_sum = 0.0
        self.busbw_count = 0
        for row in rows:
            self.append(row)

    def _name(self, name: str | None) -> int:
        index = self._index.get(name)
        if index is None:
            index = self._index[name] = len(self._names)
            self._names.append(name)
        return index

    def append(self, row: Row) -> bool:
        """Store ``row``; False (nothing stored) when a number does not fit 64 bits: no real sweep has one."""
        out, inp = row.out_of_place, row.in_place
        wrong_in = rel_in = _NONE
        time_in = algbw_in = busbw_in = 0.0
        if inp is not None:
            time_in, algbw_in, busbw_in = inp.time_us, inp.algbw, inp.busbw
            wrong_in, rel_in = _opt(inp.wrong), _opt(inp.rel_error)
        try:
            record = _RECORD.pack(
                row.size, row.count, -1 if row.root is None else row.root, 0 if inp is None else 1,
                self._name(row.type), self._name(row.redop),
                out.time_us, out.algbw, out.busbw, _opt(out.wrong), _opt(out.rel_error),
                time_in, algbw_in, busbw_in, wrong_in, rel_in,
            )  # fmt: skip
        except (struct.error, OverflowError):
            return False
        self._buffer += record
        self._count += 1
        if row.has_wrong_values():
            self.wrong_rows += 1
        if (row.size < 0 or row.count < 0 or _no_measurement(row.size, out.time_us, out.algbw, out.busbw)
                or (inp is not None and _no_measurement(row.size, time_in, algbw_in, busbw_in))
                or _opt(out.wrong) < 0 or wrong_in < 0):  # a negative #wrong counts nothing  # fmt: skip
            self._invalid(row.size)
        self.busbw_sum += out.busbw + (inp.busbw if inp is not None else 0.0)
        self.busbw_count += 1 if inp is None else 2
        if len(self._buffer) >= SPILL:
            self._spill()
        return True

    def append_values(
        self, size: int, count: int, type_name: str, redop: str | None, root: int | None,
        out: tuple[float, float, float, float, float], inp: tuple[float, float, float, float, float] | None,
    ) -> bool:
        """Store a row given as numbers (wrong and rel_error NaN when absent): the text parser's fast path."""
        try:
            record = _RECORD.pack(
                size, count, -1 if root is None else root, 0 if inp is None else 1,
                self._name(type_name), self._name(redop), *out, *(inp or _NO_HALF),
            )  # fmt: skip
        except (struct.error, OverflowError):
            return False
        self._buffer += record
        self._count += 1
        if out[3] > 0 or (inp is not None and inp[3] > 0):
            self.wrong_rows += 1
        if (size < 0 or count < 0 or _no_measurement(size, out[0], out[1], out[2])
                or (inp is not None and _no_measurement(size, inp[0], inp[1], inp[2]))
                or out[3] < 0 or (inp is not None and inp[3] < 0)):  # a negative #wrong counts nothing  # fmt: skip
            self._invalid(size)
        self.busbw_sum += out[2] + (inp[2] if inp is not None else 0.0)
        self.busbw_count += 1 if inp is None else 2
        if len(self._buffer) >= SPILL:
            self._spill()
        return True

    def note_invalid(self, size: int) -> None:
        """Count a row of ``size`` that holds no measurement and is not stored (a time or bandwidth not a number)."""
        self._invalid(size)

    def _invalid(self, size: int) -> None:
        self.invalid_rows += 1
        if len(self.invalid_sizes) < INVALID_NAMED:
            self.invalid_sizes.append(size)

    def spill_if_full(self) -> bool:
        """Spill the buffer when it holds SPILL bytes or more (for the C accelerator, which appends in bulk)."""
        if len(self._buffer) >= SPILL:
            self._spill()
            return True
        return False

    def _spill(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="rdmaforge-rows-")
        self._file.seek(0, 2)
        self._file.write(self._buffer)
        self._buffer = bytearray()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    @property
    def names(self) -> list[str | None]:
        """The type/redop strings that records refer to by index (index 0: None)."""
        return self._names

    def records(self) -> Iterator[tuple[Any, ...]]:
        """The packed rows as tuples (see _RECORD), for writers that need no Row objects."""
        return self._records()

    def record_chunks(self) -> Iterator[bytes]:
        """The packed rows (see _RECORD) in arrival order, at most _BATCH of them a chunk: for writers in C."""
        size = _RECORD.size * _BATCH
        if self._file is not None:
            self._file.seek(0)
            while True:
                data = self._file.read(size)
                if not data:
                    break
                yield data
        for start in range(0, len(self._buffer), size):
            yield bytes(self._buffer[start : start + size])

    def _records(self) -> Iterator[tuple[Any, ...]]:
        if self._file is not None:
            self._file.seek(0)
            size = _RECORD.size * _BATCH
            while True:
                data = self._file.read(size)
                if not data:
                    break
                yield from _RECORD.iter_unpack(data)
        yield from _RECORD.iter_unpack(bytes(self._buffer))

    def __iter__(self) -> Iterator[Row]:
        names = self._names
        for rec in self._records():
            yield Row(
                size=rec[0], count=rec[1], type=names[rec[4]] or "", redop=names[rec[5]],
                root=None if rec[2] < 0 else rec[2],
                out_of_place=Half(rec[6], rec[7], rec[8], _wrong(rec[9]), _back(rec[10])),
                in_place=Half(rec[11], rec[12], rec[13], _wrong(rec[14]), _back(rec[15])) if rec[3] & 1 else None,
            )  # fmt: skip

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...
    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("row index out of range")
        for position, row in enumerate(self):
            if position == index:
                return row
        raise IndexError("row index out of range")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RowStore | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RowStore({self._count} rows)"


def _wrong(value: float) -> int | None:
    return None if value != value else int(value)
