"""The C accelerator of the nccl-tests parser and JSON writer (rdmaforge/nccl_tests/_fastrows.c, issue 17's
speed target) against the pure-Python code it replaces: byte-identical ``nccl-report --json`` output and equal
parse results on every corpus file, every JSON sample, and on seeded random mutations of the corpus that reach
every line kind the extension handles or hands back (odd numbers, blank columns, glued NCCL lines, MPI tags,
every line break str.splitlines knows, non-ASCII text, interleaved runs, tiny blocks, spilled rows).

The extension is optional (setup.py builds it where a C compiler exists): without it these tests compare the
pure-Python path with itself and the extension-only ones are skipped.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import os
import random
import struct
from pathlib import Path
from typing import Any

import nccl_reference
import pytest

from rdmaforge.cli import main
from rdmaforge.nccl_tests import accel, parse, parse_file, source
from rdmaforge.nccl_tests import rowstore as rowstore_module
from rdmaforge.nccl_tests.parser import TextParser

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus" / "nccl-tests"
SAMPLES = ROOT / "tests" / "data" / "nccl-json"
REFERENCE = nccl_reference.load()

try:  # the extension itself, whatever RDMAFORGE_NCCL_PURE_PYTHON says (accel.fast follows that)
    from rdmaforge.nccl_tests import _fastrows as FAST
except ImportError:
    FAST = None  # type: ignore[assignment]
needs_fast = pytest.mark.skipif(FAST is None, reason="the C accelerator is not built (no C compiler at install)")


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.glob("*.txt") if p.name[:1].isdigit())


def inputs() -> list[Path]:
    return corpus_files() + sorted(SAMPLES.glob("*.json"))


def cli_json(monkeypatch: pytest.MonkeyPatch, fast: Any, *args: str) -> tuple[int, str]:
    monkeypatch.setattr(accel, "fast", fast)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["nccl-report", "--json", *args])
    return code, out.getvalue()


def report(monkeypatch: pytest.MonkeyPatch, fast: Any, data: bytes) -> dict[str, Any]:
    monkeypatch.setattr(accel, "fast", fast)
    return with_rank_hosts(parse(data, source="input"))


def with_rank_hosts(parsed: Any) -> dict[str, Any]:
    """The parse result's JSON shape, and each run's rank -> host map (read from the ``#  Rank`` lines by both
    paths, and not part of the JSON shape)."""
    return {**parsed.to_dict(), "rank_hosts": [run.rank_hosts for run in parsed.runs]}


def test_the_extension_is_used_when_built() -> None:
    disabled = os.environ.get(accel.DISABLE_ENV, "") not in ("", "0")
    assert accel.fast is (None if disabled else FAST)


def test_pure_python_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(accel.DISABLE_ENV, "1")
    assert accel.load() is None
    monkeypatch.setenv(accel.DISABLE_ENV, "0")
    assert accel.load() is FAST


@needs_fast
def test_an_extension_built_from_an_older_source_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-place build left from before a change of _fastrows.c would parse differently: the pure code runs."""
    monkeypatch.delenv(accel.DISABLE_ENV, raising=False)
    assert accel.load() is FAST
    monkeypatch.setattr(FAST, "VERSION", accel.VERSION - 1)
    assert accel.load() is None
    monkeypatch.delattr(FAST, "VERSION")
    assert accel.load() is None


