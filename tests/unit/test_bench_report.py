"""The benchmark report: verdicts against the line rate, transport fallback, baseline regression, e2e linearity,
artifacts (JSON, CSV, Markdown, PNG) and `rdmaforge report` exit codes. nccl-tests logs come from the corpus."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from rdmaforge.bench.e2e import parse_output
from rdmaforge.bench.report import render
from rdmaforge.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


def e2e_run(world: int, nodes: int, step_s: float) -> dict[str, object]:
    point = {"step_s": step_s, "samples_per_s": 32 * world / step_s}
    percentiles = {p: point for p in ("p50", "p75", "p90", "p95")}
    return {
        "world_size": world,
        "nodes": nodes,
        "backend": "gloo",
        "global_batch": 32 * world,
        "percentiles": percentiles,
    }


#: A real nccl-tests log's ``#  Rank N ... on HOST device`` line: its rank number and host.
RANK_LINE = re.compile(r"^#\s*Rank\s+(\d+)\s.*?\bon\s+(\S+)\s+device", re.M)


def log_hosts(log: Path) -> list[str]:
    """The hosts a real nccl-tests log's ``#  Rank`` lines name, in order of appearance."""
    return list(dict.fromkeys(host for _, host in RANK_LINE.findall(log.read_text(errors="replace"))))


def log_ranks(log: Path) -> dict[str, int]:
    """How many ranks a real nccl-tests log's ``#  Rank`` lines put on each host (each run of a log lists the same
    ranks again: a rank number counts once)."""
    return dict(Counter(dict(RANK_LINE.findall(log.read_text(errors="replace"))).values()))


