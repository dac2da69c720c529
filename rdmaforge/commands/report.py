"""`rdmaforge report RUN_DIR`: re-render a stored benchmark run (results, CSV, Markdown, plots, verdict)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rdmaforge import stored
from rdmaforge.bench.baseline import BaselineError
from rdmaforge.bench.report import render
from rdmaforge.bench.verdict import EXIT_CODES, tolerance_problem
from rdmaforge.errors import input_path, missing_path
from rdmaforge.paths import WORKSPACE
from rdmaforge.runner.exit_codes import OUTPUT_CUT, ExitCode, epilog

BENCH_DIR = WORKSPACE / "artifacts" / "bench"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="re-render a stored benchmark run directory; exit 0 pass, 4 fail, 5 incomplete",
        description="Re-renders results.json, results.csv, summary.md and the plots of a stored benchmark run "
        "and prints its verdict: pass only when every required component passed against a threshold, fail "
        "when a component failed, incomplete when a required one was skipped or not judged.",
        epilog=epilog(ExitCode.BELOW_THRESHOLD, ExitCode.INCOMPLETE, meanings={
            ExitCode.ERROR: OUTPUT_CUT,
            ExitCode.BELOW_THRESHOLD: "verdict fail (a component failed: below a threshold, a failed run, a "
                                      "regression)",
            ExitCode.INCOMPLETE: "verdict incomplete (a required component was skipped or not judged)",
        }),  # fmt: skip
    )
    parser.add_argument(
        "run_dir", type=input_path("a run directory (with run.json), or --latest"), nargs="?",
        help="directory with run.json and raw logs, or a `rdmaforge bench` run"
    )
    parser.add_argument("--latest", action="store_true", help=f"the newest run under {BENCH_DIR}")
    parser.add_argument("--json", action="store_true", help="print results.json instead of the summary")
    parser.add_argument("--baseline", type=input_path("a baseline file (rdmaforge baseline -o)"), metavar="FILE",
                        help="compare with this baseline (`rdmaforge baseline`) instead of the run's own")  # fmt: skip
    parser.add_argument("--tolerance", type=float, metavar="FRACTION",
                        help="allowed drop against the baseline (default: the run's "
                        "benchmark_regression_tolerance)")  # fmt: skip
    parser.set_defaults(func=run)


def bad_input(message: str) -> int:
    print(f"rdmaforge report: {message}", file=sys.stderr)
    return int(ExitCode.BAD_INPUT)


def find_run_dir(args: argparse.Namespace) -> Path | str:
    """The benchmark run directory to render, or the message saying why there is none."""
    if args.latest and args.run_dir is not None:  # one of them would be ignored
        return f"give RUN_DIR ({args.run_dir}) or --latest, not both"
    if args.latest:
        runs = []
        for path in BENCH_DIR.glob("*/run.json"):
            try:
                runs.append((path.stat().st_mtime_ns, str(path), path))
            except OSError:  # gone, or a dangling link: not a run
                continue
        if not runs:
            return f"no benchmark run under {BENCH_DIR} (run rdmaforge bench)"
        return max(runs)[2].parent  # the run recorded last, whatever its directory is named
    if args.run_dir is None:
        return "give RUN_DIR or --latest"
    run_dir: Path = args.run_dir
    problem = missing_path(run_dir, "run directory")
    if problem:
        return problem
    if run_dir.is_file():
        return f"{run_dir} is a file: give the benchmark run directory ({run_dir.parent} if it holds this run.json)"
    # exists(), not is_file(): a run.json that is a device or a pipe is refused by the bounded read, with its size.
    if not (run_dir / "run.json").exists() and (run_dir / "benchmark" / "run.json").exists():
        run_dir = run_dir / "benchmark"  # `rdmaforge bench` keeps the benchmark's run there
    if not (run_dir / "run.json").exists():
        return f"{run_dir} has no run.json (not a benchmark run directory)"
    return run_dir


def load_run(run_dir: Path) -> dict[str, Any]:
    """run.json of ``run_dir``, with it and e2e.json checked against their schemas (rdmaforge.stored).

    A malformed file raises UserError naming the file and key (exit 64 from rdmaforge.cli).
    """
    run: dict[str, Any] = stored.load(run_dir / "run.json", stored.RUN_JSON, "benchmark run.json")
    if (run_dir / "e2e.json").exists():
        stored.load(run_dir / "e2e.json", stored.E2E_JSON, "e2e result (e2e.json)")
    return run


def baseline_required(run: Mapping[str, Any]) -> dict[str, Any]:
    """The run.json keys that make the comparison ``--baseline`` asks for a required one. A run that named the
    baseline optional would report the comparison 'not judged (not required)' and pass without it: a comparison
    asked for on the command line is judged, and one that cannot be made leaves the run incomplete. (A baseline
    given is required by an explicit ``required`` list too: verdict.required_groups.)"""
    changed: dict[str, Any] = {}
    optional = [str(group) for group in run.get("optional") or []]
    if "baseline" in optional:
        changed["optional"] = [group for group in optional if group != "baseline"]
    return changed


def run(args: argparse.Namespace) -> int:
    run_dir = find_run_dir(args)
    if isinstance(run_dir, str):
        return bad_input(run_dir)
    stored_run = load_run(run_dir)  # checked first: nothing is re-rendered from a malformed run
    overrides: dict[str, Any] = {}
    if args.baseline is not None:
        overrides["baseline"] = str(args.baseline.resolve())
        overrides.update(baseline_required(stored_run))
    if args.tolerance is not None:
        if (problem := tolerance_problem(args.tolerance)) is not None:
            return bad_input(f"--tolerance {args.tolerance}: {problem}")
        if args.baseline is None and not stored_run.get("baseline"):
            # It would be silently unused: the user asked for a comparison that nothing makes.
            return bad_input(f"--tolerance {args.tolerance}: {run_dir} was run without a baseline, so there is no "
                             "drop to allow; give the baseline to compare with: --baseline FILE")  # fmt: skip
        overrides["tolerance"] = args.tolerance
    try:
        results = render(run_dir, overrides)
    except BaselineError as exc:
        return bad_input(str(exc))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        # As written (UTF-8, a carriage return in a reason kept, to be shown escaped rather than as a line break).
        with (run_dir / "summary.md").open(encoding="utf-8", newline="") as summary:
            print(summary.read(), end="")
        print(f"artifacts: {run_dir.resolve()}")
    return int(EXIT_CODES.get(str(results["verdict"]), ExitCode.INTERNAL))
