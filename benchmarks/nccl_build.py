"""Full NCCL build (every device function, sm_80, no ONLY_FUNCS) through playbooks/nccl.yml:
wall time on a 1-node and a 3-node lab (build once + distribute: the 3-node time must stay within 10% of the
1-node time), and the time for a node added later (served from the controller cache, no compile)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from benchmarks.common import Result, reference
from rdmaforge.lab import Lab
from rdmaforge.paths import PROJECT_ROOT

CACHE = Path.home() / ".cache" / "rdmaforge" / "builds"
FULL_BUILD = json.dumps({"nccl_build_only_funcs": "", "nccl_cuda_archs": ["sm_80"]})


def converge_nccl(lab: Lab) -> float:
    started = time.monotonic()
    proc = subprocess.run(
        [str(PROJECT_ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(lab.inventory_path),
         str(PROJECT_ROOT / "playbooks" / "nccl.yml"), "-e", FULL_BUILD],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=4 * 3600,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"nccl.yml failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    return time.monotonic() - started


def compile_seconds() -> float:
    """The builder's own compile time, from the cached build's manifest (the rest of a run is packages and copies)."""
    (path,) = CACHE.glob("nccl-*-sm_80.json")  # the one full build (partial builds end in -funcs<hash>)
    manifest = json.loads(path.read_text())
    return float(manifest["build_seconds"])


def split(total: float, compiled: float) -> str:
    return f"compile {compiled:.0f} s + packages/distribution {total - compiled:.0f} s"


def forget_full_builds() -> None:
    for path in CACHE.glob("nccl-*-sm_80.*"):  # the full build only (partial builds end in -funcs<hash>)
        path.unlink()


def run() -> list[Result]:
    lab = Lab()
    timings: dict[str, float] = {}
    compiled: dict[str, float] = {}
    for nodes in (1, 3):
        lab.down()
        lab.up(nodes=nodes, nics=0)
        forget_full_builds()
        timings[f"{nodes}-node"] = converge_nccl(lab)
        compiled[f"{nodes}-node"] = compile_seconds()
    lab.up(nodes=4, nics=0)
    timings["node added later"] = converge_nccl(lab)
    lab.down()
    return results(timings, compiled)


def results(timings: dict[str, float], compiled: dict[str, float]) -> list[Result]:
    """The table's rows from the wall times (1-node, 3-node, node added later) and the builder's compile times."""
    ratio = timings["3-node"] / timings["1-node"]
    return [
        # What the 3-node and added-node targets are measured against: no target of its own, so no PASS.
        reference("full NCCL build, 1-node lab", round(timings["1-node"], 1), "s",
                  split(timings["1-node"], compiled["1-node"])),  # fmt: skip
        Result(
            "full NCCL build + distribute, 3-node lab",
            round(timings["3-node"], 1),
            "s",
            "<= 1.10 x 1-node",
            ratio <= 1.10,
            f"ratio {ratio:.3f}; {split(timings['3-node'], compiled['3-node'])}",
        ),  # fmt: skip
        Result(
            "node added later (cached build, no compile)",
            round(timings["node added later"], 1),
            "s",
            "< 10% of a build",
            timings["node added later"] < 0.1 * timings["1-node"],
        ),  # fmt: skip
    ]
