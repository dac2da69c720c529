"""Speed and peak memory of `rdmaforge nccl-report --json` (issue 17) on two generated inputs.

Both are built in a temporary directory from the real nccl-tests outputs in ../shared/corpus/nccl-tests:
- ``corpus-1g.log``: every corpus file concatenated, repeated up to 1 GiB (many short runs, NCCL INFO noise);
- ``single-200m.log``: one run of the corpus (the 80-GPU all_reduce of file 02) whose rows are repeated up
  to 200 MiB, i.e. one sweep with ~1.7M rows.
Each is parsed by ``rdmaforge nccl-report --json`` in a child process with PYTHONUNBUFFERED=1 (as in CI and
containers), stdout to /dev/null; MB/s is input size / wall time, peak RSS is the child's ru_maxrss.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Result
from rdmaforge.paths import PROJECT_ROOT

CORPUS = PROJECT_ROOT.parent / "shared" / "corpus" / "nccl-tests"
TARGET_MBPS = 100.0
TARGET_RSS_MB = 300.0
CORPUS_BYTES = 1 << 30
SINGLE_BYTES = 200 << 20
SINGLE_SOURCE = "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt"


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.glob("*.txt") if p.name[:1].isdigit())


def build_corpus(path: Path, size: int = CORPUS_BYTES) -> int:
    data = b"".join(p.read_bytes() for p in corpus_files())
    copies = max(1, size // len(data))
    with path.open("wb") as out:
        for _ in range(copies):
            out.write(data)
    return copies * len(data)


def build_single(path: Path, size: int = SINGLE_BYTES) -> int:
    """The first run of SINGLE_SOURCE with its rows repeated until the file reaches ``size``."""
    lines = (CORPUS / SINGLE_SOURCE).read_bytes().splitlines(keepends=True)
    header_end = next(i for i, line in enumerate(lines) if line.lstrip().startswith(b"#       size"))
    rows_end = next(i for i in range(header_end + 1, len(lines)) if lines[i].lstrip().startswith(b"# Out of"))
    head, rows, foot = b"".join(lines[1 : header_end + 1]), b"".join(lines[header_end + 1 : rows_end]), lines[rows_end]
    foot += next(line for line in lines[rows_end:] if b"Avg bus bandwidth" in line)
    copies = max(1, (size - len(head) - len(foot)) // len(rows))
    with path.open("wb") as out:
        out.write(head)
        for _ in range(copies):
            out.write(rows)
        out.write(foot)
    return path.stat().st_size


def measure(path: Path) -> tuple[float, float, int, float]:
    """(seconds, peak RSS MiB, exit code, CPU seconds) of nccl-report --json on ``path``, in a fresh child process.

    The CPU time (user + sys) is what the load of other jobs does not inflate: it says what an idle core would do."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-c", "import sys; from rdmaforge.cli import main; sys.exit(main(sys.argv[1:]))"]
    started = time.monotonic()
    with open(os.devnull, "wb") as sink:
        proc = subprocess.run([*command, "nccl-report", "--json", str(path)], stdout=sink, env=env, check=False)
    seconds = time.monotonic() - started
    # ru_maxrss of children is the largest of any child waited for: each measurement runs in a new grandchild.
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, usage.ru_maxrss / 1024, proc.returncode, usage.ru_utime + usage.ru_stime


def _isolated(path: Path) -> tuple[float, float, int, float]:
    # RUSAGE_CHILDREN keeps the maximum over all children so far: measure each input in its own process.
    code = (
        "import json, sys; from pathlib import Path; from benchmarks.nccl_parser import measure; "
        "print(json.dumps(measure(Path(sys.argv[1]))))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    seconds, rss, rc, cpu = json.loads(out.stdout)
    return float(seconds), float(rss), int(rc), float(cpu)


def run() -> list[Result]:
    if not CORPUS.is_dir():
        return [Result("nccl-report parser", 0, "-", "corpus present", False, f"{CORPUS} is absent")]
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="rdmaforge-parser-bench-") as tmp:
        for label, builder in (
            ("1 GiB concatenated corpus", build_corpus),
            ("200 MiB single run", build_single),
        ):
            path = Path(tmp) / "input.log"
            size = builder(path)
            load_before = os.getloadavg()[0]
            seconds, rss, rc, cpu = _isolated(path)
            mbps = size / 1e6 / seconds
            # Other jobs share the 2 cores: the load average says how much of them this run had.
            detail = (
                f"{size / 1e6:.0f} MB in {seconds:.1f} s ({cpu:.1f} CPU s, {size / 1e6 / cpu:.0f} MB/s a CPU second), "
                f"exit {rc}, {os.cpu_count()} cores, "
                f"load average {load_before:.1f} before / {os.getloadavg()[0]:.1f} after"
            )
            results.append(
                Result(f"nccl-report --json, {label}: speed", round(mbps, 1), "MB/s",
                       f">= {TARGET_MBPS:.0f} MB/s", mbps >= TARGET_MBPS, detail)  # fmt: skip
            )
            results.append(
                Result(f"nccl-report --json, {label}: peak RSS", round(rss, 1), "MiB",
                       f"<= {TARGET_RSS_MB:.0f} MiB", rss <= TARGET_RSS_MB, detail)  # fmt: skip
            )
            path.unlink()
    return results
