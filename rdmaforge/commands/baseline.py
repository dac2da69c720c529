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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rdmaforge import output_files, stored
from rdmaforge.bench import baseline
from rdmaforge.bench.report import judge
from rdmaforge.commands.report import find_run_dir, load_run
from rdmaforge.errors import UserError, input_path, output_path
from rdmaforge.runner.exit_codes import OUTPUT_CUT, ExitCode, epilog

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
        epilog=epilog(meanings={ExitCode.ERROR: OUTPUT_CUT}),
    )
    parser.add_argument("run_dir", type=input_path("a benchmark run directory (with run.json)"),
                        help="the benchmark run to take the baseline from")  # fmt: skip
    parser.add_argument("-o", "--output", type=output_path("a file outside the run directory"), required=True,
                        metavar="FILE", help="where to write it (not one of the run's own files)")  # fmt: skip
    parser.set_defaults(func=run, latest=False)


def fail(message: str) -> int:
    print(f"rdmaforge {NAME}: {message}", file=sys.stderr)
    return int(ExitCode.BAD_INPUT)


#: Files the report reads from a run directory even when this run has none (yet): a baseline written under one of
#: these names would be read as the run's own.
READ_NAMES = ("run.json", "e2e.json")


def overwrites_run(output: Path, run_dirs: Sequence[Path]) -> str | None:
    """Why ``output`` is one of the run's own files (or its directory), or None when it is not.

    A baseline written over run.json (or a log, or e2e.json) destroys the run it was made from: `report` fails on it
    afterwards. Refused: the run directory itself, any file already directly in it, and the names the report reads
    (READ_NAMES), compared after resolving symbolic links and ``..``; an existing output that is a hard link to one
    of the run's files too (same device and inode). A new name beside them (RUN_DIR/baseline.json) is allowed.
    """
    target = output.resolve()
    inode = _inode(target)
    for run_dir in dict.fromkeys(d.resolve() for d in run_dirs):
        if target == run_dir:
            return f"is the run directory {run_dir}"
        if target.parent == run_dir and (target.exists() or target.is_symlink() or target.name in READ_NAMES):
            return f"is {target.name} of the run directory {run_dir}"
        if inode is not None and run_dir.is_dir():
            same = next((entry.name for entry in run_dir.iterdir() if _inode(entry) == inode), None)
            if same is not None:
                return f"is a hard link to {same} of the run directory {run_dir}"
    return None


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:  # missing, or not readable: nothing to compare
        return None
    return found.st_dev, found.st_ino


def run(args: argparse.Namespace) -> int:
    run_dir = find_run_dir(args)
    if isinstance(run_dir, str):
        return fail(run_dir)
    # Before anything is judged or written: a baseline must never replace the files of the run it comes from.
    clobbered = overwrites_run(args.output, [args.run_dir, run_dir] if args.run_dir is not None else [run_dir])
    if clobbered is not None:
        return fail(f"-o {args.output}: {clobbered}, which the report reads; a baseline written there would destroy "
                    "the run; allowed: a file outside the run's own files (e.g. baselines/NAME.json)")  # fmt: skip
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
        output_files.make_parents(args.output)
        # Written through, as the shell's > does: -o is the user's own choice (a link to a versioned file,
        # /dev/stdout, a pipe a reader holds), unlike the fixed names of a run directory from elsewhere.
        args.output.write_text(json.dumps(data, indent=2) + "\n")
    except OSError as exc:
        return fail(f"cannot write {args.output}: {exc.strerror or exc}")
    sizes = sum(len(entry["busbw_gbs"]) for entry in data["nccl"].values())
    e2e = "e2e throughput" if data["e2e"] else "no e2e result"
    print(f"baseline written to {args.output}: {len(data['nccl'])} collective(s), {sizes} size(s), {e2e}; "
          f"from {run_dir} (verdict {results['verdict']})")  # fmt: skip
    return int(ExitCode.OK)
