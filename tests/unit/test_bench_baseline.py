"""`rdmaforge baseline RUN_DIR -o FILE` and the comparison with it: a run against its own baseline passes, a
baseline with busbw doubled fails naming the sizes, a missing or malformed baseline is an error with its path.
The nccl-tests numbers are a real corpus log's (shared/corpus/nccl-tests/10_...socket.txt, line 68: 1 MiB at
0.59 GB/s out-of-place busbw)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rdmaforge.bench.baseline import main as check_main
from rdmaforge.cli import main
from tests.unit.test_bench_report import SOCKET_LINE_RATE, component, make_run

SOCKET_LOG = "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt"


@pytest.fixture
def run_dir(tmp_path: Path, shared_dir: Path) -> Path:
    """A tcp run whose all_reduce passes its line-rate threshold (5 Gbit/s, so 0.5 GB/s at 80%); its GPUs recorded
    as the role records them (the log's 2 GPUs on 2 nodes: 1 per node)."""
    return make_run(tmp_path / "run", "tcp", shared_dir / "corpus" / "nccl-tests" / SOCKET_LOG,
                    line_rate_gbps=SOCKET_LINE_RATE, gpus={"n1": 1, "n2": 1})  # fmt: skip


@pytest.fixture
def made(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    target = tmp_path / "baselines" / "tcp.json"
    assert main(["baseline", str(run_dir), "-o", str(target)]) == 0
    assert f"baseline written to {target}: 1 collective(s), 25 size(s)" in capsys.readouterr().out
    return target


def test_baseline_holds_busbw_per_size_and_the_fingerprint(made: Path) -> None:
    data = json.loads(made.read_text())
    assert data["kind"] == "rdmaforge-baseline"
    assert data["fingerprint"]["fabric"] == "tcp" and data["fingerprint"]["nodes"] == ["n1", "n2"]
    assert data["nccl"]["all_reduce"]["busbw_gbs"]["1048576"] == pytest.approx(0.59)
    assert data["nccl"]["all_reduce"]["busbw_gbs"]["8388608"] == pytest.approx(0.66)


def test_a_run_compared_with_its_own_baseline_passes(run_dir: Path, made: Path) -> None:
    assert main(["report", str(run_dir), "--baseline", str(made)]) == 0
    results = json.loads((run_dir / "results.json").read_text())
    compared = component(results, "baseline nccl-tests all_reduce")
    assert compared["status"] == "pass" and compared["required"] is True
    nonzero = [v for v in json.loads(made.read_text())["nccl"]["all_reduce"]["busbw_gbs"].values() if v > 0]
    assert len(nonzero) == 18  # the log's 25 sizes, 7 of them too small to show a busbw above 0.00
    # Of those, the latency-bound ones (below a tenth of the peak busbw) are named, not compared.
    bound = [v for v in nonzero if v >= 0.1 * max(nonzero)]
    assert 0 < len(bound) < len(nonzero)
    assert (f"{len(bound)} sizes within 10% of the baseline; {len(nonzero) - len(bound)} latency-bound sizes (baseline "
            f"busbw below 10% of its peak, {max(nonzero):g} GB/s) not compared") in str(compared["reason"])


def test_a_baseline_with_busbw_doubled_fails_naming_the_sizes(run_dir: Path, made: Path, tmp_path: Path) -> None:
    data = json.loads(made.read_text())
    sizes = data["nccl"]["all_reduce"]["busbw_gbs"]
    doubled = {size: value * 2 for size, value in sizes.items()}
    data["nccl"]["all_reduce"]["busbw_gbs"] = doubled
    higher = tmp_path / "doubled.json"
    higher.write_text(json.dumps(data))
    assert main(["report", str(run_dir), "--baseline", str(higher)]) == 4
    results = json.loads((run_dir / "results.json").read_text())
    compared = component(results, "baseline nccl-tests all_reduce")
    assert compared["status"] == "fail" and results["verdict"] == "fail"
    # Sizes whose busbw is 0 in the log cannot regress by a fraction; every other size is named.
    regressed = [s for s, v in sizes.items() if v > 0 and v >= 0.1 * max(sizes.values())]
    assert f"at {len(regressed)} of {len(regressed)} sizes" in str(compared["reason"])
    assert "1M (0.59 < 1.18 GB/s)" in str(compared["reason"]) and "8M (0.66 < 1.32 GB/s)" in str(compared["reason"])


def test_only_the_regressed_sizes_are_named(run_dir: Path, made: Path, tmp_path: Path) -> None:
    data = json.loads(made.read_text())
    data["nccl"]["all_reduce"]["busbw_gbs"]["1048576"] = 0.7  # 0.59 is more than 10% below 0.7
    data["nccl"]["all_reduce"]["busbw_gbs"]["8388608"] = 0.7  # 0.66 is within 10% of 0.7
    one = tmp_path / "one.json"
    one.write_text(json.dumps(data))
    assert main(["report", str(run_dir), "--baseline", str(one)]) == 4
    results = json.loads((run_dir / "results.json").read_text())
    reason = str(component(results, "baseline nccl-tests all_reduce")["reason"])
    assert "at 1 of " in reason and "1M (0.59 < 0.7 GB/s)" in reason and "8M" not in reason
    # A wider tolerance accepts it.
    assert main(["report", str(run_dir), "--baseline", str(one), "--tolerance", "0.2"]) == 0


def test_a_shorter_sweep_than_the_baselines_is_not_judged_within_it(run_dir: Path, made: Path, tmp_path: Path) -> None:
    """A baseline that also holds a size this run did not sweep (a 1 GiB message, where a fabric's bandwidth shows):
    the sizes compared are within it, but "within the baseline" would claim the size left out too."""
    data = json.loads(made.read_text())
    data["nccl"]["all_reduce"]["busbw_gbs"][str(1 << 30)] = 0.7
    longer = tmp_path / "longer.json"
    longer.write_text(json.dumps(data))
    assert main(["report", str(run_dir), "--baseline", str(longer)]) == 5
    results = json.loads((run_dir / "results.json").read_text())
    compared = component(results, "baseline nccl-tests all_reduce")
    assert compared["status"] == "not_judged" and results["verdict"] == "incomplete"
    values = data["nccl"]["all_reduce"]["busbw_gbs"].values()
    bound = [v for v in values if v and v >= 0.1 * max(values)]  # 1G among them, which this run lacks
    assert (f"{len(bound) - 1} sizes within 10% of the baseline, but this run lacks 1 of its sizes (1G)"
            in str(compared["reason"]))


def against_a_changed_baseline(run_dir: Path, made: Path, tmp_path: Path, key: str, value: object) -> dict:
    """The report's baseline component for ``run_dir`` against ``made`` with its fingerprint's ``key`` changed."""
    data = json.loads(made.read_text())
    data["fingerprint"][key] = value
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    assert main(["report", str(run_dir), "--baseline", str(other)]) == 5
    compared: dict = component(json.loads((run_dir / "results.json").read_text()), "baseline")
    assert compared["status"] == "not_judged"
    return compared


def test_a_baseline_from_another_cluster_is_not_judged(run_dir: Path, made: Path, tmp_path: Path) -> None:
    compared = against_a_changed_baseline(run_dir, made, tmp_path, "fabric", "infiniband")
    assert "fabric 'infiniband' in the baseline, 'tcp' now" in str(compared["reason"])


@pytest.mark.parametrize("groups", [{"required": ["nccl-tests", "transport"]}, {"optional": ["baseline"]}])
def test_a_baseline_asked_for_on_the_command_line_is_required_whatever_the_run_recorded(
    run_dir: Path, made: Path, tmp_path: Path, groups: dict[str, list[str]]
) -> None:
    """A run recorded by `bench --require nccl-tests,transport` (or with the baseline optional) reported `report
    --baseline OTHER` as a pass, the comparison 'not judged (not required)': exit 0 with nothing compared. The
    comparison asked for is required: one that cannot be made leaves the run incomplete (5)."""
    run = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**run, **groups}))
    compared = against_a_changed_baseline(run_dir, made, tmp_path, "fabric", "infiniband")
    assert compared["required"] is True
    assert main(["report", str(run_dir), "--baseline", str(made)]) == 0  # the run's own baseline: compared, passes
    results = json.loads((run_dir / "results.json").read_text())
    assert [(c["status"], c["required"]) for c in results["components"] if c["group"] == "baseline"] == [("pass", True)]