@pytest.mark.parametrize("path", inputs(), ids=lambda p: p.name)
def test_corpus_output_is_byte_identical(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    fast = cli_json(monkeypatch, FAST, "--fabric", "infiniband", str(path))
    pure = cli_json(monkeypatch, None, "--fabric", "infiniband", str(path))
    assert fast == pure
    runs = json.loads(fast[1])["runs"]
    if path.name in REFERENCE:
        assert [{**run, "source": path.name} for run in runs] == REFERENCE[path.name]["runs"]


def test_all_files_at_once_with_tiny_blocks_and_spills(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line crosses a block boundary and every run's rows go to the temporary file."""
    names = [str(p) for p in inputs()]
    monkeypatch.setattr(source, "BLOCK", 7)
    monkeypatch.setattr(rowstore_module, "SPILL", 200)
    assert cli_json(monkeypatch, FAST, *names) == cli_json(monkeypatch, None, *names)


def test_parse_file_results_are_equal(monkeypatch: pytest.MonkeyPatch) -> None:
    for path in inputs():
        monkeypatch.setattr(accel, "fast", FAST)
        fast = with_rank_hosts(parse_file(path))
        monkeypatch.setattr(accel, "fast", None)
        assert fast == with_rank_hosts(parse_file(path)), path.name


# -- random mutations of the corpus ----------------------------------------------------------------------

_ODD_NUMBERS = [
    "N/A", "nan", "-nan", "inf", "-inf", "1e999", "-1e999", "1e-999", "1_0", "+3", "-0", "-0.00", "0e+00", "0.0",
    "1.04858e+06", "12345678901234567890", "123456789012345678", "9007199254740993", "1.", ".5", "5e", "e5",
    "abc", "1.2.3", "0x10", "\u0663", "4.9e-324", "1.7976931348623157e308", "123456789.123456789", "-1", "-5",
    "0.000099", "99999999999999999", "1e15", "1e16", "0.30000000000000004",
]  # fmt: skip
_GLUE = "node-1:1234:5678 [0] NCCL INFO Channel 00/0 : 0[1000] -> 1[2000] via P2P/IPC"
_NCCL_LINES = [
    "host:1:2 [0] NCCL INFO Using network IB",
    "host:1:2 [0] NCCL INFO Using network Socket",
    "host:1:2 [0] NCCL INFO Using network",
    "host:1:2 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB ib0:10.0.0.1<0>",
    "host:1:2 [1] NCCL INFO Channel 00/0 : 0[1000] -> 1[2000] [send] via NET/IB/0/GDRDMA",
    "host:1:2 [1] NCCL INFO Channel 01/0 : 0[1000] -> 1[2000] [send] via NET/Socket/1",
    "host:1:2 [1] NCCL INFO Ring 00 : 1 -> 2 via NET/AWS Libfabric/0 and via NET/IB/1/GDRDMA",
    "host:1:2 [1] NCCL INFO Channel 02 : xvia NET/IB/0 then via NET/Second/1/GDRDMA",
    "host:1:2 [1] NCCL INFO Channel 03 : via NET/ or via NET/x/ or via NET/Third/7x",
    "host:1:2 [1] NCCL INFO GPU Direct RDMA Enabled for GPU 1 / HCA 0",
    "host:1:2 [1] NCCL INFO GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
    "host:1:2 [1] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
    "host:1:2 [1] NCCL INFO NCCL version 2.19.3+cuda12.2",
    "NCCL version 2.6.4+cuda10.2",
    "  NCCL version 2.7.8+cuda11.0",
    "host:1:2 [1] NCCL INFO NET/Plugin : Plugin load returned 2 : libnccl-net.so: cannot open shared object file",
    "host:1:2 [1] NCCL INFO NET/Plugin: Loaded net plugin AIACC-2.0 (v5)",
    "host:1:2 [1] NCCL INFO NET/OFI Using aws-ofi-nccl 1.7.4-aws",
    "host:1:2 [1] NCCL INFO Failed to open libibverbs.so[.1]",
    "host:1:2 [1] misc/ibvwrap.cc:42 NCCL WARN Call to ibv_open_device failed",
    "host:1:2 [1] NCCL TRACE something via NET/IB/0",
    "host:1:2 [1] NCCL INFOx not a tag",
    "xNCCL INFO not a tag either",
    "host:1:2 [1] NCCL INFO",
    "host:1:2 [1] NCCL INFO    NET/IB : No device found.",
    "12host:1:2 [1] NCCL INFO starts with a digit",
    "host:1:2 [1] NCCL INFO timeout in a message",
    "host:1:2 [1] NCCL INFO \u00e9t\u00e9 via NET/IB/0",
]
_OTHER_LINES = [
    "#  Rank  0 Group  0 Pid  12345 on node-1 device  0 [0x07] NVIDIA H100",
    "#  Rank  1 Group  0 Pid  12345 on node-1 device  1 [0x08] NVIDIA H100",
    "#  Rank  3 Pid 77 on node-2 device  3 [0x08] NVIDIA H100",
    "#   Rank  7 on     node03 device  7 [0x00] Tesla P100-PCIE-16GB",
    "#Rank 2 on x",
    "## Rank 2 on x",
    "  #  Rank 4 on x",
    "#  Rank 5 Group -1 Pid 9 on x",
    "#  Rank 6 Group x Pid 9 on x",
    "#  Rank 7 Pidx 9 on x",
    "#  Rank 8 on",
    "#  Rank 10 of x",
    "#  Rank 11 onhost x",
    "#  Rank 99999999999999999999 on big",
    "Rank 9 on no-hash",
    "#  Rank",
    "#",
    "#  ",
    "# error: some last error",
    "#error:x",
    "# Using devices",
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor)",
    "nThread 1 nGpus 8 minBytes 8 maxBytes 134217728",
    "# Collective test starting: all_gather_perf",
    "# Out of bounds values : 3 FAILED",
    "# Avg bus bandwidth    : 12.5 FAILED",
    "mpirun -np 2 ./build/sendrecv_perf_mpi -b 8",
    "Running: ./build/reduce_scatter_perf -b 8",
    "some other text",
    " .. node-1 pid 4242: Test failure common.cu:519",
    "node-1: Test NCCL failure common.cu:401 'remote process exited'",
    "Test timeout (300s)",
    "[1,0]<stdout>:#  Rank  2 Group  0 Pid  12 on node-1 device  2 [0x09] NVIDIA H100",
    "[1,0]<stderr>:host:1:2 [0] NCCL INFO Using network IB",
    "[12,34]<stddiag>:",
    "[1,x]<stdout>:not a tag",
    "caf\u00e9 \u00e9t\u00e9",
    "\x1f\t ",
]
_BREAKS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\n\n"]


def _mutate_row(rng: random.Random, line: str) -> str:
    tokens = line.split()
    choice = rng.randrange(9)
    if choice == 0 and tokens:
        tokens[rng.randrange(len(tokens))] = rng.choice(_ODD_NUMBERS)
    elif choice == 1 and len(tokens) > 3:
        del tokens[rng.randrange(3, len(tokens))]
    elif choice == 2:
        tokens.insert(rng.randrange(len(tokens) + 1), rng.choice(_ODD_NUMBERS))
    elif choice == 3 and len(tokens) > 3:
        del tokens[3]  # a blank op column
    elif choice == 4 and len(tokens) > 4:
        tokens[3] = rng.choice(["none", "sum", "-1", "0", "3", "1_0", "99999999999999999999", "+2", "max"])
    elif choice == 5:
        cut = rng.randrange(len(line) + 1)
        return line[:cut] + rng.choice([_GLUE, " " + _GLUE, "node-1: Test NCCL failure x.cu:1 'boom'"])
    elif choice == 6 and tokens:
        tokens[0] = rng.choice(["0", "8", "8", "16", "x8", "\u0663", "12345678901234567890"])
    elif choice == 7 and len(tokens) > 2:
        tokens[2] = rng.choice(["float", "half", "bfloat16", "int8", "1float", "f-loat", "_x", "caf\u00e9"])
    else:
        return line + rng.choice(["", "  ", "\t", "\x1f", " \u00e9"])
    separator = rng.choice([" ", "  ", "\t", "   "])
    return rng.choice(["", "  ", "\t"]) + separator.join(tokens)


def mutated_log(seed: int, files: list[Path]) -> str:
    """The corpus files in random order, each line kept, mutated, or joined by a random extra line."""
    rng = random.Random(seed)
    lines: list[str] = []
    for path in rng.sample(files, len(files)):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            roll = rng.random()
            if roll < 0.12 and line.lstrip()[:1].isdigit():
                line = _mutate_row(rng, line)
            elif roll < 0.16:
                lines.append(rng.choice(_NCCL_LINES + _OTHER_LINES))
            elif roll < 0.18:
                line = "[1,0]<stdout>:" + line
            lines.append(line)
    text = "".join(line + rng.choice(_BREAKS) if rng.random() < 0.05 else line + "\n" for line in lines)
    return text


@pytest.mark.parametrize("seed", range(12))
def test_mutated_corpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, seed: int) -> None:
    text = mutated_log(seed, corpus_files())
    if seed % 3 == 0:
        text = text.replace("\u00e9", "e").replace("\ufffd", "?").replace("\u0663", "3").replace("\x85", "\n")
    data = text.encode("utf-8")
    assert report(monkeypatch, FAST, data) == report(monkeypatch, None, data)
    path = tmp_path / "mutated.log"
    path.write_bytes(gzip.compress(data) if seed % 4 == 1 else data)
    if seed % 2:
        monkeypatch.setattr(source, "BLOCK", 4096)
        monkeypatch.setattr(rowstore_module, "SPILL", 4096)
    assert cli_json(monkeypatch, FAST, str(path)) == cli_json(monkeypatch, None, str(path))


