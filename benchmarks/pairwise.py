"""The full pairwise sweep on a 4-node lab with 2 extra NICs: the role's default iperf3 duration and streams,
every pair in both directions on both rails (N-1 rounds). Reports the sweep's wall time (target: under 180 s)
and whether it measured everything and found no suspect on a lab whose NICs are all shaped alike."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Result
from rdmaforge.lab import Lab
from rdmaforge.lab import impair as lab_impair
from rdmaforge.paths import PROJECT_ROOT

NODES, NICS = 4, 2
BASE = "200mbit"  # every NIC shaped alike, so the lab's 2 CPUs never decide a pair's rate
TARGET_SECONDS = 180.0


def run() -> list[Result]:
    lab = Lab()
    lab.up(nodes=NODES, nics=NICS)
    targets = [lab_impair.resolve(NODES, NICS, f"node{i}", f"eth{k}") for i in range(1, NODES + 1)
               for k in range(1, NICS + 1)]  # fmt: skip
    try:
        for target in targets:
            lab_impair.limit(target, BASE)
        with tempfile.TemporaryDirectory() as runs:
            started = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "rdmaforge.cli", "pairwise", "-i", str(lab.inventory_path),
                                   "--json", "--runs-dir", runs], cwd=PROJECT_ROOT, capture_output=True, text=True,
                                  timeout=1800)  # fmt: skip
            seconds = time.monotonic() - started
            results = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
            timings = _task_seconds(Path(runs))
    finally:
        for target in targets:
            lab_impair.clear(target)
        lab.up(nodes=3, nics=NICS)  # back to the test suite's default lab
    pairs = results.get("pairs", [])
    ok = [p for p in pairs if p["status"] == "ok"]
    expected = NODES * (NODES - 1) * NICS
    median = sorted(p["gbps"] for p in ok)[len(ok) // 2] if ok else 0.0
    detail = (f"exit {proc.returncode}; {len(ok)}/{expected} directed measurements ok; median {median:.3f} Gb/s "
              f"(shaped {BASE}); suspects {len(results.get('suspects', []))}; {timings}")  # fmt: skip
    return [
        Result(
            f"pairwise sweep, {NODES} nodes x {NICS} rails, 2 s per direction",
            round(seconds, 1),
            "s",
            f"< {TARGET_SECONDS:.0f} s",
            proc.returncode == 0 and len(ok) == expected and seconds < TARGET_SECONDS,
            detail,
        ),  # fmt: skip
    ]


def _task_seconds(runs: Path) -> str:
    """How much of the sweep was measuring (the rounds) and how much the rest (facts, preflight, report)."""
    recaps = list(runs.glob("*/recap.json"))
    if not recaps:
        return "no recap"
    data = json.loads(recaps[0].read_text())
    return f"ansible {data.get('ansible', {}).get('seconds', '?')} s"
