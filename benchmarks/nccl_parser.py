"""Speed and peak memory of `rdmaforge nccl-report --json` (issue 17) on two generated inputs.

Both are built in a temporary directory from the real nccl-tests outputs in ../shared/corpus/nccl-tests:
- ``corpus-1g.log``: every corpus file concatenated, repeated up to 1 GiB (many short runs, NCCL INFO noise);
- ``single-200m.log``: one run of the corpus (the 80-GPU all_reduce of file 02) whose rows are repeated up
  to 200 MiB, i.e. one sweep with ~1.7M rows.
Each is parsed by ``rdmaforge nccl-report --json`` in a child process with PYTHONUNBUFFERED=1 (as in CI and
containers), stdout to /dev/null; MB/s is input size / wall time, peak RSS is the child's ru_maxrss. A run that
does not end with the exit code its input calls for (EXPECTED_EXIT: a crash is 70, a bad input 64) parsed
nothing worth timing: both of its targets fail, naming the exit code.
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
from rdmaforge.runner.exit_codes import ExitCode, describe

CORPUS = PROJECT_ROOT.parent / "shared" / "corpus" / "nccl-tests"
TARGET_MBPS = 100.0
TARGET_RSS_MB = 300.0
CORPUS_BYTES = 1 << 30
SINGLE_BYTES = 200 << 20
SINGLE_SOURCE = "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt"
CORPUS_LABEL = "1 GiB concatenated corpus"
SINGLE_LABEL = "200 MiB single run"
#: The exit code nccl-report must end with on each input, from the corpus' INDEX.md: the corpus holds failed runs
#: (03's alltoall, 07's out-of-bounds all_gather, 13, 14 and 16), so a whole read of it exits 4; file 02's runs
#: have no failure or anomaly, so one of them, its rows repeated, exits 0.
EXPECTED_EXIT = {CORPUS_LABEL: ExitCode.BELOW_THRESHOLD, SINGLE_LABEL: ExitCode.OK}


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


def judge(label: str, size: int, seconds: float, rss: float, rc: int, cpu: float, load: str) -> list[Result]:
    """The speed and peak-RSS results of one measured input (``load``: the load averages, as the detail says them).

    Each target is met only when nccl-report ended with EXPECTED_EXIT[label]: a run that crashed (70), refused its
    input (64) or judged it otherwise was not the parse being timed."""
    mbps = size / 1e6 / seconds
    expected = EXPECTED_EXIT[label]
    exited = rc == expected
    # Other jobs share the 2 cores: the load average says how much of them this run had.
    detail = (
        f"{size / 1e6:.0f} MB in {seconds:.1f} s ({cpu:.1f} CPU s, {size / 1e6 / max(cpu, 1e-9):.0f} MB/s a CPU "
        f"second), exit {rc}, {os.cpu_count()} cores, load average {load}"
    )
    if not exited:
        detail = (f"nccl-report exited {rc} ({describe(rc)}), not {int(expected)} ({describe(expected)}) as "
                  f"this input calls for: not a measurement of a parse; {detail}")  # fmt: skip
    return [
        Result(f"nccl-report --json, {label}: speed", round(mbps, 1), "MB/s",
               f">= {TARGET_MBPS:.0f} MB/s", exited and mbps >= TARGET_MBPS, detail),  # fmt: skip
        Result(f"nccl-report --json, {label}: peak RSS", round(rss, 1), "MiB",
               f"<= {TARGET_RSS_MB:.0f} MiB", exited and rss <= TARGET_RSS_MB, detail),  # fmt: skip
    ]


def run() -> list[Result]:
    if not CORPUS.is_dir():
        return [Result("nccl-report parser", 0, "-", "corpus present", False, f"{CORPUS} is absent")]
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="rdmaforge-parser-bench-") as tmp:
        for label, builder in ((CORPUS_LABEL, build_corpus), (SINGLE_LABEL, build_single)):
            path = Path(tmp) / "input.log"
            size = builder(path)
            load_before = os.getloadavg()[0]
            seconds, rss, rc, cpu = _isolated(path)
            load = f"{load_before:.1f} before / {os.getloadavg()[0]:.1f} after"
            results += judge(label, size, seconds, rss, rc, cpu, load)
            path.unlink()
    return results
