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
from typing import Any

from rdmaforge.nccl_tests.lines import parse_float, parse_int
from rdmaforge.nccl_tests.model import (
    Half,
    Row,
    Run,
    add_unique,
    nccl_version_from_code,
    normalize_collective,
    ranks_from_devices,
)

_MAX_REPAIR_ATTEMPTS = 200
_CLOSERS = {"{": "}", "[": "]"}


def looks_like_json(text: str) -> bool:
    """Whether ``text`` is (the beginning of) a JSON object rather than a text log."""
    return text.lstrip().startswith("{")


#: Keys that every ``-J`` document starts with or holds; a JSON object without any of them is something else.
_SIGNATURE_KEYS = ("results", "config", "nccl_version", "args")


def parse_json_output(text: str) -> list[Run]:
    """The run described by a ``-J`` JSON document: one run, or none when ``text`` is not such a document."""
    document, repaired = _load(text)
    if not isinstance(document, dict) or not any(key in document for key in _SIGNATURE_KEYS):
        return []
    return [_run_from_document(document, repaired)]


def _load(text: str) -> tuple[Any, bool]:
    try:
        return json.loads(text), False
    except ValueError:
        return _repair_truncated(text), True


def _repair_truncated(text: str) -> Any:
    """Parse the longest prefix of ``text`` that closes into valid JSON; None when there is none.

    A hung or killed run leaves the file open mid-``results``: cutting after the last complete object
    and appending the closers of the brackets still open keeps every row that was written.
    """
    cut_points = _object_ends(text)
    for end, open_brackets in reversed(cut_points[-_MAX_REPAIR_ATTEMPTS:]):
        candidate = text[:end] + "".join(_CLOSERS[b] for b in reversed(open_brackets))
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return None


def _object_ends(text: str) -> list[tuple[int, str]]:
    """Positions just after each ``}`` outside strings, with the brackets still open there."""
    stack: list[str] = []
    ends: list[tuple[int, str]] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in _CLOSERS:
            stack.append(char)
        elif char in "}]" and stack:
            stack.pop()
            if char == "}":
                ends.append((index + 1, "".join(stack)))
    return ends


def _run_from_document(doc: dict[str, Any], repaired: bool) -> Run:
    run = Run(has_table=isinstance(doc.get("results"), list), truncated=repaired)
    run.collective = _collective(doc.get("args"))
    version = doc.get("nccl_version")
    code = parse_int(str(version)) if isinstance(version, int | str) else None
    run.nccl_version = nccl_version_from_code(code) if code is not None else _version_string(version)
    run.ranks = _ranks(doc)
    results = doc.get("results")
    for item in results if isinstance(results, list) else []:
        row = _row(item, require_both_halves=repaired)
        if row is not None:
            run.rows.append(row)
    _read_footer(run, doc)
    return run


def _collective(args: Any) -> str | None:
    if isinstance(args, list) and args and isinstance(args[0], str):
        return normalize_collective(args[0])
    if isinstance(args, str) and args.strip():
        return normalize_collective(args.split()[0])
    return None


def _version_string(version: Any) -> str | None:
    return version.split("+", 1)[0] if isinstance(version, str) and version else None


def _ranks(doc: dict[str, Any]) -> int | None:
    config_value = doc.get("config")
    config: dict[str, Any] = config_value if isinstance(config_value, dict) else {}
    devices = doc.get("devices", config.get("devices"))
    ranks = [d.get("rank") for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []
    max_rank = max((r for r in ranks if isinstance(r, int) and not isinstance(r, bool)), default=-1)
    # nccl-tests parses only the first device line of each process into ``devices``.
    per_process = _as_int(config.get("nthreads")) * _as_int(config.get("ngpus"))
    return ranks_from_devices(max_rank, per_process)


def _as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _row(item: Any, require_both_halves: bool) -> Row | None:
    if not isinstance(item, dict):
        return None
    size, count = _number(item.get("size")), _number(item.get("count"))
    type_name = item.get("type")
    if size is None or count is None or not isinstance(type_name, str) or not type_name:
        return None
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
    wrong = _number(data.get("nwrong"))
    return Half(time_us=time, algbw=algbw, busbw=busbw, wrong=int(wrong) if wrong is not None else None)


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
    avg = doc.get("average_bus_bandwidth", doc.get("average_bus_bandwidith"))
    if isinstance(avg, dict):
        run.avg_busbw = _number(avg.get("bandwidth", avg.get("bandwidith")))
        run.bw_check_failed = _okay(avg.get("okay")) is False
    errors = doc.get("errors")
    # ``errors`` holds ncclGetLastError(), often "" on success: like ``# error:`` in the text, a warning.
    for error in errors if isinstance(errors, list) else []:
        if isinstance(error, str):
            add_unique(run.warnings, error.strip())