def test_a_baseline_given_to_bench_is_required_with_an_explicit_require_too(
    run_dir: Path, made: Path, tmp_path: Path
) -> None:
    """Review round 36: a run from `bench --require nccl-tests -e benchmark_baseline=FILE` whose baseline came from
    another cluster passed (exit 0), the comparison 'not judged (not required)': an explicit list dropped the
    baseline that `report --baseline` requires. A baseline given is required unless benchmark_optional lists it."""
    data = json.loads(made.read_text())
    data["fingerprint"]["fabric"] = "infiniband"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    run = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**run, "required": ["nccl-tests"], "baseline": str(other)}))
    assert main(["report", str(run_dir)]) == 5
    results = json.loads((run_dir / "results.json").read_text())
    compared = component(results, "baseline")
    assert (compared["status"], compared["required"], results["verdict"]) == ("not_judged", True, "incomplete")
    (run_dir / "run.json").write_text(json.dumps({**run, "required": ["nccl-tests"], "baseline": str(other),
                                                  "optional": ["baseline"]}))  # fmt: skip
    assert main(["report", str(run_dir)]) == 0  # taken out by name: not required, and said so
    assert component(json.loads((run_dir / "results.json").read_text()), "baseline")["required"] is False


def test_a_baseline_with_other_gpus_per_node_is_not_judged(run_dir: Path, made: Path, tmp_path: Path) -> None:
    compared = against_a_changed_baseline(run_dir, made, tmp_path, "gpus", {"n1": 8, "n2": 8})
    assert "GPUs per node [8, 8] in the baseline, [1, 1] now" in str(compared["reason"])


