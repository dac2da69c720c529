"""Parser for the JSON file nccl-tests writes with ``-J file.json`` (2.17.3+), into the same Run model.

Format (corpus FORMAT_HISTORY.md, section 6): ``args`` (argv), ``nccl_version`` (version code),
``config{nthreads, ngpus, ...}``, ``devices[{rank, ...}]``, ``results[{size, count, type, redop, root,
out_of_place{time|cpu_time, alg_bw, bus_bw, nwrong}, in_place{...}, ...}]``, ``out_of_bounds{count,
okay}``, ``average_bus_bandwidth{bandwidth, okay}`` (spelled ``average_bus_bandwidith{bandwidith}``
before 2.17.9), ``errors[]``. nccl-tests writes it with printf, so the parser is lenient: booleans may be
the strings "true"/"false", doubles may be the string "nan", ``root`` may be a padded string. A file cut
short by a hang is repaired by closing its open brackets, and the run is reported incomplete.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from rdmaforge.nccl_tests.consistency import table_problem
from rdmaforge.nccl_tests.lines import parse_float, parse_int, wrong_count
from rdmaforge.nccl_tests.model import (
    Half,
    Row,
    Run,
    add_unique,
    average_mismatch,
    nccl_version_from_code,
    normalize_collective,
    ranks_from_devices,
)
from rdmaforge.nccl_tests.parser import sweep_length, sweep_order_problem

_CLOSERS = {"{": "}", "[": "]"}
# Strings (escapes included) and the structural characters; anything else is skipped by the scanner.
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[{}\[\],]')
# printf's spellings of non-finite doubles, unquoted (not JSON): ``-nan``, ``nan``, ``inf``, ``-inf``.
_BARE_NONFINITE = re.compile(r"(?<=[:\[,\s])-?(?:nan|inf)(?=\s*[,}\]])", re.IGNORECASE)


def looks_like_json(text: str) -> bool:
    """Whether ``text`` is (the beginning of) a JSON object rather than a text log."""
    return text.lstrip().startswith("{")


#: Keys that every ``-J`` document starts with or holds; a JSON object without any of them is something else.
_SIGNATURE_KEYS = ("results", "config", "nccl_version", "args")


def foreign_json_first(text: str) -> bool:
    """Whether ``text`` starts with a whole JSON object that is no ``-J`` document (a launcher's JSON log line):
    what follows it is a text log."""
    pos = _after_space(text, 0)
    try:
        document, _ = json.JSONDecoder().raw_decode(text, pos)
    except (ValueError, RecursionError):
        return False
    return isinstance(document, dict) and not any(key in document for key in _SIGNATURE_KEYS)


def parse_json_output(text: str) -> list[Run]:
    """The run described by a ``-J`` JSON document: one run, or none when ``text`` is not such a document."""
    document, repaired, skipped = _load(text)
    if not isinstance(document, dict) or not any(key in document for key in _SIGNATURE_KEYS):
        return []
    run = _run_from_document(document, repaired)
    if skipped:
        add_unique(
            run.warnings,
            f"{skipped} part(s) of the -J JSON are not valid JSON (e.g. an unquoted -nan): skipped, or read "
            "without the values that were not numbers",
        )
    return [run]


def parse_json_documents(text: str) -> tuple[list[Run], str] | None:
    """Several ``-J`` documents one after the other (files concatenated with ``cat``), or one followed by a text
    log: the runs of every document and the text after the last one. None for a single document alone (or none),
    which parse_json_output reads, repairs included. Each document is a run of its own: the first one's pass says
    nothing of the second's ``#wrong``."""
    decoder = json.JSONDecoder()
    runs: list[Run] = []
    pos = _after_space(text, 0)
    while pos < len(text) and text[pos] == "{":
        try:
            document, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            if not runs:
                return None
            return runs + parse_json_output(text[pos:]), ""  # a damaged document after good ones: repaired
        if not isinstance(document, dict) or not any(key in document for key in _SIGNATURE_KEYS):
            break
        runs.append(_run_from_document(document, False))
        pos = _after_space(text, end)
    if not runs or (len(runs) == 1 and pos >= len(text)):
        return None
    return runs, text[pos:]


def _after_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _load(text: str) -> tuple[Any, bool, int]:
    """The document, whether it was cut short, and how many members/records had to be skipped."""
    try:
        return json.loads(text), False, 0
    except (ValueError, RecursionError):
        pass
    # printf's bare nan/inf (the common damage) read as null in one C-speed pass; the records holding them
    # then lack a number and are dropped by _row, as the piecewise reader would.
    cleaned, count = _BARE_NONFINITE.subn("null", text)
    if count:
        try:
            return json.loads(cleaned), False, count
        except (ValueError, RecursionError):
            pass
    return _load_piecewise(text)


def _loads_lenient(fragment: str) -> tuple[Any, bool]:
    """The value of ``fragment`` and whether printf's bare nan/inf had to be read as null."""
    try:
        return json.loads(fragment), False
    except ValueError:
        return json.loads(_BARE_NONFINITE.sub("null", fragment)), True


def _load_piecewise(text: str) -> tuple[Any, bool, int]:
    """Each top-level member, and each record of ``results``, parsed on its own in one linear scan.

    A bad token then costs its own record (or member), not the file; a file cut short by a hang keeps every
    record written before the cut and reports itself truncated.
    """
    document: dict[str, Any] = {}
    skipped = 0
    stack: list[str] = []
    member_start = -1  # start of the current top-level member (after ``{`` or ``,`` at depth 1)
    key: str | None = None
    results: list[Any] | None = None
    item_start = -1

    def take_member(end: int) -> None:
        nonlocal skipped
        if member_start < 0 or key == "results":
            return
        try:
            value, lenient = _loads_lenient("{" + text[member_start:end] + "}")
            document.update(value)
            skipped += lenient
        except (ValueError, RecursionError, TypeError):
            skipped += 1

    for token in _TOKEN.finditer(text):
        char = token.group()
        depth = len(stack)
        if char[0] == '"':
            if depth == 1 and key is None:
                key = json.loads(char) if len(char) < 256 else None
            continue
        if char in _CLOSERS:
            if depth == 0 and char == "{" and not document and member_start < 0:
                member_start = token.end()
            elif depth == 1 and key == "results" and char == "[":
                results = []
            elif depth == 2 and results is not None and key == "results" and char == "{":
                item_start = token.start()
            stack.append(char)
            continue
        if char == ",":
            if depth == 1:
                take_member(token.start())
                member_start, key = token.end(), None
            continue
        if not stack or _CLOSERS[stack[-1]] != char:
            break  # mismatched bracket: what follows cannot be trusted
        stack.pop()
        if depth == 3 and results is not None and key == "results" and item_start >= 0:
            try:
                value, lenient = _loads_lenient(text[item_start : token.end()])
                results.append(value)
                skipped += lenient
            except (ValueError, RecursionError):
                skipped += 1
            item_start = -1
        elif depth == 1:
            take_member(token.start())
            member_start = -1
            break
    else:
        stack = stack or ["{"]  # the scan ran out of input: the document was cut short
    if results is not None:
        document["results"] = results
    if member_start < 0 and not document:
        return None, bool(stack), skipped
    return document, bool(stack), skipped


def _run_from_document(doc: dict[str, Any], repaired: bool) -> Run:
    run = Run(has_table=isinstance(doc.get("results"), list), truncated=repaired)
    run.collective = _collective(doc.get("args"))
    version = doc.get("nccl_version")
    code = parse_int(str(version)) if isinstance(version, int | str) else None
    run.nccl_version = nccl_version_from_code(code) if code is not None else _version_string(version)
    run.ranks = _ranks(doc)
    run.rank_hosts = _rank_hosts(doc)
    run.split_groups = _groups(doc)
    results = doc.get("results")
    items = results if isinstance(results, list) else []
    for index, item in enumerate(items):
        row = _row(item, require_both_halves=repaired)
        if row is not None:
            if not run.rows.append(row):  # a number past what a row stores (size beyond 64 bits)
                run.rows.note_invalid(row.size)
        elif (size := _unmeasured_size(item)) is not None:
            run.rows.note_invalid(size)  # as the text parser does: no number to keep, but it fails the run
        elif not (repaired and index == len(items) - 1) and (size := _unreadable_size(item)) is not None:
            run.rows.note_invalid(size)  # a record that measured a size but cannot be read is not left out
    _read_footer(run, doc)
    config = doc.get("config")
    validation = config.get("validation") if isinstance(config, dict) else None
    # nccl-tests' -c (datacheck), as the text's nThread line says it
    if validation in (0, 1) and not isinstance(validation, bool):
        run.validated = validation == 1
    sweep = _sweep(config)
    run.expected_rows = sweep_length(*sweep) if sweep is not None else None
    finished = run.avg_busbw is not None  # its footer: a document cut short is incomplete for that
    run.split_problem = sweep_order_problem(run.rows, sweep, finished=finished) or average_mismatch(run)
    if run.split_problem is None:
        run.table_problem = table_problem(run.rows, run.collective, run.ranks if run.split_groups <= 1 else None)
    return run


#: The largest rank, thread or GPU count read (a number past it is none): the ranks are printed, and a number of
#: thousands of digits cannot be (review round 25b).
_MAX_RANK = 2**31 - 1
#: Sizes are 64-bit in nccl-tests: a larger one in the config is no size (the rows' own are invalid rows).
_MAX_SIZE = 2**64


def _sweep(config: Any) -> tuple[int, int, int, bool] | None:
    """minBytes, maxBytes, step and whether the step is a factor, from ``config`` (what the text log's nThread line
    says); None when one is missing or no integer. nccl-tests writes ``step_factor`` when it is above 1, else
    ``step_bytes``. A ``# Reducing maxBytes`` (memory limit) comes after the config and is not in the document."""
    if not isinstance(config, dict):
        return None
    low, high = _size_value(config.get("minimum_bytes")), _size_value(config.get("maximum_bytes"))
    factor, step = _size_value(config.get("step_factor")), _size_value(config.get("step_bytes"))
    if low is None or high is None:
        return None
    if factor is not None and factor > 1:
        return low, high, factor, True
    if step is not None:
        return low, high, step, False
    return None


def _size_value(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value < _MAX_SIZE else None
    number = _number(value)
    return int(number) if number is not None and number.is_integer() and 0 <= number < _MAX_SIZE else None


def _unreadable_size(item: Any) -> int | None:
    """The size (-1 when it is no integer) of a record _row cannot read: a bandwidth that is a word or a boolean, a
    half that is null, a size too large to store. None for a 0-byte record (nccl-tests writes "nan" for its
    bandwidths, and the report judges no 0-byte row); the last record of a repaired file is its caller's to skip."""
    size = _number(item.get("size")) if isinstance(item, dict) else None
    if size == 0:
        return None
    return int(size) if size is not None and size.is_integer() else -1


def _collective(args: Any) -> str | None:
    if isinstance(args, list) and args and isinstance(args[0], str):
        return normalize_collective(args[0])
    if isinstance(args, str) and args.strip():
        return normalize_collective(args.split()[0])
    return None


def _version_string(version: Any) -> str | None:
    return version.split("+", 1)[0] if isinstance(version, str) and version else None


def _config_and_devices(doc: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """The document's ``config`` ({} when none) and the device records of ``devices`` (None when it is no list)."""
    config_value = doc.get("config")
    config: dict[str, Any] = config_value if isinstance(config_value, dict) else {}
    devices = doc.get("devices", config.get("devices"))
    return config, [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else None


def _ranks(doc: dict[str, Any]) -> int | None:
    config, devices = _config_and_devices(doc)
    ranks = [d.get("rank") for d in devices or []]
    max_rank = max((r for r in ranks if isinstance(r, int) and not isinstance(r, bool) and r <= _MAX_RANK), default=-1)
    # nccl-tests parses only the first device line of each process into ``devices``.
    per_process = _as_int(config.get("nthreads")) * _as_int(config.get("ngpus"))
    return ranks_from_devices(max_rank, per_process)


def _groups(doc: dict[str, Any]) -> int:
    """How many NCCL_TESTS_SPLIT groups ``devices`` lists (each group runs its own communicator: a row's count is
    per group, and ``devices`` lists every group's processes); 0 without devices. A group written as text or a float
    is read as the number it spells (nccl-tests writes an int), so 0, 0.0 and "0" are one group."""
    _, devices = _config_and_devices(doc)
    return len({_group_of(d.get("group", 0)) for d in devices or []})


def _group_of(value: Any) -> int | str:
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]{1,18}\s*", value):
        return int(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value == int(value):
        return int(value)
    return repr(value)


#: The most ranks one process is taken to run (nthreads x ngpus): nccl-tests lists one device a process.
_MAX_PER_PROCESS = 64
#: The most ranks whose hosts are kept (a job of 8,000 GPUs has 8,000): past it, none are (a crafted devices list of
#: 100,000 processes of 64 ranks each would hold gigabytes), and the log is judged as one naming no host.
_MAX_RANK_HOSTS = 1 << 16


def _rank_hosts(doc: dict[str, Any]) -> dict[int, str]:
    """Rank to host, as a text log's ``#  Rank`` lines give them: nccl-tests lists each process's first rank in
    ``devices`` with its ``hostname``; the process's other ranks (nthreads x ngpus in all) ran on its host too. A
    hostname that is not one printable word is left out, as the text's Rank line would not match."""
    config, devices = _config_and_devices(doc)
    if devices is None:
        return {}
    per_process = min(_as_int(config.get("nthreads")) * _as_int(config.get("ngpus")) or 1, _MAX_PER_PROCESS)
    hosts: dict[int, str] = {}
    for device in devices:
        rank = device.get("rank") if isinstance(device, dict) else None
        host = device.get("hostname") if isinstance(device, dict) else None
        if not (isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank <= _MAX_RANK - per_process):
            continue
        if not isinstance(host, str) or not host or not host.isprintable() or any(c.isspace() for c in host):
            continue
        if len(hosts) + per_process > _MAX_RANK_HOSTS:
            return {}
        for each in range(rank, rank + per_process):
            hosts.setdefault(each, host)
    return dict(sorted(hosts.items()))


def _as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_RANK else 0


def _row(item: Any, require_both_halves: bool) -> Row | None:
    if not isinstance(item, dict):
        return None
    size, count = _number(item.get("size")), _number(item.get("count"))
    type_name = item.get("type")
    if size is None or count is None or not isinstance(type_name, str) or not type_name:
        return None
    if not (size.is_integer() and count.is_integer() and size >= 0 and count >= 0):
        return None  # nccl-tests writes whole byte and element counts: 2097152.5 is no size it measured
    out_of_place = _half(item.get("out_of_place"))
    in_place = _half(item.get("in_place"))
    if out_of_place is None or (item.get("in_place") is not None and in_place is None):
        return None
    if require_both_halves and "in_place" not in item:
        return None  # the last record of a truncated file
    root = _number(item.get("root"))
    return Row(
        size=int(size),
        count=int(count),
        type=type_name,
        redop=_redop(item.get("redop")),
        root=int(root) if root is not None and root >= 0 else None,
        out_of_place=out_of_place,
        in_place=in_place,
    )


#: A half's measurement: a time (``cpu_time`` with -C) and the bandwidths.
_MEASURED = ("time", "cpu_time", "alg_bw", "bus_bw")


def _unmeasured_size(item: Any) -> int | None:
    """The size of a record whose time or bandwidth is there but no finite number (NaN, Infinity, a number past a
    double, nccl-tests' string "nan"), or None. _row declines it; dropped, it vanished from a run that then passed
    on its other sizes. A value printf wrote bare (``-nan``, not JSON) was read as null: that record is skipped
    with the file's warning, as before. A 0-byte record is none of these: nccl-tests writes "nan" for its bandwidths
    (0 bytes in some time), and the report judges no 0-byte row."""
    if not isinstance(item, dict):
        return None
    size, count = _number(item.get("size")), _number(item.get("count"))
    if not size or count is None or not isinstance(item.get("type"), str):
        return None
    for half in (item.get("out_of_place"), item.get("in_place")):
        if isinstance(half, dict) and any(_not_finite(half.get(key)) for key in _MEASURED):
            return int(size)
    return None


def _not_finite(value: Any) -> bool:
    """Whether ``value`` is a number, or a numeric string, that is not finite."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return False
    try:
        return not math.isfinite(float(value.strip() if isinstance(value, str) else value))
    except OverflowError:
        return True  # an integer past a double
    except ValueError:
        return False


def _redop(value: Any) -> str | None:
    # Same normalisation as the text parser: blank and "none" both mean "no reduction".
    if not isinstance(value, str) or value.strip() in ("", "none"):
        return None
    return value.strip()


def _half(data: Any) -> Half | None:
    if not isinstance(data, dict):
        return None
    time = _number(data.get("time", data.get("cpu_time")))
    algbw, busbw = _number(data.get("alg_bw")), _number(data.get("bus_bw"))
    if time is None or algbw is None or busbw is None:
        return None
    given = data.get("nwrong")
    wrong = _number(given)
    if wrong is None and given is not None and not (isinstance(given, str) and given.strip() in ("", "N/A")):
        return None  # a boolean or a word: no count, and no "not checked" either (review round 25b): unreadable
    return Half(time_us=time, algbw=algbw, busbw=busbw, wrong=wrong_count(wrong) if wrong is not None else None)


def _number(value: Any) -> float | None:
    """A finite number from a JSON number or a numeric string (``"    -1"``); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return parse_float(str(value))
    if isinstance(value, str):
        return parse_float(value.strip())
    return None


def _okay(value: Any) -> bool | None:
    """``okay`` fields: JSON booleans or the strings "true"/"false"; "unchecked" and the rest: None."""
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return bool(value == "true")
    return None


def _read_footer(run: Run, doc: dict[str, Any]) -> None:
    oob = doc.get("out_of_bounds")
    if isinstance(oob, dict):
        count = _number(oob.get("count"))
        run.out_of_bounds = int(count) if count is not None else None
        if run.out_of_bounds is None and _okay(oob.get("okay")) is False:
            run.out_of_bounds = 1
        elif run.out_of_bounds == 0 and _okay(oob.get("okay")) is False:
            # A count of 0 with nccl-tests' own okay: false: its verdict wins, as the text's FAILED does (review 25b).
            run.errors.append("out_of_bounds: count 0 with okay false")
    avg = doc.get("average_bus_bandwidth", doc.get("average_bus_bandwidith"))
    if isinstance(avg, dict):
        value = avg.get("bandwidth", avg.get("bandwidith"))
        run.avg_busbw = _number(value)
        if run.avg_busbw is None and value is not None:
            run.avg_unreadable = str(value)[:40]
        run.bw_check_failed = _okay(avg.get("okay")) is False
    errors = doc.get("errors")
    # ``errors`` holds ncclGetLastError(), often "" on success: like ``# error:`` in the text, a warning.
    for error in errors if isinstance(errors, list) else []:
        if isinstance(error, str):
            add_unique(run.warnings, error.strip())