def make_run(tmp_path: Path, fabric: str, log: Path | None, collective: str = "all_reduce", **extra: object) -> Path:
    """A run directory of nodes n1, n2, ...: one per host the log's ranks ran on (two without a log, or with a log of
    one host). run.json records, as the role does, the nodes' host names (from the nodes' facts) and their GPUs:
    with a log, as many per node as the log ran ranks on its host (a node the log names no host for: null, unknown);
    without one, none (nccl-tests skipped: no GPU). ``hostnames`` or ``gpus`` given replace them (None: not
    recorded, as in an older run.json or one written by hand)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    ranks = log_ranks(log) if log is not None else {}
    hosts = log_hosts(log) if log is not None else []
    nodes = [f"n{i}" for i in range(1, max(len(hosts), 2) + 1)]
    run: dict[str, object] = {"fabric": fabric, "nodes": nodes, "min_efficiency": 0.8, "tolerance": 0.1}
    if log is not None:
        named = dict(zip(nodes, hosts, strict=False))
        run["hostnames"] = named
        run["gpus"] = {node: ranks[named[node]] if node in named else None for node in nodes}
    else:
        run["gpus"] = dict.fromkeys(nodes, 0)
    run |= extra
    for key in ("hostnames", "gpus"):
        if run.get(key) is None:
            run.pop(key, None)
    if log is not None:
        (tmp_path / f"nccl-{collective}.log").write_bytes(log.read_bytes())
        run["nccl"] = {"status": "ran", "collectives": [collective]}
    else:
        run["nccl"] = {"status": "skipped", "reason": "no GPU on n1, n2 (rdmaforge_node.gpu_count=0)"}
    (tmp_path / "run.json").write_text(json.dumps(run))
    return tmp_path


@pytest.fixture
def socket_log(shared_dir: Path) -> Path:
    return shared_dir / "corpus" / "nccl-tests" / "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt"


def component(results: dict[str, object], name: str) -> dict[str, object]:
    found = [c for c in results["components"] if c["name"] == name]  # type: ignore[attr-defined,index]
    assert len(found) == 1, results["components"]
    return found[0]  # type: ignore[no-any-return]


def test_socket_fallback_on_an_rdma_fabric_fails(tmp_path: Path, socket_log: Path) -> None:
    results = render(make_run(tmp_path, "infiniband", socket_log))
    assert results["verdict"] == "fail"
    transport = component(results, "transport")
    assert transport["status"] == "fail" and transport["required"] is True and transport["value"] == "Socket"
    assert "fell back to the Socket transport" in str(transport["reason"])
    assert any(r.startswith("transport: fail: ") for r in results["reasons"])
    assert results["nccl"]["collectives"]["all_reduce"]["avg_busbw"] == pytest.approx(0.300212)


def test_below_line_rate_fails_with_threshold_and_value(tmp_path: Path, socket_log: Path) -> None:
    results = render(make_run(tmp_path, "tcp", socket_log, line_rate_gbps=25))
    entry = results["nccl"]["collectives"]["all_reduce"]
    assert results["verdict"] == "fail"
    nccl = component(results, "nccl-tests all_reduce")
    # tcp at 25 Gbit/s is 3.125 GB/s; 80% of it is the threshold.
    assert nccl["status"] == "fail" and nccl["threshold"] == pytest.approx(0.8 * 25 / 8, abs=1e-3)
    assert nccl["value"] == entry["peak_busbw"] and nccl["unit"] == "GB/s"
    assert entry["efficiency"] == pytest.approx(entry["peak_busbw"] / 3.125)
    # three significant digits below 10 GB/s: 3.1 beside a threshold of 2.5 read as a rounding slip
    assert "below 80% of the expected 3.12 GB/s line rate" in " ".join(results["reasons"])
    for name in ("results.json", "results.csv", "summary.md", "nccl_busbw.png"):
        assert (tmp_path / name).exists(), name
    assert (tmp_path / "nccl_busbw.png").read_bytes().startswith(PNG)
    csv_lines = (tmp_path / "results.csv").read_text().splitlines()
    assert csv_lines[0].startswith("collective,size_bytes,count,type")
    assert len(csv_lines) - 1 == len(entry["rows"]) == 25
    stored = json.loads((tmp_path / "results.json").read_text())
    assert stored["verdict"] == "fail" and {c["name"] for c in stored["components"]} >= {"nccl-tests all_reduce"}
    assert set(stored["components"][0]) >= {"name", "status", "required", "reason", "threshold", "value"}


#: A line rate the socket log's 2 nodes (A10G over TCP, peak busbw 0.82 GB/s = 6.6 Gbit/s) pass against: 5 Gbit/s,
#: AWS's single-flow TCP limit. 80% of it is 0.5 GB/s, and the log stays below twice it (1.25 GB/s), the highest a
#: multi-node busbw can be (rdmaforge.bench.line_rate.CEILING_FACTOR, rate_ceiling).
SOCKET_LINE_RATE = 5
#: The same for the corpus' two H100 nodes of one GPU each (05, 20: peak busbw 13.6 GB/s, 109 Gbit/s): 100 Gbit/s.
H100_PAIR_LINE_RATE = 100
#: And for 01's two T4 nodes over EFA (peak busbw 3.15 GB/s, 25.2 Gbit/s): 25 Gbit/s.
EFA_LINE_RATE = 25


#: The socket log's 1 MiB row: out-of-place busbw 0.59 GB/s, in-place 0.62; its footer's average of every half
#: of every row (25 rows: 50 halves), which the parser checks against the rows.
ROW_1M = "1762.4    0.59    0.59  0e+00   1704.5    0.62    0.62"
AVG_BUSBW = 0.300212


def forged_socket_log(socket_log: Path, target: Path, out_of_place: float, in_place: float) -> Path:
    """The socket log with its 1 MiB row's busbw set as a forger (or a broken timer) would, the footer's average
    kept consistent with it so that the run parses as ok."""
    text = socket_log.read_text()
    assert text.count(ROW_1M) == 1 and text.count(str(AVG_BUSBW)) == 1
    average = AVG_BUSBW + (out_of_place - 0.59 + in_place - 0.62) / 50
    row = f"1762.4    0.59  {out_of_place:6g}  0e+00   1704.5    0.62  {in_place:6g}"
    target.write_text(text.replace(ROW_1M, row).replace(str(AVG_BUSBW), f"{average:.6g}"))
    return target


@pytest.mark.parametrize(
    ("out_of_place", "in_place", "shown"),
    [(1e308, 0.62, "busbw 1e+308 GB/s (out-of-place, 1048576 B)"),
     # 100 GB/s is 800 Gbit/s: no 5 Gbit/s link carries it; the in-place half is a measurement of the table too.
     (0.59, 100.0, "busbw 100 GB/s (in-place, 1048576 B)")],
)  # fmt: skip
def test_a_busbw_above_the_fabrics_ceiling_fails_as_implausible(
    tmp_path: Path, socket_log: Path, out_of_place: float, in_place: float, shown: str
) -> None:
    """A finite but absurd bus bandwidth (a forged or corrupt log, a broken timer) reached the threshold and passed.
    Above twice the node's line rate no multi-node collective can measure it: the run fails, as one with a nan or
    inf row does, naming the value, the ceiling and where the line rate came from; never a pass."""
    log = forged_socket_log(socket_log, tmp_path / "forged.log", out_of_place, in_place)
    results = render(make_run(tmp_path / "run", "tcp", log, line_rate_gbps=SOCKET_LINE_RATE))
    assert results["nccl"]["collectives"]["all_reduce"]["status"] == "ok"  # the table itself parses as a whole run
    nccl = component(results, "nccl-tests all_reduce")
    assert nccl["status"] == "fail" and results["verdict"] == "fail", nccl
    assert nccl["reason"] == (f"{shown} is above the fabric's ceiling 1.25 GB/s (2 x line rate): an implausible "
                              "measurement, or benchmark_line_rate_gbps too low")  # fmt: skip
    # Where the line rate came from is in the header, beside the reason.
    assert results["nccl"]["line_rate"]["detail"] == "benchmark_line_rate_gbps 5 Gb/s per node"
    assert main(["report", str(tmp_path / "run")]) == 4
    # The same log unforged passes against the same line rate: the ceiling is no bar to a real measurement.
    real = render(make_run(tmp_path / "real", "tcp", socket_log, line_rate_gbps=SOCKET_LINE_RATE))
    assert component(real, "nccl-tests all_reduce")["status"] == "pass" and real["verdict"] == "pass"


def test_plots_leave_out_values_too_large_to_draw_with_a_note_and_no_warning(tmp_path: Path, socket_log: Path) -> None:
    """The forged 1e308 GB/s row and an e2e throughput of 1.5e308 samples/s (finite JSON numbers that e2e.json's
    schema takes): matplotlib scaled its axes to them and warned "overflow encountered" (RuntimeWarning). They are
    left out of the plots now, named in summary.md; the plots are drawn from the rest, without a warning."""
    pytest.importorskip("matplotlib")
    import warnings

    run_dir = make_run(tmp_path / "run", "tcp", forged_socket_log(socket_log, tmp_path / "forged.log", 1e308, 0.62),
                       line_rate_gbps=SOCKET_LINE_RATE, e2e_enabled=True)  # fmt: skip
    e2e = {"single": e2e_run(1, 1, 0.1), "multi": e2e_run(2, 2, 0.125), "min_linearity": 0.5}
    e2e["multi"]["percentiles"]["p95"] = {"step_s": 0.125, "samples_per_s": 1.5e308}  # type: ignore[index]
    (run_dir / "e2e.json").write_text(json.dumps(e2e))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning from the plotting fails the test
        render(run_dir)
    summary = (run_dir / "summary.md").read_text()
    assert ("Note: nccl_busbw.png: 1 value(s) left out of the plot, not finite or beyond 5e+307: all_reduce "
            "1048576 B busbw 1e+308 GB/s") in summary  # fmt: skip
    assert ("Note: e2e_throughput.png: 1 value(s) left out of the plot, not finite or beyond 5e+307: 2 nodes p95 "
            "1.5e+308 samples/s") in summary  # fmt: skip
    for name in ("nccl_busbw.png", "e2e_throughput.png"):
        assert (run_dir / name).read_bytes().startswith(PNG) and f"![{name}]({name})" in summary


def test_passes_when_every_required_component_passed(tmp_path: Path, socket_log: Path) -> None:
    ok = render(make_run(tmp_path, "tcp", socket_log, line_rate_gbps=SOCKET_LINE_RATE))  # 0.625 GB/s expected
    assert ok["verdict"] == "pass", ok["reasons"]
    assert component(ok, "nccl-tests all_reduce")["status"] == "pass"
    assert component(ok, "transport")["status"] == "pass"  # tcp expects the Socket transport
    assert component(ok, "e2e")["status"] == "skipped" and component(ok, "e2e")["required"] is False


@pytest.mark.parametrize(("code", "why"), [(1, "the launch exited 1"), (124, "reached benchmark_timeout")])
def test_a_launch_that_exited_non_zero_fails_even_with_its_whole_table(tmp_path: Path, socket_log: Path, code: int,
                                                                      why: str) -> None:  # fmt: skip
    """The same complete, passing table (10, 2 nodes over sockets), but the launch (timeout, mpirun, the binary)
    exited with an error: a rank that failed after the table, an mpirun error at teardown, the timeout."""
    ok = render(make_run(tmp_path / "ok", "tcp", socket_log, line_rate_gbps=SOCKET_LINE_RATE,
                         nccl_exit_codes={"all_reduce": 0}))  # fmt: skip
    assert component(ok, "nccl-tests all_reduce")["status"] == "pass"
    failed = render(make_run(tmp_path / "failed", "tcp", socket_log, line_rate_gbps=SOCKET_LINE_RATE,
                             nccl_exit_codes={"all_reduce": code}))  # fmt: skip
    nccl = component(failed, "nccl-tests all_reduce")
    assert nccl["status"] == "fail" and failed["verdict"] == "fail"
    assert why in str(nccl["reason"]), nccl


def test_a_launch_whose_exit_status_is_unknown_is_named_so(tmp_path: Path, socket_log: Path) -> None:
    """Review round 33b: a run.json without the launch's exit status passed with no word of it. With exit codes
    recorded for other collectives but not this one it is not judged; a run.json with none at all (written before
    they were recorded, or by hand) is judged on its table, and the reason says that the exit status is unknown."""
    none_for_it = render(make_run(tmp_path / "other", "tcp", socket_log, line_rate_gbps=SOCKET_LINE_RATE,
                                  nccl_exit_codes={"alltoall": 0}))  # fmt: skip
    nccl = component(none_for_it, "nccl-tests all_reduce")
    assert nccl["status"] == "not_judged" and none_for_it["verdict"] != "pass", nccl
    assert nccl["reason"] == ("run ok but run.json records no exit status of its launch (nccl_exit_codes has none "
                              "for all_reduce)")
    unrecorded = render(make_run(tmp_path / "old", "tcp", socket_log, line_rate_gbps=SOCKET_LINE_RATE))
    nccl = component(unrecorded, "nccl-tests all_reduce")
    assert nccl["status"] == "pass", nccl
    assert str(nccl["reason"]).endswith("; its launch's exit status is not recorded (run.json has no nccl_exit_codes)")


def test_an_aborted_launch_in_the_log_fails_the_collective_whatever_run_json_recorded(
    tmp_path: Path, socket_log: Path
) -> None:
    """mpirun's own report of a rank that died after the table (OpenMPI's wording), in a run.json with no exit codes:
    the log says the job failed."""
    log = tmp_path / "aborted.log"
    log.write_text(socket_log.read_text() + "-" * 74 + "\nmpirun noticed that process rank 1 with PID 4242 on node "
                   "ip-10-0-142-242 exited on signal 11 (Segmentation fault).\n" + "-" * 74 + "\n")  # fmt: skip
    results = render(make_run(tmp_path / "run", "tcp", log, line_rate_gbps=SOCKET_LINE_RATE))
    nccl = component(results, "nccl-tests all_reduce")
    assert nccl["status"] == "fail" and results["verdict"] == "fail", nccl
    assert "mpirun noticed that process rank 1 with PID 4242" in str(nccl["reason"]), nccl


def test_no_efficiency_threshold_is_not_judged_hence_incomplete(tmp_path: Path, socket_log: Path) -> None:
    results = render(make_run(tmp_path, "tcp", socket_log, line_rate_gbps=SOCKET_LINE_RATE, min_efficiency=""))
    nccl = component(results, "nccl-tests all_reduce")
    assert nccl["status"] == "not_judged" and nccl["threshold"] is None and nccl["value"] is not None
    assert results["verdict"] == "incomplete"
    assert "nccl-tests all_reduce (required): not judged: no threshold" in results["reasons"][0]
    assert main(["report", str(tmp_path)]) == 5


def e2e_dir(tmp_path: Path, min_linearity: object, **extra: object) -> Path:
    run_dir = make_run(tmp_path, "erdma", None, gpus={"n1": 0, "n2": 0}, e2e_enabled=True, **extra)
    e2e = {"single": e2e_run(1, 1, 0.1), "multi": e2e_run(2, 2, 0.125), "min_linearity": min_linearity}
    (run_dir / "e2e.json").write_text(json.dumps(e2e))
    return run_dir


def test_e2e_without_threshold_and_nccl_without_gpus_is_incomplete_never_pass(tmp_path: Path) -> None:
    """The issue's `make demo`: nccl-tests never ran and e2e had no threshold; this is not a pass."""
    results = render(e2e_dir(tmp_path, None))
    assert results["verdict"] == "incomplete"
    nccl, e2e = component(results, "nccl-tests"), component(results, "e2e")
    assert nccl["status"] == "skipped" and nccl["required"] is False and "no GPU on n1, n2" in str(nccl["reason"])
    assert e2e["status"] == "not_judged" and e2e["required"] is True and e2e["on"] == "gloo on CPU, 2 nodes, 2 ranks"
    assert results["e2e"]["linearity"] == pytest.approx((64 / 0.125) / ((32 / 0.1) * 2))
    assert e2e["value"] == pytest.approx(0.8)
    summary = (tmp_path / "summary.md").read_text()
    assert "**Verdict: incomplete**" in summary
    assert "- e2e: not judged (required), 0.8 linearity, on gloo on CPU, 2 nodes, 2 ranks: no threshold" in summary
    assert "- nccl-tests: skipped (not required): no GPU on n1, n2" in summary
    assert (tmp_path / "e2e_throughput.png").read_bytes().startswith(PNG)
    assert "Linearity (N-node / (1-node x N), p50): 0.80" in summary


