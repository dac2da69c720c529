"""`python -m benchmarks [NAME...]`: run the benchmarks (all, or those named: e.g. `ssh_mesh_scale run_dir_scrub`,
which need no lab), print a table, write artifacts/bench/*.json.

Exit status 1 when a benchmark misses its target; 5 when none missed one but a target was not judged (this run
left out what it needs); a reference figure (measured, nothing to judge it against) counts neither way; 64 when a
name is no benchmark's (nothing runs).
"""

from __future__ import annotations

import importlib
import sys

from benchmarks.common import Result, exit_code, table_line, write_report
from rdmaforge.lab.session import hold_lab
from rdmaforge.runner.exit_codes import ExitCode

BENCHMARKS = [
    "lab_up",
    "nccl_build",
    "nccl_parser",
    "pairwise",
    "converge_scale",
    "ssh_mesh_scale",
    "run_dir_scrub",
    "sweep_report_scale",
]
#: Benchmarks that bring the lab up or down: only they need the machine-wide lab lock.
LAB_BENCHMARKS = {"lab_up", "nccl_build", "pairwise", "converge_scale"}


def selected(argv: list[str]) -> list[str]:
    """The benchmarks to run: those named (each once, in the order given), or all; a name that is none is an
    error (ValueError) naming the allowed ones."""
    unknown = [name for name in argv if name not in BENCHMARKS]
    if unknown:
        raise ValueError(f"no benchmark {', '.join(map(repr, unknown))}; allowed values: {', '.join(BENCHMARKS)}")
    return list(dict.fromkeys(argv)) or list(BENCHMARKS)


def main(argv: list[str]) -> int:
    try:
        names = selected(argv)
    except ValueError as exc:
        print(f"python -m benchmarks: {exc}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    # The lab is machine-wide: a test session must not tear it down mid-benchmark.
    lock = hold_lab() if LAB_BENCHMARKS.intersection(names) else None
    results: list[Result] = []
    for name in names:
        print(f"== {name}", flush=True)
        results += importlib.import_module(f"benchmarks.{name}").run()
    width = max(len(r.name) for r in results)
    for r in results:
        print(table_line(r, width))
    print(f"report: {write_report(results)}")
    if lock is not None:
        lock.close()
    return exit_code(results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
