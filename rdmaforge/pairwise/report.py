"""``python -m rdmaforge.pairwise.report RAW_JSON OUT_DIR``: score the role's raw measurements and write
results.json, table.txt, hostfile.healthy and heatmap-<nic>.png into OUT_DIR.

RAW_JSON (written by the pairwise role, and by nothing else) holds ``plan`` (plan.Plan.to_dict()),
``measurements`` (score.Measurement records), ``thresholds`` (score.Thresholds fields), ``method``, ``notes``,
``slots`` (MPI slots per node) and ``single_stream`` (``streams`` and the one-stream ``measurements`` of seed 003's
check), checked against rdmaforge.stored.PAIRWISE_RAW: a damaged file is refused (64) by a message naming the file,
the field and what it must be. Prints one JSON object: the suspects, the table and the output files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rdmaforge import stored
from rdmaforge.errors import UserError
from rdmaforge.pairwise.output import SHOWN_MATRIX_NODES, not_judged_lines, results, table, write_all
from rdmaforge.pairwise.score import Measurement, Thresholds, admitted, ceiling_note, score, single_stream


def thresholds_from(data: dict[str, Any]) -> Thresholds:
    """ValueError (naming the role variable) for a value that is not a number."""
    try:
        return _thresholds_from(data)
    except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: an integer of hundreds of digits
        keys = ("slow_ratio", "node_fraction", "line_rate_gbps", "min_line_fraction")
        given = ", ".join(f"pairwise_{key}={_given(data[key])}" for key in keys if key in data)
        raise ValueError(f"the scoring thresholds must be numbers ({exc}): {given}") from exc


def _given(value: Any) -> str:
    return stored.shown(value) if stored.beyond_float(value) else repr(value)


def _thresholds_from(data: dict[str, Any]) -> Thresholds:
    # YAML's true is no threshold, though float() reads it as 1.0 (a line rate of 1 Gb/s)
    flags = [key for key in ("slow_ratio", "node_fraction", "line_rate_gbps", "min_line_fraction")
             if isinstance(data.get(key), bool)]  # fmt: skip
    if flags:
        raise ValueError(", ".join(f"pairwise_{key}={str(data[key]).lower()} is not a number" for key in flags))
    line_rate = data.get("line_rate_gbps")
    return Thresholds(
        slow_ratio=float(data.get("slow_ratio", Thresholds.slow_ratio)),
        node_fraction=float(data.get("node_fraction", Thresholds.node_fraction)),
        line_rate_gbps=float(line_rate) if line_rate not in (None, "") else None,
        min_line_fraction=float(data.get("min_line_fraction", Thresholds.min_line_fraction)),
    )


def plan_problems(raw: dict[str, Any]) -> list[str]:
    """What the schema cannot see: a plan with no node or no rail (nothing judged, yet no suspect either), a round's
    pair that is not two different nodes of the plan, a measurement between nodes or on a NIC the plan does not
    have. Each names its place in raw.json."""
    plan = raw["plan"]
    nodes, rails = set(plan["nodes"]), set(plan["rails"])
    found = []
    if not nodes:
        found.append("plan.nodes: [] names no node; allowed: the nodes of the sweep")
    if not rails:
        found.append("plan.rails: [] names no rail; allowed: the NICs measured (at least one)")
    for i, pairs in enumerate(plan["rounds"]):
        for j, pair in enumerate(pairs):
            if len(pair) != 2 or pair[0] == pair[1] or not set(pair) <= nodes:
                found.append(f"plan.rounds[{i}][{j}]: {stored.shown(pair)} is not two different nodes of plan.nodes")
    one = raw.get("single_stream") or {}
    for where, listed in (("measurements", raw["measurements"]), ("single_stream.measurements",
                                                                  one.get("measurements") or [])):  # fmt: skip
        for i, m in enumerate(listed):
            for end in ("a", "b"):
                if m[end] not in nodes:
                    found.append(f"{where}[{i}].{end}: {stored.shown(m[end])} is not a node of plan.nodes")
            if m["a"] == m["b"]:
                found.append(f"{where}[{i}]: a node measured against itself ({stored.shown(m['a'])})")
            if m["nic"] not in rails:
                found.append(f"{where}[{i}].nic: {stored.shown(m['nic'])} is not a rail of plan.rails")
    return found


MISSING_DETAIL = "not measured: a node of the pair failed or left the play"


def with_missing(measurements: list[Measurement], plan: dict[str, Any]) -> list[Measurement]:
    """Every direction the plan scheduled, on every rail: one never measured is ``missing`` (not ok). A direction
    --rounds K schedules in more than one round must be measured in each of them: a round it is missing from is
    ``missing`` there, not made good by another round's measurement (a direction counts by its worst round)."""
    scheduled: dict[tuple[str, str, str], list[int]] = {}
    for index, pairs in enumerate(plan["rounds"]):
        for a, b in pairs:
            for nic in plan["rails"]:
                for s, r in ((a, b), (b, a)):
                    scheduled.setdefault((s, r, nic), []).append(index)
    seen = {(m.a, m.b, m.nic) for m in measurements}
    seen_in = {(m.a, m.b, m.nic, m.round) for m in measurements}
    added = []
    for (s, r, nic), rounds in scheduled.items():
        if (s, r, nic) not in seen:
            added.append(Measurement(s, r, nic, None, "missing", rounds[0], MISSING_DETAIL))
        elif len(rounds) > 1:
            added += [Measurement(s, r, nic, None, "missing", index, MISSING_DETAIL)
                      for index in dict.fromkeys(rounds) if (s, r, nic, index) not in seen_in]  # fmt: skip
    return measurements + added