def test_e2e_with_a_threshold_passes_or_fails(tmp_path: Path) -> None:
    passed = render(e2e_dir(tmp_path / "a", 0.5))
    assert passed["verdict"] == "pass" and component(passed, "e2e")["threshold"] == 0.5
    failed = render(e2e_dir(tmp_path / "b", 0.9))
    assert failed["verdict"] == "fail" and "linearity 0.80 is below 0.9" in failed["reasons"][0]


def e2e_case(tmp_path: Path, e2e: dict[str, object], nodes: int = 2, gpus: int = 0) -> dict[str, object]:
    """The report of a run of ``nodes`` nodes of ``gpus`` GPUs each, e2e required and ``e2e`` as its e2e.json."""
    names = [f"n{i}" for i in range(1, nodes + 1)]
    run_dir = make_run(tmp_path, "erdma", None, nodes=names, gpus=dict.fromkeys(names, gpus), e2e_enabled=True)
    (run_dir / "e2e.json").write_text(json.dumps({"min_linearity": 0.5, **e2e}))
    return render(run_dir)


def test_an_e2e_result_of_other_nodes_than_the_runs_is_never_a_pass(tmp_path: Path) -> None:
    """e2e.json was not compared with run.json: a training on 2 of 4 nodes, or 1 rank on 4 nodes, passed."""
    two_of_four = e2e_case(tmp_path / "a", {"single": e2e_run(1, 1, 0.1), "multi": e2e_run(2, 2, 0.105)}, nodes=4)
    e2e = component(two_of_four, "e2e")
    assert (e2e["status"], two_of_four["verdict"]) == ("fail", "fail")
    assert "the N-node run trained on 2 nodes, the run has 4 nodes (n1, n2, n3, n4): the training did not span" in str(
        e2e["reason"])  # fmt: skip
    more = e2e_case(tmp_path / "b", {"single": e2e_run(1, 1, 0.1), "multi": e2e_run(4, 4, 0.105)}, nodes=2)
    assert component(more, "e2e")["status"] == "not_judged" and more["verdict"] == "incomplete"
    contradictory = e2e_case(tmp_path / "c", {"single": e2e_run(1, 1, 0.1), "multi": e2e_run(1, 4, 0.105)}, nodes=4)
    judged = component(contradictory, "e2e")
    assert judged["status"] == "not_judged"
    assert "had 1 rank(s) on 4 nodes (multi.world_size below multi.nodes)" in str(judged["reason"])
    fine = e2e_case(tmp_path / "d", {"single": e2e_run(1, 1, 0.1), "multi": e2e_run(4, 4, 0.105)}, nodes=4)
    assert fine["verdict"] == "pass", fine["reasons"]


def test_a_training_on_fewer_ranks_than_the_nodes_gpus_or_without_its_1_gpu_run_is_named(tmp_path: Path) -> None:
    """8-GPU nodes trained with one rank each: the summary said 'one GPU or none' and passed. A node training with 8
    ranks and no 1-GPU run ('one') left the within-node linearity out without a word."""
    one_rank = e2e_case(tmp_path / "a", {"single": e2e_run(1, 1, 0.1), "multi": e2e_run(2, 2, 0.105),
                                         "ranks_per_node": 1}, gpus=8)  # fmt: skip
    intra = component(one_rank, "e2e intra-node")
    assert intra["status"] == "not_judged" and one_rank["verdict"] == "incomplete"
    assert "each node has 8 GPUs (run.json) but trained with 1 rank(s)" in str(intra["reason"])
    no_one = e2e_case(tmp_path / "b", {"single": e2e_run(8, 1, 0.1), "multi": e2e_run(16, 2, 0.105),
                                       "ranks_per_node": 8}, gpus=8)  # fmt: skip
    assert component(no_one, "e2e intra-node")["status"] == "not_judged" and no_one["verdict"] == "incomplete"
    assert "e2e.json has no 1-GPU run" in str(component(no_one, "e2e intra-node")["reason"])
    # On nccl: e2e_run's gloo on nodes with GPUs measured neither (trained_off_the_gpus), within a node too.
    on_nccl = {key: {**e2e_run(world, 1, 0.1), "backend": "nccl"} for key, world in (("one", 1), ("single", 8))}
    whole = e2e_case(tmp_path / "c", {**on_nccl, "multi": {**e2e_run(16, 2, 0.105), "backend": "nccl"},
                                      "ranks_per_node": 8}, gpus=8)  # fmt: skip
    assert component(whole, "e2e intra-node")["status"] == "pass"


def test_required_and_optional_from_run_json(tmp_path: Path) -> None:
    # --require nccl-tests on a GPU-less run: the skipped nccl-tests makes it incomplete despite e2e passing.
    forced = render(e2e_dir(tmp_path / "a", 0.5, required=["nccl-tests", "e2e"]))
    assert forced["verdict"] == "incomplete" and component(forced, "nccl-tests")["required"] is True
    # e2e made optional: with nothing required that was judged, an unjudged e2e proves nothing either.
    optional = render(e2e_dir(tmp_path / "b", None, optional=["e2e"]))
    assert optional["verdict"] == "incomplete" and optional["reasons"] == ["nothing was measured against a threshold"]


def test_nccl_tests_is_required_on_gpu_nodes_even_when_switched_off(tmp_path: Path) -> None:
    run_dir = e2e_dir(tmp_path, 0.5)
    run = json.loads((run_dir / "run.json").read_text())
    run["gpus"] = {"n1": 8, "n2": 8}
    run["nccl"] = {"status": "skipped", "reason": "benchmark_nccl_tests is false"}
    (run_dir / "run.json").write_text(json.dumps(run))
    results = render(run_dir)
    assert results["verdict"] == "incomplete"
    assert "nccl-tests (required): skipped: benchmark_nccl_tests is false" in results["reasons"]


def test_a_node_of_unknown_gpu_count_is_not_taken_for_a_cpu_only_node(tmp_path: Path) -> None:
    """run.json's null count (a node without preflight's fact): nccl-tests stays required, so its absence is never a
    pass on the strength of e2e alone."""
    run_dir = e2e_dir(tmp_path, 0.5)
    run = json.loads((run_dir / "run.json").read_text())
    run["gpus"] = {"n1": None, "n2": 8}
    run["nccl"] = {"status": "skipped", "reason": "benchmark_nccl_tests is false"}
    (run_dir / "run.json").write_text(json.dumps(run))
    results = render(run_dir)
    assert results["verdict"] == "incomplete"
    assert component(results, "nccl-tests")["required"] is True


def test_e2e_skipped_for_a_node_of_unknown_gpu_count_is_incomplete_and_says_why(tmp_path: Path) -> None:
    """The role skips the training when a node's GPU count is unknown (run.json's ``e2e``): the report says which
    node and what to set, and the required e2e makes the verdict incomplete, never a pass."""
    why = ("the GPU count of n2 could not be read (rdmaforge_node.gpu_count null: nvidia-smi, lspci and the PCI tree "
           "in sysfs gave none) and rdmaforge_gpus_per_node is not set for it, so how many ranks to run is unknown; "
           "set rdmaforge_gpus_per_node (host_vars or group_vars) to the node's GPU count")  # fmt: skip
    run_dir = make_run(tmp_path, "erdma", None, gpus={"n1": 0, "n2": None}, e2e_enabled=True,
                       e2e={"status": "skipped", "reason": why})  # fmt: skip
    results = render(run_dir)
    assert results["verdict"] == "incomplete"
    e2e = component(results, "e2e")
    assert (e2e["status"], e2e["required"], e2e["reason"]) == ("skipped", True, why)
    assert f"e2e (required): skipped: {why}" in results["reasons"]


def test_the_role_records_a_node_without_preflights_fact_as_of_unknown_gpu_count() -> None:
    from tests.unit.test_filter_docs import FILTERS

    hostvars = {"n1": {"rdmaforge_node": {"gpu_count": 8}}, "n2": {}, "n3": {"rdmaforge_node": {"gpu_count": 0}}}
    assert FILTERS["rdmaforge_gpu_counts"](["n1", "n2", "n3"], hostvars) == {"n1": 8, "n2": None, "n3": 0}


