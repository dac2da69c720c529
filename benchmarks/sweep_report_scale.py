"""The pairwise report (``python -m rdmaforge.pairwise.report``: scoring, results.json, table.txt, the heat map) on
a sweep of NODES nodes and one rail, every pair measured in both directions, one node at a third of the others'
rate. Its scoring scanned every pair once per node (n^3 work: about two minutes a rail at 1000 nodes) and its heat
map grew with the nodes until it ran out of memory (9 GB at 200 nodes, killed at 730) before results.json was
written (review round 21b). Timed in a fresh child process: wall seconds, and its peak RSS.

A figure counts only when the report did its job: exit 0, results.json written with every pair, and the slow node
(and only it) named a suspect."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Result
from rdmaforge.pairwise import plan
from rdmaforge.paths import PROJECT_ROOT

NODES = 1000
TARGET_SECONDS = 120.0
TARGET_RSS_MIB = 1600.0
SLOW = "n0007"


def raw_sweep(nodes: int) -> dict:
    names = [f"n{i:04d}" for i in range(nodes)]
    def nic(k: int, i: int) -> dict:
        return {"name": f"eth{k}", "ipv4": [{"address": f"10.{k}.{i // 250}.{i % 250 + 1}", "prefixlen": 16}]}

    facts = {name: {"nics": [nic(0, i), nic(1, i)],
                    "default_route_interface": "eth0", "gpu_count": 0} for i, name in enumerate(names)}  # fmt: skip
    made = plan.make_plan(facts, "all").to_dict()
    measurements = []
    for index, pairs in enumerate(made["rounds"]):
        for a, b in pairs:
            rate = 30.0 if SLOW in (a, b) else 95.0 + (hash((a, b)) % 5)
            measurements += [{"a": s, "b": r, "nic": "eth1", "gbps": rate, "status": "ok", "round": index}
                             for s, r in ((a, b), (b, a))]  # fmt: skip
    return {"plan": made, "measurements": measurements, "method": "iperf3",
            "thresholds": {"slow_ratio": 0.5, "node_fraction": 0.5, "line_rate_gbps": 100.0}}  # fmt: skip


def run() -> list[Result]:
    with tempfile.TemporaryDirectory() as work:
        raw_path, out = Path(work) / "raw.json", Path(work) / "out"
        raw_path.write_text(json.dumps(raw_sweep(NODES)))
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "rdmaforge.pairwise.report", str(raw_path), str(out)],
                              cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=1800)  # fmt: skip
        seconds = time.monotonic() - started
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0  # kB on Linux
        results = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else {}
        heatmaps = sorted(p.name for p in out.glob("heatmap-*.png"))
    pairs = NODES * (NODES - 1)  # results.json lists each direction
    suspects = [(s["kind"], s["node"]) for s in results.get("suspects", [])]
    did = proc.returncode == 0 and len(results.get("pairs", [])) == pairs and suspects == [("node", SLOW)]
    stale = " (peak RSS of an earlier child)" if peak <= before / 1024.0 else ""
    detail = (f"exit {proc.returncode}; {len(results.get('pairs', []))}/{pairs} directions; suspects {suspects[:3]}; "
              f"heat maps {heatmaps}{stale}; {proc.stderr.strip()[-300:]}")  # fmt: skip
    return [
        Result(f"pairwise report, {NODES} nodes x 1 rail: wall time", round(seconds, 1), "s",
               f"< {TARGET_SECONDS:.0f} s", did and seconds < TARGET_SECONDS, detail),
        Result(f"pairwise report, {NODES} nodes x 1 rail: peak RSS", round(peak, 1), "MiB",
               f"< {TARGET_RSS_MIB:.0f} MiB", did and not stale and peak < TARGET_RSS_MIB, detail),
    ]  # fmt: skip
