"""nccl-tests output parsing (text of every version, -J JSON) and the ``rdmaforge nccl-report`` command.

Expected values come from the corpus INDEX.md and were checked against the files themselves.
"""

from __future__ import annotations

import io
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rdmaforge.cli import main
from rdmaforge.nccl_tests import Run, accel, parse, parse_file, parse_json_output, parse_text
from rdmaforge.runner.exit_codes import ExitCode

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "nccl-tests"
DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-json"
needs_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(),
    reason=f"{CORPUS} is absent: the nccl-tests corpus lives in ../shared beside the checkout",
)


def half(time_us: float, algbw: float, busbw: float, wrong: int | None = None, rel: float | None = None):
    return {"time_us": time_us, "algbw": algbw, "busbw": busbw, "wrong": wrong, "rel_error": rel}


def row(size: int, count: int, type_: str, redop: str | None, root: int | None, oop: dict, ip: dict | None):
    return {
        "size": size,
        "count": count,
        "type": type_,
        "redop": redop,
        "root": root,
        "out_of_place": oop,
        "in_place": ip,
    }


@dataclass(frozen=True)
class Expect:
    collective: str | None
    tests_version: str | None
    nccl_version: str | None
    ranks: int | None
    rows: int
    avg_busbw: float | None
    out_of_bounds: int | None
    status: str
    first: dict | None = None
    last: dict | None = None
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


V2178 = ("2.17.8", "2.29.2", 80)
V2176 = ("2.17.6", "2.28.7")
CNODE_FAILURE = "cnode2-001: Test NCCL failure common.cu:401 'remote process exited or there was a network error / '"
GENOA_FAILURE = (
    "GENOA-06: Test NCCL failure common.cu:392 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '"
)
GH200 = "Test CUDA failure common.cu:1304 'CUDA-capable device(s) is/are busy or unavailable'"
GH200_HOSTS = ("gpu-1-1", "gpu-1-7", "gpu-1-7", "gpu-1-7", "gpu-1-7", "gpu-1-1")
GENOA_WARNINGS = (
    "Could not find a path for pattern 4, falling back to simple order",
    "Could not find a path for pattern 1, falling back to simple order",
    "Cuda failure 1 'invalid argument'",
)
F, D = "float", "double"

# fmt: off
EXPECTED: dict[str, list[Expect]] = {
    "01_allreduce_v2.13_efa_2node_mpirun_ncclinfo.txt": [
        Expect(None, None, "2.12.7", 2, 31, 1.15327, 0, "ok",
               first=row(0, 0, F, "sum", None, half(6.36, 0.0, 0.0, 0), half(6.40, 0.0, 0.0, 0)),
               last=row(1073741824, 268435456, F, "sum", None,
                        half(344981, 3.11, 3.11, 0), half(344454, 3.12, 3.12, 0))),
    ],
    "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt": [
        Expect("all_reduce", *V2178, 10, 265.631, 0, "ok",
               first=row(33554432, 4194304, D, "sum", None,
                         half(798.52, 42.02, 82.99, 0), half(857.09, 39.15, 77.32, 0)),
               last=row(17179869184, 2147483648, D, "sum", None,
                        half(105854, 162.30, 320.54, 0), half(105146, 163.39, 322.70, 0))),
        Expect("all_gather", *V2178, 10, 218.677, 0, "ok",
               first=row(33553920, 52428, D, None, None,
                         half(682.20, 49.19, 48.57, 0), half(672.05, 49.93, 49.30, 0)),
               last=row(17179868160, 26843544, D, None, None,
                        half(52314.1, 328.40, 324.29, 0), half(52531.4, 327.04, 322.95, 0))),
        Expect("reduce_scatter", *V2178, 10, 216.683, 0, "ok",
               first=row(33553920, 52428, D, "sum", None,
                         half(689.11, 48.69, 48.08, 0), half(742.89, 45.17, 44.60, 0)),
               last=row(17179868160, 26843544, D, "sum", None,
                        half(52458.7, 327.49, 323.40, 0), half(52777.8, 325.51, 321.44, 0))),
        Expect("alltoall", *V2178, 10, 47.1472, 0, "ok",
               first=row(33553920, 52428, D, None, None,
                         half(970.33, 34.58, 34.15, 0), half(980.59, 34.22, 33.79, None)),
               last=row(17179868160, 26843544, D, None, None,
                        half(336737, 51.02, 50.38, 0), half(335382, 51.22, 50.58, None))),
        Expect("sendrecv", *V2178, 10, 15.1671, 0, "ok",
               first=row(33554432, 4194304, D, "sum", None,
                         half(2271.70, 14.77, 14.77, 0), half(2290.00, 14.65, 14.65, None)),
               last=row(17179869184, 2147483648, D, "sum", None,
                        half(1128428, 15.22, 15.22, 0), half(1128397, 15.23, 15.23, None))),
    ],
    "03_alltoall_fail_sendrecv_v2.17.6_h100_8gpu_2node.txt": [
        Expect("alltoall", *V2176, 8, 0, None, None, "failed", errors=(CNODE_FAILURE,)),
        Expect("sendrecv", *V2176, 8, 10, 5.9895, 0, "ok",
               first=row(33554432, 4194304, D, "sum", None,
                         half(3809.85, 8.81, 8.81, 0), half(3875.27, 8.66, 8.66, None)),
               last=row(17179869184, 2147483648, D, "sum", None,
                        half(1.6e07, 1.09, 1.09, 0), half(1.7e07, 1.03, 1.03, None))),
    ],
    "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt": [
        Expect("alltoall", *V2176, 2, 10, 13.4689, 0, "ok",
               first=row(33554432, 2097152, D, None, None,
                         half(1282.93, 26.15, 13.08, 0), half(1266.72, 26.49, 13.24, None)),
               last=row(17179869184, 1073741824, D, None, None,
                        half(635876, 27.02, 13.51, 0), half(631396, 27.21, 13.60, None))),
        Expect("sendrecv", *V2176, 2, 10, 13.5405, 0, "ok",
               first=row(33554432, 4194304, D, "sum", None,
                         half(2513.89, 13.35, 13.35, 0), half(2504.26, 13.40, 13.40, None)),
               last=row(17179869184, 2147483648, D, "sum", None,
                        half(1263724, 13.59, 13.59, 0), half(1262569, 13.61, 13.61, None))),
    ],
    "07_multi_v2.0-era_v100_12gpu_dgx2_allgather_oob4.txt": [
        Expect("all_gather", None, None, 12, 31, 30.2993, 4, "failed",
               first=row(0, 0, F, None, None,
                         half(57.30, 0.0, 0.0, None, 0.0), half(57.09, 0.0, 0.0, None, 0.0)),
               last=row(8589934560, 178956970, F, None, None,
                        half(106773, 73.75, 73.75, None, 1.0), half(70089, 112.34, 112.34, None, 1.0))),
        Expect("all_reduce", None, None, 12, 31, 42.5578, 0, "ok",
               first=row(8, 2, F, "sum", None,
                         half(61.03, 0.0, 0.0, None, 2e-07), half(61.04, 0.0, 0.0, None, 1e-07)),
               last=row(8589934592, 2147483648, F, "sum", None,
                        half(127453, 67.40, 123.56, None, 2e-07), half(127443, 67.40, 123.57, None, 2e-07))),
        Expect("broadcast", None, None, 12, 31, 41.2456, 0, "ok",
               first=row(8, 2, F, None, 0,
                         half(59.75, 0.0, 0.0, None, 0.0), half(59.96, 0.0, 0.0, None, 0.0)),
               last=row(8589934592, 2147483648, F, None, 0,
                        half(70321, 122.15, 122.15, None, 0.0), half(70368, 122.07, 122.07, None, 0.0))),
        Expect("reduce", None, None, 12, 31, 41.3386, 0, "ok",
               first=row(8, 2, F, "sum", 0,
                         half(58.15, 0.0, 0.0, None, 2e-07), half(59.52, 0.0, 0.0, None, 1e-07)),
               last=row(8589934592, 2147483648, F, "sum", 0,
                        half(69989, 122.73, 122.73, None, 2e-07), half(70007, 122.70, 122.70, None, 2e-07))),
        Expect("reduce_scatter", None, None, 12, 31, 20.3609, 0, "ok",
               first=row(0, 0, F, "sum", None,
                         half(58.16, 0.0, 0.0, None, 0.0), half(58.77, 0.0, 0.0, None, 0.0)),
               last=row(8589934560, 178956970, F, "sum", None,
                        half(122722, 64.16, 64.16, None, 2e-07), half(123574, 63.72, 63.72, None, 2e-07))),
    ],
    "08_allreduce_v2.0-era_v100_16gpu_2node_efa_ncclinfo.txt": [
        Expect(None, None, "2.6.4", 16, 28, 2.28496, 0, "ok",
               first=row(8, 2, F, "sum", None,
                         half(152.5, 0.0, 0.0, None, 2e-07), half(151.9, 0.0, 0.0, None, 1e-07)),
               last=row(1073741824, 268435456, F, "sum", None,
                        half(367759, 2.92, 5.47, None, 5e-07), half(368047, 2.92, 5.47, None, 5e-07))),
    ],
    "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt": [
        Expect("all_reduce", None, "2.11.4", 2, 25, 0.300212, 0, "ok",
               first=row(8, 2, F, "sum", None,
                         half(172.7, 0.0, 0.0, None, 0.0), half(168.9, 0.0, 0.0, None, 0.0)),
               last=row(134217728, 33554432, F, "sum", None,
                        half(183560, 0.73, 0.73, None, 0.0), half(174589, 0.77, 0.77, None, 0.0))),
    ],
    "13_allreduce_v2.13-2.14.0_5090_2gpu_ncclinfo_ncclwarn_testncclfailure.txt": [
        Expect("all_reduce", None, "2.25.1", 2, 0, None, None, "failed",
               errors=(GENOA_FAILURE,), warnings=GENOA_WARNINGS),
    ],
    "14_allreduce_v2.17.8_gh200_8gpu_2node_testcudafailure.txt": [
        Expect("all_reduce", "2.17.8", "2.26.6", 8, 0, None, None, "failed",
               errors=tuple(f"{host}: {GH200}" for host in GH200_HOSTS)),
    ],
    "16_allreduce_v1.0_p100_8gpu_ncclfailure.txt": [
        Expect("all_reduce", None, "1.0", 8, 0, None, None, "failed",
               errors=("NCCL failure all_reduce.cu:95 'unhandled cuda error'",)),
    ],
    "20_alltoall_ok_sendrecv_HANG_v2.17.6_h100_2gpu_2node.txt": [
        Expect("alltoall", *V2176, 2, 10, 13.3923, 0, "ok",
               first=row(33554432, 2097152, D, None, None,
                         half(1299.79, 25.82, 12.91, 0), half(1280.15, 26.21, 13.11, None)),
               last=row(17179869184, 1073741824, D, None, None,
                        half(638886, 26.89, 13.45, 0), half(635731, 27.02, 13.51, None))),
        Expect("sendrecv", *V2176, 2, 0, None, None, "incomplete"),
    ],
    "22_alltoall_v2.0-2.9_a100_8gpu_c0_NA_blank-redop_SANITIZED.txt": [
        Expect(None, None, None, 8, 34, 58.6481, 0, "ok",
               first=row(0, 0, F, None, None, half(1.63, 0.0, 0.0), half(1.38, 0.0, 0.0)),
               last=row(8589934592, 268435456, F, None, None,
                        half(33508, 256.36, 224.31), half(33234, 258.47, 226.16))),
    ],
}
# fmt: on