@pytest.mark.parametrize(
    ("in_baseline", "in_run", "missing", "code"),
    [(True, False, "this run records no GPU count for n1, n2", 5),
     (False, True, "the baseline records no GPU count for n1, n2", 5),
     (False, False, "the baseline records no GPU count for n1, n2; this run records no GPU count for n1, n2", 5),
     # A null count is unknown, not 0 GPUs: the log's 2 ranks (1 GPU known) cannot be checked, not judged either.
     (True, {"n1": 1, "n2": None}, "this run records no GPU count for n2", 5)],
)  # fmt: skip
def test_gpus_per_node_that_a_side_lacks_are_not_compared_and_not_judged(
    run_dir: Path, made: Path, tmp_path: Path, in_baseline: bool, in_run: object, missing: str, code: int
) -> None:
    """The GPUs per node were compared only when both sides recorded some: a baseline or run.json without them (made
    by hand, or from a run without the record) passed as if the shapes matched. Like a fabric or node count that
    differs, a shape that cannot be compared makes the baseline not judged: the sizes are not compared."""
    data = json.loads(made.read_text())
    if not in_baseline:
        del data["fingerprint"]["gpus"]
    baseline_file = tmp_path / "gpus.json"
    baseline_file.write_text(json.dumps(data))
    run = json.loads((run_dir / "run.json").read_text())
    if in_run is False:
        del run["gpus"]
    elif isinstance(in_run, dict):
        run["gpus"] = in_run
    (run_dir / "run.json").write_text(json.dumps(run))
    assert main(["report", str(run_dir), "--baseline", str(baseline_file)]) == code
    results = json.loads((run_dir / "results.json").read_text())
    compared = component(results, "baseline")
    assert compared["status"] == "not_judged" and results["verdict"] != "pass"
    assert f"GPUs per node not compared: {missing}" in str(compared["reason"]), compared
    assert not [c for c in results["components"] if c["group"] == "baseline" and c["status"] == "pass"]