@pytest.mark.parametrize("line", _NCCL_LINES + _OTHER_LINES)
def test_each_odd_line_inside_a_table(monkeypatch: pytest.MonkeyPatch, line: str) -> None:
    """Each odd line between the rows of a run, and before its header, changes the same things both ways."""
    head = (
        "# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902\n"
        "# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor)\n"
    )
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
        "   busbw #wrong\n"
    )
    rows = [
        f"{8 << i:>12} {2 << i:>12}     float     sum      -1    {10.5 + i:.2f}    0.00    0.00      0"
        f"    {10.25 + i:.2f}    0.00    0.00      0\n"
        for i in range(4)
    ]
    text = head + line + "\n" + header + rows[0] + rows[1] + line + "\n" + rows[2] + line + rows[3]
    text += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n"
    data = text.encode("utf-8")
    assert report(monkeypatch, FAST, data) == report(monkeypatch, None, data)


def test_channel_networks_keep_their_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A channel line read by Python (its message starts with NCCL) before one the extension gathers."""
    text = "h:1:2 [0] NCCL INFO NCCL_X via NET/Zeta/0\nh:1:2 [0] NCCL INFO c via NET/Alpha/0/GDRDMA\n" * 2
    data = text.encode()
    assert report(monkeypatch, FAST, data) == report(monkeypatch, None, data)
    assert report(monkeypatch, FAST, data)["transport"]["networks"] == ["Zeta", "Alpha"]


def test_interleaved_processes_and_glued_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two non-MPI processes in one file (the lanes of interleave.py) and rows split by a glued NCCL line."""
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
        "   busbw #wrong\n"
    )

    def start(pid: int) -> str:
        return (
            "# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902\n"
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor)\n"
            f"#  Rank  0 Group  0 Pid {pid} on node-1 device  0 [0x07] NVIDIA H100\n"
        )

    def row(size: int, busbw: float) -> str:
        return f"{size:>12} {size // 4:>12}     float     sum      -1    10.50    0.00   {busbw:.2f}      0" + (
            f"    10.25    0.00   {busbw:.2f}      0\n"
        )

    text = start(11) + start(22) + header + header + row(8, 1.0) + row(8, 1.0) + row(16, 2.0)
    text += "        32            8     float     sum      -1  " + _GLUE + "\n"
    text += "    10.1   0.00   3.00  0   10.2 0.00 3.00 0\n"
    text += row(32, 3.0) + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 2.0\n" * 2
    data = text.encode("utf-8")
    assert report(monkeypatch, FAST, data) == report(monkeypatch, None, data)


