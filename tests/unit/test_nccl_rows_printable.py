"""Rows nccl-tests cannot print (a count that is not the size in elements, a type or op name it never prints) make
a run incomplete: such a log was edited or spliced, and its numbers are no measurement of the cluster.

Inputs are real samples (the shared corpus, tests/data/device-h100 and tests/data/nccl-json) with one row edited in
the test. What nccl-tests prints comes from its source (2.19.6 src/common.cu and each collective's
getCollByteCount): count = size / bytes of an element, divided by the ranks for all_gather, reduce_scatter and
alltoall; the element bytes (float 4, double 8, half 2) are the C types', written here, not read from the code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rdmaforge.nccl_tests import accel, parse_text
from rdmaforge.nccl_tests.json_format import parse_json_output

CORPUS = "corpus/nccl-tests"
ALLREDUCE_2_RANKS = "01_allreduce_v2.13_efa_2node_mpirun_ncclinfo.txt"  # no collective named, 2 ranks, float
FIVE_COLLECTIVES = "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt"  # 80 ranks, double
DATA = Path(__file__).resolve().parents[1] / "data"
#: A 2.13+ row (size count type redop root ...), behind mpirun's --tag-output prefix or not.
_ROW = re.compile(r"^(?P<prefix>\[\d+,\d+\]<stdout>:)?(?P<lead>\s*)(?P<size>\d+)(?P<gap1>\s+)(?P<count>\d+)"
                  r"(?P<gap2>\s+)(?P<type>\S+)(?P<gap3>\s+)(?P<op>\S+)(?P<rest>\s+-?\d+\s.*)$")  # fmt: skip


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _row_indices(lines: list[str]) -> list[int]:
    """The rows of some bytes (0-byte rows count 0 elements of any type)."""
    return [i for i, line in enumerate(lines) if (row := _ROW.match(line)) and int(row["size"]) > 0]


def _edit(line: str, **fields: str) -> str:
    found = _ROW.match(line)
    assert found is not None, line
    parts = found.groupdict(default="")
    parts.update(fields)
    return "".join(parts[key] for key in ("prefix", "lead", "size", "gap1", "count", "gap2", "type", "gap3", "op",
                                          "rest"))  # fmt: skip


def _collective_run(path: Path, collective: str) -> list[str]:
    """The lines of one collective's run in a multi-collective log: its version line to the next one's."""
    lines = _lines(path)
    starts = [i for i, line in enumerate(lines) if line.startswith("# nccl-tests version")]
    for at, start in enumerate(starts):
        if lines[start + 1].split()[-1] == f"{collective}_perf":
            end = starts[at + 1] if at + 1 < len(starts) else len(lines)
            return lines[start:end]
    raise AssertionError(f"no {collective} run in {path}")


def _parse(lines: list[str]):
    return parse_text("\n".join(lines) + "\n")


def test_every_real_sample_keeps_to_what_nccl_tests_prints(shared_dir, engine):
    texts = sorted((shared_dir / CORPUS).glob("*.txt")) + sorted((DATA / "device-h100").glob("*perf*.txt"))
    texts.append(DATA / "device-h100" / "all_reduce.txt")
    checked = 0
    for path in texts:
        for run in parse_text(path.read_text(errors="replace")):
            assert run.table_problem is None, (path.name, run.collective, run.table_problem)
            checked += len(run.rows)
    documents = sorted((DATA / "nccl-json").glob("*.json")) + [DATA / "device-h100" / "all_reduce.json"]
    for path in documents:
        for run in parse_json_output(path.read_text()):
            assert run.table_problem is None, (path.name, run.table_problem)
            checked += len(run.rows)
    assert checked > 400  # the rows of every sample were read (454 in all), not an empty parse


def test_a_count_one_off_its_size_makes_the_run_incomplete(shared_dir, engine):
    lines = _lines(shared_dir / CORPUS / ALLREDUCE_2_RANKS)
    assert [run.status for run in _parse(lines)] == ["ok"]
    at = _row_indices(lines)[-1]
    row = _ROW.match(lines[at])
    assert row is not None and row["type"] == "float"
    size, count = int(row["size"]), int(row["count"])
    assert count == size // 4
    lines[at] = _edit(lines[at], count=str(count + 1))
    (run,) = _parse(lines)
    assert run.status == "incomplete"
    assert f"a row of {size} bytes with count {count + 1} (float, 4 bytes an element)" in run.status_reason
    assert f"nccl-tests prints count {count} for {size} bytes (size / 4 bytes)" in run.status_reason
    # 01 names no collective: its first counted row set the scale, and the reason says so
    assert "the run names no collective: its first row that counts elements set the size to count x 4 bytes)" in (
        run.status_reason
    )


def test_a_row_whose_size_and_count_double_makes_a_two_rank_run_without_a_collective_incomplete(shared_dir, engine):
    """01 names no collective and has 2 ranks: its first rows set the scale (1), and a later row of twice that
    (what an all_gather of 2 ranks would print) is not this run's."""
    lines = _lines(shared_dir / CORPUS / ALLREDUCE_2_RANKS)
    at = _row_indices(lines)[-1]
    row = _ROW.match(lines[at])
    assert row is not None
    count = int(row["count"])
    lines[at] = _edit(lines[at], count=str(count // 2))
    (run,) = _parse(lines)
    assert run.collective is None and run.ranks == 2
    assert run.status == "incomplete"
    assert f"with count {count // 2} (float, 4 bytes an element)" in run.status_reason


@pytest.mark.parametrize(("field", "value", "words"), [
    ("type", "flaot", "a row's type is 'flaot', a name nccl-tests never prints"),
    ("op", "zzz", "a row's op is 'zzz', one nccl-tests never prints"),
])  # fmt: skip
def test_a_type_or_op_nccl_tests_never_prints_makes_the_run_incomplete(shared_dir, engine, field, value, words):
    lines = _lines(shared_dir / CORPUS / ALLREDUCE_2_RANKS)
    at = _row_indices(lines)[3]
    lines[at] = _edit(lines[at], **{field: value})
    (run,) = _parse(lines)
    assert run.status == "incomplete"
    assert words in run.status_reason


def test_an_all_gather_row_counts_its_block_per_rank(shared_dir, engine):
    """all_gather of 80 ranks prints a count of size / 8 / 80 (double); a row counted as all_reduce counts it,
    size / 8, is not nccl-tests'."""
    lines = _collective_run(shared_dir / CORPUS / FIVE_COLLECTIVES, "all_gather")
    (run,) = _parse(lines)
    assert (run.collective, run.ranks, run.status) == ("all_gather", 80, "ok")
    at = _row_indices(lines)[-1]
    row = _ROW.match(lines[at])
    assert row is not None and row["type"] == "double"
    size, count = int(row["size"]), int(row["count"])
    assert count == size // 8 // 80
    lines[at] = _edit(lines[at], count=str(size // 8))
    (run,) = _parse(lines)
    assert run.status == "incomplete"
    assert f"a row of {size} bytes with count {size // 8} (double, 8 bytes an element)" in run.status_reason
    assert f"nccl-tests' all_gather prints count {count} for {size} bytes (size / 8 bytes / 80 ranks)" in (
        run.status_reason
    )


def test_an_all_reduce_row_with_an_all_gather_count_is_not_nccl_tests(shared_dir, engine):
    lines = _collective_run(shared_dir / CORPUS / FIVE_COLLECTIVES, "all_reduce")
    at = _row_indices(lines)[-1]
    row = _ROW.match(lines[at])
    assert row is not None
    size = int(row["size"])
    lines[at] = _edit(lines[at], count=str(size // 8 // 80))
    (run,) = _parse(lines)
    assert run.status == "incomplete"
    assert f"nccl-tests' all_reduce prints count {size // 8} for {size} bytes (size / 8 bytes)" in run.status_reason


def test_sweeps_of_two_types_are_each_checked_with_their_own_element(shared_dir, engine):
    """``-d all`` prints one sweep a type: a second sweep in half (2 bytes) counts size / 2 and stays ok; the same
    sweep keeping float's counts is incomplete."""
    lines = _lines(shared_dir / CORPUS / ALLREDUCE_2_RANKS)
    rows = _row_indices(lines)
    footer = rows[-1] + 1
    half = [_edit(lines[i], type="half", count=str(int(_ROW.match(lines[i])["size"]) // 2)) for i in rows]
    zeros = [_edit(line, type="half") for line in lines[: rows[0]] if _ROW.match(line)]
    assert len(zeros) == 2  # 1 and 2 bytes hold no float: minBytes 1 prints two 0-byte rows
    # nThread says minBytes 1: the 0-byte rows open each sweep; the second sweep is zeros + half rows.
    table = lines[:footer] + zeros + half + lines[footer:]
    (run,) = _parse(table)
    assert run.status == "ok", run.status_reason
    wrong = [_edit(lines[i], type="half") for i in rows]
    (run,) = _parse(lines[:footer] + zeros + wrong + lines[footer:])
    assert run.status == "incomplete"
    first = _ROW.match(lines[rows[0]])
    assert f"a row of {first['size']} bytes with count {first['count']} (half, 2 bytes an element)" in run.status_reason


def _json_document() -> dict:
    return json.loads((DATA / "device-h100" / "all_reduce.json").read_text())


@pytest.mark.parametrize(("key", "change", "words"), [
    ("count", lambda item: item["count"] + 1, "bytes an element): nccl-tests' all_reduce prints count"),
    ("type", lambda item: "flaot", "a row's type is 'flaot'"),
    ("redop", lambda item: "zzz", "a row's op is 'zzz'"),
])  # fmt: skip
def test_a_json_row_nccl_tests_cannot_print_makes_the_run_incomplete(engine, key, change, words):
    document = _json_document()
    (run,) = parse_json_output(json.dumps(document))
    assert run.status == "ok"
    item = document["results"][4]
    item[key] = change(item)
    (run,) = parse_json_output(json.dumps(document))
    assert run.status == "incomplete"
    assert words in run.status_reason


def test_alltoallv_sizes_are_not_checked_against_counts(shared_dir, engine):
    """alltoallv prints its largest per-rank size beside a count of the even split: no fixed relation, so a
    count that is not the size in elements says nothing there (not judged, rather than a false incomplete)."""
    lines = _collective_run(shared_dir / CORPUS / FIVE_COLLECTIVES, "alltoall")
    lines[1] = lines[1].replace("alltoall_perf", "alltoallv_perf")
    at = _row_indices(lines)[-1]
    lines[at] = _edit(lines[at], count=str(int(_ROW.match(lines[at])["count"]) + 1))
    (run,) = _parse(lines)
    assert run.collective == "alltoallv"
    assert run.table_problem is None


@pytest.mark.parametrize("cycles", [2, 140])
def test_a_row_edited_in_the_last_of_many_sweeps_is_found(shared_dir, engine, cycles):
    """``-N`` cycles repeat the sweep (31 rows a cycle): 140 cycles (4,340 rows) are read in two chunks of the row
    store, and the scale the first chunk set holds in the second. The edit in the last cycle is found."""
    lines = _lines(shared_dir / CORPUS / ALLREDUCE_2_RANKS)
    table = [line for line in lines if _ROW.match(line)]
    first, last = lines.index(table[0]), lines.index(table[-1])
    repeated = table * cycles
    (run,) = _parse(lines[:first] + repeated + lines[last + 1 :])
    assert (run.status, len(run.rows)) == ("ok", 31 * cycles), run.status_reason
    row = _ROW.match(repeated[-2])
    assert row is not None
    repeated[-2] = _edit(repeated[-2], count=str(int(row["count"]) - 1))
    (run,) = _parse(lines[:first] + repeated + lines[last + 1 :])
    assert run.status == "incomplete"
    assert f"a row of {row['size']} bytes with count {int(row['count']) - 1} (float," in run.status_reason


def test_a_first_counted_row_that_fits_no_scale_names_what_nccl_tests_prints(shared_dir, engine):
    """Without a named collective the first row that counts elements sets the scale: 4 bytes counted as 2 floats
    fits none (it would be 8 bytes, or 16 for 2 ranks)."""
    lines = _lines(shared_dir / CORPUS / ALLREDUCE_2_RANKS)
    at = _row_indices(lines)[0]
    row = _ROW.match(lines[at])
    assert row is not None and (row["size"], row["count"]) == ("4", "1")
    lines[at] = _edit(lines[at], count="2")
    (run,) = _parse(lines)
    assert run.status == "incomplete"
    assert run.status_reason == (
        "a row of 4 bytes with count 2 (float, 4 bytes an element): nccl-tests prints a size of 8 bytes (count x 4) "
        "or 16 (times its 2 ranks, for a collective that moves a block per rank), so the row was edited or comes "
        "from another run"
    )


def test_the_c_accelerator_and_python_stop_at_the_same_record():
    """consistency._first_unprintable and the extension's first_unprintable, on records of every kind: counts 0,
    negative and near 2**63, sizes that fit a scale and sizes that do not, unknown type and op indexes."""
    if accel.fast is None:
        pytest.skip("the C accelerator is not built here (no compiler, or RDMAFORGE_NCCL_PURE_PYTHON set)")
    import random

    from rdmaforge.nccl_tests.consistency import _first_unprintable
    from rdmaforge.nccl_tests.rowstore import _RECORD

    pick = random.Random(17)
    # Types 1-3 and 300 are printed, ops 0, 1, 3 and 300: indexes past 255 read both bytes of the record's field.
    element, redop_ok = bytearray(301), bytearray(301)
    element[1:4], element[300] = bytes([4, 8, 255]), 2
    redop_ok[0:2], redop_ok[3], redop_ok[300] = b"\x01\x01", 1, 1
    values = [0, 1, 4, 7, 8, 16, 24, 80, 2**31, 2**62, 2**63 - 1, -8, -1]
    stops = set()
    for _ in range(3000):
        records, true_scale = [], pick.choice([1, 2, 3, 80])
        for _ in range(pick.randint(1, 8)):
            count, type_index = pick.choice(values), pick.choice([1, 2, 3, 300] * 5 + [0, 4, 9, 301, 65535])
            redop_index = pick.choice([0, 1, 3, 300] * 5 + [2, 4, 9, 301, 65535])
            each = element[type_index] if type_index < len(element) else 3
            size = count * each * true_scale if pick.random() < 0.85 else pick.choice(values)
            size = max(min(size, 2**63 - 1), -(2**63))
            records.append(_RECORD.pack(size, count, -1, 1, type_index, redop_index, *([0.0] * 10)))
        chunk = b"".join(records)
        scale, ranks = pick.choice([0, 0, 1, true_scale]), pick.choice([0, 1, 2, 80])
        found = _first_unprintable(chunk, element, redop_ok, scale, ranks)
        fast = accel.fast.first_unprintable(chunk, element, redop_ok, scale, ranks)
        assert fast == found, (chunk.hex(), scale, ranks)
        stops.add(found[0])
    assert stops >= {-1, 0, 1, 2, 3}  # records were read past the first, and whole chunks passed


def test_split_groups_count_per_group_and_stay_ok(shared_dir, engine):
    """With NCCL_TESTS_SPLIT each group runs its own communicator: nccl-tests' nranks is the group's, while the
    ``#  Rank`` lines list every group's ranks. 02's all_gather as two groups of 40 (ranks 40-79 in Group 1): each
    row counts size / 8 / 40, and the run stays ok; the same counts with every rank in Group 0 do not."""
    lines = _collective_run(shared_dir / CORPUS / FIVE_COLLECTIVES, "all_gather")
    per_group = [_edit(line, count=str(int(_ROW.match(line)["size"]) // 8 // 40)) if _ROW.match(line) else line
                 for line in lines]  # fmt: skip
    split = [re.sub(r"(Rank +(?:[4-7]\d) Group) +0 ", r"\1  1 ", line) for line in per_group]
    assert sum("Group  1 " in line for line in split) == 40
    (run,) = _parse(split)
    assert (run.status, run.ranks) == ("ok", 80), run.status_reason
    (run,) = _parse(per_group)
    assert run.status == "incomplete"
    assert "nccl-tests' all_gather prints count" in run.status_reason and "/ 80 ranks)" in run.status_reason


def test_a_json_document_of_two_groups_counts_per_group():
    """-J lists each process in ``devices`` with its group: a second process in group 1 makes the run 8 ranks in
    two communicators of 4, and reduce_scatter's counts (size / 4 bytes / 4 ranks) stay right; in group 0 it
    would be one communicator of 8, which those counts do not fit."""
    document = json.loads((DATA / "nccl-json" / "reduce_scatter_v2.17.9_cputime_minbw.json").read_text())
    (run,) = parse_json_output(json.dumps(document))
    assert (run.status, run.ranks) == ("failed", 4) and run.table_problem is None  # its own min-bw failure
    second = dict(document["devices"][0], rank=4, pid=4243, group=1)
    document["devices"].append(second)
    (run,) = parse_json_output(json.dumps(document))
    assert run.ranks == 8 and run.table_problem is None
    second["group"] = 0
    (run,) = parse_json_output(json.dumps(document))
    assert run.table_problem is not None and "/ 8 ranks)" in run.table_problem


def test_a_collective_guessed_from_an_earlier_line_is_not_trusted(shared_dir, engine):
    """Before 2.16.7 a run names no collective; the parser takes the first ``*_perf`` word before it as a hint. A
    listing of the build directory names all_gather first: the all_reduce rows of corpus 10 stay ok (the hint is
    not used to judge counts), and the row scale is the rows' own."""
    path = shared_dir / CORPUS / "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt"
    lines = _lines(path)
    assert "all_reduce_perf" in lines[1]
    lines[1] = "all_gather_perf  all_reduce_perf  alltoall_perf  broadcast_perf  reduce_perf"
    (run,) = _parse(lines)
    assert run.collective == "all_gather"  # the hint, shown as before
    assert run.status == "ok", run.status_reason


def test_a_row_of_some_bytes_that_counts_none_is_named(shared_dir, engine):
    lines = _collective_run(shared_dir / CORPUS / FIVE_COLLECTIVES, "all_reduce")
    at = _row_indices(lines)[2]
    size = _ROW.match(lines[at])["size"]
    lines[at] = _edit(lines[at], count="0")
    (run,) = _parse(lines)
    assert run.status == "incomplete"
    assert run.status_reason == (
        f"a row of {size} bytes with count 0 (double, 8 bytes an element): nccl-tests' all_reduce prints a count of 0 "
        "only in a row of 0 bytes, so the row was edited or comes from another run"
    )


@pytest.mark.parametrize(("collective", "op", "words"), [
    ("all_reduce", "none", "shows op none, and nccl-tests' all_reduce prints one of avg, max, min, mulsum, prod, sum"),
    ("all_gather", "sum", "shows op sum, and nccl-tests' all_gather prints none (it reduces nothing)"),
])  # fmt: skip
def test_an_op_the_named_collective_never_prints_makes_the_run_incomplete(shared_dir, engine, collective, op, words):
    """Each collective's TimeTest call (v2.0.0 to 2.19.6) passes its reduction op or none: all_reduce rows always
    show an op, all_gather rows never do (02 prints ``sum`` and ``none`` in them)."""
    lines = _collective_run(shared_dir / CORPUS / FIVE_COLLECTIVES, collective)
    at = _row_indices(lines)[4]
    lines[at] = _edit(lines[at], op=op)
    (run,) = _parse(lines)
    assert run.status == "incomplete"
    assert words in run.status_reason


def test_every_collective_with_an_op_rule_has_a_size_rule():
    """The op tables and the size table name the same collectives (a collective added to one and not the other
    would be judged by half the rules). The lists themselves come from nccl-tests' sources, read in the module."""
    from rdmaforge.nccl_tests.consistency import NOT_REDUCING, REDUCING, SIZE_SCALE

    assert REDUCING | NOT_REDUCING | {"sendrecv"} == set(SIZE_SCALE)
    assert not REDUCING & NOT_REDUCING


@pytest.mark.parametrize("spelling", [0, 0.0, "0"])
def test_a_json_group_spelled_another_way_is_the_same_group(spelling):
    """nccl-tests writes the group as an int; 0, 0.0 and "0" are one group, so the run's ranks still judge it."""
    document = json.loads((DATA / "nccl-json" / "reduce_scatter_v2.17.9_cputime_minbw.json").read_text())
    document["devices"].append(dict(document["devices"][0], rank=4, pid=4243, group=spelling))
    (run,) = parse_json_output(json.dumps(document))
    assert run.ranks == 8 and run.table_problem is not None and "/ 8 ranks)" in run.table_problem


def test_a_named_collective_of_unknown_ranks_says_so(shared_dir, engine):
    """02's all_gather as two groups: its ranks per communicator are not known, so its first counted row sets the
    scale; a later row off that scale is named with why the scale came from a row."""
    lines = _collective_run(shared_dir / CORPUS / FIVE_COLLECTIVES, "all_gather")
    split = [re.sub(r"(Rank +(?:[4-7]\d) Group) +0 ", r"\1  1 ", line) for line in lines]
    at = _row_indices(split)[-1]
    split[at] = _edit(split[at], count=str(int(_ROW.match(split[at])["count"]) * 2))
    (run,) = _parse(split)
    assert run.status == "incomplete"
    assert "nccl-tests' all_gather prints count" in run.status_reason
    assert ("(the log does not say how many ranks a communicator has (NCCL_TESTS_SPLIT groups, or no Rank lines): "
            "its first row that counts elements set the size to count x 8 bytes x 80 ranks)") in run.status_reason