@pytest.mark.parametrize(
    ("gpus", "lacking"),
    [(None, "n1, n2"),  # an older run.json, from before GPU counts were recorded
     ({}, "n1, n2")],
)  # fmt: skip
def test_a_baseline_is_not_made_from_a_run_without_gpu_counts(
    run_dir: Path, made: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], gpus: object, lacking: str
) -> None:
    """A run.json without a GPU count for some node made a baseline (exit 0) that no later run could be compared with
    (GPUs per node not compared: not judged, every time). It is refused as bad input (64, README's exit codes),
    naming the run file and the missing field, and nothing is written."""
    run = json.loads((run_dir / "run.json").read_text())
    if gpus is None:
        del run["gpus"]
    else:
        run["gpus"] = gpus
    (run_dir / "run.json").write_text(json.dumps(run))
    capsys.readouterr()
    target = tmp_path / "unknown-gpus.json"
    assert main(["baseline", str(run_dir), "-o", str(target)]) == 64
    err = capsys.readouterr().err
    assert f"{run_dir.resolve() / 'run.json'}: records no GPU count for {lacking} (run.json: gpus" in err, err
    assert not target.exists()
    # The later comparison of such a run with a baseline that has its GPU counts (made before, from the whole run):
    # not judged, never within the baseline.
    assert main(["report", str(run_dir), "--baseline", str(made)]) in (4, 5)
    results = json.loads((run_dir / "results.json").read_text())
    compared = component(results, "baseline")
    assert compared["status"] == "not_judged" and f"this run records no GPU count for {lacking}" in str(
        compared["reason"]
    )
    assert results["verdict"] != "pass"


def test_a_baseline_is_not_made_from_a_run_with_a_null_gpu_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A null count is unknown, not 0 GPUs: an e2e run (its verdict not fail: nccl-tests skipped, no GPU) whose
    run.json has none for n2 is refused too, naming n2."""
    from tests.unit.test_bench_report import e2e_dir

    source = e2e_dir(tmp_path / "a", 0.5)
    run = json.loads((source / "run.json").read_text())
    (source / "run.json").write_text(json.dumps({**run, "gpus": {"n1": 0, "n2": None}}))
    capsys.readouterr()
    assert main(["baseline", str(source), "-o", str(tmp_path / "x.json")]) == 64
    err = capsys.readouterr().err
    assert f"{source.resolve() / 'run.json'}: records no GPU count for n2 (run.json: gpus" in err, err
    assert not (tmp_path / "x.json").exists()


def unjudged_run(case: str, tmp_path: Path, shared_dir: Path) -> Path:
    """A run whose verdict is incomplete, not fail, because its nccl-tests busbw was never judged."""
    corpus = shared_dir / "corpus" / "nccl-tests"
    if case == "one node":  # 22: eight A100 ranks of one host; a run of that one node measured NVLink
        log = corpus / "22_alltoall_v2.0-2.9_a100_8gpu_c0_NA_blank-redop_SANITIZED.txt"
        return make_run(tmp_path / "run", "tcp", log, "alltoall", nodes=["n1"], gpus={"n1": 8},
                        hostnames={"n1": "localhost"})  # fmt: skip
    if case == "no threshold":  # benchmark_min_efficiency empty: reported, not judged
        return make_run(tmp_path / "run", "tcp", corpus / SOCKET_LOG, line_rate_gbps=SOCKET_LINE_RATE,
                        min_efficiency="")  # fmt: skip
    # the socket log without its NCCL INFO lines: the busbw passes, which transport carried it cannot be told
    log = tmp_path / "no-info.log"
    log.write_text("".join(x for x in (corpus / SOCKET_LOG).read_text().splitlines(True) if "NCCL INFO" not in x))
    return make_run(tmp_path / "run", "tcp", log, line_rate_gbps=SOCKET_LINE_RATE)


@pytest.mark.parametrize(
    ("case", "why"),
    [("one node", "nccl-tests alltoall: not judged: all 8 ranks on one node (n1): the traffic stayed inside it"),
     ("no threshold", "nccl-tests all_reduce: not judged: no threshold: benchmark_min_efficiency is empty"),
     ("no transport", "transport: not judged: cannot check the transport: no 'Using network' line")],
)  # fmt: skip
def test_a_baseline_is_not_made_from_unjudged_nccl_tests(
    tmp_path: Path, shared_dir: Path, capsys: pytest.CaptureFixture[str], case: str, why: str
) -> None:
    """A run whose verdict is incomplete (not fail) made a baseline of busbw never judged: one node's NVLink bandwidth,
    a table with no threshold, or bandwidth of a transport not shown. A later run compared with it would be "within
    the baseline" without any check. It is refused (64), naming the run and the component that was not judged."""
    run_dir = unjudged_run(case, tmp_path, shared_dir)
    assert main(["report", str(run_dir)]) == 5  # incomplete: not a failed run, which is refused already
    capsys.readouterr()
    target = tmp_path / "unjudged.json"
    assert main(["baseline", str(run_dir), "-o", str(target)]) == 64
    err = capsys.readouterr().err
    assert f"rdmaforge baseline: {run_dir.resolve()}: its nccl-tests busbw did not pass (" in err, err
    assert why in err, err
    assert not target.exists()