def test_single_long_sweep_spills_identically(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = CORPUS / "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt"
    lines = path.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("#       size"))
    end = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("# Out of"))
    text = "".join(lines[: start + 1]) + "".join(lines[start + 1 : end]) * 300 + "".join(lines[end:])
    big = tmp_path / "sweep.log"
    big.write_text(text)
    monkeypatch.setattr(rowstore_module, "SPILL", 100_000)
    assert cli_json(monkeypatch, FAST, str(big)) == cli_json(monkeypatch, None, str(big))


# -- the number conversions -------------------------------------------------------------------------------


@needs_fast
def test_float_repr_matches_python() -> None:
    assert FAST is not None
    rng = random.Random(17)
    values = [0.0, -0.0, 1e-4, 9.999999999999999e-05, 1e15, 1e16, 999999999999999.9, 5e-324, 1.5, -2.25, 0.1]
    values += [math.inf, -math.inf, math.nan, 0.1 + 0.2, 1 / 3, 123456789012345.0, 12345678901234.56]
    for _ in range(20000):
        values.append(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0])
        values.append(round(rng.uniform(0, 10 ** rng.randint(0, 12)), rng.randint(0, 6)))
        values.append(rng.randint(0, 10**6) / 10 ** rng.randint(0, 9) * rng.choice([1.0, 1000.0, -1.0]))
    for value in values:
        assert FAST.float_repr(value) == repr(value), value.hex()