def corpus_runs(name: str) -> list[Run]:
    return parse_file(CORPUS / name).runs


# -- the corpus -----------------------------------------------------------------------------------------


@needs_corpus
def test_every_corpus_file_has_expectations() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.txt")) == sorted(EXPECTED)


@needs_corpus
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file(name: str) -> None:
    runs = corpus_runs(name)
    expected = EXPECTED[name]
    assert len(runs) == len(expected)
    for run, want in zip(runs, expected, strict=True):
        assert run.collective == want.collective
        assert run.nccl_tests_version == want.tests_version
        assert run.nccl_version == want.nccl_version
        assert run.ranks == want.ranks
        assert len(run.rows) == want.rows
        assert run.avg_busbw == want.avg_busbw
        assert run.out_of_bounds == want.out_of_bounds
        assert run.status == want.status
        assert tuple(run.errors) == want.errors
        assert tuple(run.warnings) == want.warnings
        if want.first is not None:
            assert run.rows[0].to_dict() == want.first
            assert run.rows[-1].to_dict() == want.last


@needs_corpus
def test_corpus_row_totals_match_index() -> None:
    totals = {name: sum(len(run.rows) for run in corpus_runs(name)) for name in EXPECTED}
    assert totals == {
        "01_allreduce_v2.13_efa_2node_mpirun_ncclinfo.txt": 31,
        "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt": 50,
        "03_alltoall_fail_sendrecv_v2.17.6_h100_8gpu_2node.txt": 10,
        "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt": 20,
        "07_multi_v2.0-era_v100_12gpu_dgx2_allgather_oob4.txt": 155,
        "08_allreduce_v2.0-era_v100_16gpu_2node_efa_ncclinfo.txt": 28,
        "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt": 25,
        "13_allreduce_v2.13-2.14.0_5090_2gpu_ncclinfo_ncclwarn_testncclfailure.txt": 0,
        "14_allreduce_v2.17.8_gh200_8gpu_2node_testcudafailure.txt": 0,
        "16_allreduce_v1.0_p100_8gpu_ncclfailure.txt": 0,
        "20_alltoall_ok_sendrecv_HANG_v2.17.6_h100_2gpu_2node.txt": 10,
        "22_alltoall_v2.0-2.9_a100_8gpu_c0_NA_blank-redop_SANITIZED.txt": 34,
    }


@needs_corpus
def test_wrong_counts_v2_17() -> None:
    for run in corpus_runs("02_multi_v2.17.8_h100_80gpu_10node_5colls.txt"):
        assert {r.out_of_place.wrong for r in run.rows} == {0}
        in_place = {r.in_place.wrong for r in run.rows if r.in_place is not None}
        # 2.13.1+: alltoall and sendrecv print N/A for the in-place #wrong.
        assert in_place == ({None} if run.collective in ("alltoall", "sendrecv") else {0})