def test_a_failed_collective_is_not_passed_by_its_baseline_line(run_dir: Path, made: Path) -> None:
    """The same whole table as the baseline's, but the launch exited 1: the collective fails (the verdict with it);
    the baseline's line must not say its sizes are within the baseline."""
    run = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**run, "nccl_exit_codes": {"all_reduce": 1}}))
    assert main(["report", str(run_dir), "--baseline", str(made)]) == 4
    results = json.loads((run_dir / "results.json").read_text())
    assert component(results, "nccl-tests all_reduce")["status"] == "fail"
    compared = component(results, "baseline nccl-tests all_reduce")
    assert compared["status"] == "not_judged", compared
    assert "within" not in str(compared["reason"]) and "nccl-tests all_reduce failed" in str(compared["reason"])
    line = next(x for x in (run_dir / "summary.md").read_text().splitlines() if "baseline nccl-tests all_reduce" in x)
    assert "pass" not in line and "within" not in line, line


def test_a_table_not_known_to_be_this_clusters_is_not_compared_with_the_baseline(
    run_dir: Path, made: Path, tmp_path: Path
) -> None:
    """Review round 33b: the baseline's own table on hosts run.json does not name (another job's, as far as can be
    told) made the collective not judged, yet its baseline line passed, and with the baseline required the whole
    verdict was pass, exit 0."""
    log = run_dir / "nccl-all_reduce.log"
    text = log.read_text()
    hosts = sorted(set(re.findall(r"^#\s*Rank\s+\d+\s.*?\bon\s+(\S+)\s+device", text, flags=re.M)))
    assert len(hosts) == 2
    other = text.replace(hosts[0], "otherhost-a").replace(hosts[1], "otherhost-b")
    moved = make_run(tmp_path / "other", "tcp", None, line_rate_gbps=SOCKET_LINE_RATE, gpus={"n1": 1, "n2": 1},
                     required=["baseline"])  # fmt: skip
    (moved / "nccl-all_reduce.log").write_text(other)
    run = json.loads((moved / "run.json").read_text())
    run["nccl"] = {"status": "ran", "collectives": ["all_reduce"]}
    (moved / "run.json").write_text(json.dumps(run))
    assert main(["report", str(moved), "--baseline", str(made)]) == 5
    results = json.loads((moved / "results.json").read_text())
    assert component(results, "nccl-tests all_reduce")["status"] == "not_judged"
    compared = component(results, "baseline nccl-tests all_reduce")
    assert compared["status"] == "not_judged", compared
    assert "its table is not compared with the baseline" in str(compared["reason"]), compared
    assert "otherhost-a" in str(compared["reason"]) and results["verdict"] != "pass"
    # Nor a table whose launch's exit status run.json does not record (it records other collectives').
    run_json = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**run_json, "nccl_exit_codes": {"alltoall": 0}}))
    assert main(["report", str(run_dir), "--baseline", str(made)]) == 5
    compared = component(json.loads((run_dir / "results.json").read_text()), "baseline nccl-tests all_reduce")
    assert compared["status"] == "not_judged" and "records no exit status" in str(compared["reason"]), compared
    (run_dir / "run.json").write_text(json.dumps(run_json))
    # The same table on the run's own nodes is compared (the baseline passes it), as before.
    assert main(["report", str(run_dir), "--baseline", str(made)]) == 0


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "cannot read it"),
        ("{not json", "not JSON"),
        ('{"nccl": {"collectives": {"all_reduce": {"avg_busbw": 0.5}}}}', "not an rdmaforge baseline"),
        (
            '{"kind": "rdmaforge-baseline", "version": 1, "fingerprint": {}, "e2e": {}, '
            '"nccl": {"all_reduce": {"busbw_gbs": {"1M": 1}}}}',
            "not a valid rdmaforge baseline: nccl.all_reduce.busbw_gbs: key must be a message size in bytes",
        ),
        (  # more digits than Python reads into an int (4300): a clear error, not a crash
            '{"kind": "rdmaforge-baseline", "version": 1, "fingerprint": {}, "e2e": {}, '
            '"nccl": {"all_reduce": {"busbw_gbs": {"' + "9" * 5000 + '": 1}}}}',
            "not a valid rdmaforge baseline: nccl.all_reduce.busbw_gbs: key must be a message size in bytes "
            "(digits only, no leading zero, 20 at most)",
        ),
    ],
)
def test_a_missing_or_malformed_baseline_is_an_error_naming_its_path(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, why: str
) -> None:
    path = tmp_path / "bad-baseline.json"
    if content is not None:
        path.write_text(content)
    assert main(["report", str(run_dir), "--baseline", str(path)]) == 64
    err = capsys.readouterr().err
    assert f"benchmark baseline {path}: {why}" in err
    assert not (run_dir / "results.json").exists()  # nothing judged, nothing written
    assert check_main([str(path)]) == 64  # the role's check before a run uses the same code
    # The same baseline named in run.json (as the role records it) is the same error, never ignored.
    run = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**run, "baseline": str(path)}))
    assert main(["report", str(run_dir)]) == 64