def test_nothing_ran_is_incomplete(tmp_path: Path) -> None:
    results = render(make_run(tmp_path, "erdma", None))
    assert results["verdict"] == "incomplete"


def test_report_command_exit_codes(tmp_path: Path, socket_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(make_run(tmp_path / "a", "tcp", socket_log, line_rate_gbps=SOCKET_LINE_RATE))]) == 0
    assert main(["report", str(make_run(tmp_path / "b", "tcp", socket_log, line_rate_gbps=25))]) == 4
    assert main(["report", str(make_run(tmp_path / "c", "infiniband", socket_log))]) == 4
    assert main(["report", str(make_run(tmp_path / "d", "erdma", None))]) == 5
    assert main(["report", str(tmp_path / "nothing")]) == 64
    out, err = capsys.readouterr()
    assert "Verdict: pass" in out and f"run directory {tmp_path / 'nothing'} does not exist" in err


@pytest.mark.parametrize("content", [b"\x00\x01\x02\xff" * 4096, b"\x1f\x8b\x08\x00garbage"],
                         ids=["binary", "bad-gzip"])
def test_one_unreadable_log_fails_its_collective_and_the_others_are_still_judged(
    tmp_path: Path, socket_log: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    """review round 35: one binary log made `report` exit 64 for the whole run, showing nothing of the rest."""
    run_dir = make_run(tmp_path, "tcp", socket_log, line_rate_gbps=SOCKET_LINE_RATE)
    run = json.loads((run_dir / "run.json").read_text())
    run["nccl"]["collectives"].append("all_gather")
    (run_dir / "run.json").write_text(json.dumps(run))
    (run_dir / "nccl-all_gather.log").write_bytes(content)
    assert main(["report", str(run_dir)]) == 4
    out, _ = capsys.readouterr()
    results = json.loads((run_dir / "results.json").read_text())
    broken = component(results, "nccl-tests all_gather")
    assert broken["status"] == "fail" and str(broken["reason"]).startswith("nccl-all_gather.log: "), broken
    assert "all_gather's output in the run directory cannot be read" in str(broken["reason"])
    assert component(results, "nccl-tests all_reduce")["status"] == "pass"  # the good log, judged as alone
    transport = component(results, "transport")
    assert "cannot check the transport: nccl-all_gather.log cannot be read" in str(transport["reason"]), transport
    assert "Verdict: fail" in out


def test_e2e_output_line_is_found_among_logs() -> None:
    text = 'W1122 warning\nRDMAFORGE_E2E {"world_size": 2}\nother\n'
    assert parse_output(text) == {"world_size": 2}
    assert parse_output("Traceback ...\n") is None


@pytest.fixture
def two_rank_log(shared_dir: Path) -> Path:
    """nccl-tests 2.17.6 on two H100 nodes, one GPU each: 2 ranks (the corpus' INDEX.md)."""
    return shared_dir / "corpus" / "nccl-tests" / "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt"


def test_a_log_with_fewer_ranks_than_the_runs_gpus_is_not_the_clusters_bandwidth(
    tmp_path: Path, two_rank_log: Path
) -> None:
    """The run asked for 8 GPUs on each of two nodes; a log of 2 ranks measured a different job (one GPU per node),
    so its bus bandwidth says nothing about this cluster and must not pass."""
    results = render(make_run(tmp_path / "a", "tcp", two_rank_log, "alltoall", line_rate_gbps=H100_PAIR_LINE_RATE,
                              gpus={"n1": 8, "n2": 8}))  # fmt: skip
    nccl = component(results, "nccl-tests alltoall")
    assert nccl["status"] == "fail" and results["verdict"] == "fail"
    assert nccl["reason"] == ("run ok but it is not this run's job: the log has 2 ranks, the run asked for 16 "
                              "(16 GPUs on 2 nodes)")  # fmt: skip
    matching = render(make_run(tmp_path / "b", "tcp", two_rank_log, "alltoall", line_rate_gbps=H100_PAIR_LINE_RATE,
                               gpus={"n1": 1, "n2": 1}))  # fmt: skip
    assert component(matching, "nccl-tests alltoall")["status"] == "pass"


def test_a_log_against_an_unknown_gpu_count_is_not_judged_by_its_ranks(tmp_path: Path, two_rank_log: Path) -> None:
    """A node without a GPU count (null: the role had no preflight fact for it) is unknown, not 0: the log of 2 ranks
    failed as "the run asked for 1 (1 GPUs on 2 nodes)", which the run never asked."""
    results = render(make_run(tmp_path / "a", "tcp", two_rank_log, "alltoall", line_rate_gbps=H100_PAIR_LINE_RATE,
                              gpus={"n1": None, "n2": 1}))  # fmt: skip
    nccl = component(results, "nccl-tests alltoall")
    assert nccl["status"] == "not_judged" and results["verdict"] == "incomplete"
    assert nccl["reason"] == ("run ok but run.json records no GPU count for n1: whether the log's 2 ranks are this "
                              "run's whole job cannot be told")  # fmt: skip
    assert "asked for" not in str(nccl["reason"])
    # Known counts that already exceed the log's ranks fail it whatever the unknown one is.
    more = render(make_run(tmp_path / "b", "tcp", two_rank_log, "alltoall", line_rate_gbps=H100_PAIR_LINE_RATE,
                           gpus={"n1": None, "n2": 8}))  # fmt: skip
    nccl = component(more, "nccl-tests alltoall")
    assert nccl["status"] == "fail" and "the log has 2 ranks, the run asked for at least 8" in str(nccl["reason"])


def test_a_log_of_gpu_ranks_is_not_the_job_of_a_cpu_only_run(tmp_path: Path, two_rank_log: Path) -> None:
    """run.json says no node has a GPU, yet the log holds 2 GPU ranks: it is another job's log, and passed (the
    rank check was skipped when the GPUs added up to 0)."""
    results = render(make_run(tmp_path / "a", "tcp", two_rank_log, "alltoall", line_rate_gbps=H100_PAIR_LINE_RATE,
                              gpus={"n1": 0, "n2": 0}))  # fmt: skip
    nccl = component(results, "nccl-tests alltoall")
    assert nccl["status"] == "fail" and results["verdict"] == "fail"
    assert nccl["reason"] == ("run ok but it is not this run's job: the log has 2 ranks, the run asked for 0 "
                              "(CPU only, 2 nodes)")  # fmt: skip


CORPUS_LOG = "corpus/nccl-tests/{}"


def corpus_log(shared_dir: Path, name: str) -> Path:
    path = shared_dir / CORPUS_LOG.format(name)
    if not path.is_file():
        pytest.skip(f"the nccl-tests corpus log {path} is not here")
    return path


def test_the_parser_keeps_the_host_of_every_rank(shared_dir: Path) -> None:
    """02: nccl-tests 2.17.8 on ten H100 nodes of eight GPUs each (INDEX.md), five collectives of 80 ranks."""
    from rdmaforge.nccl_tests import parse_file

    log = corpus_log(shared_dir, "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt")
    hosts = log_hosts(log)
    assert len(hosts) == 10
    for run in parse_file(log).runs:
        assert len(run.rank_hosts) == run.ranks == 80
        assert sorted(set(run.rank_hosts.values())) == sorted(hosts)
        assert all(list(run.rank_hosts.values()).count(h) == 8 for h in hosts)


#: 05 and 20 ran on the same cluster, two ranks each: 05 on cnode2-001 and cnode2-002, 20 on cnode2-002 and
#: cnode2-008 (their Rank lines).
LOG_05 = "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt"
LOG_20 = "20_alltoall_ok_sendrecv_HANG_v2.17.6_h100_2gpu_2node.txt"


def test_ranks_on_nodes_the_run_left_out_fail(tmp_path: Path, shared_dir: Path) -> None:
    """Under --limit the role's mpirun took the cluster's hostfile and filled other nodes: the log's ranks ran on
    cnode2-002 and cnode2-008 while the run's nodes were cnode2-001 and cnode2-002. Same rank count, not its job."""
    ours = log_hosts(corpus_log(shared_dir, LOG_05))
    other_job = corpus_log(shared_dir, LOG_20)
    results = render(make_run(tmp_path / "a", "tcp", other_job, "alltoall", line_rate_gbps=H100_PAIR_LINE_RATE,
                              gpus={"n1": 1, "n2": 1}, hostnames={"n1": ours[0], "n2": ours[1]}))  # fmt: skip
    nccl = component(results, "nccl-tests alltoall")
    assert nccl["status"] == "fail" and results["verdict"] == "fail"
    theirs = sorted(set(log_hosts(other_job)) - set(ours))
    idle = sorted(set(ours) - set(log_hosts(other_job)))
    assert nccl["reason"] == (f"run ok but it is not this run's nodes' job: ranks on {', '.join(theirs)}, not nodes "
                              f"of this run; no rank on n1 ({idle[0]})")  # fmt: skip
    assert main(["report", str(tmp_path / "a")]) == 4
    # The same log on the nodes it ran on passes (host names compared up to the first dot, as nccl-tests prints).
    own = dict(zip(["n1", "n2"], (f"{h}.cluster.internal" for h in log_hosts(other_job)), strict=True))
    results = render(make_run(tmp_path / "b", "tcp", other_job, "alltoall", line_rate_gbps=H100_PAIR_LINE_RATE,
                              gpus={"n1": 1, "n2": 1}, hostnames=own))  # fmt: skip
    assert component(results, "nccl-tests alltoall")["status"] == "pass", results["reasons"]


def test_without_recorded_host_names_other_hosts_are_not_judged(tmp_path: Path, shared_dir: Path) -> None:
    """A run recorded before run.json kept the nodes' host names: ranks on hosts not named like its nodes could be
    its nodes or others; never a pass."""
    log = corpus_log(shared_dir, LOG_20)
    results = render(make_run(tmp_path, "tcp", log, "alltoall", line_rate_gbps=H100_PAIR_LINE_RATE, hostnames=None))
    nccl = component(results, "nccl-tests alltoall")
    assert nccl["status"] == "not_judged" and results["verdict"] == "incomplete"
    assert "run.json records no host names of its nodes" in str(nccl["reason"])
    assert main(["report", str(tmp_path)]) == 5


def test_nodes_sharing_a_host_name_are_not_judged(tmp_path: Path, shared_dir: Path) -> None:
    """Two nodes whose facts give the same host name (a cloned image): which of them ran the ranks cannot be told."""
    log = corpus_log(shared_dir, LOG_05)
    first = log_hosts(log)[0]
    results = render(make_run(tmp_path, "tcp", log, "alltoall", line_rate_gbps=H100_PAIR_LINE_RATE,
                              gpus={"n1": 1, "n2": 1},
                              hostnames={"n1": first, "n2": f"{first}.other-domain"}))  # fmt: skip
    nccl = component(results, "nccl-tests alltoall")
    assert nccl["status"] == "not_judged" and results["verdict"] == "incomplete"
    assert f"nodes n1, n2 have the same host name ({first})" in str(nccl["reason"])


def test_all_ranks_on_one_node_are_not_a_two_node_result(tmp_path: Path, shared_dir: Path) -> None:
    """07: twelve V100 ranks of one DGX-2 (its Rank lines all name one host). As a two-node run's log its busbw
    went over NVLink, not the fabric: it fails, with or without the nodes' host names in run.json."""
    log = corpus_log(shared_dir, "07_multi_v2.0-era_v100_12gpu_dgx2_allgather_oob4.txt")
    (host,) = log_hosts(log)
    gpus = {"n1": 6, "n2": 6}
    recorded = render(make_run(tmp_path / "a", "tcp", log, line_rate_gbps=1, gpus=gpus,
                               hostnames={"n1": host, "n2": f"{host}-2"}))  # fmt: skip
    nccl = component(recorded, "nccl-tests all_reduce")
    assert nccl["status"] == "fail" and recorded["verdict"] == "fail"
    assert nccl["reason"].endswith(f"no rank on n2 ({host}-2)")
    unrecorded = render(make_run(tmp_path / "b", "tcp", log, line_rate_gbps=1, gpus=gpus, hostnames=None))
    nccl = component(unrecorded, "nccl-tests all_reduce")
    assert nccl["status"] == "fail"
    assert f"the ranks ran on 1 host(s) ({host}), the run has 2 nodes (n1, n2)" in str(nccl["reason"])


def test_a_log_without_rank_lines_is_not_judged(tmp_path: Path, shared_dir: Path) -> None:
    source = corpus_log(shared_dir, "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt")
    hosts = log_hosts(source)
    stripped = tmp_path / "no-ranks.log"
    stripped.write_text("".join(line for line in source.read_text().splitlines(keepends=True)
                                if not re.match(r"^#\s*Rank\s", line)))  # fmt: skip
    results = render(make_run(tmp_path / "run", "tcp", stripped, line_rate_gbps=SOCKET_LINE_RATE,
                              gpus={"n1": 1, "n2": 1},
                              hostnames=dict(zip(["n1", "n2"], hosts, strict=True))))  # fmt: skip
    nccl = component(results, "nccl-tests all_reduce")
    assert nccl["status"] == "not_judged" and results["verdict"] == "incomplete"
    assert "lists no '#  Rank' lines" in str(nccl["reason"])


def test_another_collectives_log_is_not_this_collectives_result(tmp_path: Path, shared_dir: Path) -> None:
    """05 holds an alltoall and a sendrecv run; kept as nccl-all_reduce.log it says nothing about all_reduce."""
    results = render(make_run(tmp_path, "tcp", corpus_log(shared_dir, LOG_05), line_rate_gbps=H100_PAIR_LINE_RATE,
                              gpus={"n1": 1, "n2": 1}))  # fmt: skip
    nccl = component(results, "nccl-tests all_reduce")
    assert nccl["status"] == "fail" and results["verdict"] == "fail"
    assert nccl["reason"] == ("nccl-all_reduce.log holds no all_reduce run (it holds alltoall, sendrecv): it is "
                              "another collective's output")  # fmt: skip


def test_a_transport_warning_is_named_not_hidden_in_a_pass(tmp_path: Path, shared_dir: Path) -> None:
    """01: EFA with GPUDirect RDMA off (its NCCL INFO lines). As it is, AWS Libfabric is not a network the erdma
    profile accepts: the transport fails. With its network renamed to NCCL's verbs transport (IB), it is the RDMA
    transport the profile expects, with traffic staged through host memory: a warning, named, and not judged (it
    was a pass, while nccl-report said WARN, exit 5, on the same log: a warning is never folded into a pass)."""
    source = corpus_log(shared_dir, "01_allreduce_v2.13_efa_2node_mpirun_ncclinfo.txt")
    efa = render(make_run(tmp_path / "efa", "erdma", source, line_rate_gbps=EFA_LINE_RATE, gpus={"n1": 1, "n2": 1}))
    assert component(efa, "transport")["status"] == "fail" and efa["verdict"] == "fail"
    log = tmp_path / "verbs.log"
    log.write_text(source.read_text().replace("AWS Libfabric", "IB"))
    results = render(make_run(tmp_path / "verbs", "erdma", log, line_rate_gbps=EFA_LINE_RATE, gpus={"n1": 1, "n2": 1}))
    transport = component(results, "transport")
    assert transport["status"] == "not_judged" and results["verdict"] != "pass"
    assert main(["report", str(tmp_path / "verbs")]) != 0
    assert transport["reason"] == (
        "NCCL used IB as fabric profile 'erdma' expects; with a warning, not judged: GPUDirect RDMA is off: "
        "some traffic is staged through host memory"
    )
    assert results["nccl"]["transport"]["verdict"]["status"] == "warn"


def edited_e2e(run_dir: Path, **changes: object) -> Path:
    """e2e.json of ``run_dir`` with keys changed: ``multi__nodes=None`` sets multi.nodes to null, ``...=DELETE`` removes
    it (what a hand-edited or older file may hold; the schema allows both)."""
    e2e = json.loads((run_dir / "e2e.json").read_text())
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = e2e
        for key in parents:
            node = node[key]
        if value == "DELETE":
            del node[last]
        else:
            node[last] = value
    (run_dir / "e2e.json").write_text(json.dumps(e2e))
    return run_dir


def with_gpus(run_dir: Path, gpus: dict[str, int]) -> Path:
    """``run_dir`` with run.json recording ``gpus`` per node."""
    run = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**run, "gpus": gpus}))
    return run_dir