@needs_corpus
def test_relative_error_column_v2_0() -> None:
    all_gather = corpus_runs("07_multi_v2.0-era_v100_12gpu_dgx2_allgather_oob4.txt")[0]
    errors = [r.out_of_place.rel_error for r in all_gather.rows]
    assert errors[-2:] == [1.0, 1.0]
    assert all(e == 0.0 for e in errors[:-2])
    assert all(r.out_of_place.wrong is None for r in all_gather.rows)
    assert all_gather.status_reason == "out of bounds values: 4"


@needs_corpus
def test_a_run_started_with_c_0_says_its_data_was_not_validated(capsys: pytest.CaptureFixture[str]) -> None:
    """Corpus 22 was run with -c 0 (its nThread line says validation: 0, every #wrong is N/A): nccl-report printed
    "status: ok" and nothing else, as for a run whose results were checked (review round 29b). The run stays ok (it
    completed); the report says the data went unchecked, in text and JSON. A run with validation: 1 says nothing."""
    unchecked = str(CORPUS / "22_alltoall_v2.0-2.9_a100_8gpu_c0_NA_blank-redop_SANITIZED.txt")
    assert "validation: 0" in Path(unchecked).read_text()
    assert main(["nccl-report", unchecked]) == ExitCode.OK
    text = capsys.readouterr().out
    assert "  status: ok\n  data: not validated (nccl-tests -c 0: #wrong is N/A, so wrong results were not counted)" \
        in text, text[:600]  # fmt: skip
    assert main(["nccl-report", "--json", unchecked]) == ExitCode.OK
    assert [run["validated"] for run in json.loads(capsys.readouterr().out)["runs"]] == [False]
    checked = str(CORPUS / "01_allreduce_v2.13_efa_2node_mpirun_ncclinfo.txt")
    assert "validation: 1" in Path(checked).read_text()
    main(["nccl-report", checked])
    assert "not validated" not in capsys.readouterr().out
    main(["nccl-report", "--json", checked])
    assert [run["validated"] for run in json.loads(capsys.readouterr().out)["runs"]] == [True]


@needs_corpus
def test_a_table_without_wrong_counts_is_not_validated_whatever_its_nthread_line_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review round 33b: 05's first run with every out-of-place #wrong printed N/A, its nThread line still saying
    validation: 1, was reported with no note: the table counted nothing, so nothing says its data was checked.
    Review round 34a: with the note it was still "status: ok", exit 0; the log contradicts itself, so the run is
    incomplete (exit 5)."""
    text = (CORPUS / "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt").read_text()
    first = text[: text.index("# Collective test concluded: alltoall_perf")]
    assert "validation: 1" in first
    rows = [line for line in first.splitlines() if line.strip()[:1].isdigit()]
    blanked = first
    for row in rows:
        fields = row.split()
        assert fields[8] == "0" and fields[-1] == "N/A"  # out-of-place #wrong counted, in-place N/A (alltoall)
        blanked = blanked.replace(row, row.replace(f" {fields[7]}       0 ", f" {fields[7]}     N/A ", 1))
    assert blanked.count("N/A") == 2 * len(rows)
    log = tmp_path / "no-counts.log"
    log.write_text(blanked)
    assert main(["nccl-report", str(log)]) == ExitCode.INCOMPLETE
    out = capsys.readouterr().out
    assert ("  data: not validated (every #wrong is N/A although the nThread line says validation: 1: the table "
            "counts no wrong results)") in out, out[:800]
    assert "status: incomplete - its nThread line says validation: 1, yet every #wrong is N/A" in out, out[:800]
    log.write_text(first)  # untouched: counted, so no note
    main(["nccl-report", str(log)])
    assert "not validated" not in capsys.readouterr().out


def test_a_json_run_started_with_c_0_says_its_data_was_not_validated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-J output says -c in config.validation (review round 31a: only the text log's nThread line was read). The
    repository's sample as `-c 0 -J` writes it: validation 0, every nwrong null."""
    sample = Path(__file__).resolve().parents[1] / "data" / "nccl-json" / "all_reduce_v2.17.8_ok.json"
    document = json.loads(sample.read_text())
    assert document["config"]["validation"] == 1
    document["config"]["validation"] = 0
    for row in document["results"]:
        for half in ("out_of_place", "in_place"):
            row[half]["nwrong"] = None
    unchecked = tmp_path / "c0.json"
    unchecked.write_text(json.dumps(document))
    assert main(["nccl-report", str(unchecked)]) == ExitCode.OK
    assert "  status: ok\n  data: not validated (" in capsys.readouterr().out
    for path, validated in ((unchecked, False), (sample, True)):
        assert main(["nccl-report", "--json", str(path)]) == ExitCode.OK
        assert [run["validated"] for run in json.loads(capsys.readouterr().out)["runs"]] == [validated]


def _with_oob_line(name: str, replacement: str | None) -> list[Run]:
    """The corpus file with each ``Out of bounds values`` line replaced (None: deleted)."""
    lines = (CORPUS / name).read_text().splitlines(keepends=True)
    kept = [line if "Out of bounds values" not in line else replacement for line in lines]
    return parse("".join(line for line in kept if line is not None)).runs


@needs_corpus
def test_an_error_column_run_without_its_out_of_bounds_line_is_not_ok() -> None:
    """v2.0-2.11 print a relative error per row, no #wrong: nccl-tests judges it only in the Out of bounds line.
    Review round 25b: corpus 07's all_gather (error 1e+00 in its last rows) was ok with that line deleted or its
    count garbled."""
    oob4 = "07_multi_v2.0-era_v100_12gpu_dgx2_allgather_oob4.txt"
    runs = _with_oob_line(oob4, None)
    assert [r.status for r in runs] == ["incomplete"] * 5
    assert "no readable 'Out of bounds values' line" in str(runs[0].status_reason)
    garbled = _with_oob_line(oob4, "# Out of bounds values : ? FAILED\n")
    assert [r.status for r in garbled] == ["failed"] * 5
    assert garbled[0].status_reason == "# Out of bounds values : ? FAILED"
    # A count of 0 with nccl-tests' own FAILED: the word is its verdict.
    v2_11 = "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt"
    zero = _with_oob_line(v2_11, "# Out of bounds values : 0 FAILED\n")
    assert [r.status for r in zero] == ["failed"]


@needs_corpus
def test_a_wrong_column_run_is_judged_by_its_rows_without_the_out_of_bounds_line() -> None:
    """v2.12+ print #wrong in every row: those rows are the verdict, with or without the footer's line."""
    runs = _with_oob_line("02_multi_v2.17.8_h100_80gpu_10node_5colls.txt", None)
    assert [r.status for r in runs] == ["ok"] * 5


def test_an_out_of_bounds_count_too_long_for_a_number_is_no_count() -> None:
    """Review round 25b: a count of 5,000 digits raised ValueError from int() (exit 70, "internal error")."""
    header = ("#  size count type redop time algbw busbw error time algbw busbw error\n"
              "#   (B) (elements) (us) (GB/s) (GB/s) (us) (GB/s) (GB/s)\n")  # fmt: skip
    row = "  1048576  262144  float  sum  100.0  10.49  19.66  0e+00  100.0  10.49  19.66  0e+00\n"
    for footer, status in (("9" * 5000, "incomplete"), ("9" * 5000 + " FAILED", "failed"), ("4 FAILED", "failed"),
                           ("0 OK", "ok")):  # fmt: skip
        (run,) = parse(header + row + f"# Out of bounds values : {footer}\n# Avg bus bandwidth    : 19.66\n").runs
        assert run.status == status, footer


