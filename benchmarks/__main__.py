"""`python -m benchmarks [NAME...]`: run the benchmarks, print a table, write artifacts/bench/*.json.

Exit status 1 when a benchmark misses its target.
"""

from __future__ import annotations

import fcntl
import importlib
import sys
from pathlib import Path

from benchmarks.common import Result, write_report

BENCHMARKS = ["lab_up", "nccl_build"]
# The lab is machine-wide: the benchmarks hold the same lock as a pytest session so neither tears down the other's lab.
LAB_LOCK = Path("/var/lib/rdmaforge/lab-test-session.lock")


def main(argv: list[str]) -> int:
    names = argv or BENCHMARKS
    LAB_LOCK.parent.mkdir(parents=True, exist_ok=True)
    lock = LAB_LOCK.open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"waiting for the test session to release the lab ({LAB_LOCK})", flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    results: list[Result] = []
    for name in names:
        print(f"== {name}", flush=True)
        results += importlib.import_module(f"benchmarks.{name}").run()
    width = max(len(r.name) for r in results)
    for r in results:
        print(
            f"{r.name:{width}}  {r.value:>10} {r.unit:3} target {r.target:12} {'PASS' if r.passed else 'FAIL'}"
            f"  {r.detail}"
        )
    print(f"report: {write_report(results)}")
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