def test_a_training_on_cpu_on_nodes_with_gpus_is_not_judged(tmp_path: Path) -> None:
    """ddp_train takes gloo on CPU where torch sees no CUDA device (a CPU-only torch wheel, a driver older than the
    wheel's CUDA): on nodes run.json records with GPUs, such a training measured neither the GPUs nor NCCL, and its
    linearity passed. On nodes without GPUs (the lab) the same training is what e2e measures."""
    cpu_nodes = render(e2e_dir(tmp_path / "cpu", 0.5))
    assert component(cpu_nodes, "e2e")["status"] == "pass"
    results = render(with_gpus(e2e_dir(tmp_path / "gpu", 0.5), {"n1": 8, "n2": 8}))
    e2e = component(results, "e2e")
    assert e2e["status"] == "not_judged" and results["verdict"] == "incomplete", e2e
    assert "the training ran on gloo, not nccl, while run.json records GPUs on n1, n2" in str(e2e["reason"])
    assert main(["report", str(tmp_path / "gpu")]) == 5
    on_nccl = edited_e2e(with_gpus(e2e_dir(tmp_path / "nccl", 0.5), {"n1": 8, "n2": 8}), single__backend="nccl",
                         multi__backend="nccl")  # fmt: skip
    assert component(render(on_nccl), "e2e")["status"] == "pass"