@pytest.mark.parametrize("accelerated", [True, False])
@pytest.mark.parametrize("size", [str(2**63), "1" + "0" * 19, "1" + "0" * 20])
def test_a_row_whose_size_is_past_64_bits_is_an_invalid_row(
    monkeypatch: pytest.MonkeyPatch, accelerated: bool, size: str
) -> None:
    """Review round 26: a size of 19 or 20 digits past 2**63 was dropped without a trace (the store refused it and
    the row counted as read), and the run passed on its other rows."""
    if not accelerated:
        monkeypatch.setattr(accel, "fast", None)
    header = ("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
              "#   (B) (elements) (us) (GB/s) (GB/s) (us) (GB/s) (GB/s)\n")  # fmt: skip
    row = "  {}  262144  float  sum  -1  100.0  10.49  19.66  0  100.0  10.49  19.66  0\n"
    footer = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 19.66\n"
    (run,) = parse(header + row.format(1048576) + row.format(size) + footer).runs
    assert run.status == "failed" and run.rows.invalid_rows == 1 and "past 64 bits" in str(run.status_reason)


@pytest.mark.parametrize("accelerated", [True, False])
@pytest.mark.parametrize(("wrong", "status"), [("0.5", "failed"), ("-1e-05", "failed"), ("1e+00", "failed"),
                                               ("0", "ok"), ("0e+00", "ok")])  # fmt: skip