def build(raw: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """The report of ``raw``, written into ``out_dir``. Takes ``raw``'s measurements out of it: a million of them
    as json's dicts are 600 MB at 1,000 nodes a rail, kept for nothing once read."""
    plan = raw["plan"]
    limits = thresholds_from(raw.get("thresholds") or {})
    limits.check()  # before the ceiling is taken from the line rate
    taken = with_missing([Measurement.from_dict(m) for m in raw.pop("measurements")], plan)
    # Judged as score() judges them: results.json and the table show a rate above the ceiling as the failure it is.
    measurements = admitted(taken, limits)
    measurements.sort(key=lambda m: (m.nic, m.round, m.a, m.b))
    rails = score(measurements, plan["nodes"], plan["rails"], limits)
    one = raw.get("single_stream") or {}
    single_taken = [Measurement.from_dict(m) for m in one.get("measurements") or []]
    single = single_stream(admitted(single_taken, limits), measurements, int(one.get("streams") or 0))
    above = [note for note in (ceiling_note(taken, limits), ceiling_note(single_taken, limits)) if note]
    data = results(measurements, rails, plan, limits, str(raw.get("method", "iperf3")),
                   [*plan.get("notes", []), *raw.get("notes", []), *above], single)  # fmt: skip
    slots = {str(k): None if v is None else int(v) for k, v in (raw.get("slots") or {}).items()}
    write_all(data, out_dir, slots)
    return data


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m rdmaforge.pairwise.report RAW_JSON OUT_DIR", file=sys.stderr)
        return 64
    raw_path, out_dir = Path(argv[0]), Path(argv[1])
    try:
        what = "pairwise sweep's raw.json"
        raw = stored.load(raw_path, stored.PAIRWISE_RAW, what, stored.PAIRWISE_RAW_MAX_BYTES)
        found = plan_problems(raw)
        if found:
            more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
            raise UserError(f"{raw_path}: not a valid {what}: " + "; ".join(found[:5]) + more)
        data = build(raw, out_dir)
    except UserError as exc:  # names the file itself
        print(f"rdmaforge pairwise report: {exc}", file=sys.stderr)
        return 64
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"rdmaforge pairwise report: cannot read {raw_path}: {exc}", file=sys.stderr)
        return 64
    summary = {"suspects": data["suspects"], "unjudged": data["unjudged"], "unmeasured": data["unmeasured"],
               "not_judged": not_judged_lines(data), "healthy_nodes": data["healthy_nodes"],
               "notes": data["notes"],
               "results": str(out_dir / "results.json"), "table": table(data, SHOWN_MATRIX_NODES)}  # fmt: skip
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
