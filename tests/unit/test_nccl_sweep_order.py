"""Rows outside a run's announced sweep (a size going back, a size above maxBytes, a row after the footer) and the
sweep check of ``-J`` JSON documents: such runs are never ok.

Inputs are real samples (the shared corpus and tests/data/device-h100) with one row inserted, moved or removed in
the test; expected sizes come from the samples themselves.
"""

from __future__ import annotations

import json
from pathlib import Path

from rdmaforge.nccl_tests import parse_text
from rdmaforge.nccl_tests.json_format import parse_json_output

CORPUS = "corpus/nccl-tests"
SENDRECV_LOG = "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt"
DATA = Path(__file__).resolve().parents[1] / "data" / "device-h100"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _row_indices(lines: list[str]) -> list[int]:
    """Indices of the result rows (lines that start with a size) of the given lines."""
    return [i for i, line in enumerate(lines) if line.strip()[:1].isdigit()]


def _size(line: str) -> int:
    return int(line.split()[0])


def _sendrecv_run(shared_dir: Path) -> list[str]:
    """The lines of the sendrecv run of corpus file 05 (its second run): version line to footer."""
    lines = _lines(shared_dir / CORPUS / SENDRECV_LOG)
    start = max(i for i, line in enumerate(lines) if line.startswith("# nccl-tests version"))
    return lines[start:]


def test_untouched_samples_parse_ok(shared_dir, engine):
    runs = parse_text("\n".join(_sendrecv_run(shared_dir)) + "\n")
    assert [run.status for run in runs] == ["ok"]
    for name in ("all_reduce.txt", "more_perf.txt"):
        assert {run.status for run in parse_text((DATA / name).read_text())} == {"ok"}
    run = parse_json_output((DATA / "all_reduce.json").read_text())[0]
    assert run.status == "ok"
    assert run.expected_rows == len(json.loads((DATA / "all_reduce.json").read_text())["results"])


def test_a_second_row_of_an_earlier_size_after_the_last_is_incomplete(shared_dir, engine):
    lines = _sendrecv_run(shared_dir)
    rows = _row_indices(lines)
    # A stray copy of the second largest row after the largest one, with a higher busbw (as the fuzz report's repro).
    stray = lines[rows[-2]]
    stray_size = _size(stray)
    assert stray_size < _size(lines[rows[-1]])
    lines.insert(rows[-1] + 1, stray.replace("13.60", "16.50"))
    (run,) = parse_text("\n".join(lines) + "\n")
    assert run.status == "incomplete"
    assert f"a row of {stray_size} bytes follows one of {_size(lines[rows[-1]])} bytes" in run.status_reason
    assert f"({_size(lines[rows[0]])} bytes, minBytes)" in run.status_reason


def test_a_size_going_back_in_the_middle_of_a_sweep_is_incomplete(shared_dir, engine):
    lines = _sendrecv_run(shared_dir)
    rows = _row_indices(lines)
    stray = lines[rows[2]]  # the third size, printed again after the fifth
    lines.insert(rows[4] + 1, stray)
    (run,) = parse_text("\n".join(lines) + "\n")
    assert run.status == "incomplete"
    assert f"a row of {_size(stray)} bytes follows one of {_size(lines[rows[4]])} bytes" in run.status_reason


def test_a_row_above_max_bytes_is_incomplete(shared_dir, engine):
    lines = _sendrecv_run(shared_dir)
    rows = _row_indices(lines)
    last = lines[rows[-1]]
    largest = _size(last)
    bigger = last.replace(str(largest), str(largest * 2), 1)
    lines.insert(rows[-1] + 1, bigger)
    (run,) = parse_text("\n".join(lines) + "\n")
    assert run.status == "incomplete"
    assert f"a row of {largest * 2} bytes, above the {largest} bytes (maxBytes)" in run.status_reason


def test_a_row_after_the_footer_is_not_the_runs_and_makes_it_incomplete(shared_dir, engine):
    lines = _sendrecv_run(shared_dir)
    rows = _row_indices(lines)
    footer = next(i for i, line in enumerate(lines) if "Avg bus bandwidth" in line)
    late = lines[rows[-1]].replace("13.61", "16.50")
    lines.insert(footer + 1, late)
    (run,) = parse_text("\n".join(lines) + "\n")
    assert run.status == "incomplete"
    assert f"a row of {_size(late)} bytes comes after the run's 'Avg bus bandwidth' line" in run.status_reason
    assert len(run.rows) == len(rows)  # the late row is not stored in the run
    assert max(row.out_of_place.busbw for row in run.rows) < 16.5


def test_repeated_whole_sweeps_stay_ok(shared_dir, engine):
    # -N cycles, -d all and -o all print the whole sweep again in the same table, each from minBytes.
    lines = _sendrecv_run(shared_dir)
    rows = _row_indices(lines)
    table = [lines[i] for i in rows]
    repeated = lines[: rows[0]] + table * 3 + lines[rows[-1] + 1 :]
    (run,) = parse_text("\n".join(repeated) + "\n")
    assert run.status == "ok", run.status_reason
    assert len(run.rows) == 3 * len(rows)