def test_a_fractional_wrong_count_never_reads_as_zero(
    monkeypatch: pytest.MonkeyPatch, accelerated: bool, wrong: str, status: str
) -> None:
    """Review round 25b: int() made a #wrong of 0.5 or -1e-05 (a garbled column) 0 wrong values, and the row passed."""
    if not accelerated:
        monkeypatch.setattr(accel, "fast", None)
    header = ("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
              "#   (B) (elements) (us) (GB/s) (GB/s) (us) (GB/s) (GB/s)\n")  # fmt: skip
    row = f"  1048576  262144  float  sum  -1  100.0  10.49  19.66  {wrong}  100.0  10.49  19.66  0\n"
    (run,) = parse(header + row + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 19.66\n").runs
    assert run.status == status, run.status_reason


@needs_corpus
@pytest.mark.parametrize("accelerated", [True, False])
def test_numbers_too_long_for_int_are_no_numbers(monkeypatch: pytest.MonkeyPatch, accelerated: bool) -> None:
    """Review round 25b: a size, nThread, sweep, rank or NCCL code of 5,000 digits raised ValueError (int() refuses
    more than 4300 digits): nccl-report exited 70, "internal error". A row's size so long is a size past what a row
    stores (an invalid row, failing the run); a header line with one is no such line."""
    if not accelerated:
        monkeypatch.setattr(accel, "fast", None)
    text = (CORPUS / "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt").read_text()
    huge = "9" * 5000
    first_row = next(line for line in text.splitlines() if line.strip().startswith("33554432 "))
    size = first_row.split()[0]
    (alltoall, _) = parse(text.replace(first_row, first_row.replace(size, huge, 1))).runs
    assert alltoall.status == "failed" and alltoall.status_reason is not None
    assert "past 64 bits" in alltoall.status_reason
    for old, new in (("nThread 1", f"nThread {huge}"), ("maxBytes 17179869184", f"maxBytes {huge}"),
                     ("#  Rank  0", f"#  Rank  {huge}")):  # fmt: skip
        assert old in text, old
        runs = parse(text.replace(old, new, 1)).runs
        assert runs and all(r.status in ("ok", "incomplete") for r in runs), old


@needs_corpus
def test_na_columns_and_blank_redop() -> None:
    (run,) = corpus_runs("22_alltoall_v2.0-2.9_a100_8gpu_c0_NA_blank-redop_SANITIZED.txt")
    assert sum(1 for r in run.rows if r.size == 0) == 5
    assert all(r.redop is None and r.out_of_place.rel_error is None for r in run.rows)


@needs_corpus
def test_mpi_prefixes_and_info_inside_table() -> None:
    (run,) = corpus_runs("01_allreduce_v2.13_efa_2node_mpirun_ncclinfo.txt")
    assert [r.size for r in run.rows[:3]] == [0, 0, 4]


@needs_corpus
def test_hang_reason() -> None:
    sendrecv = corpus_runs("20_alltoall_ok_sendrecv_HANG_v2.17.6_h100_2gpu_2node.txt")[1]
    assert sendrecv.status_reason == "the result table has no rows (hang or truncated log)"


@needs_corpus
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_truncated_and_corrupted_never_raises(name: str) -> None:
    data = (CORPUS / name).read_bytes()
    rng = random.Random(name)
    for cut in range(0, len(data), max(1, len(data) // 40)):
        for run in parse(data[:cut]).runs:
            run.to_dict()
    damaged = bytearray(data)
    for _ in range(200):
        damaged[rng.randrange(len(damaged))] = rng.randrange(256)
    parse(bytes(damaged)).to_dict()


# -- synthetic text: formats and failure modes the corpus lacks ----------------------------------------

V1_LOG = """\
nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 
# NCCL Tests compiled with NCCL 1.0
# Using devices
#   Rank  0 on     node03 device  0 [0x04] Tesla P100-PCIE-16GB
#   Rank  1 on     node03 device  1 [0x05] Tesla P100-PCIE-16GB

#                                                 out-of-place                    in-place
#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res
           8             2   float     sum    0.031   0.00   0.00    1e-07    0.029   0.00   0.00    1e-07
          16             4   float     sum    0.030   0.00   0.00\tN/A    0.030   0.00   0.00\tN/A
 Out of bounds values : 0 OK
 Avg bus bandwidth    : 0.000512 

"""  # noqa: W291


def test_v1_milliseconds_become_microseconds() -> None:
    (run,) = parse_text(V1_LOG)
    assert run.status == "ok"
    assert run.nccl_version == "1.0"
    assert run.ranks == 2
    assert [r.out_of_place.time_us for r in run.rows] == pytest.approx([31.0, 30.0])
    assert run.rows[0].out_of_place.rel_error == 1e-07
    assert run.rows[1].in_place is not None and run.rows[1].in_place.rel_error is None
    assert run.avg_busbw == 0.000512


HEAD_2_17 = """\
# nccl-tests version 2.17.9 nccl-headers=22803 nccl-library=22803
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  10001 on    node-01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  20002 on    node-02 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
"""  # noqa: W291,E501
#: The same run announcing one size (the 1 MiB row alone), and a sweep from 0 bytes (which nccl-tests' loop
#: cannot step by a factor: no count of sizes is expected).
HEAD_1M = HEAD_2_17.replace("maxBytes 2097152", "maxBytes 1048576")
HEAD_FROM_0 = HEAD_2_17.replace("minBytes 1048576", "minBytes 0")

# Rows as 2.17.3+ prints them: preamble "%12li  %12li  %8s  %6s  %6i" (52 columns), then two halves.
PRE_1M = "     1048576        262144     float     sum      -1"
PRE_2M = "     2097152        524288     float     sum      -1"
ROW_1M = PRE_1M + "    60.10   17.45   17.45       0    59.80   17.53   17.53       0"
ROW_2M = PRE_2M + "    95.20   22.03   22.03       0    94.70   22.15   22.15       0"
FOOTER = """\
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 19.7875 
#
# Collective test concluded: all_reduce_perf
#
"""  # noqa: W291


#: The footer of a table holding ROW_1M alone: nccl-tests' average is the mean busbw of every half of every row.
FOOTER_1M = FOOTER.replace("19.7875", "17.49")


def test_a_footer_that_is_not_the_mean_of_the_rows_is_not_ok() -> None:
    """Rows missing, or another process's rows or footer in this run: the average says so (FOOTER is for 2 rows)."""
    (run,) = parse_text(HEAD_2_17 + ROW_1M + "\n" + FOOTER)
    assert run.status == "incomplete"
    assert run.status_reason == (
        "its 'Avg bus bandwidth' (19.7875 GB/s) is not the mean of its 1 row(s) (17.49 GB/s): rows are missing, "
        "or another process's rows or footer are mixed into this run"
    )


def test_clean_v2_17_run() -> None:
    (run,) = parse_text(HEAD_2_17 + ROW_1M + "\n" + ROW_2M + "\n" + FOOTER)
    assert (run.collective, run.nccl_tests_version, run.nccl_version) == ("all_reduce", "2.17.9", "2.28.3")
    assert run.ranks == 2
    assert (len(run.rows), run.avg_busbw, run.out_of_bounds, run.status) == (2, 19.7875, 0, "ok")


#: A 1 MiB row whose times and bandwidths are negative (as /tmp/audit-cli-1/t_neg.txt made of file 05's first row)
#: and a 2 MiB row measured in no time at all: neither is a measurement.
NEGATIVE_1M = PRE_1M + "   -60.10  -17.45  -17.45     N/A   -59.80  -17.53  -17.53     N/A"
ZERO_TIME_2M = PRE_2M + "     0.00    0.00    0.00       0     0.00    0.00    0.00       0"
#: nccl-tests' average of those two rows (the mean busbw of their four halves).
FOOTER_NO_MEASUREMENT = FOOTER.replace("19.7875", "-8.745")


@pytest.mark.parametrize("fast", [True, False], ids=["accelerator", "pure-python"])
def test_rows_that_are_no_measurement_fail_the_run(monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    if not fast:
        monkeypatch.setattr(accel, "fast", None)
    (run,) = parse_text(HEAD_2_17 + NEGATIVE_1M + "\n" + ZERO_TIME_2M + "\n" + FOOTER_NO_MEASUREMENT)
    assert [r.size for r in run.rows] == [1048576, 2097152]
    assert run.status == "failed"
    assert run.status_reason == (
        "2 invalid row(s), not a measurement: a negative size, count, time, bandwidth or #wrong, a size or count "
        "past 64 bits, a time or bandwidth that is not a number (nan, inf, N/A, a word), a zero time for a message of "
        "some bytes, or numbers that disagree (an NCCL line cut the row inside a number) (size 1048576, 2097152)"
    )
    (one,) = parse_text(HEAD_2_17 + ROW_1M + "\n" + NEGATIVE_1M.replace("-17.45", " 17.45") + "\n" + FOOTER)
    assert one.status == "failed" and one.status_reason is not None and "(size 1048576)" in one.status_reason


#: printf's spellings of a time or bandwidth that is no number (a broken timer, a division by zero), and N/A.
NOT_A_NUMBER = ("nan", "-nan", "inf", "-inf", "N/A")


@pytest.mark.parametrize("token", NOT_A_NUMBER)
@pytest.mark.parametrize("fast", [True, False], ids=["accelerator", "pure-python"])
def test_a_row_whose_bandwidth_is_not_a_number_fails_the_run(
    monkeypatch: pytest.MonkeyPatch, fast: bool, token: str
) -> None:
    """The 2 MiB row of a sweep with busbw nan was dropped as if it were not a row: the run was ok on its 1 MiB row
    alone (its footer's average within 5% of it), so the largest size vanished from a passing report."""
    if not fast:
        monkeypatch.setattr(accel, "fast", None)
    nan_2m = PRE_2M + f"    95.20 {token:>7} {token:>7}       0    94.70   22.15   22.15       0"
    (run,) = parse_text(HEAD_2_17 + ROW_1M + "\n" + nan_2m + "\n" + FOOTER_1M.replace("17.49", "18.0"))
    assert run.status == "failed", run.status_reason
    assert run.status_reason is not None and "1 invalid row(s), not a measurement" in run.status_reason
    assert "not a number" in run.status_reason and run.status_reason.endswith("(size 2097152)")
    # A time that is no number is no measurement either, in either half.
    nan_time = PRE_2M + f"    95.20   22.03   22.03       0  {token:>7}   22.15   22.15       0"
    (run,) = parse_text(HEAD_2_17 + ROW_1M + "\n" + nan_time + "\n" + FOOTER_1M.replace("17.49", "18.0"))
    assert run.status == "failed" and run.status_reason is not None and "(size 2097152)" in run.status_reason


def test_a_row_cut_short_is_still_no_row() -> None:
    """Only a row whose every column is a number or N/A counts as one without a measurement; a row cut mid-token
    (`in` of inf, `-na` of -nan) is what a hang leaves: the run stays incomplete, not failed."""
    for cut in (ROW_2M[:-3] + " in", ROW_2M[:-3] + " -na"):
        (run,) = parse_text(HEAD_2_17 + ROW_1M + "\n" + cut)
        assert run.status == "incomplete", (cut, run.status_reason)


def test_a_json_row_with_a_negative_size_or_time_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads((DATA / "all_reduce_v2.17.8_ok.json").read_text())
    document["results"][0]["size"] = -8
    document["results"][1]["in_place"]["time"] = -20.02
    path = tmp_path / "negative.json"
    path.write_text(json.dumps(document))
    assert main(["nccl-report", "--json", str(path)]) == ExitCode.BELOW_THRESHOLD
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["status"] == "failed"
    assert run["status_reason"].startswith("2 invalid row(s), not a measurement")
    assert run["status_reason"].endswith("(size -8, 16)")


@pytest.mark.parametrize(
    "value", ["NaN", "Infinity", "-Infinity", "1e400", "1" + "0" * 400, '"nan"', '"-nan"', '"inf"'],
    ids=["NaN", "Infinity", "-Infinity", "1e400", "10**400", "str-nan", "str--nan", "str-inf"],
)  # fmt: skip
def test_a_json_row_whose_bandwidth_is_not_a_number_fails_the_run(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Valid JSON for Python (NaN, Infinity, numbers past a double) or nccl-tests' string "nan": the 64-byte row
    vanished without a warning, and the run was ok on its other sizes."""
    text = (DATA / "all_reduce_v2.17.8_ok.json").read_text()
    assert text.count('"bus_bw":0.004565') == 1
    path = tmp_path / "nan.json"
    path.write_text(text.replace('"bus_bw":0.004565', f'"bus_bw":{value}'))
    assert main(["nccl-report", "--json", str(path)]) == ExitCode.BELOW_THRESHOLD
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["status"] == "failed"
    assert run["status_reason"].startswith("1 invalid row(s), not a measurement")
    assert run["status_reason"].endswith("(size 64)")


def test_a_zero_byte_row_whose_bandwidth_is_nan_is_no_invalid_row() -> None:
    """0 bytes in some time: nccl-tests writes its bandwidths as "nan" (-J) and may print nan; nothing to judge."""
    zero = "           0             0     float     sum      -1" + "     4.12     nan     nan       0" * 2
    (run,) = parse_text(HEAD_FROM_0 + zero + "\n" + ROW_1M + "\n" + FOOTER_1M)
    assert run.status == "ok", run.status_reason


def test_zero_byte_rows_with_zero_bandwidth_stay_ok() -> None:
    zero = "           0             0     float     sum      -1" + "     0.12    0.00    0.00       0" * 2
    (run,) = parse_text(HEAD_FROM_0 + zero + "\n" + ROW_1M + "\n" + FOOTER_1M.replace("17.49", "8.745"))
    assert run.status == "ok", run.status_reason


def test_failure_glued_onto_a_row() -> None:
    failure = "Test NCCL failure common.cu:401 'remote process exited or there was a network error / '"
    trace = " .. node-02 pid 20002: Test failure common.cu:519"
    (run,) = parse_text(HEAD_2_17 + ROW_1M + "\n" + PRE_2M + "node-02: " + failure + "\n" + trace + "\n")
    assert run.status == "failed"
    assert len(run.rows) == 1
    assert run.errors == [f"node-02: {failure}"]


def test_info_line_glued_into_a_row_keeps_the_row() -> None:
    info = "node-01:10001:10050 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA"
    rest_1m = ROW_1M[len(PRE_1M) :]
    text = HEAD_2_17 + PRE_1M + info + "\n" + info + "\n" + rest_1m + "\n" + ROW_2M + "\n" + FOOTER
    (run,) = parse_text(text)
    assert [r.size for r in run.rows] == [1048576, 2097152]
    assert run.rows[0].to_dict() == parse_text(HEAD_2_17 + ROW_1M)[0].rows[0].to_dict()
    assert run.status == "ok"


def test_truncated_mid_row_is_incomplete() -> None:
    (run,) = parse_text(HEAD_2_17 + ROW_1M + "\n" + ROW_2M[:75])
    assert len(run.rows) == 1
    assert run.status == "incomplete"
    assert run.status_reason == "no 'Avg bus bandwidth' line after 1 row(s) (hang or truncated log)"


def test_nonzero_wrong_and_trace_lines_fail_the_run() -> None:
    wrong = ROW_2M.replace("       0    94.70", " 1.04858e+06    94.70")
    footer = FOOTER.replace("0 OK", "1 FAILED") + " .. node-01 pid 10001: Test failure common.cu:1138\n"
    (run,) = parse_text(HEAD_2_17 + ROW_1M + "\n" + wrong + "\n" + footer)
    assert run.rows[1].out_of_place.wrong == 1048580
    assert run.out_of_bounds == 1
    assert run.status == "failed"
    assert run.errors == [".. node-01 pid 10001: Test failure common.cu:1138"]


def test_wrong_without_out_of_bounds_line_fails() -> None:
    wrong = ROW_2M.replace("       0    94.70", "       3    94.70")
    (run,) = parse_text(HEAD_2_17 + wrong + "\n" + FOOTER)
    assert run.status == "failed"
    assert run.status_reason == "1 row(s) with #wrong > 0"


def test_min_bandwidth_check_and_last_error() -> None:
    footer = FOOTER.replace("19.7875 ", "19.7875 FAILED") + "# error: NET/IB : Got async event : port error\n"
    (run,) = parse_text(HEAD_2_17 + ROW_1M + "\n" + footer)
    assert run.bw_check_failed and run.status == "failed"
    assert run.warnings == ["NET/IB : Got async event : port error"]


def test_timeout_line() -> None:
    (run,) = parse_text(HEAD_2_17 + ROW_1M + "\nnode-01: Test timeout (600s) common.cu:1207\n")
    assert run.errors == ["node-01: Test timeout (600s) common.cu:1207"]
    assert run.status == "failed"


def test_timestamp_and_per_iteration_columns() -> None:
    # 2.19.2 ``-I 1`` adds i_min/i_max/i_p99/i_cv% to each half; 2.17.6 ``-S`` appends a timestamp.
    stats = "    i_min    i_max    i_p99   i_cv%"
    header = (
        "#       size         count      type   redop    root"
        + ("     time   algbw   busbw  #wrong" + stats) * 2
        + "            timestamp\n"
    )
    line = (
        PRE_1M
        + "    60.10   17.45   17.45       0    58.00    66.00    65.00    2.10"
        + "    59.80   17.53   17.53       0    57.90    64.00    63.90    1.90"
        + "  2026-03-02 08:15:41\n"
    )
    (run,) = parse_text("# nThread 1 nGpus 1 minBytes 1 maxBytes 1\n" + header + line)
    expected = row(1048576, 262144, "float", "sum", None, half(60.10, 17.45, 17.45, 0), half(59.80, 17.53, 17.53, 0))
    assert run.rows[0].to_dict() == expected


def test_v2_16_starting_line_without_version_line() -> None:
    text = HEAD_2_17.split("\n", 1)[1].replace("all_reduce_perf", "broadcast_perf")
    (run,) = parse_text(text + ROW_1M.replace("  sum      -1", " none       0") + "\n" + FOOTER)
    assert run.collective == "broadcast"
    assert run.nccl_tests_version is None
    assert (run.rows[0].redop, run.rows[0].root) == (None, 0)


def test_several_runs_in_one_file() -> None:
    text = (HEAD_1M + ROW_1M + "\n" + FOOTER_1M) * 3
    assert [r.status for r in parse_text(text)] == ["ok", "ok", "ok"]


def test_row_with_na_time_does_not_count() -> None:
    # Not a row of the table, but no time for a message of some bytes: no measurement, which fails the run (a
    # sweep's other rows would otherwise pass without it).
    (run,) = parse_text(HEAD_2_17 + ROW_1M.replace("   60.10", "     N/A") + "\n" + FOOTER)
    assert run.rows == []
    assert run.status == "failed" and run.status_reason is not None and "(size 1048576)" in run.status_reason


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n\n\n",
        b"\x00\xff\xfe# nThread\x00 1\r\n#  size count type time busbw\r\n   1 2 float 3 4 5 6",
        "#       size  count  type  time  algbw  busbw  #wrong\n  5 5 \u00e9 1 2 3 4\n".encode("utf-16"),
        b"# Avg bus bandwidth    : nan \n# Out of bounds values : 99999999999999999999 OK\n",
        b"host: Test NCCL failure\nNCCL version \n[1,0]<stdout>:",
    ],
)
def test_odd_input_never_raises(data: bytes) -> None:
    report = parse(data)
    json.dumps(report.to_dict(), allow_nan=False)


def test_random_bytes_are_refused_as_binary_not_parsed() -> None:
    """Random bytes (few NULs) were parsed into no run; they are refused as binary data (InputError: exit 64)."""
    from rdmaforge.nccl_tests import InputError

    with pytest.raises(InputError, match="holds binary data"):
        parse(random.Random(7).randbytes(8192))


def test_warning_before_the_banner_joins_the_next_run() -> None:
    warn = "\nnode-01:10001:10001 [0] misc/ibvwrap.cc:100 NCCL WARN Call to ibv_open_device failed\n\n"
    (run,) = parse_text(warn + HEAD_1M + ROW_1M + "\n" + FOOTER_1M)
    assert run.warnings == ["Call to ibv_open_device failed"]
    assert run.status == "ok"


def test_json_object_that_is_not_nccl_tests_output() -> None:
    assert parse('{"hello": "world"}').runs == []
    (run,) = parse("{banner}\n" + HEAD_1M + ROW_1M + "\n" + FOOTER_1M).runs
    assert run.status == "ok"


def test_empty_input_has_no_runs() -> None:
    assert parse("").runs == []
    assert parse(b"\x00\x01garbage\n").runs == []


# -- -J JSON ----------------------------------------------------------------------------------------------


def json_run(name: str) -> Run:
    (run,) = parse_file(DATA / name).runs
    return run


def test_json_ok_old_spelling() -> None:
    run = json_run("all_reduce_v2.17.8_ok.json")
    assert (run.collective, run.nccl_tests_version, run.nccl_version) == ("all_reduce", None, "2.27.3")
    assert (run.ranks, len(run.rows), run.avg_busbw, run.out_of_bounds) == (4, 4, 0.002177, 0)
    assert (run.status, run.errors) == ("ok", [])
    assert run.rows[0].to_dict() == row(
        8, 2, "float", "sum", None, half(20.11, 0.000398, 0.000597, 0), half(19.87, 0.000403, 0.000604, 0)
    )
    assert run.rows[-1].size == 64
    assert run.warnings == []  # ``errors: [""]`` is ncclGetLastError() with nothing to say


def test_json_wrong_and_out_of_bounds() -> None:
    run = json_run("alltoall_v2.19.6_wrong_oob.json")
    assert (run.collective, run.nccl_version, run.ranks) == ("alltoall", "2.28.7", 16)
    assert [r.out_of_place.wrong for r in run.rows] == [0, 0, 5, 0]
    assert {r.in_place.wrong for r in run.rows if r.in_place} == {None}
    assert (run.avg_busbw, run.out_of_bounds, run.status) == (22.101059, 1, "failed")
    assert run.rows[0].redop is None and run.rows[0].root is None
    assert run.warnings == ["NET/IB : Got async event : port error"]


def test_json_numbers_past_what_is_printed_and_okay_false_with_a_zero_count() -> None:
    """Review round 25b: a device rank or thread count of 4,300 digits made a rank count nobody can print (exit
    70), and ``out_of_bounds {count: 0, okay: false}`` passed."""
    doc = json.loads((DATA / "all_reduce_v2.17.8_ok.json").read_text())
    huge = int("9" * 4300)
    doc["config"]["nthreads"] = huge
    for device in doc.get("devices", doc["config"].get("devices", [])):
        device["rank"] = huge
    doc["config"]["maximum_bytes"] = huge
    doc["config"]["step_bytes"] = 1
    (run,) = parse(json.dumps(doc)).runs
    assert run.ranks is None or run.ranks < 2**31
    assert run.expected_rows is None
    assert run.status == "ok"
    doc = json.loads((DATA / "all_reduce_v2.17.8_ok.json").read_text())
    doc["out_of_bounds"] = {"count": 0, "okay": False}
    (failed,) = parse(json.dumps(doc)).runs
    assert failed.status == "failed"


@needs_corpus
def test_a_text_log_whose_first_line_is_other_json_is_read_as_text_past_the_json_limit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Review round 25b: a text log over 32 MiB that began with a launcher's JSON line was refused as an oversized
    -J document (the limit lowered here, so the test needs no 32 MiB file). A -J document past it still is."""
    import rdmaforge.nccl_tests as nccl_tests
    from rdmaforge.nccl_tests import source

    monkeypatch.setattr(nccl_tests, "MAX_JSON", 4096)
    monkeypatch.setattr(source, "BLOCK", 1024)
    text = (CORPUS / "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt").read_text()
    assert len(text) > 4096
    log = tmp_path / "launcher.log"
    log.write_text('{"level": "info", "msg": "job started"}\n' + text)
    assert [(r.collective, r.status) for r in parse_file(log).runs] == [
        (r.collective, r.status) for r in parse(text).runs] == [("alltoall", "ok"), ("sendrecv", "ok")]
    document = tmp_path / "big.json"
    document.write_text('{"args": [\n' + '"x",\n' * 2000 + '"x"]}\n')
    with pytest.raises(nccl_tests.InputError, match="larger than"):
        parse_file(document)


@pytest.mark.parametrize("nwrong", [True, False, "none of them"])
def test_a_json_wrong_count_that_is_a_boolean_or_a_word_is_no_pass(nwrong: object) -> None:
    """Review round 25b: nwrong true (or a word) read as "not checked", and the run passed."""
    doc = json.loads((DATA / "all_reduce_v2.17.8_ok.json").read_text())
    doc["results"][1]["out_of_place"]["nwrong"] = nwrong
    (run,) = parse(json.dumps(doc)).runs
    assert run.status == "failed", run.status_reason


def test_json_cpu_time_nan_and_min_bandwidth() -> None:
    run = json_run("reduce_scatter_v2.17.9_cputime_minbw.json")
    assert (run.collective, run.nccl_version, run.ranks) == ("reduce_scatter", "2.21.5", 4)
    # The 0-byte row has "nan" bandwidths: not all its numeric columns are present, so it does not count.
    assert [r.size for r in run.rows] == [4096, 65536, 1048576, 4194304]
    assert run.rows[0].out_of_place.time_us == 12.3
    assert (run.avg_busbw, run.out_of_bounds, run.bw_check_failed) == (13.851695, 0, True)
    assert run.status == "failed"


def test_json_truncated_by_a_hang() -> None:
    run = json_run("sendrecv_v2.18.0_truncated.json")
    assert (run.collective, run.nccl_version, run.ranks) == ("sendrecv", "2.28.5", 2)
    assert [r.size for r in run.rows] == [33554432, 67108864, 134217728]
    assert (run.avg_busbw, run.out_of_bounds, run.status) == (None, None, "incomplete")


@pytest.mark.parametrize("text", ["{", "{}", "[1, 2]", '{"results": 5}', '{"results": [{"size": 1}]}', "{]"])
def test_odd_json_never_raises(text: str) -> None:
    for run in parse_json_output(text):
        run.to_dict()


def test_json_cut_anywhere_never_raises() -> None:
    data = (DATA / "alltoall_v2.19.6_wrong_oob.json").read_text()
    for cut in range(1, len(data), 37):
        runs = parse(data[:cut]).runs
        assert all(run.status != "ok" for run in runs)


# -- the CLI ---------------------------------------------------------------------------------------------


RUN_KEYS = {"collective", "nccl_tests_version", "nccl_version", "ranks", "rows", "avg_busbw"}
RUN_KEYS |= {"out_of_bounds", "status", "errors"}
ROW_KEYS = {"size", "count", "type", "redop", "root", "out_of_place", "in_place"}
HALF_KEYS = {"time_us", "algbw", "busbw", "wrong"}


def check_contract(data: dict[str, Any]) -> None:
    assert isinstance(data["runs"], list) and isinstance(data["transport"], dict)
    for item in data["runs"]:
        assert RUN_KEYS <= set(item)
        assert isinstance(item["collective"], str | None) and isinstance(item["ranks"], int | None)
        assert isinstance(item["nccl_tests_version"], str | None)
        assert isinstance(item["nccl_version"], str | None)
        assert isinstance(item["avg_busbw"], float | None) and isinstance(item["out_of_bounds"], int | None)
        assert item["status"] in ("ok", "failed", "incomplete")
        assert isinstance(item["errors"], list) and all(isinstance(e, str) for e in item["errors"])
        for entry in item["rows"]:
            assert ROW_KEYS <= set(entry)
            assert isinstance(entry["size"], int) and isinstance(entry["count"], int)
            assert isinstance(entry["type"], str) and isinstance(entry["redop"], str | None)
            assert isinstance(entry["root"], int | None)
            for key in ("out_of_place", "in_place"):
                if entry[key] is None:
                    continue
                assert HALF_KEYS <= set(entry[key])
                assert all(isinstance(entry[key][k], float) for k in ("time_us", "algbw", "busbw"))
                assert isinstance(entry[key]["wrong"], int | None)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["nccl-report", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_contract_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(DATA / "all_reduce_v2.17.8_ok.json"), str(DATA / "alltoall_v2.19.6_wrong_oob.json")]
    code, out, _ = run_cli(capsys, "--json", *files)
    data = json.loads(out)
    check_contract(data)
    assert code == ExitCode.BELOW_THRESHOLD  # a run failed
    assert [(r["collective"], r["status"], r["source"]) for r in data["runs"]] == [
        ("all_reduce", "ok", files[0]),
        ("alltoall", "failed", files[1]),
    ]


@needs_corpus
def test_cli_json_contract_over_the_whole_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--json", *sorted(str(p) for p in CORPUS.glob("*.txt")))
    data = json.loads(out)
    check_contract(data)
    assert len(data["runs"]) == sum(len(runs) for runs in EXPECTED.values())
    assert code == ExitCode.BELOW_THRESHOLD


def test_cli_all_ok_is_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, str(DATA / "all_reduce_v2.17.8_ok.json"))
    assert code == 0 and err == ""
    assert "run 1: all_reduce" in out and "status: ok" in out


def test_cli_text_output_of_a_failed_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "failed.log"
    log.write_text(HEAD_2_17 + ROW_1M + "\nnode-01: Test timeout (600s) common.cu:1207\n")
    code, out, _ = run_cli(capsys, str(log))
    assert code == ExitCode.BELOW_THRESHOLD
    assert "status: failed - node-01: Test timeout (600s) common.cu:1207" in out


def test_cli_unreadable_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    good = str(DATA / "all_reduce_v2.17.8_ok.json")
    code, out, err = run_cli(capsys, "--json", good, str(tmp_path / "missing.log"))
    assert (code, out) == (ExitCode.BAD_INPUT, "")  # checked before anything is printed
    assert "missing.log: No such file or directory" in err


def test_cli_usage_error_exits_64(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["nccl-report", "--fabric", "carrier-pigeon", "x.log"])
    assert exc.value.code == ExitCode.BAD_INPUT


def test_cli_file_without_runs_is_not_ok(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    code, out, err = run_cli(capsys, "--json", str(empty))
    assert code == ExitCode.INCOMPLETE and json.loads(out)["runs"] == []
    assert "no nccl-tests run found" in err


def test_cli_reads_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = io.TextIOWrapper(io.BytesIO((HEAD_1M + ROW_1M + "\n" + FOOTER_1M).encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, _ = run_cli(capsys, "--json", "-")
    assert code == 0
    assert json.loads(out)["runs"][0]["source"] == "<stdin>"


def test_a_file_name_holding_newlines_cannot_print_a_line_of_its_own(
    tmp_path: Path, shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review round 34a: a file named 'a<newline>verdict (infiniband): OK<newline>  ok' printed, in the title and in
    the transport verdict's message naming it, a line 'verdict (infiniband): OK' under the real verdict (UNKNOWN:
    the log has no NCCL INFO lines). Names are printed on one line, their newlines escaped."""
    log = shared_dir / "corpus" / "nccl-tests" / "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt"
    if not log.is_file():
        pytest.skip(f"the nccl-tests corpus log {log} is not here")
    forged = tmp_path / "a\nverdict (infiniband): OK\n  ok"
    forged.write_bytes(log.read_bytes())
    empty = tmp_path / "b\nrun 9: forged"
    empty.write_text("")
    assert main(["nccl-report", "--fabric", "infiniband", str(forged), str(empty)]) == ExitCode.INCOMPLETE
    out, err = capsys.readouterr()
    lines = out.splitlines() + err.splitlines()
    assert [line for line in lines if line.startswith("verdict (")] == ["verdict (infiniband): UNKNOWN"], out
    assert not any(line.startswith(("  ok", "run 9")) for line in lines), out + err
    assert "a\\x0averdict (infiniband): OK\\x0a  ok" in out and "b\\x0arun 9: forged" in err


@pytest.mark.parametrize("kind", ["png", "random", "gzip-of-gzip"])
def test_binary_files_with_few_nul_bytes_are_refused_as_binary(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review round 34a: only a share of NUL bytes marked a file binary; an image or random bytes (few NULs) and a
    gzip inside a gzip were "no nccl-tests run found", exit 5, where --help promises 64 for binary data."""
    import gzip

    noise = random.Random(34).randbytes(200_000)
    data = {"png": b"\x89PNG\r\n\x1a\n" + noise, "random": noise,
            "gzip-of-gzip": gzip.compress(gzip.compress(b"# nccl-tests\n" * 1000))}[kind]  # fmt: skip
    path = tmp_path / f"{kind}.log"
    path.write_bytes(data)
    assert main(["nccl-report", str(path)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert ("compressed twice" if kind == "gzip-of-gzip" else "holds binary data") in err, err


@needs_corpus
def test_split_groups_are_recorded_and_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                engine: str) -> None:  # fmt: skip
    """Review round 41c: the parser read NCCL_TESTS_SPLIT groups (``#  Rank N Group G``; -J: devices[].group) for
    its count check only, and a run of several communicators read as one. Run.split_groups counts them; nccl-report
    names them in its text and --json (only when more than one: a log of one group prints as before). Corpus 02
    split by node (NCCL_TESTS_SPLIT_MASK=0xfffffff8: 10 groups of 8 ranks) and the repository's -J sample split by
    host (2 groups of 2)."""
    from tests.unit.test_bench_report import split_groups

    text = (CORPUS / "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt").read_text()
    log = tmp_path / "split.log"
    log.write_text(split_groups(text, 0xFFFFFFF8))
    runs, whole = parse_file(log).runs, parse_text(text)
    assert [run.split_groups for run in runs] == [10] * 5 and [run.split_groups for run in whole] == [1] * 5
    assert [run.status for run in runs] == [run.status for run in whole]  # each group's run completed as well
    assert [run.to_dict()["split_groups"] for run in runs] == [10] * 5
    assert all("split_groups" not in run.to_dict() for run in whole)
    main(["nccl-report", str(log)])
    out = capsys.readouterr().out
    assert out.count(", 80 ranks, 10 NCCL_TESTS_SPLIT groups (busbw per group)\n") == 5, out[:600]
    main(["nccl-report", "--json", str(log)])
    assert [run["split_groups"] for run in json.loads(capsys.readouterr().out)["runs"]] == [10] * 5
    document = json.loads((DATA / "all_reduce_v2.17.8_ok.json").read_text())
    (run,) = parse_json_output(json.dumps(document))
    assert run.split_groups == 1 and "split_groups" not in run.to_dict()
    for device in document["config"]["devices"]:
        device["group"] = 0 if device["hostname"] == "node-a" else 2  # rank & ~1 of ranks 2 and 3
    (run,) = parse_json_output(json.dumps(document))
    assert (run.split_groups, run.to_dict()["split_groups"]) == (2, 2)