@needs_fast
def test_token_parsing_matches_float() -> None:
    assert FAST is not None
    rng = random.Random(18)
    tokens = list(_ODD_NUMBERS) + ["0", "5.", "+.5", "-.5", "1E5", "1e+05", "00001.5000", "1" * 60, "1" * 61]
    for _ in range(20000):
        value = rng.choice([rng.uniform(0, 10), rng.uniform(0, 1e5), 10 ** rng.uniform(-9, 25)])
        digits = rng.randint(0, 8)
        tokens += [f"{value:.{digits}f}", f"{value:g}", f"{value:.{digits}e}", f"-{value:.{digits + 9}g}", str(value)]
    for token in tokens:
        got = FAST.parse_float(token)
        if got is None:
            continue  # declined: Python reads it
        assert struct.pack("<d", got) == struct.pack("<d", float(token)), token


@needs_fast
def test_scan_hands_back_what_it_does_not_handle() -> None:
    assert FAST is not None
    block = "plain text\n#  Rank 0 on x\n# nThread 1 nGpus 1\nrest\r\nlast"
    word = {name: 3 + index for index, name in enumerate(FAST.WORDS)}  # kind 3 + i: a line of first word WORDS[i]
    kind, start, end, after, *counts = FAST.scan(block, 0, None, None, [], [])
    assert (kind, block[start:end], counts) == (word["Rank"], "#  Rank 0 on x", [0, 0, 0])  # no run yet: Python
    kind, start, end, after, *counts = FAST.scan(block, after, None, None, [], [])
    assert (kind, block[start:end]) == (word["nThread"], "# nThread 1 nGpus 1")
    assert FAST.scan(block, after, None, None, [], []) == (0, len(block), len(block), len(block), 0, 0, 0)
    assert FAST.scan("\u20ac\n", 0, None, None, [], [])[0] == -1  # not a 1-byte-kind str
    lines = "h:1:2 [0] NCCL INFO a via NET/IB/0/GDRDMA\nh:1:2 [0] NCCL INFO b via NET/Socket/1\n"
    channels: list[str] = []
    assert FAST.scan(lines * 2, 0, None, None, [], channels)[4:] == (4, 2, 2)
    assert channels == ["IB", "Socket"]
    assert FAST.next_line("a\r\nb", 0) == (0, 1, 3)
    assert FAST.next_line("a", 1) is None


@needs_fast
def test_scan_says_what_kind_of_line_it_hands_back() -> None:
    """Kind 2: a failure line; kind 3 + i: a line whose first word is WORDS[i], whose handlers the parser calls
    without feed(); kind 1: any other line, for feed() (an NCCL WARN, a glued row, non-ASCII text)."""
    assert FAST is not None
    parser = TextParser()
    assert {word: parser._handlers_for(word) for word in FAST.WORDS} == {
        "error:": (parser._on_last_error,), **parser._by_first_word}  # fmt: skip
    word = {name: 3 + index for index, name in enumerate(FAST.WORDS)}
    cases = [
        (" .. node-1 pid 4242: Test failure common.cu:519", 2),
        ("node-1: Test NCCL failure common.cu:401 'remote process exited'", 2),
        ("Test timeout (300s)", 2),
        ("# nccl-tests version 2.17.8 nccl-headers=22902", word["nccl-tests"]),
        ("# Collective test starting: all_gather_perf", word["Collective"]),
        ("nThread 1 nGpus 8 minBytes 8", word["nThread"]),
        ("#  Rank  0 Group  0 Pid  12345 on node-1 device  0", word["Rank"]),
        ("# NCCL Tests compiled with NCCL 2.19", word["NCCL"]),
        ("  # Out of bounds values : 3 FAILED", word["Out"]),
        ("# Avg bus bandwidth    : 12.5", word["Avg"]),
        ("#       size         count      type", word["size"]),
        ("#  bytes    N    type      op", word["bytes"]),
        ("# error:x", word["error:"]),
        ("[1,0]<stdout>:# Avg bus bandwidth : 1", word["Avg"]),
        ("host:1:2 [0] misc/x.cc:1 NCCL WARN boom", 1),
        ("# Avg bus bandwidth \u00e9", 1),
    ]
    for line, kind in cases:
        assert FAST.scan(line + "\n", 0, None, None, [], [])[:3] == (kind, 0, len(line)), line