def test_a_linearity_of_runs_with_other_ranks_per_node_is_not_judged(tmp_path: Path) -> None:
    """Seed 003's linearity divides the N-node throughput by N 1-node runs: a 1-node run of 1 rank against a
    2-node run of 4 ranks gave 1.6 x the real figure, and a pass."""
    results = render(edited_e2e(e2e_dir(tmp_path, 0.5), multi__world_size=4))
    e2e = component(results, "e2e")
    assert e2e["status"] == "not_judged" and results["verdict"] == "incomplete", e2e
    assert "the 1-node run had 1 rank(s) and the 2-node run 4 (not 1 x 2)" in str(e2e["reason"])


def test_a_table_of_unvalidated_data_says_so(shared_dir: Path) -> None:
    """Corpus 22 ran with -c 0 (its header: validation: 0; #wrong N/A everywhere); 05's sendrecv with validation 1."""
    from rdmaforge.bench.report import unvalidated
    from rdmaforge.nccl_tests import parse

    c0 = corpus_log(shared_dir, "22_alltoall_v2.0-2.9_a100_8gpu_c0_NA_blank-redop_SANITIZED.txt").read_text()
    assert "validation: 0" in c0
    assert "not validated (nccl-tests -c 0" in unvalidated(parse(c0).runs[-1])
    checked = corpus_log(shared_dir, LOG_05).read_text()
    assert "validation: 1" in checked
    assert unvalidated(next(r for r in parse(checked).runs if r.collective == "sendrecv")) == ""


def test_a_log_that_is_a_pipe_is_not_read(tmp_path: Path, socket_log: Path) -> None:
    """A FIFO (or a link to /dev/urandom) in place of a log made `report` wait forever; run.json is read bounded."""
    import os

    run_dir = make_run(tmp_path, "tcp", socket_log)
    (run_dir / "nccl-all_reduce.log").unlink()
    os.mkfifo(run_dir / "nccl-all_reduce.log")
    nccl = component(render(run_dir), "nccl-tests all_reduce")
    assert nccl["status"] == "fail"
    assert nccl["reason"].startswith("nccl-all_reduce.log is no regular file (a pipe, a device or a directory)")


def test_a_failed_training_run_fails_e2e_even_with_result_lines(tmp_path: Path) -> None:
    """A node exited non-zero (e2e.json's error), yet rank 0 printed results whose linearity would pass: fail."""
    error = "the N-node run on n2 exited 1: torch.distributed.elastic.multiprocessing.errors.ChildFailedError"
    results = render(edited_e2e(e2e_dir(tmp_path, 0.5), error=error))
    e2e = component(results, "e2e")
    assert e2e["status"] == "fail" and results["verdict"] == "fail"
    assert e2e["reason"] == f"e2e benchmark failed: {error}"
    assert main(["report", str(tmp_path)]) == 4


@pytest.mark.parametrize("nodes", [1, None, "DELETE"])
def test_a_linearity_across_nodes_needs_two_nodes(tmp_path: Path, nodes: object) -> None:
    """multi.nodes of 1 (the N-node run trained on one node), null or missing: nothing crossed nodes, not judged."""
    results = render(edited_e2e(e2e_dir(tmp_path, 0.5), multi__nodes=nodes))
    e2e = component(results, "e2e")
    assert e2e["status"] == "not_judged" and results["verdict"] == "incomplete"
    assert results["e2e"]["linearity"] is None and e2e["value"] is None
    assert ("needs 2 or more" if nodes == 1 else "multi.nodes is missing or null") in str(e2e["reason"])
    assert main(["report", str(tmp_path)]) == 5


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"single__percentiles__p50__samples_per_s": None}, "not_judged"),
        ({"multi__percentiles__p50__samples_per_s": None}, "not_judged"),
        ({"multi__percentiles__p75__samples_per_s": None}, "pass"),  # shown as "-", not needed by the linearity
        ({"multi__world_size": "DELETE"}, "pass"),
        ({"multi__backend": "DELETE"}, "pass"),
        ({"single__world_size": None, "multi__nodes": "DELETE"}, "not_judged"),
    ],
)
def test_null_or_missing_e2e_values_are_shown_as_dashes_not_a_crash(
    tmp_path: Path, change: dict[str, object], status: str
) -> None:
    results = render(edited_e2e(e2e_dir(tmp_path, 0.5), **change))
    assert component(results, "e2e")["status"] == status
    summary = (tmp_path / "summary.md").read_text()
    assert "| e2e run | ranks |" in summary
    if status == "not_judged" or "p75" in next(iter(change)):
        assert " - |" in summary
    assert (tmp_path / "e2e_throughput.png").read_bytes().startswith(PNG)
    assert main(["report", str(tmp_path)]) == (0 if status == "pass" else 5)
    # Without the N-node p50 (and no nccl-tests table) a baseline would compare nothing, and an e2e not judged holds
    # nothing checked: both refused, 64. So is an N-node result that does not say its world size or backend: a later
    # run could not be told to train the same workload (rdmaforge.bench.baseline.REQUIRED_WORKLOAD).
    unknown_workload = next(iter(change)) in ("multi__world_size", "multi__backend")
    made = 0 if status == "pass" and not unknown_workload else 64
    assert main(["baseline", str(tmp_path), "-o", str(tmp_path / "baseline.json")]) == made


def test_a_run_without_a_gpus_record_is_not_judged_by_its_ranks(tmp_path: Path, two_rank_log: Path) -> None:
    """run.json without ``gpus`` (the role always records it: an older run.json, or one written by hand): the log's
    2 ranks cannot be checked against the run's GPUs, so the collective is not judged; it passed, the rank check
    skipped, while the same log against 8 GPUs per node fails. An empty record is no better."""
    hosts = dict(zip(["n1", "n2"], log_hosts(two_rank_log), strict=True))
    for name, gpus in (("missing", None), ("empty", {})):
        results = render(make_run(tmp_path / name, "tcp", two_rank_log, "alltoall", line_rate_gbps=H100_PAIR_LINE_RATE,
                                  gpus=gpus, hostnames=hosts))  # fmt: skip
        assert "gpus" not in json.loads((tmp_path / name / "run.json").read_text()) or gpus == {}
        nccl = component(results, "nccl-tests alltoall")
        assert nccl["status"] == "not_judged" and results["verdict"] == "incomplete", (name, nccl)
        assert "run.json records no GPUs per node (its `gpus` is missing or empty" in str(nccl["reason"]), nccl
        assert "the log's 2 ranks" in str(nccl["reason"])
        assert main(["report", str(tmp_path / name)]) == 5


def add_collective(run_dir: Path, name: str, log: Path) -> Path:
    """A second collective's log in a run directory of make_run, listed in run.json as the role lists it."""
    (run_dir / f"nccl-{name}.log").write_bytes(log.read_bytes())
    run = json.loads((run_dir / "run.json").read_text())
    run["nccl"]["collectives"].append(name)
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def test_each_collectives_own_log_must_show_the_transport(tmp_path: Path, shared_dir: Path, socket_log: Path) -> None:
    """10 shows NCCL's Socket transport (its INFO lines); 05 has no NCCL INFO line. As all_reduce's and alltoall's
    logs of one run, 10's evidence counted for alltoall too, and the transport passed for both: alltoall's is not
    judged, named, and the run is not a pass."""
    no_info = corpus_log(shared_dir, LOG_05)
    run_dir = make_run(tmp_path, "tcp", socket_log, line_rate_gbps=SOCKET_LINE_RATE)
    results = render(add_collective(run_dir, "alltoall", no_info))
    transport = component(results, "transport")
    assert transport["status"] == "not_judged" and results["verdict"] != "pass", transport
    assert "alltoall: cannot check the transport: no NCCL INFO lines" in str(transport["reason"]), transport
    assert "all_reduce: NCCL used the Socket transport as fabric profile 'tcp' expects" in str(transport["reason"])
    assert results["nccl"]["transport"]["collectives"]["alltoall"]["status"] == "unknown"
    assert results["nccl"]["transport"]["collectives"]["all_reduce"]["status"] == "ok"
    # A collective run.json lists whose log is missing shows no transport either.
    run_dir = make_run(tmp_path / "missing", "tcp", socket_log, line_rate_gbps=SOCKET_LINE_RATE)
    (run_dir / "nccl-alltoall.log").unlink(missing_ok=True)
    run = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**run, "nccl": {"status": "ran",
                                                                  "collectives": ["all_reduce", "alltoall"]}}))
    transport = component(render(run_dir), "transport")
    assert transport["status"] == "not_judged", transport
    assert "alltoall: cannot check the transport: nccl-alltoall.log is missing" in str(transport["reason"])