def test_repeated_sweeps_with_a_stray_row_in_the_second_are_incomplete(shared_dir, engine):
    lines = _sendrecv_run(shared_dir)
    rows = _row_indices(lines)
    table = [lines[i] for i in rows]
    second = table[:4] + [table[1]] + table[4:]
    repeated = lines[: rows[0]] + table + second + lines[rows[-1] + 1 :]
    (run,) = parse_text("\n".join(repeated) + "\n")
    assert run.status == "incomplete"
    assert f"a row of {_size(table[1])} bytes follows one of {_size(table[3])} bytes" in run.status_reason


def test_a_row_at_min_bytes_after_the_whole_sweep_is_incomplete(shared_dir, engine):
    """Review round 33b: one row at minBytes after the last row (a second sweep that never went on) passed the order
    check, and its busbw, higher than any other, became the run's peak: a fail became a pass."""
    lines = _sendrecv_run(shared_dir)
    rows = _row_indices(lines)
    first = lines[rows[0]]
    lines.insert(rows[-1] + 1, first.replace(first.split()[7], "99.99", 1))
    (run,) = parse_text("\n".join(lines) + "\n")
    assert run.status == "incomplete"
    assert (f"the table holds {len(rows) + 1} rows in 2 sweeps, and the nThread line announces {len(rows)} message "
            "sizes a sweep") in run.status_reason


def test_a_whole_sweep_then_half_a_sweep_is_incomplete(shared_dir, engine):
    lines = _sendrecv_run(shared_dir)
    rows = _row_indices(lines)
    table = [lines[i] for i in rows]
    half = len(table) // 2
    mixed = lines[: rows[0]] + table + table[:half] + lines[rows[-1] + 1 :]
    (run,) = parse_text("\n".join(mixed) + "\n")
    assert run.status == "incomplete"
    assert f"the table holds {len(table) + half} rows in 2 sweeps" in run.status_reason


def test_a_second_sweep_cut_short_without_a_footer_says_so(shared_dir, engine):
    """A run that hung in its second cycle (-N 2) printed no footer: that is its reason, not mixed output."""
    lines = _sendrecv_run(shared_dir)
    rows = _row_indices(lines)
    table = [lines[i] for i in rows]
    (run,) = parse_text("\n".join(lines[: rows[0]] + table + table[:3]) + "\n")
    assert run.status == "incomplete"
    assert run.status_reason == f"no 'Avg bus bandwidth' line after {len(table) + 3} row(s) (hang or truncated log)"


def _json_document() -> dict:
    return json.loads((DATA / "all_reduce.json").read_text())


def test_json_with_its_last_row_removed_is_incomplete_as_the_text_log_is():
    document = _json_document()
    expected = len(document["results"])
    document["results"].pop()
    (run,) = parse_json_output(json.dumps(document))
    assert run.status == "incomplete"
    assert f"1 of the {expected} message sizes" in run.status_reason
    # The same loss in the text log of the same run says the same.
    lines = _lines(DATA / "all_reduce.txt")
    del lines[_row_indices(lines)[-1]]
    (text_run,) = parse_text("\n".join(lines) + "\n")
    assert text_run.status == "incomplete"
    assert text_run.status_reason == run.status_reason


def test_json_with_middle_rows_removed_is_incomplete():
    document = _json_document()
    expected = len(document["results"])
    del document["results"][5:8]
    (run,) = parse_json_output(json.dumps(document))
    assert run.status == "incomplete"
    assert f"3 of the {expected} message sizes" in run.status_reason


def test_json_with_a_duplicated_size_is_incomplete():
    document = _json_document()
    results = document["results"]
    size = results[10]["size"]
    results.insert(11, dict(results[10]))
    (run,) = parse_json_output(json.dumps(document))
    assert run.status == "incomplete"
    assert f"two rows of {size} bytes follow each other" in run.status_reason


def test_json_with_a_size_going_back_is_incomplete():
    document = _json_document()
    results = document["results"]
    back, last = results[-3]["size"], results[-1]["size"]
    results.append(dict(results[-3]))
    (run,) = parse_json_output(json.dumps(document))
    assert run.status == "incomplete"
    assert f"a row of {back} bytes follows one of {last} bytes" in run.status_reason


def test_json_with_a_row_at_min_bytes_after_the_sweep_is_incomplete():
    document = _json_document()
    results = document["results"]
    expected = len(results)
    results.append(dict(results[0]))
    (run,) = parse_json_output(json.dumps(document))
    assert run.status == "incomplete"
    assert f"the table holds {expected + 1} rows in 2 sweeps" in run.status_reason