def test_baseline_refuses_a_failed_run_and_a_run_without_measurements(
    tmp_path: Path, shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = shared_dir / "corpus" / "nccl-tests" / SOCKET_LOG
    failed = make_run(tmp_path / "failed", "infiniband", log)  # a fallback to sockets on IB
    assert main(["baseline", str(failed), "-o", str(tmp_path / "x.json")]) == 64
    assert "the run's verdict is fail" in capsys.readouterr().err
    empty = make_run(tmp_path / "empty", "erdma", None)
    assert main(["baseline", str(empty), "-o", str(tmp_path / "y.json")]) == 64
    assert "no nccl-tests table and no e2e result" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "y.json").exists()


def test_an_e2e_run_without_its_p50_is_not_compared(tmp_path: Path) -> None:
    """e2e.json allows a null p50 (schema): the baseline comparison of the N-node throughput is not judged."""
    from tests.unit.test_bench_report import e2e_dir, edited_e2e

    source = e2e_dir(tmp_path / "a", 0.5)
    target = tmp_path / "e2e-baseline.json"
    assert main(["baseline", str(source), "-o", str(target)]) == 0
    assert json.loads(target.read_text())["e2e"]["multi_p50_samples_per_s"] > 0
    run_dir = edited_e2e(e2e_dir(tmp_path / "b", 0.5), multi__percentiles__p50__samples_per_s=None)
    assert main(["report", str(run_dir), "--baseline", str(target)]) == 5
    compared = component(json.loads((run_dir / "results.json").read_text()), "baseline e2e")
    assert compared["status"] == "not_judged" and "N-node p50 throughput is missing" in str(compared["reason"])


