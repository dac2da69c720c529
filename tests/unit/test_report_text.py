"""What the benchmark report and nccl-report print for a person: a node's unknown GPU count said as unknown, and
absurd but finite numbers (1e308, from a corrupt log or e2e.json) shown in a few characters, not 309 digits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rdmaforge.bench.report import gpu_words
from rdmaforge.cli import main

HEAD = """\
# nccl-tests version 2.17.6 nccl-headers=22807 nccl-library=22807
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1048576 step: 2(factor) warmup iters: 1 iters: 1 validation: 1
#
# Using devices
#  Rank  0 Group  0 Pid   1001 on    node-01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   1002 on    node-02 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
"""
#: A row whose bus bandwidths are finite but absurd (a corrupt or forged log).
HUGE_ROW = (
    "     1048576        262144     float     sum      -1    60.10   17.45  1e+308       0"
    "    59.80   17.53  1e+308       0\n"
)
HUGE_LOG = HEAD + HUGE_ROW + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1e+308\n#\n"
#: Longer than any line the report's own text makes (its longest: a component's line with the reason of a busbw
#: above the fabric's ceiling, about 240); 1e308 printed digit by digit is 309 characters.
LONGEST = 280


@pytest.mark.parametrize(
    ("gpus", "words"),
    [
        ({"n1": 8, "n2": 8}, "16 GPUs on 2 nodes"),
        ({"n1": 0, "n2": 0}, "CPU only, 2 nodes"),
        # A null count is unknown (the role had no preflight fact for the node), never 0 GPUs.
        ({"n1": None, "n2": 8}, "8 GPUs on 1 of 2 nodes, the GPU count of n1 unknown"),
        ({"n1": None, "n2": 0}, "no GPU on 1 of 2 nodes, the GPU count of n1 unknown"),
        ({"n1": None, "n2": None}, "2 nodes, their GPU counts unknown"),
        ({"n1": 4}, "4 GPUs on 1 of 2 nodes, the GPU count of n2 unknown"),
        ({"n1": 1, "n2": 0}, "1 GPU on 2 nodes"),
    ],
)
def test_gpu_words_says_which_counts_are_unknown(gpus: dict[str, int | None], words: str) -> None:
    assert gpu_words({"nodes": ["n1", "n2"], "gpus": gpus}) == words


def test_gpu_words_of_one_node() -> None:
    assert gpu_words({"nodes": ["n1"], "gpus": {"n1": 8}}) == "8 GPUs on 1 node"


def test_gpu_words_names_at_most_a_few_unknown_nodes() -> None:
    nodes = [f"n{i}" for i in range(1, 11)]
    words = gpu_words({"nodes": nodes, "gpus": {"n1": 8}})
    assert words == "8 GPUs on 1 of 10 nodes, the GPU counts of n2, n3, n4, n5, n6 and 4 more unknown"


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    assert "internal error" not in err, err
    return code, out


def test_nccl_report_shows_a_huge_bandwidth_in_a_few_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "huge.log"
    log.write_text(HUGE_LOG)
    _, out = run_cli(["nccl-report", str(log)], capsys)
    row = next(line for line in out.splitlines() if line.strip().startswith("1048576"))
    assert row.split()[5:7] == ["60.10", "1e+308"], row
    assert max(len(line) for line in out.splitlines()) < LONGEST, out


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # matplotlib's axis ticks of a 1e308 bar
def test_report_shows_a_huge_bandwidth_and_throughput_in_a_few_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "nccl-all_reduce.log").write_text(HUGE_LOG)
    huge = {p: {"samples_per_s": 1e308} for p in ("p50", "p75", "p90", "p95")}
    e2e = {"single": {"nodes": 1, "world_size": 1, "percentiles": huge},
           "multi": {"nodes": 2, "world_size": 2, "percentiles": huge}}  # fmt: skip
    (run_dir / "e2e.json").write_text(json.dumps(e2e))
    run = {"fabric": "tcp", "nodes": ["n1", "n2"], "hostnames": {"n1": "node-01", "n2": "node-02"},
           "line_rate_gbps": 25, "min_efficiency": 0.8, "tolerance": 0.1, "gpus": {"n1": 1, "n2": 1},
           "e2e_enabled": True, "nccl": {"status": "ran", "collectives": ["all_reduce"]}}  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(run))
    _, out = run_cli(["report", str(run_dir)], capsys)
    assert "1e+308" in out, out
    assert max(len(line) for line in out.splitlines()) < LONGEST, [line[:150] for line in out.splitlines()]


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # matplotlib's axis ticks of a 1e308 line
def test_the_plots_line_rate_label_is_a_few_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run.json line rate of 1e308 Gb/s (finite, 0 or more: the schema takes it) is 1.25e307 GB/s of bus
    bandwidth: nccl_busbw.png's legend says so in a few characters, as summary.md does."""
    axes = pytest.importorskip("matplotlib.axes")
    labels: list[str] = []
    draw = axes.Axes.axhline

    def axhline(self: object, *args: object, **kwargs: object) -> object:
        labels.append(str(kwargs.get("label")))
        return draw(self, *args, **kwargs)

    monkeypatch.setattr(axes.Axes, "axhline", axhline)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "nccl-all_reduce.log").write_text(HUGE_LOG.replace("1e+308", "17.45"))  # a bandwidth of this world
    run = {"fabric": "tcp", "nodes": ["n1", "n2"], "hostnames": {"n1": "node-01", "n2": "node-02"},
           "line_rate_gbps": 1e308, "min_efficiency": 0.8, "tolerance": 0.1, "gpus": {"n1": 1, "n2": 1},
           "e2e_enabled": False, "nccl": {"status": "ran", "collectives": ["all_reduce"]}}  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(run))
    run_cli(["report", str(run_dir)], capsys)
    assert labels == ["line rate 1.25e+307 GB/s"]