def test_a_rerun_without_info_lines_does_not_borrow_the_earlier_runs_transport(
    tmp_path: Path, socket_log: Path
) -> None:
    """10 (Socket, with its NCCL INFO lines) and then the same run again without them, appended to one log (a rerun
    without NCCL_DEBUG=INFO): the collective is judged by its last run, and the first run's INFO lines passed the
    transport for it. One run's lines say nothing of another's: not judged, named; a fallback they show still fails."""
    text = socket_log.read_text()
    rerun = "\n".join(line for line in text.splitlines() if "NCCL INFO" not in line) + "\n"
    assert "NCCL INFO" in text and "NCCL INFO" not in rerun
    alone = render(make_run(tmp_path / "alone", "tcp", socket_log, line_rate_gbps=SOCKET_LINE_RATE))
    assert component(alone, "transport")["status"] == "pass"
    log = tmp_path / "two-runs.log"
    log.write_text(text + rerun)
    results = render(make_run(tmp_path / "two", "tcp", log, line_rate_gbps=SOCKET_LINE_RATE))
    transport = component(results, "transport")
    assert transport["status"] == "not_judged" and results["verdict"] != "pass", transport
    assert transport["reason"] == ("cannot check the transport: the last all_reduce run in nccl-all_reduce.log "
                                   "printed no NCCL INFO lines of its own (those in the log are an earlier run's)")
    failed = render(make_run(tmp_path / "ib", "infiniband", log))
    assert component(failed, "transport")["status"] == "fail"  # the first run's fallback to sockets still counts


def test_an_unnamed_rerun_that_failed_is_the_run_judged(tmp_path: Path, socket_log: Path) -> None:
    """10 names its run only by the command line echoed before it (nccl-tests 2.10 prints no 'Collective test
    starting'); the same job run again without that line crashed after 3 rows (review round 33b). The unnamed rerun
    was dropped and the log passed on its first run; it is the last run of the log, and it failed."""
    text = socket_log.read_text()
    lines = [line for line in text.splitlines() if " NCCL INFO " not in line]
    start = next(i for i, line in enumerate(lines) if "nThread" in line)
    first_row = next(i for i, line in enumerate(lines) if i > start and line.strip()[:1].isdigit())
    crash = "ip-10-0-139-244: Test NCCL failure common.cu:1279 'unhandled system error'"
    rerun = [line for line in lines[start : first_row + 3] if "all_reduce_perf" not in line] + [crash]
    log = tmp_path / "rerun.log"
    log.write_text(text + "\n" + "\n".join(rerun) + "\n")
    (tmp_path / "alone.log").write_text(text)
    alone = render(make_run(tmp_path / "alone", "tcp", tmp_path / "alone.log", line_rate_gbps=SOCKET_LINE_RATE))
    assert component(alone, "nccl-tests all_reduce")["status"] == "pass", alone["reasons"]
    results = render(make_run(tmp_path / "run", "tcp", log, line_rate_gbps=SOCKET_LINE_RATE))
    nccl = component(results, "nccl-tests all_reduce")
    assert nccl["status"] == "fail" and results["verdict"] == "fail", nccl
    assert "Test NCCL failure common.cu:1279" in str(nccl["reason"]), nccl


def test_one_collectives_rdma_does_not_stand_for_another_log_without_evidence(tmp_path: Path, shared_dir: Path) -> None:
    """01 with its network renamed to NCCL's verbs transport (IB: as in the warning test above) for all_reduce, and 05
    (no NCCL INFO line) for alltoall: all_reduce's IB counted for alltoall, both judged RDMA."""
    source = corpus_log(shared_dir, "01_allreduce_v2.13_efa_2node_mpirun_ncclinfo.txt")
    log = tmp_path / "verbs.log"
    log.write_text(source.read_text().replace("AWS Libfabric", "IB"))
    run_dir = make_run(tmp_path / "run", "erdma", log, line_rate_gbps=EFA_LINE_RATE, gpus={"n1": 1, "n2": 1})
    results = render(add_collective(run_dir, "alltoall", corpus_log(shared_dir, LOG_05)))
    transport = component(results, "transport")
    assert transport["status"] == "not_judged" and results["verdict"] != "pass", transport
    assert "alltoall: cannot check the transport: no NCCL INFO lines" in str(transport["reason"]), transport


def test_one_collectives_fallback_fails_the_transport_whatever_the_others_show(
    tmp_path: Path, shared_dir: Path, socket_log: Path
) -> None:
    """On an InfiniBand fabric 10's Socket transport fails all_reduce's; alltoall's log (05) shows none: still a
    fail, naming the collective that fell back, and the one not judged."""
    run_dir = make_run(tmp_path, "infiniband", socket_log)
    results = render(add_collective(run_dir, "alltoall", corpus_log(shared_dir, LOG_05)))
    transport = component(results, "transport")
    assert transport["status"] == "fail" and results["verdict"] == "fail", transport
    reason = str(transport["reason"])
    assert reason.startswith("all_reduce: fabric profile 'infiniband' expects RDMA but NCCL fell back"), reason
    assert "; alltoall: cannot check the transport" in reason


def alltoall_run(shared_dir: Path) -> str:
    """05's alltoall run, from its version line to its 'concluded' line (the log's first run; sendrecv follows)."""
    text = corpus_log(shared_dir, LOG_05).read_text()
    end = "# Collective test concluded: alltoall_perf\n"
    return text[text.index("# nccl-tests version"):text.index(end) + len(end)]


