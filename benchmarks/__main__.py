"""`python -m benchmarks [NAME...]`: run the benchmarks, print a table, write artifacts/bench/*.json.

Exit status 1 when a benchmark misses its target; 5 when none missed one but a target was not judged (this run
left out what it needs); a reference figure (measured, nothing to judge it against) counts neither way.
"""

from __future__ import annotations

import importlib
import sys

from benchmarks.common import Result, exit_code, table_line, write_report
from rdmaforge.lab.session import hold_lab

BENCHMARKS = ["lab_up", "nccl_build", "nccl_parser", "pairwise", "converge_scale"]
#: Benchmarks that bring the lab up or down: only they need the machine-wide lab lock.
LAB_BENCHMARKS = {"lab_up", "nccl_build", "pairwise", "converge_scale"}


def main(argv: list[str]) -> int:
    names = argv or BENCHMARKS
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
