"""What nccl-tests can print in a row's preamble, and the check that a run's rows keep to it.

nccl-tests prints each row's preamble from the size it measured (every version, v1 to 2.19.6, src/common.cu):
``max(sendBytes, expectedBytes)`` as the size and ``nbytes / wordSize(type)`` as the count, where the collective's
getCollByteCount sets those from the element count. For all_reduce, broadcast, reduce and sendrecv the size is the
count's bytes; all_gather, reduce_scatter, alltoall, gather, scatter and hypercube move one block per rank, and their
size is the count's bytes times the run's ranks (``nProcs * nGpus * nThreads``). The type is one of the names its
``test_typenames`` lists and the op one of ``test_opnames`` (or none for a collective without a reduction).

A row that breaks this was not printed by nccl-tests: a log edited, or rows of another run spliced in (review 34a:
a count changed by one, a type spelled ``flaot`` and an op ``zzz`` were reported ok). The check reads the packed
rows at the run's end (in C when the accelerator is built), the same for the text parser, its C accelerator and -J
JSON documents.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from rdmaforge.nccl_tests import accel
from rdmaforge.nccl_tests.rowstore import _RECORD, RowStore

#: Bytes an element of each type nccl-tests prints: 2.x's test_typenames (bfloat16 from 2.10, f8e4m3 and f8e5m2
#: from 2.15.0), then v1's two other names (char, int).
TYPE_BYTES: dict[str, int] = {
    "int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "half": 2, "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1,
    "char": 1, "int": 4,
}  # fmt: skip
#: The ops nccl-tests prints (test_opnames); a collective without a reduction prints none (blank before 2.13.4 and
#: in hypercube still, ``none`` in the others after), which the parser keeps as None.
REDOPS = frozenset({"sum", "prod", "max", "min", "avg", "mulsum"})
#: How a collective's printed size relates to its count: 1, the count's bytes; "ranks", those times the run's ranks.
#: alltoallv (2.19.x) prints the largest of its per-rank counts as the size: no fixed relation, not checked.
SIZE_SCALE: dict[str, int | str] = {
    "all_reduce": 1, "broadcast": 1, "reduce": 1, "sendrecv": 1,
    "all_gather": "ranks", "reduce_scatter": "ranks", "alltoall": "ranks", "gather": "ranks", "scatter": "ranks",
    "hypercube": "ranks",
}  # fmt: skip
_UNCHECKED = frozenset({"alltoallv"})
#: Which collectives print a reduction op in each row and which print none, in every version (v2.0.0 to 2.19.6:
#: each collective's TimeTest call passes run_opnames[j], or "" / "none"); sendrecv prints the -o op from 2.13 and
#: had no op column before, so either is its own.
REDUCING = frozenset({"all_reduce", "reduce", "reduce_scatter"})
NOT_REDUCING = frozenset({"all_gather", "broadcast", "alltoall", "hypercube", "gather", "scatter"})

#: A record's size, count, type index and op index: rowstore._RECORD ("<qqqBHH10d") without root, flags and halves.
_PREAMBLE = struct.Struct("<qq9xHH80x")


def _listed(names: Iterable[str]) -> str:
    return ", ".join(names)


def table_problem(rows: RowStore, collective: str | None, ranks: int | None) -> str | None:
    """Why a row of ``rows`` cannot be one nccl-tests printed: a type or op name it never prints, or a count that
    is not the row's size in elements (divided by the ranks for a collective that moves a block per rank); None
    when every row keeps to what nccl-tests prints. Without a known collective the scale is the first counted
    row's (1 or the run's ranks), and every row must keep it. The C accelerator reads the rows when it is built
    (28 ms for the bench's 1.6M-row run); _first_unprintable, its twin, is a Python loop over every row."""
    if collective in _UNCHECKED or not rows:
        return None
    names = rows.names
    element = bytes(TYPE_BYTES.get(name, 0) if name is not None else 0 for name in names)
    redop_ok = bytes(_op_printable(name, collective) for name in names)
    kind = SIZE_SCALE.get(collective) if collective is not None else None
    scale = initial = 1 if kind == 1 else (ranks or 0) if kind == "ranks" else 0
    first_unprintable = accel.fast.first_unprintable if accel.fast is not None else _first_unprintable
    for chunk in rows.record_chunks():
        at, found = first_unprintable(chunk, element, redop_ok, scale, ranks or 0)
        if at >= 0:
            size, count, type_index, redop_index = _PREAMBLE.unpack_from(chunk, at * _RECORD.size)
            inferred = initial == 0 and found > 0  # an earlier row set the scale: the reason says which way
            return _problem(size, count, names[type_index], names[redop_index], found, inferred, ranks, collective)
        scale = found
    return None


def _op_printable(name: str | None, collective: str | None) -> bool:
    """Whether a row of ``collective`` (None: not named) can show op ``name`` (None: no op)."""
    if name is None:
        return collective not in REDUCING
    return name in REDOPS and collective not in NOT_REDUCING


def _first_unprintable(chunk: bytes, element: bytes, redop_ok: bytes, scale: int, ranks: int) -> tuple[int, int]:
    """The index of the first record in ``chunk`` that nccl-tests cannot have printed (-1: none), and the scale
    after the records read (0: not known yet; the first record that counts elements sets it). The C
    accelerator's first_unprintable does the same."""
    for at, (size, count, type_index, redop_index) in enumerate(_PREAMBLE.iter_unpack(chunk)):
        each = element[type_index] if type_index < len(element) else 0
        if not each or redop_index >= len(redop_ok) or not redop_ok[redop_index]:
            return at, scale
        whole = count * each
        if scale == 0 and count > 0:
            found = size // whole if size % whole == 0 else 0
            if found < 1 or (found != 1 and ranks > 0 and found != ranks):
                return at, scale
            scale = found
        if size != whole * scale:
            return at, scale
    return -1, scale


def _problem(
    size: int, count: int, type_name: str | None, redop: str | None, scale: int, inferred: bool,
    ranks: int | None, collective: str | None,
) -> str:  # fmt: skip
    """The words for a row _first_unprintable stopped at (``scale``: the run's, 0 when this row was to set it;
    ``inferred``: set by the run's first counted row, the run naming no collective or not its ranks)."""
    if type_name not in TYPE_BYTES:
        names = list(TYPE_BYTES)
        return (f"a row's type is {type_name!r}, a name nccl-tests never prints (it prints {_listed(names[:-2])}; "
                f"v1 {_listed(names[-2:])}): the row was edited or garbled, so its count and size cannot be "
                "checked")  # fmt: skip
    if redop is not None and redop not in REDOPS:
        return (f"a row's op is {redop!r}, one nccl-tests never prints (it prints {_listed(sorted(REDOPS))}, or none "
                "for a collective without a reduction): the row was edited or garbled")  # fmt: skip
    if not _op_printable(redop, collective):
        printed = f"one of {_listed(sorted(REDOPS))}" if collective in REDUCING else "none (it reduces nothing)"
        return (f"a row of {size} bytes shows op {redop or 'none'}, and nccl-tests' {collective} prints {printed} "
                "as its op: the row comes from another collective's run, or was edited")  # fmt: skip
    each = TYPE_BYTES[type_name]
    row = f"a row of {size} bytes with count {count} ({type_name}, {each} bytes an element)"
    printer = f"nccl-tests' {collective}" if collective else "nccl-tests"
    spliced = "so the row was edited or comes from another run"
    if count == 0:
        return f"{row}: {printer} prints a count of 0 only in a row of 0 bytes, {spliced}"
    unknown = (
        "the run names no collective"
        if collective is None
        else ("the log does not say how many ranks a communicator has (NCCL_TESTS_SPLIT groups, or no Rank lines)")
    )
    if scale == 0:
        if collective is not None:  # a collective that moves a block per rank: the ranks are the unknown factor
            allowed = f"a whole multiple of {count * each} bytes (count x {each} bytes x its ranks)"
        elif ranks:
            allowed = (f"{count * each} bytes (count x {each}) or {count * each * ranks} (times its {ranks} ranks, "
                       "for a collective that moves a block per rank)")  # fmt: skip
        else:
            allowed = (f"{count * each} bytes (count x {each}) or a whole multiple of it (times the ranks, for a "
                       "collective that moves a block per rank)")  # fmt: skip
        return f"{row}: {printer} prints a size of {allowed}, {spliced}"
    ranks_part = f" x {scale} ranks" if scale > 1 else ""
    if inferred:
        spliced += (f" ({unknown}: its first row that counts elements set the size to count x {each} "
                    f"bytes{ranks_part})")  # fmt: skip
    if size % (each * scale):
        return (f"{row}: {printer} prints {type_name} rows of a whole multiple of {each * scale} bytes "
                f"({each} bytes{ranks_part}), {spliced}")  # fmt: skip
    return (f"{row}: {printer} prints count {size // (each * scale)} for {size} bytes (size / {each} bytes"
            f"{ranks_part.replace(' x ', ' / ')}), {spliced}")  # fmt: skip