def test_a_baseline_that_compares_nothing_is_neither_made_nor_passed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run with no nccl-tests table whose N-node p50 is null made a baseline (exit 0, "e2e throughput") of the
    1-node throughput alone, which compare() never reads: every later run with it could only be incomplete."""
    from tests.unit.test_bench_report import e2e_dir, edited_e2e

    source = edited_e2e(e2e_dir(tmp_path / "a", 0.5), multi__percentiles__p50__samples_per_s=None)
    assert main(["baseline", str(source), "-o", str(tmp_path / "x.json")]) == 64
    assert "no N-node e2e p50 throughput" in capsys.readouterr().err and not (tmp_path / "x.json").exists()
    # Such a file, written before or by hand, still leaves the verdict incomplete, naming the baseline.
    made = tmp_path / "e2e-baseline.json"
    assert main(["baseline", str(e2e_dir(tmp_path / "b", 0.5)), "-o", str(made)]) == 0
    data = json.loads(made.read_text())
    data["e2e"]["multi_p50_samples_per_s"] = None
    made.write_text(json.dumps(data))
    run_dir = e2e_dir(tmp_path / "c", 0.5)
    assert main(["report", str(run_dir)]) == 0  # without a baseline, this run passes
    assert main(["report", str(run_dir), "--baseline", str(made)]) == 5
    results = json.loads((run_dir / "results.json").read_text())
    assert results["verdict"] == "incomplete" and "baseline (required): no result at all" in results["reasons"]


@pytest.mark.parametrize(("edits", "status"), [
    ({"min_linearity": None}, "not judged: no threshold"),
    ({"multi__nodes": 1}, "not judged: the N-node run trained on 1 node"),
])  # fmt: skip
def test_a_baseline_is_not_made_from_an_e2e_result_that_did_not_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edits: dict[str, object], status: str
) -> None:
    """An N-node training that ran on one node (or was never held against a linearity floor) was stored as the
    2-node reference: a later 2-node run at linearity 0.55 then passed its baseline line. nccl-tests numbers were
    refused in that case already; the e2e throughput is now too."""
    from tests.unit.test_bench_report import e2e_dir, edited_e2e

    source = edited_e2e(e2e_dir(tmp_path / "a", 0.5), **edits)
    target = tmp_path / "x.json"
    assert main(["baseline", str(source), "-o", str(target)]) == 64
    err = capsys.readouterr().err
    assert f"its e2e training did not pass (e2e: {status}" in err, err
    assert not target.exists()


def test_a_failed_training_is_not_passed_by_its_baseline_line(tmp_path: Path) -> None:
    """A node of the N-node training exited 1 (e2e.json's error) after rank 0 printed the same throughput as the
    baseline's: e2e fails, and the baseline's line must not say the throughput is within the baseline (as for a
    failed collective)."""
    from tests.unit.test_bench_report import e2e_dir, edited_e2e

    target = tmp_path / "e2e-baseline.json"
    assert main(["baseline", str(e2e_dir(tmp_path / "a", 0.5)), "-o", str(target)]) == 0
    error = "the N-node run on n2 exited 1: torch.distributed.elastic.multiprocessing.errors.ChildFailedError"
    run_dir = edited_e2e(e2e_dir(tmp_path / "b", 0.5), error=error)
    assert main(["report", str(run_dir), "--baseline", str(target)]) == 4
    results = json.loads((run_dir / "results.json").read_text())
    assert component(results, "e2e")["status"] == "fail"
    compared = component(results, "baseline e2e")
    assert compared["status"] == "not_judged", compared
    assert "within" not in str(compared["reason"]) and "e2e failed" in str(compared["reason"])


def test_a_linearity_below_its_floor_still_compares_the_throughput(tmp_path: Path) -> None:
    """A training that ran to its end, whose linearity is below an impossible floor (1000): e2e fails on
    linearity, and its N-node throughput is a measurement all the same, compared with the baseline (here the
    same throughput: within it). Only a training that exited non-zero (e2e.json's error) goes uncompared."""
    from tests.unit.test_bench_report import e2e_dir

    target = tmp_path / "e2e-baseline.json"
    assert main(["baseline", str(e2e_dir(tmp_path / "a", 0.5)), "-o", str(target)]) == 0
    run_dir = e2e_dir(tmp_path / "b", 1000)
    assert main(["report", str(run_dir), "--baseline", str(target)]) == 4
    results = json.loads((run_dir / "results.json").read_text())
    assert component(results, "e2e")["status"] == "fail"
    compared = component(results, "baseline e2e")
    assert compared["status"] == "pass" and "within 10% of the baseline" in str(compared["reason"]), compared


@pytest.mark.parametrize("target", ["run.json", "nccl-all_reduce.log", ".", "e2e.json", "sub/../run.json", "link"])
def test_a_baseline_is_never_written_over_the_runs_own_files(
    run_dir: Path, tmp_path: Path, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o naming the run directory, a file in it (or one the report would read there: e2e.json), or a symbolic link
    to its run.json: refused before anything is written, and the run still reports. A new name beside them is not."""
    (run_dir / "sub").mkdir()
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    (tmp_path / "link").symlink_to(run_dir / "run.json")
    output = tmp_path / "link" if target == "link" else run_dir / target
    assert main(["baseline", str(run_dir), "-o", str(output)]) == 64
    err = capsys.readouterr().err
    assert err.startswith(f"rdmaforge baseline: -o {output}: is ") and "which the report reads" in err
    assert len(err.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before
    assert main(["report", str(run_dir)]) == 0
    assert main(["baseline", str(run_dir), "-o", str(run_dir / "baseline.json")]) == 0


def test_an_empty_output_path_is_a_usage_error(run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """-o '' (an unset shell variable) is Path("."): refused, exit 64, never taken for the current directory."""
    monkeypatch.chdir(tmp_path / "run")
    with pytest.raises(SystemExit) as exited:
        main(["baseline", str(run_dir), "-o", ""])
    assert exited.value.code == 64
    assert "argument -o/--output: '': an empty path" in capsys.readouterr().err


def test_a_latency_bound_size_that_moved_by_a_printed_digit_is_no_regression(run_dir: Path, made: Path,
                                                                            tmp_path: Path) -> None:  # fmt: skip
    """Review round 27c: nccl-tests prints busbw with two decimals, so a small size going from 0.02 to 0.01 GB/s read
    as a 50% regression and failed the run (exit 4); such sizes jitter by more than any tolerance."""
    data = json.loads(made.read_text())
    sizes = data["nccl"]["all_reduce"]["busbw_gbs"]
    small = min((size for size, value in sizes.items() if value > 0), key=int)
    sizes[small] = sizes[small] * 2 + 0.01  # the baseline saw twice this run's busbw at its smallest size
    higher = tmp_path / "small.json"
    higher.write_text(json.dumps(data))
    assert main(["report", str(run_dir), "--baseline", str(higher)]) == 0
    reason = str(component(json.loads((run_dir / "results.json").read_text()), "baseline nccl-tests all_reduce")
                 ["reason"])  # fmt: skip
    assert "latency-bound sizes" in reason and "not compared" in reason



def test_an_output_that_is_a_link_is_written_through(run_dir: Path, tmp_path: Path) -> None:
    """-o is the user's own path: a link to a versioned baseline updates that file (the run directory's fixed
    names are replaced instead, never written through: rdmaforge/output_files.py; review round 30)."""
    versioned = tmp_path / "baseline-2026q4.json"
    versioned.write_text("{}\n")
    link = tmp_path / "baseline.json"
    link.symlink_to(versioned.name)
    assert main(["baseline", str(run_dir), "-o", str(link)]) == 0
    assert link.is_symlink() and json.loads(versioned.read_text())["nccl"]


def test_a_relative_baseline_is_refused_where_it_is_recorded_and_where_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review round 34a: benchmark_baseline set relative in group_vars went into run.json as it was, and `report` read
    it against its own directory: the same run failed from one directory and passed from another. The role's check
    (python -m rdmaforge.bench.baseline) refuses it before measuring, and report refuses one already recorded."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bl.json").write_text("{}")
    assert check_main(["bl.json"]) == 64
    assert "benchmark_baseline=bl.json is a relative path" in capsys.readouterr().err
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"fabric": "tcp", "nodes": ["n1", "n2"], "min_efficiency": 0.8,
                                                  "tolerance": 0.1, "baseline": "bl.json"}))  # fmt: skip
    assert main(["report", str(run_dir)]) == 64
    assert "run.json's baseline=bl.json is a relative path" in capsys.readouterr().err


def test_an_output_below_a_file_names_that_file(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o baselines/tcp.json where baselines is a file: mkdir said only "File exists" (review round 34a, low)."""
    (tmp_path / "baselines").write_text("not a directory\n")
    assert main(["baseline", str(run_dir), "-o", str(tmp_path / "baselines" / "sub" / "tcp.json")]) == 64
    err = capsys.readouterr().err
    assert f"{tmp_path / 'baselines'} is not a directory" in err and "File exists" not in err, err
    assert (tmp_path / "baselines").read_text() == "not a directory\n"
