"""`rdmaforge report RUN_DIR`: re-render a stored benchmark run (results, CSV, Markdown, plots, verdict)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rdmaforge.bench.report import render
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.runner.exit_codes import EPILOG, ExitCode

BENCH_DIR = PROJECT_ROOT / "artifacts" / "bench"

#: A verdict's exit code: 4 below its threshold as for `rdmaforge bench`; a failed run is 1 here (there is no
#: host to blame in a stored run), where `rdmaforge bench` says 2 (the play failed on a host).
EXIT_CODES = {"pass": ExitCode.OK, "skipped": ExitCode.OK, "fail": ExitCode.ERROR,
              "below_threshold": ExitCode.BELOW_THRESHOLD}  # fmt: skip


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("report", help="re-render a stored benchmark run directory", epilog=EPILOG)
    parser.add_argument(
        "run_dir", type=Path, nargs="?", help="directory with run.json and raw logs, or a `rdmaforge bench` run"
    )
    parser.add_argument("--latest", action="store_true", help=f"the newest run under {BENCH_DIR}")
    parser.add_argument("--json", action="store_true", help="print results.json instead of the summary")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.latest:
        runs = sorted(p for p in BENCH_DIR.glob("*/run.json"))
        if not runs:
            print(f"rdmaforge report: no benchmark run under {BENCH_DIR} (run playbooks/bench.yml)", file=sys.stderr)
            return 2
        args.run_dir = runs[-1].parent
    if args.run_dir is None:
        print("rdmaforge report: give RUN_DIR or --latest", file=sys.stderr)
        return 2
    if not (args.run_dir / "run.json").is_file() and (args.run_dir / "benchmark" / "run.json").is_file():
        args.run_dir = args.run_dir / "benchmark"  # `rdmaforge bench` keeps the benchmark's run there
    if not (args.run_dir / "run.json").is_file():
        print(f"rdmaforge report: {args.run_dir} has no run.json (not a benchmark run directory)", file=sys.stderr)
        return 2
    results = render(args.run_dir)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print((args.run_dir / "summary.md").read_text(), end="")
        print(f"artifacts: {args.run_dir.resolve()}")
    return int(EXIT_CODES.get(results["verdict"]["status"], ExitCode.ERROR))