def test_a_failed_run_before_a_clean_rerun_of_the_collective_fails_it(
    tmp_path: Path, shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rerun appended to the log does not hide a measured failure: the first alltoall run counted 5 wrong elements
    at 256 MiB (#wrong of its out-of-place half), the second is 05's clean run, which alone passes."""
    clean = alltoall_run(shared_dir)
    wrong = re.sub(r"^( +268435456 .*? 13\.48 +)0 ", r"\g<1>5 ", clean, count=1, flags=re.M)
    assert wrong != clean
    log = tmp_path / "two-runs.log"
    log.write_text(wrong + "\n" + clean)
    extra = {"line_rate_gbps": H100_PAIR_LINE_RATE, "gpus": {"n1": 1, "n2": 1}}
    results = render(make_run(tmp_path / "run", "tcp", log, "alltoall", **extra))
    nccl = component(results, "nccl-tests alltoall")
    assert nccl["status"] == "fail" and results["verdict"] == "fail"
    assert str(nccl["reason"]).startswith("run 1 of 2 alltoall runs in nccl-alltoall.log failed: ")
    assert "#wrong" in str(nccl["reason"])
    assert results["nccl"]["collectives"]["alltoall"]["status"] == "ok"  # the last run is still the one shown
    assert main(["report", str(tmp_path / "run")]) == 4
    capsys.readouterr()
    (tmp_path / "one-run.log").write_text(clean)
    alone = render(make_run(tmp_path / "alone", "tcp", tmp_path / "one-run.log", "alltoall", **extra))
    assert component(alone, "nccl-tests alltoall")["status"] == "pass", alone["reasons"]


def test_a_start_that_crashed_before_its_table_does_not_fail_the_retry(tmp_path: Path, shared_dir: Path) -> None:
    """A first start that stopped after its '#  Rank' lines (other pids: another launch), then 05's clean run: the
    retry is judged and passes, and the incomplete start is named in its reason."""
    clean = alltoall_run(shared_dir)
    crashed = clean[:clean.index("#                                                              out-of-place")]
    crashed = crashed.replace("Pid 440010", "Pid 1001").replace("Pid 381003", "Pid 1002")
    log = tmp_path / "retried.log"
    log.write_text(crashed + clean)
    results = render(make_run(tmp_path / "run", "tcp", log, "alltoall", line_rate_gbps=H100_PAIR_LINE_RATE,
                              gpus={"n1": 1, "n2": 1}))  # fmt: skip
    nccl = component(results, "nccl-tests alltoall")
    assert nccl["status"] == "pass", results["reasons"]  # (05 has no NCCL INFO lines: its transport is not judged)
    assert "run 1 of 2 alltoall runs in nccl-alltoall.log ended incomplete" in str(nccl["reason"])


@pytest.mark.parametrize("how", ["deleted", "dangling-link"])
def test_a_log_missing_from_the_run_directory_is_named_missing(tmp_path: Path, socket_log: Path, how: str) -> None:
    """run.json says the collective ran; its log is gone. It was reported as "no nccl-tests result in ... (crashed
    before the table)", a crash nothing showed."""
    run_dir = make_run(tmp_path / "run", "tcp", socket_log)
    log = run_dir / "nccl-all_reduce.log"
    log.unlink()
    if how == "dangling-link":
        log.symlink_to(run_dir / "nowhere.log")
    nccl = component(render(run_dir), "nccl-tests all_reduce")
    assert nccl["status"] == "fail"
    assert str(nccl["reason"]).startswith("nccl-all_reduce.log is not in the run directory"), nccl["reason"]
    assert "crashed" not in str(nccl["reason"])


def test_a_tiny_threshold_is_shown_as_it_is_never_as_0(tmp_path: Path, socket_log: Path) -> None:
    """min_efficiency 1e-9 of 25 Gbit/s (3.125 GB/s) is 3.125e-09 GB/s: shown so, with 1e-07%, not "0 GB/s" and
    "0%" (a pass against what reads as no threshold)."""
    run_dir = make_run(tmp_path / "run", "tcp", socket_log, line_rate_gbps=25.0, min_efficiency=1e-9)
    nccl = component(render(run_dir), "nccl-tests all_reduce")
    assert nccl["status"] == "pass" and nccl["threshold"] == 3.13e-09, nccl
    assert "reaches 1e-07% of the expected" in str(nccl["reason"]), nccl["reason"]


def test_a_gpu_count_of_a_node_outside_the_run_drops_no_requirement(tmp_path: Path, shared_dir: Path) -> None:
    """Review round 34a: run.json's gpus with one more key, a node that is not one of its nodes, at 0 GPUs: the
    InfiniBand run without NCCL INFO lines went from incomplete (transport not judged, required) to pass, its
    transport never checked. Only the run's own nodes decide whether nccl-tests and its transport are required."""
    log = corpus_log(shared_dir, LOG_05)
    recorded = {"hostnames": dict(zip(["n1", "n2"], log_hosts(log), strict=True)), "nccl_exit_codes": {"alltoall": 0},
                "line_rate_gbps": H100_PAIR_LINE_RATE}  # fmt: skip
    proper = render(make_run(tmp_path / "a", "infiniband", log, "alltoall", gpus={"n1": 1, "n2": 1}, **recorded))
    stale = render(make_run(tmp_path / "b", "infiniband", log, "alltoall", gpus={"n1": 1, "n2": 1, "old-node": 0},
                            **recorded))  # fmt: skip
    assert proper["verdict"] == "incomplete", proper["reasons"]
    assert component(proper, "transport")["required"] is True
    assert stale["verdict"] == proper["verdict"] and component(stale, "transport")["required"] is True
    assert main(["report", str(tmp_path / "b")]) == 5


def test_a_training_log_that_cannot_be_read_or_is_huge_is_named_not_read(tmp_path: Path) -> None:
    """Review round 34a: a training log e2e.json names that cannot be read (here a link to /proc/self/mem, whose
    first page is not mapped: EIO) ended `rdmaforge report` with exit 70, "internal error"; and a log was read
    whole whatever its size (a 200 MB sparse one took 432 MB). Now each is a log with nothing to read, with why."""
    from rdmaforge.bench.report import TRAINING_LOG_MAX_BYTES, training_logs

    (tmp_path / "e2e-n1.log").symlink_to("/proc/self/mem")
    with (tmp_path / "e2e-n2.log").open("wb") as sparse:
        sparse.truncate(TRAINING_LOG_MAX_BYTES + 1)
    (tmp_path / "e2e-n3.log").write_text("NCCL INFO Using network Socket\n")
    e2e = {"multi": {"nodes": 3}, "logs": {"multi": ["e2e-n1.log", "e2e-n2.log", "e2e-n3.log"]}}
    logs = {log.name: log for log in training_logs(tmp_path, e2e, ["n1", "n2", "n3"])}
    assert logs["e2e-n1.log"].text is None and str(logs["e2e-n1.log"].blank).startswith("unreadable (")
    assert logs["e2e-n2.log"].text is None and logs["e2e-n2.log"].blank == "larger than 64 MiB, not read"
    assert logs["e2e-n3.log"].blank is None and "Using network Socket" in str(logs["e2e-n3.log"].text)


def test_latest_is_the_run_recorded_last_not_the_last_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review round 34a: --latest sorted the directories by name: any name after the timestamps ('zzz-copy') was
    "the newest run" whatever its age."""
    import argparse
    import os

    from rdmaforge.commands import report as report_command

    monkeypatch.setattr(report_command, "BENCH_DIR", tmp_path)
    for name, age in (("zzz-copy", 3600), ("20261207T010000Z", 0)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text("{}")
        stamp = (tmp_path / name / "run.json").stat().st_mtime - age
        os.utime(tmp_path / name / "run.json", (stamp, stamp))
    args = argparse.Namespace(latest=True, run_dir=None)
    assert report_command.find_run_dir(args) == tmp_path / "20261207T010000Z"


def test_a_log_whose_rank_lines_name_no_host_cannot_pass_the_transport(tmp_path: Path, shared_dir: Path) -> None:
    """Review round 35: nccl-report left a log whose '#  Rank' lines name no host unknown, while the benchmark
    report's transport component still passed it (10, two nodes over sockets, without its Rank lines)."""
    text = corpus_log(shared_dir, "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt").read_text()
    log = tmp_path / "unplaced.log"
    log.write_text("\n".join(line for line in text.splitlines() if not line.startswith("#   Rank")) + "\n")
    results = render(make_run(tmp_path / "run", "tcp", log, gpus={"n1": 1, "n2": 1}, line_rate_gbps=SOCKET_LINE_RATE,
                              nccl_exit_codes={"all_reduce": 0}))  # fmt: skip
    transport = component(results, "transport")
    assert transport["status"] == "not_judged", transport
    assert "'#  Rank' lines name no host" in transport["reason"], transport


def split_groups(text: str, mask: int) -> str:
    """``text`` (an nccl-tests log of 2.13.4+, whose ``#  Rank`` lines print ``Group %2d``) as it reads when run with
    NCCL_TESTS_SPLIT_MASK=``mask``: nccl-tests gives each rank the group (color) rank & mask and splits
    MPI_COMM_WORLD by it, one communicator per group."""
    def regroup(line: re.Match[str]) -> str:
        return f"{line[1]}Group {int(line[2]) & mask:2d}"

    return re.sub(r"^(#\s*Rank\s+(\d+)\s+)Group\s+-?\d+", regroup, text, flags=re.M)


def test_a_run_split_into_groups_is_not_judged_as_the_fabric(tmp_path: Path, shared_dir: Path) -> None:
    """Review round 41c: with NCCL_TESTS_SPLIT_MASK each group runs its own communicator and the table is one
    group's bandwidth (a node's NVLink, one rail), yet the report judged it as the fabric's: a run split by node
    passed. Corpus 02's all_reduce on 10 nodes of 8 x 400 Gbit/s rails passes whole (peak 344.87 GB/s of 400); split
    by node (mask 0xfffffff8: 10 groups) or by rail (mask 0x7: 8 groups) it is not judged, nor compared with a
    baseline."""
    from rdmaforge.bench.baseline import compare_collective

    log = corpus_log(shared_dir, "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt")
    ports = {f"n{i}": {"gbps": 3200.0, "detail": "8 active mlx5* port(s): 400 Gb/s each"} for i in range(1, 11)}
    whole = render(make_run(tmp_path / "whole", "infiniband", log, port_line_rates=ports))
    assert component(whole, "nccl-tests all_reduce")["status"] == "pass"
    entry = whole["nccl"]["collectives"]["all_reduce"]
    base = {"busbw_gbs": {str(row["size"]): row["out_of_place"]["busbw"] for row in entry["rows"]}}
    for mask, groups in ((0xFFFFFFF8, 10), (0x7, 8)):
        split = tmp_path / f"split-{mask:x}.log"
        split.write_text(split_groups(log.read_text(), mask))
        assert len(set(re.findall(r"Group +(\d+) ", split.read_text()))) == groups
        results = render(make_run(tmp_path / f"run-{mask:x}", "infiniband", split, port_line_rates=ports))
        nccl = component(results, "nccl-tests all_reduce")
        assert nccl["status"] == "not_judged" and results["verdict"] != "pass", nccl
        assert f"its ranks form {groups} NCCL_TESTS_SPLIT groups" in nccl["reason"], nccl
        assert "the busbw is one group's, not the fabric's" in nccl["reason"], nccl
        entry = results["nccl"]["collectives"]["all_reduce"]
        assert entry["not_comparable"] == nccl["reason"]
        compared = compare_collective("all_reduce", base, entry, 0.1)
        assert compared.status == "not_judged" and "is not compared with the baseline" in compared.reason, compared
