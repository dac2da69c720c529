"""`rdmaforge baseline RUN_DIR -o FILE`: make a baseline from a benchmark run, for later runs to compare with.

The baseline holds nccl-tests' bus bandwidth per collective and message size, the e2e throughput, and the run's
cluster fingerprint (rdmaforge.bench.baseline). `rdmaforge bench -e benchmark_baseline=FILE` (or
`rdmaforge report RUN_DIR --baseline FILE`) compares a run with it within benchmark_regression_tolerance and
names the sizes that regressed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rdmaforge import stored
from rdmaforge.bench import baseline
from rdmaforge.bench.report import judge
from rdmaforge.commands.report import find_run_dir, load_run
from rdmaforge.errors import UserError
from rdmaforge.runner.exit_codes import EPILOG, ExitCode

NAME = "baseline"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        NAME,
        help="write a baseline (busbw per collective and size, e2e throughput) from a benchmark run",
        description="Reads a benchmark run (a `rdmaforge bench` run directory or its benchmark/), and writes a "
        "baseline file: nccl-tests' out-of-place busbw per collective and message size, the e2e p50 "
        "throughput, and the cluster fingerprint (fabric, nodes, GPUs per node). A run whose verdict is fail "
        "is refused: it would make a broken cluster the reference; so is a run whose nccl-tests (or their transport) "
        "were not judged (all ranks on one node, no threshold, no NCCL INFO lines): its busbw was never checked; and "
        "a run whose run.json records no GPU count for a node: no later run could be compared with it.",
        epilog=EPILOG,
    )
    parser.add_argument("run_dir", type=Path, help="the benchmark run to take the baseline from")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="FILE", help="where to write it")
    parser.set_defaults(func=run, latest=False)


def fail(message: str) -> int:
    print(f"rdmaforge {NAME}: {message}", file=sys.stderr)
    return int(ExitCode.BAD_INPUT)


def run(args: argparse.Namespace) -> int:
    run_dir = find_run_dir(args)
    if isinstance(run_dir, str):
        return fail(run_dir)
    run_json = load_run(run_dir)  # schema-checked: a malformed run.json is a message, not a traceback
    try:
        # Judged without any earlier baseline, and without rewriting the run's files.
        results = judge(run_dir, {**run_json, "baseline": None})
        if results["verdict"] == "fail":
            reasons = "; ".join(results.get("reasons") or [])
            return fail(f"{run_dir}: the run's verdict is fail ({reasons}); a baseline must come from a sound run")
        data = baseline.make(run_json, results, str(run_dir.resolve()))
        # What is written is what `report --baseline` and `bench -e benchmark_baseline` accept (the same schema).
        stored.check(data, stored.BASELINE, f"baseline made from {run_dir}", "rdmaforge baseline")
    except UserError as exc:  # BaselineError included
        return fail(str(exc))
    try:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(data, indent=2) + "\n")
    except OSError as exc:
        return fail(f"cannot write {args.output}: {exc.strerror or exc}")
    sizes = sum(len(entry["busbw_gbs"]) for entry in data["nccl"].values())
    e2e = "e2e throughput" if data["e2e"] else "no e2e result"
    print(f"baseline written to {args.output}: {len(data['nccl'])} collective(s), {sizes} size(s), {e2e}; "
          f"from {run_dir} (verdict {results['verdict']})")  # fmt: skip
    return int(ExitCode.OK)
