"""Bad inputs to every command that runs without hosts (issue 17): each case asserts the exit code from the
table (64 bad input, 5 nothing proven, ...), a message naming the file/key/value, and that no traceback
reaches the user. Inputs are built in a temporary directory from the schemas' own examples (a valid
run.json/summary.json each case damages in one place) and from the JSON samples in tests/data/nccl-json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rdmaforge import stored
from rdmaforge.cli import main
from rdmaforge.errors import UserError
from rdmaforge.runner.exit_codes import ExitCode

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-json"
OK_JSON = DATA / "all_reduce_v2.17.8_ok.json"
BAD, INCOMPLETE = ExitCode.BAD_INPUT, ExitCode.INCOMPLETE

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
ROW = (
    "     1048576        262144     float     sum      -1    60.10   17.45   17.45       0"
    "    59.80   17.53   17.53       0\n"
)
FOOT = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 17.49\n#\n"
LOG = HEAD + ROW + FOOT

#: A valid run.json (the keys roles/benchmark/tasks/report.yml writes); each case damages one key.
RUN = {
    "fabric": "tcp",
    "nodes": ["n1", "n2"],
    "line_rate_gbps": 25.0,
    "min_efficiency": 0.8,
    "baseline": None,
    "tolerance": 0.1,
    "nccl": {"status": "skipped", "reason": "no GPU on n1, n2"},
    "e2e_enabled": False,
    "gpus": {"n1": 0, "n2": 0},
    "required": [],
    "optional": [],
}
#: A valid summary.json (the keys roles/cluster_summary writes); each case damages one key.
NODE = {
    "host": "n1",
    "address": "198.18.0.2",
    "os": "Debian 12",
    "fabric": "tcp",
    "cpus": 2,
    "gpus": 0,
    "rdma_devices": ["mlx5_0"],
    "rdma_packages": {"rdma-core": "44.0"},
    "mpi_version": "4.1.4",
    "nccl_build": None,
    "nccl_plugin": "none",
    "nccl_plugin_version": None,
    "nccl_plugin_api_versions": [],
    "nccl_settings": {"NCCL_DEBUG": "WARN"},
}
SUMMARY = {"nodes": [NODE]}

Setup = Callable[[Path], list[str]]


@dataclass(frozen=True)
class Case:
    id: str
    setup: Setup
    rc: int
    needles: tuple[str, ...]


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    return path


def nccl(data: bytes | str, *extra: str, name: str = "in.log") -> Setup:
    return lambda tmp: ["nccl-report", *extra, str(write(tmp / name, data))]


def run_dir(run: Any, e2e: Any = None, raw: bytes | None = None) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        target = tmp / "run"
        write(target / "run.json", raw if raw is not None else json.dumps(run))
        if e2e is not None:
            write(target / "e2e.json", json.dumps(e2e) if not isinstance(e2e, bytes) else e2e)
        return target

    return build


def report(run: Any, *extra: str, e2e: Any = None, raw: bytes | None = None) -> Setup:
    return lambda tmp: ["report", str(run_dir(run, e2e, raw)(tmp)), *extra]


def baseline(run: Any, raw: bytes | None = None) -> Setup:
    return lambda tmp: ["baseline", str(run_dir(run, raw=raw)(tmp)), "-o", str(tmp / "b.json")]


def summary(data: Any, raw: bytes | None = None) -> Setup:
    return lambda tmp: ["summary", str(write(tmp / "summary.json", raw if raw is not None else json.dumps(data)))]


def with_key(base: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """``base`` with ``key`` (``a.b`` for nested) set to ``value``; the sentinel DELETE removes it."""
    copy: dict[str, Any] = json.loads(json.dumps(base))
    *parents, last = key.split(".")
    target = copy
    for part in parents:
        target = target[part]
    if value is DELETE:
        target.pop(last)
    else:
        target[last] = value
    return copy


DELETE = object()


def cuts(text: str) -> list[int]:
    """Every structural point of a JSON text: after each bracket, comma and colon."""
    return [i + 1 for i, char in enumerate(text) if char in "{}[],:"][:-1]


def gz_of_zeros(tmp: Path) -> list[str]:
    return ["nccl-report", str(write(tmp / "zeros.gz", gzip.compress(bytes(8 << 20))))]


def sparse_file(path: Path, size: int = 2 << 30) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        out.truncate(size)  # holes: no disk used; a reader must refuse it without reading it whole
    return path


def sparse(tmp: Path) -> list[str]:
    return ["nccl-report", str(sparse_file(tmp / "sparse.log"))]


def json_text() -> str:
    return OK_JSON.read_text()


def nccl_cases() -> list[Case]:
    text = json_text()
    rows_at = text.index('"results"')
    cases = [
        Case("nccl-missing-file", lambda t: ["nccl-report", str(t / "nope.log")], BAD, ("nope.log", "No such file")),
        Case("nccl-directory", lambda t: ["nccl-report", str(t)], BAD, ("Is a directory",)),
        # Opens, then every read fails (EIO) with no file name in the error: the message must name the file.
        Case("nccl-read-error", lambda t: ["nccl-report", "/proc/self/mem"], BAD,
             ("/proc/self/mem: cannot be read (Input/output error)",)),  # fmt: skip
        Case("nccl-utf16-no-bom", nccl(LOG.encode("utf-16-le")), BAD, ("in.log", "UTF-16 without a byte-order mark")),
        Case("nccl-utf32-no-bom", nccl(LOG.encode("utf-32-le")), BAD, ("in.log", "not an nccl-tests log")),
        Case("nccl-corrupt-gzip", nccl(b"\x1f\x8b" + b"garbage" * 50), BAD, ("in.log", "gzip data is corrupt")),
        Case("nccl-truncated-gzip", nccl(gzip.compress(LOG.encode() * 50)[:60]), BAD, ("in.log", "cut short")),
        Case("nccl-empty", nccl(""), INCOMPLETE, ("no nccl-tests run found in", "in.log")),
        Case("nccl-blank-lines", nccl("\n \n\t\n"), INCOMPLETE, ("no nccl-tests run found",)),
        # Review round 34a: the second read of stdin found nothing, "no run found", exit 5
        Case("nccl-stdin-twice", lambda t: ["nccl-report", "-", "-"], BAD, ("is given 2 times; it can be read once",)),
        Case("nccl-prose", nccl("hello\nworld\n"), INCOMPLETE, ("no nccl-tests run found",)),
        Case("nccl-random-bytes", nccl(bytes(range(1, 256)) * 40), BAD, ("holds binary data",)),
        Case("nccl-json-list", nccl("[1, 2, 3]"), INCOMPLETE, ("no nccl-tests run found",)),
        Case("nccl-json-other-object", nccl('{"hello": "world"}'), INCOMPLETE, ("no nccl-tests run found",)),
        Case("nccl-json-lone-brace", nccl("{"), INCOMPLETE, ("no nccl-tests run found",)),
        Case("nccl-json-cut-in-results", nccl(text[: rows_at + 400]), INCOMPLETE, ()),
        Case("nccl-json-cut-before-footer", nccl(text[: text.rindex('"out_of_bounds"')]), INCOMPLETE, ()),
        Case("nccl-json-unquoted-nan", nccl(text.replace('"bus_bw": ', '"bus_bw": -nan, "x": ', 1)), 0, ()),
        Case("nccl-text-cut-after-version", nccl(HEAD.splitlines()[0] + "\n"), INCOMPLETE, ()),
        Case("nccl-text-cut-after-header", nccl(HEAD), INCOMPLETE, ()),
        Case("nccl-text-cut-mid-row", nccl(HEAD + ROW[:60]), INCOMPLETE, ()),
        Case("nccl-text-cut-before-avg", nccl(HEAD + ROW + FOOT.splitlines()[0] + "\n"), INCOMPLETE, ()),
        Case("nccl-glued-80k-prefix", nccl("x" * 80_000 + " NCCL INFO Using network IB\n"), INCOMPLETE, ()),
        Case("nccl-bad-fabric", nccl(LOG, "--fabric", "carrier-pigeon"), BAD, ("invalid choice", "carrier-pigeon")),
        Case("nccl-no-file", lambda t: ["nccl-report"], BAD, ("FILE",)),
        Case("nccl-unknown-option", nccl(LOG, "--frobnicate"), BAD, ("unrecognized arguments", "--frobnicate")),
    ]
    return cases


RUN_KEYS: list[tuple[str, Any, str]] = [
    ("fabric", 5, "fabric: expected string"),
    ("fabric", "carrier-pigeon", "fabric: must be one of"),
    # Without it the transport and the line rate were judged as tcp's.
    ("fabric", DELETE, "fabric: missing (required)"),
    ("nodes", "n1", "nodes: expected a list"),
    ("nodes", [1], "nodes[0]: expected string"),
    ("line_rate_gbps", "100G", "line_rate_gbps: expected number"),
    ("line_rate_gbps", -1, "line_rate_gbps: must be 0 or more"),
    ("min_efficiency", "eighty", "min_efficiency: must be a number"),
    ("min_efficiency", 80, "min_efficiency: must be a number above 0 and at most 1"),
    # 0 would pass anything, 0 GB/s included: an empty threshold (null or "") is how a run says "not judged".
    ("min_efficiency", 0, "min_efficiency: must be a number above 0 and at most 1, or empty"),
    ("min_efficiency", -0.5, "min_efficiency: must be a number above 0 and at most 1, or empty"),
    ("hostnames", {"n1": 5}, "hostnames.n1: expected string or null"),
    ("min_efficiency", True, "min_efficiency: expected number"),
    ("baseline", 5, "baseline: expected string or null"),
    ("tolerance", "x", "tolerance: expected number"),
    ("tolerance", 1.5, "tolerance: must be from 0.0 to below 1.0"),
    ("tolerance", None, "tolerance: expected number"),
    ("nccl", "ran", "nccl: expected an object"),
    ("nccl.status", DELETE, "nccl.status: missing"),
    ("nccl.status", 1, "nccl.status: expected string"),
    ("nccl.reason", 5, "nccl.reason: expected string or null"),
    ("nccl.collectives", "allreduce", "nccl.collectives: expected a list"),
    ("nccl.collectives", ["../../etc/x"], "nccl.collectives[0]: must be a plain name"),
    ("nccl.collectives", [None], "nccl.collectives[0]: expected string"),
    ("nccl.collectives", ["all_reduce", "all_reduce"], 'nccl.collectives[1]: "all_reduce" is listed more than once'),
    ("e2e_enabled", "yes", "e2e_enabled: expected boolean"),
    ("gpus", [1], "gpus: expected an object"),
    ("gpus", {"n1": "8"}, "gpus.n1: expected integer"),
    # The bounds of summary.json's counts: a node claiming 10**30 GPUs is a corrupt or forged file, not a machine.
    ("gpus", {"n1": -1}, "gpus.n1: must be a count from 0 to 1024, got -1"),
    ("gpus", {"n1": 10**30}, "gpus.n1: must be a count from 0 to 1024, got 1000000000000000000000000000000"),
    ("gpus", {"n1": 1025}, "gpus.n1: must be a count from 0 to 1024, got 1025"),
    ("required", "nccl-tests", "required: expected a list"),
    ("optional", 5, "optional: expected a list"),
    ("port_line_rates", [400], "port_line_rates: expected an object"),
    ("port_line_rates", {"n1": {"gbps": "400G", "detail": "x"}}, "port_line_rates.n1.gbps: expected number or null"),
    ("port_line_rates", {"n1": {"gbps": -5, "detail": "x"}}, "port_line_rates.n1.gbps: must be 0 or more"),
    ("port_line_rates", {"n1": {"gbps": 400}}, "port_line_rates.n1.detail: missing"),
]


def run_json_cases() -> list[Case]:
    cases = [
        Case(f"report-run.json-{key}={json.dumps(value, default=lambda _: 'DELETE')}",
             report(with_key(RUN, key, value)), BAD, ("run.json", needle))  # fmt: skip
        for key, value, needle in RUN_KEYS
    ]
    valid = json.dumps(RUN)
    cases += [
        Case(f"report-run.json-cut-at-{cut}", report(None, raw=valid[:cut].encode()), BAD,
             ("run.json", "not valid JSON"))  # fmt: skip
        for cut in cuts(valid)[:: max(1, len(cuts(valid)) // 8)]
    ]
    cases += [
        Case("report-run.json-empty", report(None, raw=b""), BAD, ("run.json", "not valid JSON")),
        Case("report-run.json-list", report([RUN]), BAD, ("run.json", "expected an object")),
        Case("report-run.json-null", report(None), BAD, ("run.json", "expected an object, got null")),
        Case("report-run.json-utf16", report(None, raw=valid.encode("utf-16")), BAD,
             ("run.json: UTF-16 text (save it as UTF-8), not UTF-8",)),  # fmt: skip
        # Review round 34a: a compressed run.json was "not UTF-8 text (invalid start byte at byte 1)"
        Case("report-run.json-gzip", report(None, raw=gzip.compress(valid.encode())), BAD,
             ("run.json: gzip-compressed (gunzip it first), not UTF-8",)),  # fmt: skip
        Case("report-run.json-nan", report(None, raw=valid.replace("0.8", "NaN").encode()), BAD,
             ("min_efficiency", "expected number")),  # fmt: skip
        # Finite in JSON, beyond any float: math.isfinite raised OverflowError (an internal error, not bad input).
        Case("report-run.json-400-digit-rate", report(with_key(RUN, "line_rate_gbps", 10**400)), BAD,
             ("run.json", "line_rate_gbps: expected number or null, got an integer of 401 digits")),  # fmt: skip
        Case("report-no-args", lambda t: ["report"], BAD, ("give RUN_DIR or --latest",)),
        Case("report-missing-dir", lambda t: ["report", str(t / "nope")], BAD, ("run dir", "nope does not exist")),
        Case("report-dir-is-a-file", lambda t: ["report", str(write(t / "f", "x"))], BAD,
             ("f is a file: give the benchmark run directory",)),  # fmt: skip
        # Review round 34a: --latest silently won over the RUN_DIR given
        Case("report-dir-and-latest", lambda t: [*report(RUN)(t), "--latest"], BAD, ("or --latest, not both",)),
        Case("report-run.json-is-a-dir", lambda t: ["report", str(mkdir(t / "r" / "run.json").parent)], BAD,
             ("run.json: is a directory, expected benchmark run.json",)),  # fmt: skip
        Case("report-tolerance-2", report(RUN, "--tolerance", "2"), BAD, ("--tolerance 2.0", "fraction")),
        Case("report-tolerance-word", report(RUN, "--tolerance", "lots"), BAD, ("--tolerance", "invalid float")),
        # Review round 34a: a tolerance with nothing to compare was silently unused
        Case("report-tolerance-without-baseline", report(RUN, "--tolerance", "0.2"), BAD,
             ("--tolerance 0.2:", "was run without a baseline", "--baseline FILE")),  # fmt: skip
        Case("report-baseline-missing", lambda t: [*report(RUN)(t), "--baseline", str(t / "no.json")], BAD,
             ("no.json",)),  # fmt: skip
        Case("report-baseline-corrupt", lambda t: [*report(RUN)(t), "--baseline", str(write(t / "b.json", "{"))],
             BAD, ("b.json", "not JSON")),  # fmt: skip
        Case("report-baseline-not-one", lambda t: [*report(RUN)(t), "--baseline", str(write(t / "b.json", "[]"))],
             BAD, ("b.json", "not an rdmaforge baseline")),  # fmt: skip
        Case("report-results-json-unwritable", unwritable_results, BAD, ("results.json", "Is a directory")),
        Case("report-e2e-corrupt", report(RUN, e2e=b"{"), BAD, ("e2e.json", "not valid JSON")),
        Case("report-e2e-no-percentiles", report(RUN, e2e={"single": {"nodes": 1}, "multi": None}), BAD,
             ("e2e.json", "single.percentiles: missing")),  # fmt: skip
        Case("report-e2e-word-throughput",
             report(RUN, e2e={"single": {"percentiles": {p: {"samples_per_s": "fast"} for p in PCT}}}), BAD,
             ("e2e.json", "single.percentiles.p50.samples_per_s: expected number")),  # fmt: skip
        Case("report-e2e-threshold-word", report(RUN, e2e={"min_linearity": "high"}), BAD,
             ("e2e.json", "min_linearity: must be a number")),  # fmt: skip
        Case("report-e2e-threshold-zero", report(RUN, e2e={"min_linearity": 0.0}), BAD,
             ("e2e.json", "min_linearity: must be a number above 0, or empty")),  # fmt: skip
    ]
    return cases


PCT = ("p50", "p75", "p90", "p95")


def mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def unwritable_results(tmp: Path) -> list[str]:
    target = run_dir(RUN)(tmp)
    (target / "results.json").mkdir()
    return ["report", str(target)]


def baseline_cases() -> list[Case]:
    return [
        Case("baseline-missing-dir", lambda t: ["baseline", str(t / "nope"), "-o", str(t / "b.json")], BAD,
             ("run directory", "nope does not exist")),  # fmt: skip
        Case("baseline-run.json-corrupt", baseline(None, raw=b'{"fabric": '), BAD, ("run.json", "not valid JSON")),
        Case("baseline-run.json-wrong-type", baseline(with_key(RUN, "nodes", "n1")), BAD, ("run.json", "nodes")),
        Case("baseline-collectives-string", baseline(with_key(RUN, "nccl.collectives", "allreduce")), BAD,
             ("nccl.collectives: expected a list",)),  # fmt: skip
        Case("baseline-no-output", lambda t: ["baseline", str(run_dir(RUN)(t))], BAD, ("-o/--output",)),
        Case("baseline-nothing-measured", baseline(RUN), BAD, ("baseline",)),
    ]


SUMMARY_KEYS: list[tuple[str, Any, str]] = [
    ("host", 5, "nodes[0].host: expected string"),
    ("host", DELETE, "nodes[0].host: missing"),
    ("rdma_devices", "mlx5_0", "nodes[0].rdma_devices: expected a list"),
    ("rdma_devices", [0], "nodes[0].rdma_devices[0]: expected string"),
    ("rdma_ports", "mlx5_0:1 ACTIVE", "nodes[0].rdma_ports: expected a list"),
    ("rdma_ports", [{"port": 1}], "nodes[0].rdma_ports[0]: expected string"),
    ("rdma_packages", ["rdma-core"], "nodes[0].rdma_packages: expected an object"),
    ("nccl_settings", "NCCL_DEBUG=INFO", "nodes[0].nccl_settings: expected an object"),
    ("nccl_plugin_api_versions", "v8", "nodes[0].nccl_plugin_api_versions: expected a list"),
    ("cpus", [2], "nodes[0].cpus: expected integer or null"),
    # Counts: whole, not negative, and within what one node can have (a corrupt file, not a machine, says 1e308).
    ("gpus", -3, "nodes[0].gpus: must be a count from 0 to 1024, got -3"),
    ("gpus", "8", 'nodes[0].gpus: expected integer or null, got "8"'),
    ("gpus", 2.5, "nodes[0].gpus: expected integer or null, got 2.5"),
    ("gpus", 100_000, "nodes[0].gpus: must be a count from 0 to 1024, got 100000"),
    ("cpus", 1e308, "nodes[0].cpus: expected integer or null, got 1e+308"),
    ("cpus", -1, "nodes[0].cpus: must be a count from 0 to 65536, got -1"),
    ("cpus", 10**30, "nodes[0].cpus: must be a count from 0 to 65536, got 1000000000000000000000000000000"),
    ("cpus", True, "nodes[0].cpus: expected integer or null, got true"),
    ("os", {"name": "Debian"}, "nodes[0].os: expected string or number"),
]


#: A valid baseline (the keys rdmaforge.bench.baseline.make writes, rdmaforge.stored.BASELINE); each case
#: damages one key and `rdmaforge report RUN --baseline b.json` must name it, the value and what is allowed.
BASELINE = {
    "kind": "rdmaforge-baseline",
    "version": 1,
    "source": "/runs/r1/benchmark",
    "fingerprint": {"fabric": "tcp", "nodes": ["n1", "n2"], "node_count": 2, "gpus": {"n1": 0, "n2": 0}},
    "nccl": {"all_reduce": {"busbw_gbs": {"1048576": 17.45}}},
    "e2e": {
        "single_p50_samples_per_s": 100.0,
        "single_backend": "nccl",
        "multi_p50_samples_per_s": 180.0,
        "multi_backend": "nccl",
    },
}
SIZE = "nccl.all_reduce.busbw_gbs.1048576"
NOT_ONE = "not an rdmaforge baseline"
INVALID = "not a valid rdmaforge baseline: "

BASELINE_KEYS: list[tuple[str, Any, str]] = [
    ("kind", 5, f"{NOT_ONE} (kind: expected string, got 5)"),
    ("kind", "rdmaforge-run", f'{NOT_ONE} (kind: must be "rdmaforge-baseline", got "rdmaforge-run")'),
    ("kind", DELETE, f"{NOT_ONE} (kind: missing (required))"),
    ("version", "1", f'{INVALID}version: expected integer, got "1"'),
    ("version", 2, f"{INVALID}version: must be 1, got 2"),
    ("version", DELETE, f"{INVALID}version: missing (required)"),
    ("source", ["r1"], f'{INVALID}source: expected string, got ["r1"]'),
    ("fingerprint", "tcp", f'{INVALID}fingerprint: expected an object, got "tcp"'),
    ("fingerprint", DELETE, f"{INVALID}fingerprint: missing (required)"),
    ("fingerprint.fabric", 5, f"{INVALID}fingerprint.fabric: expected string or null, got 5"),
    ("fingerprint.nodes", "n1", f'{INVALID}fingerprint.nodes: expected a list, got "n1"'),
    ("fingerprint.nodes", [1], f"{INVALID}fingerprint.nodes[0]: expected string, got 1"),
    ("fingerprint.node_count", "2", f'{INVALID}fingerprint.node_count: expected integer, got "2"'),
    ("fingerprint.node_count", -1, f"{INVALID}fingerprint.node_count: must be 0 or more, got -1"),
    ("fingerprint.gpus", [8], f"{INVALID}fingerprint.gpus: expected an object, got [8]"),
    ("fingerprint.gpus", {"n1": "8"}, f'{INVALID}fingerprint.gpus.n1: expected integer, got "8"'),
    ("fingerprint.gpus", {"n1": -1}, f"{INVALID}fingerprint.gpus.n1: must be a count from 0 to 1024, got -1"),
    ("fingerprint.gpus", {"n1": 10**30}, f"{INVALID}fingerprint.gpus.n1: must be a count from 0 to 1024, "
     "got 1000000000000000000000000000000"),  # fmt: skip
    ("nccl", [], f"{INVALID}nccl: expected an object, got []"),
    ("nccl", DELETE, f"{INVALID}nccl: missing (required)"),
    ("nccl.all_reduce", 17.45, f"{INVALID}nccl.all_reduce: expected an object, got 17.45"),
    ("nccl.all_reduce.busbw_gbs", DELETE, f"{INVALID}nccl.all_reduce.busbw_gbs: missing (required)"),
    ("nccl.all_reduce.busbw_gbs", [17.45], f"{INVALID}nccl.all_reduce.busbw_gbs: expected an object, got [17.45]"),
    (SIZE, "17.45", f'{INVALID}{SIZE}: expected number, got "17.45"'),
    (SIZE, None, f"{INVALID}{SIZE}: expected number, got null"),
    (SIZE, -1, f"{INVALID}{SIZE}: must be 0 or more, got -1"),
    ("nccl.all_reduce.busbw_gbs.1M", 1, f'{INVALID}nccl.all_reduce.busbw_gbs: key must be a message size in bytes '
     '(digits only, no leading zero, 20 at most), got "1M"'),  # fmt: skip
    # "016" named no size a run has: its regression was never compared (not judged, never fail; round 29b)
    ("nccl.all_reduce.busbw_gbs.016", 1, f'{INVALID}nccl.all_reduce.busbw_gbs: key must be a message size in bytes '
     '(digits only, no leading zero, 20 at most), got "016"'),  # fmt: skip
    ("e2e", "fast", f'{INVALID}e2e: expected an object, got "fast"'),
    ("e2e", DELETE, f"{INVALID}e2e: missing (required)"),
    ("e2e.single_p50_samples_per_s", "fast", f'{INVALID}e2e.single_p50_samples_per_s: expected number or null, '
     'got "fast"'),  # fmt: skip
    ("e2e.multi_p50_samples_per_s", True, f"{INVALID}e2e.multi_p50_samples_per_s: expected number or null, got true"),
    ("e2e.multi_p50_samples_per_s", -5, f"{INVALID}e2e.multi_p50_samples_per_s: must be 0 or more, got -5"),
    ("e2e.single_backend", 5, f"{INVALID}e2e.single_backend: expected string or null, got 5"),
    ("e2e.multi_backend", {"x": 1}, f'{INVALID}e2e.multi_backend: expected string or null, got {{"x": 1}}'),
]


def with_baseline(data: Any = None, raw: bytes | None = None) -> Setup:
    """`rdmaforge report RUN --baseline b.json` with ``data`` (or ``raw`` bytes) as the baseline."""

    def setup(tmp: Path) -> list[str]:
        path = write(tmp / "b.json", raw if raw is not None else json.dumps(data))
        return [*report(RUN)(tmp), "--baseline", str(path)]

    return setup


def baseline_file_cases() -> list[Case]:
    cases = [
        Case(f"baseline-file-{key}={json.dumps(value, default=lambda _: 'DELETE')}",
             with_baseline(with_key(BASELINE, key, value)), BAD, ("benchmark baseline", "b.json", needle))  # fmt: skip
        for key, value, needle in BASELINE_KEYS
    ]
    valid = json.dumps(BASELINE)
    cases += [
        Case(f"baseline-file-cut-at-{cut}", with_baseline(raw=valid[:cut].encode()), BAD,
             ("b.json", "not JSON (Expecting"))  # fmt: skip
        for cut in cuts(valid)[:: max(1, len(cuts(valid)) // 8)]
    ]
    cases += [
        Case("baseline-file-list", with_baseline([BASELINE]), BAD,
             ("b.json", f"{NOT_ONE} (the document: expected an object, got [{{\"kind\"")),  # fmt: skip
        Case("baseline-file-null", with_baseline(None), BAD, ("b.json", "expected an object, got null")),
        Case("baseline-file-empty", with_baseline(raw=b""), BAD, ("b.json", "not JSON (Expecting value")),
        Case("baseline-file-nan", with_baseline(raw=valid.replace("17.45", "NaN").encode()), BAD,
             ("b.json", f"{SIZE}: expected number, got NaN")),  # fmt: skip
        Case("baseline-file-utf16", with_baseline(raw=valid.encode("utf-16")), BAD, ("b.json", "not JSON (not UTF-8")),
        Case("baseline-file-nested-500",
             with_baseline(raw=valid.replace('"/runs/r1/benchmark"', "[" * 500 + "]" * 500).encode()), BAD,
             ("b.json", "nested too deeply (more than 100 levels")),  # fmt: skip
        Case("baseline-file-directory", lambda t: [*report(RUN)(t), "--baseline", str(mkdir(t / "b.json"))], BAD,
             ("b.json", "cannot read it (is a directory)")),  # fmt: skip
    ]
    return cases


def summary_cases() -> list[Case]:
    valid = json.dumps(SUMMARY)
    cases = [
        Case(f"summary-{key}={json.dumps(value, default=lambda _: 'DELETE')}",
             summary({"nodes": [with_key(NODE, key, value)]}), BAD, ("summary.json", needle))  # fmt: skip
        for key, value, needle in SUMMARY_KEYS
    ]
    cases += [
        Case(f"summary-cut-at-{cut}", summary(None, raw=valid[:cut].encode()), BAD, ("summary.json", "not valid JSON"))
        for cut in cuts(valid)[:: max(1, len(cuts(valid)) // 6)]
    ]
    cases += [
        Case("summary-missing", lambda t: ["summary", str(t / "none.json")], BAD, ("none.json", "does not exist")),
        Case("summary-directory", lambda t: ["summary", str(t)], BAD, ("is a directory",)),
        Case("summary-empty", summary(None, raw=b""), BAD, ("summary.json", "not valid JSON")),
        Case("summary-list", summary([NODE]), BAD, ("summary.json", "expected an object")),
        Case("summary-no-nodes", summary({}), BAD, ("summary.json", "nodes: missing")),
        Case("summary-nodes-string", summary({"nodes": "n1"}), BAD, ("nodes: expected a list",)),
        # Two entries for one host: which one is the node? Refused, naming the host and both places.
        Case("summary-duplicate-host", summary({"nodes": [NODE, with_key(NODE, "gpus", 8)]}), BAD,
             ("summary.json", 'nodes[1].host: "n1" is listed more than once (also nodes[0])')),  # fmt: skip
        Case("summary-binary", summary(None, raw=bytes(range(256)) * 4), BAD, ("summary.json", "not UTF-8")),
        # 985 levels: json.loads reads it, the schema check's message would recurse past Python's limit; 1500: the
        # JSON decoder itself does. 101 levels: deeper than any summary.
        *(Case(f"summary-nested-{depth}", summary(None, raw=deep_settings(depth)), BAD,
               ("summary.json", "nested too deeply (more than 100 levels"))  # fmt: skip
          for depth in (985, 1500, 99)),
    ]
    return cases


def deep_settings(depth: int) -> bytes:
    """A summary whose node's nccl_settings value is ``depth`` nested lists (with the root object, the nodes list,
    the node and nccl_settings: ``depth + 4`` levels)."""
    return ('{"nodes":[{"host":"a","nccl_settings":{"A":' + "[" * depth + "]" * depth + "}}]}").encode()


HOSTS = "all:\n  children:\n    cluster:\n      hosts:\n        n1:\n"
#: group_vars that render writes the docker files for (the other kinds need more).
DOCKER_ONLY = "rdmaforge_fabric: tcp\nworkload_manifests_gpus_per_node: 8\nworkload_manifests_kinds: [docker]\n"


def inventory(
    tmp: Path, group_vars: str = "", host_vars: str = "", hosts: str | None = None, linked_vars: Path | None = None
) -> Path:
    """An inventory; ``linked_vars``: where a link group_vars/all/more.yml leads (nowhere, or to itself)."""
    base = tmp / "inv"
    write(base / "hosts.yml", hosts or HOSTS)
    if group_vars:
        write(base / "group_vars" / "all.yml", group_vars)
    if host_vars:
        write(base / "host_vars" / "n1.yml", host_vars)
    if linked_vars is not None:
        link(base / "group_vars" / "all" / "more.yml", linked_vars)
    return base / "hosts.yml"


def render_cases() -> list[Case]:
    return [
        Case("render-missing-inventory", lambda t: ["render", "-i", str(t / "no.yml"), "-o", str(t / "o")], BAD,
             ("no.yml", "does not exist")),  # fmt: skip
        # A link loop or a link to nothing, as -i or -o, named as what it is (not "no such file", "File exists").
        Case("render-inventory-link-loop", lambda t: ["render", "-i", str(symlink_loop(t)), "-o", str(t / "o")], BAD,
             ("-i", "loop.yml cannot be read: Too many levels of symbolic links")),  # fmt: skip
        Case("render-inventory-dangling-link",
             lambda t: ["render", "-i", str(link(t / "inv.yml", t / "gone.yml")), "-o", str(t / "o")], BAD,
             ("inv.yml is a symbolic link to", "gone.yml, which does not exist")),  # fmt: skip
        Case("render-output-link-loop",
             lambda t: ["render", "-i", str(inventory(t)), "-o", str(symlink_loop(t))], BAD,
             ("-o", "loop.yml cannot be read: Too many levels of symbolic links", "allowed: a directory")),  # fmt: skip
        Case("render-output-dangling-link",
             lambda t: ["render", "-i", str(inventory(t)), "-o", str(link(t / "out", t / "gone") / "sub")], BAD,
             ("out/sub:", "out is a symbolic link to", "gone, which does not exist")),  # fmt: skip
        # group_vars that Ansible would skip without a word (it lists only files there): refused, not the defaults.
        Case("render-group-vars-dangling-link",
             lambda t: ["render", "-i", str(inventory(t, linked_vars=t / "gone.yml")), "-o", str(t / "o")], BAD,
             ("group_vars/all/more.yml: cannot read", "gone.yml, which does not exist", "Ansible would skip it")),
        Case("render-group-vars-link-loop",
             lambda t: ["render", "-i", str(inventory(t, linked_vars=Path("more.yml"))), "-o", str(t / "o")], BAD,
             ("group_vars/all/more.yml: cannot read", "Too many levels of symbolic links", "Ansible would skip it")),
        # A host name YAML reads as no string: Ansible's reason, not only "No inventory was parsed".
        *(Case(f"render-host-name-{kind}",
               lambda t, key=key: ["render", "-i", str(inventory(t, hosts=HOSTS.replace("n1:", f"{key}:"))),
                                   "-o", str(t / "o")], BAD,
               (f"host {shown}: YAML read this host name as {kind}", "host names must be strings", "in quotes"))
          for key, shown, kind in (("123", "123", "a number"), ("yes", "True", "the boolean true"),
                                   ("~", "None", "null"))),  # fmt: skip
        # Longer than any host's: Ansible's fact cache would stop on it ("File name too long").
        Case("render-host-name-too-long",
             lambda t: ["render", "-i", str(inventory(t, hosts=HOSTS.replace("n1:", "a" * 300 + ":"))),
                        "-o", str(t / "o")], BAD,
             (f"{'a' * 40}...{'a' * 10}: the host name is 300 characters long; allowed: at most 253",)),  # fmt: skip
        Case("render-output-is-a-file",
             lambda t: ["render", "-i", str(inventory(t)), "-o", str(write(t / "file", "x"))], BAD,
             ("file: exists and is not a directory",)),  # fmt: skip
        Case("render-output-under-a-file",
             lambda t: ["render", "-i", str(inventory(t)), "-o", str(write(t / "file", "x") / "sub")], BAD,
             ("is not a writable directory",)),  # fmt: skip
        Case("render-group-vars-yaml",
             lambda t: ["render", "-i", str(inventory(t, group_vars="a: [1, 2\nb: c\n")), "-o", str(t / "o")], BAD,
             ("group_vars/all.yml", "line 2", "YAML syntax error")),  # fmt: skip
        Case("render-host-vars-yaml",
             lambda t: ["render", "-i", str(inventory(t, host_vars="x: {\n")), "-o", str(t / "o")], BAD,
             ("host_vars/n1.yml", "YAML syntax error")),  # fmt: skip
        Case("render-hosts-yaml",
             lambda t: ["render", "-i", str(inventory(t, hosts="all:\n  - [\n")), "-o", str(t / "o")], BAD,
             ("hosts.yml", "YAML syntax error")),  # fmt: skip
        # YAML's !!binary makes bytes, which ansible-inventory --list stops on with a traceback naming no key.
        Case("render-binary-value",
             lambda t: ["render", "-i", str(inventory(t, group_vars="x: 1\nodd:\n  l: [1, !!binary aGVsbG8=]\n")),
                        "-o", str(t / "o")], BAD,
             ("group_vars/all.yml: odd.l[1] is a !!binary value", "allowed: text")),  # fmt: skip
        # Valid YAML that Ansible refuses: its [ERROR] line, not a cut traceback.
        Case("render-empty-group", lambda t: ["render", "-i", str(inventory(t)), "-o", str(t / "o"), "--group", ""],
             BAD, ("--group is empty",)),  # fmt: skip
        Case("render-group-vars-list",
             lambda t: ["render", "-i", str(inventory(t, group_vars="- a\n- b\n")), "-o", str(t / "o")], BAD,
             ("group_vars/all.yml: holds a list, not a mapping",)),  # fmt: skip
        # NCCL would fall back to TCP sockets on an RDMA fabric without a word (no net plugin, IB off).
        Case("render-rdma-fabric-ib-disabled",
             lambda t: ["render", "-i", str(inventory(t, group_vars="rdmaforge_fabric: roce\nnccl_env_overrides:\n"
                                                                    "  NCCL_IB_DISABLE: 1\n")), "-o", str(t / "o")],
             BAD, ("n1: NCCL settings (rdmaforge_fabric=roce, nccl_plugin_provider=none): NCCL_IB_DISABLE='1' turns "
                   "off NCCL's IB (verbs) transport",)),  # fmt: skip
        # An image starting with '-' became an option of docker run (--privileged, with another image).
        Case("render-image-an-option",
             lambda t: ["render", "-i", str(inventory(t, group_vars=DOCKER_ONLY + "workload_manifests_image: "
                                                                   "--privileged\n")), "-o", str(t / "o")], BAD,
             ("n1: workload_manifests_image='--privileged' is not valid", "allowed: a docker image reference")),
        # A carriage return in a value ended the systemd unit's line (systemd-analyze: unbalanced quoting).
        Case("render-env-carriage-return",
             lambda t: ["render", "-i", str(inventory(t, group_vars=DOCKER_ONLY + "workload_manifests_env:\n"
                                                                   "  LR: \"3e-4\\r\"\n")), "-o", str(t / "o")], BAD,
             ("n1: workload_manifests_env.LR='3e-4\\r' holds the control character", "allowed: printable text")),
        # A link at an output path: render wrote through it, to a file outside -o.
        Case("render-output-file-a-link",
             lambda t: ["render", "-i", str(inventory(t, group_vars=DOCKER_ONLY)), "-o",
                        str(link(t / "o" / "docker" / "n1" / "rdmaforge-train.sh", t / "victim.sh").parents[2])],
             BAD, ("docker/n1/rdmaforge-train.sh is a symbolic link", "render never writes through a link")),
        Case("render-no-output", lambda t: ["render", "-i", str(inventory(t))], BAD, ("-o/--output",)),
        Case("render-bad-kind", lambda t: ["render", "-i", str(inventory(t)), "-o", str(t), "--kind", "helm"], BAD,
             ("invalid choice", "helm")),  # fmt: skip
    ]


#: An -e mapping past Python's recursion limit: the commands that run against hosts refuse it before anything runs.
DEEP_EXTRA_VARS = '{"a": ' + "[" * 3000 + "]" * 3000 + "}"


#: YAML's "billion laughs": nine levels of nine aliases, 387 million values once expanded, in under 400 bytes. Every
#: walk over it (rdmaforge's depth check, Ansible's variable merging) ran for hours (review round 29b).
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{name}: &{name} [{', '.join(['*' + before] * 9)}]\n" for before, name in zip("abcdefgh", "bcdefghi", strict=True)
)
#: An integer Python refuses to convert (more than 4300 digits): a traceback, exit 70, before round 29b.
HUGE_INTEGER = "9" * 5000
BOMB_SAYS = "expands to more than 1,000,000 values (YAML aliases included"
HUGE_SAYS = "an integer of more than 4300 digits"


def extra_vars_cases() -> list[Case]:
    cases = [
        Case(f"{name}-extra-vars-nested-too-deeply",
             lambda t, name=name: [name, "-i", str(inventory(t)), "--runs-dir", str(t / "runs"), "-e", DEEP_EXTRA_VARS],
             BAD, ('-e {"a": [[[', "...: nested too deeply (more than 100 levels")) # fmt: skip
        for name in ("doctor", "pairwise", "provision", "bench")
    ]
    return cases + [
        Case("doctor-extra-vars-file-alias-bomb",
             lambda t: ["doctor", "-i", str(inventory(t)), "--runs-dir", str(t / "runs"), "-e",
                        "@" + str(write(t / "bomb.yml", ALIAS_BOMB))],
             BAD, ("bomb.yml", BOMB_SAYS)),  # fmt: skip
        Case("doctor-extra-vars-inline-huge-integer",
             lambda t: ["doctor", "-i", str(inventory(t)), "--runs-dir", str(t / "runs"), "-e",
                        '{"a": ' + HUGE_INTEGER + "}"],
             BAD, ('-e {"a": 999', HUGE_SAYS)),  # fmt: skip
        Case("doctor-extra-vars-file-huge-integer",
             lambda t: ["doctor", "-i", str(inventory(t)), "--runs-dir", str(t / "runs"), "-e",
                        "@" + str(write(t / "big.yml", f"a: {HUGE_INTEGER}\n"))],
             BAD, ("big.yml", HUGE_SAYS)),  # fmt: skip
        Case("render-group-vars-alias-bomb",
             lambda t: ["render", "-i", str(inventory(t, group_vars=ALIAS_BOMB)), "-o", str(t / "o")],
             BAD, ("group_vars/all.yml", BOMB_SAYS)),  # fmt: skip
        # YAML reads 0x... without Python's digit limit: the value failed Ansible later, in the interpreter's words
        Case("doctor-extra-vars-file-huge-hexadecimal",
             lambda t: ["doctor", "-i", str(inventory(t)), "--runs-dir", str(t / "runs"), "-e",
                        "@" + str(write(t / "hex.yml", "a: 0x" + "f" * 4000 + "\n"))],
             BAD, ("hex.yml", HUGE_SAYS)),  # fmt: skip
        Case("render-group-vars-huge-hexadecimal",
             lambda t: ["render", "-i", str(inventory(t, group_vars="a: 0x" + "f" * 4000 + "\n")), "-o", str(t / "o")],
             BAD, ("group_vars/all.yml", HUGE_SAYS)),  # fmt: skip
        Case("render-group-vars-huge-integer",
             lambda t: ["render", "-i", str(inventory(t, group_vars=f"a: {HUGE_INTEGER}\n")), "-o", str(t / "o")],
             BAD, ("group_vars/all.yml", HUGE_SAYS)),  # fmt: skip
        Case("render-group-vars-nested-too-deeply",
             lambda t: ["render", "-i", str(inventory(t, group_vars="a: " + "[" * 2000 + "]" * 2000 + "\n")),
                        "-o", str(t / "o")],
             BAD, ("group_vars/all.yml", "nested too deeply (more than 100 levels")),  # fmt: skip
        Case("doctor-group-vars-alias-bomb",
             lambda t: ["doctor", "-i", str(inventory(t, group_vars=ALIAS_BOMB)), "--runs-dir", str(t / "runs")],
             BAD, ("group_vars/all.yml", BOMB_SAYS)),  # fmt: skip
    ]


def symlink_loop(tmp: Path) -> Path:
    """A path that is a link to itself: stat() fails with ELOOP, not ENOENT."""
    loop = tmp / "loop.yml"
    loop.symlink_to(loop.name)
    return loop


def inventory_path_cases() -> list[Case]:
    """An -i that is not there, or a link loop, is a bad command line (64) on every command that runs against
    hosts, named as what it is; and so is a RUN_DIR that is a link loop."""
    commands = {"provision": [], "verify": [], "doctor": [], "bench": [], "pairwise": [], "upgrade-nccl": [],
                "rollback-nccl": [], "remove-node": ["n1"], "reset": ["--yes"]}  # fmt: skip
    cases = []
    for name, more in commands.items():
        cases += [
            Case(f"{name}-inventory-missing",
                 lambda t, name=name, more=more: [name, "-i", str(t / "no.yml"), "--runs-dir", str(t / "runs"), *more],
                 BAD, ("no.yml", "does not exist")),  # fmt: skip
            Case(f"{name}-inventory-link-loop",
                 lambda t, name=name, more=more: [name, "-i", str(symlink_loop(t)), "--runs-dir", str(t / "runs"),
                                                  *more],
                 BAD, ("loop.yml", "cannot be read: Too many levels of symbolic links")),  # fmt: skip
        ]
    cases.append(Case("summary-link-loop", lambda t: ["summary", str(symlink_loop(t))], BAD,
                      ("summary", "loop.yml", "cannot be read: Too many levels of symbolic links")))  # fmt: skip
    cases.append(Case("report-run-dir-link-loop", lambda t: ["report", str(symlink_loop(t))], BAD,
                      ("loop.yml", "cannot be read: Too many levels of symbolic links")))  # fmt: skip
    return cases


def fifo(path: Path) -> Path:
    """A named pipe no one writes to: opening it to read waits for ever (round 29b: report, summary hung on it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def pipe_cases() -> list[Case]:
    def run_json_pipe(t: Path) -> list[str]:
        fifo(t / "run" / "run.json")
        return ["report", str(t / "run")]

    def e2e_pipe(t: Path) -> list[str]:
        target = run_dir(RUN)(t)
        fifo(target / "e2e.json")
        return ["report", str(target)]

    said = "a named pipe or socket, not a file"
    return [
        Case("report-run-json-a-pipe", run_json_pipe, BAD, ("run.json", said)),
        Case("report-e2e-json-a-pipe", e2e_pipe, BAD, ("e2e.json", said)),
        Case("summary-a-pipe", lambda t: ["summary", str(fifo(t / "summary.json"))], BAD, ("summary.json", said)),
        Case("report-baseline-a-pipe", lambda t: [*report(RUN)(t), "--baseline", str(fifo(t / "b.json"))], BAD,
             ("b.json", said)),  # fmt: skip
    ]


def test_a_host_name_longer_than_any_hosts_stops_a_run_before_ansible(tmp_path: Path) -> None:
    """provision and the other commands that run against hosts refuse it from the inventory's YAML (a file or a
    directory) with their other argument checks: Ansible's fact cache, a file named after the host, would stop the run
    on it ("File name too long") before preflight could name it. Called directly: a run must not start here."""
    from rdmaforge.runner import command

    fine = inventory(tmp_path / "fine")
    assert command.check_arguments(argparse.Namespace(inventory=fine, extra_vars=[])) == []
    hosts = inventory(tmp_path, hosts=HOSTS.replace("n1:", "n2:\n        " + "a" * 300 + ":"))
    line = f"{'a' * 40}...{'a' * 10}: the host name is 300 characters long; allowed: at most 253 characters"
    for given in (hosts, hosts.parent):
        with pytest.raises(UserError) as refused:
            command.check_arguments(argparse.Namespace(inventory=given, extra_vars=[]))
        assert str(refused.value).startswith(line), refused.value


@pytest.mark.parametrize(("key", "value"), [("0x7f000001", 2130706433), ("12", 12), ("1.5", 1.5)])
def test_a_host_key_yaml_reads_as_a_number_stops_a_run_before_ansible(tmp_path: Path, key: str, value: object) -> None:
    """YAML reads these keys as numbers: Ansible printed some 25 lines of plugin warnings ("Host pattern 2130706433
    must be a string") and the run ended with exit 1, the name as written lost (fuzz 13b)."""
    from rdmaforge.runner import command

    hosts = inventory(tmp_path, hosts=HOSTS.replace("n1:", f"n1:\n        {key}:"))
    with pytest.raises(UserError) as refused:
        command.check_arguments(argparse.Namespace(inventory=hosts, extra_vars=[]))
    assert f"{hosts}: host {value}: YAML read this host name as a number, not a string, and host names must be " \
        "strings; allowed: the name in quotes" in str(refused.value)  # fmt: skip


def test_a_long_host_name_in_an_ini_inventory_stops_a_run_before_ansible(tmp_path: Path) -> None:
    """The same check for an INI inventory: a file given with -i, or a file without extension in an inventory
    directory (Ansible reads those as INI and skips a directory's .ini files). A range is as long as its longer end
    (node[001:100] with a 250-character stem is 253 characters); a :port is not part of the name; the words of
    [group:vars] and [group:children] sections are no hosts; an executable file is a script, not INI."""
    from rdmaforge.runner import command

    def check(given: Path) -> list[str]:
        try:
            command.check_arguments(argparse.Namespace(inventory=given, extra_vars=[]))
        except UserError as refused:
            return [line for line in str(refused).splitlines() if "the host name" in line]
        return []

    stem = "a" * 60 + "." + "b" * 60 + "." + "c" * 60 + "." + "d" * 60 + "." + "e" * 7  # 251 characters
    fine = (f"# {'z' * 300}\n[gpu]\n{stem}[1:9] ansible_host=198.18.0.2\nnode1:2222\n"
            f"[gpu:vars]\n{'v' * 300}=1\n[all:children]  # the groups\n{'g' * 300}\n")  # fmt: skip
    write(tmp_path / "fine" / "hosts", fine)
    assert check(tmp_path / "fine" / "hosts") == []
    assert check(tmp_path / "fine") == []
    too_long = f"[gpu]\n{stem}[1:100]:2222 ansible_host=198.18.0.2\n"  # 254 characters from node ...100
    line = (f"{'a' * 40}...eee[1:100]: the host name is 254 characters long; allowed: at most 253 characters, in "
            "dot-separated labels of at most 63 (a DNS name)")  # fmt: skip
    for name in ("hosts", "hosts.ini", "cluster.conf"):
        write(tmp_path / name / name, too_long)
        assert check(tmp_path / name / name) == [line], name  # the file given with -i
        assert check(tmp_path / name) == ([] if name == "hosts.ini" else [line]), name  # the directory
    script = tmp_path / "script" / "hosts"
    write(script, too_long)
    script.chmod(0o755)
    assert check(script.parent) == []


CASES = (nccl_cases() + run_json_cases() + baseline_cases() + baseline_file_cases() + summary_cases() + render_cases()
         + extra_vars_cases() + inventory_path_cases() + pipe_cases())  # fmt: skip


# -- huge and binary inputs: each in its own process, with a wall-time and a peak-memory bound ------------------

#: Bounds for one huge or binary input: a reader that reads a 2 GiB sparse file or /dev/zero whole breaks them.
WALL_LIMIT_S = 60.0
RSS_LIMIT_MB = 300
#: A safety net, not the check: a runaway reader fails with MemoryError instead of taking the machine's memory.
AS_LIMIT = 4 << 30
TOO_LARGE = "more than 64 MiB, too large for"


@dataclass(frozen=True)
class Bounded(Case):
    module: str = "rdmaforge.cli"  # rdmaforge.bench.baseline: the role's check of benchmark_baseline


def link(path: Path, target: str | Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def run_json_at(tmp: Path, target: str) -> list[str]:
    link(tmp / "run" / "run.json", target)
    return ["report", str(tmp / "run")]


def e2e_sparse(tmp: Path) -> list[str]:
    target = run_dir(RUN)(tmp)
    sparse_file(target / "e2e.json")
    return ["report", str(target)]


def baseline_at(make: Callable[[Path], Path]) -> Setup:
    return lambda tmp: [*report(RUN)(tmp), "--baseline", str(make(tmp))]


BOUNDED = [
    Bounded("nccl-dev-zero", lambda t: ["nccl-report", "/dev/zero"], BAD, ("/dev/zero", "binary data")),
    Bounded("nccl-sparse-2g", sparse, BAD, ("sparse.log", "binary data")),
    Bounded("nccl-gzip-of-zeros", gz_of_zeros, BAD, ("zeros.gz", "binary data")),
    Bounded("nccl-elf", lambda t: ["nccl-report", "/bin/true"], BAD, ("/bin/true", "binary data")),
    Bounded("nccl-json-over-32mib", nccl('{"args": [' + '"x", ' * (7 << 20)), BAD, ("in.log", "larger than 32 MiB")),
    Bounded("nccl-4mib-line", nccl("y" * (4 << 20)), INCOMPLETE, ("no nccl-tests run found",)),
    Bounded("nccl-json-deep-nesting", nccl("{" + '"args": ' + "[" * 100_000), INCOMPLETE, ()),
    Bounded("report-run.json-dev-zero", lambda t: run_json_at(t, "/dev/zero"), BAD,
            ("run.json", f"{TOO_LARGE} benchmark run.json")),  # fmt: skip: read with a bound, refused by size
    Bounded("report-run.json-sparse-2g", lambda t: run_json_at(t, str(sparse_file(t / "big"))), BAD,
            ("run.json", f"{TOO_LARGE} benchmark run.json")),  # fmt: skip
    Bounded("report-e2e.json-sparse-2g", e2e_sparse, BAD, ("e2e.json", f"{TOO_LARGE} e2e result")),
    Bounded("baseline-file-dev-zero", baseline_at(lambda t: Path("/dev/zero")), BAD,
            ("benchmark baseline /dev/zero: more than 64 MiB, too large for a baseline",)),  # fmt: skip
    Bounded("baseline-file-sparse-2g", baseline_at(lambda t: sparse_file(t / "b.json")), BAD,
            ("b.json: more than 64 MiB, too large for a baseline",)),  # fmt: skip
    Bounded("baseline-file-binary", baseline_at(lambda t: write(t / "b.json", bytes(range(256)) * 64)), BAD,
            ("b.json: not JSON (not UTF-8 text",)),  # fmt: skip
    Bounded("baseline-check-dev-zero", lambda t: ["/dev/zero"], BAD, ("/dev/zero", TOO_LARGE),
            module="rdmaforge.bench.baseline"),  # fmt: skip
    Bounded("baseline-check-sparse-2g", lambda t: [str(sparse_file(t / "b.json"))], BAD, ("b.json", TOO_LARGE),
            module="rdmaforge.bench.baseline"),  # fmt: skip
    Bounded("summary-dev-zero", lambda t: ["summary", "/dev/zero"], BAD, ("/dev/zero", f"{TOO_LARGE} cluster summary")),
    Bounded("summary-sparse-2g", lambda t: ["summary", str(sparse_file(t / "summary.json"))], BAD,
            ("summary.json", TOO_LARGE)),  # fmt: skip
]


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def bounded(module: str, argv: list[str], tmp: Path) -> tuple[int, str, float, float]:
    """Exit code, stdout + stderr, wall seconds and peak RSS in MB of ``python -m module argv`` alone (os.wait4
    gives this child's own rusage, not the maximum over every child the test process ever had)."""
    out_path, err_path = tmp / "child.out", tmp / "child.err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", module, *argv], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, preexec_fn=limit_memory)  # fmt: skip
        timer = threading.Timer(WALL_LIMIT_S, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
    text = out_path.read_text(errors="replace") + err_path.read_text(errors="replace")
    return proc.returncode, text, wall, usage.ru_maxrss / 1024  # Linux reports KiB


@pytest.mark.parametrize("case", BOUNDED, ids=[case.id for case in BOUNDED])
def test_huge_or_binary_input_is_bounded(case: Bounded, tmp_path: Path) -> None:
    argv = case.setup(tmp_path)
    code, text, wall, rss_mb = bounded(case.module, argv, tmp_path)
    assert wall <= WALL_LIMIT_S, f"{case.id}: {wall:.1f} s (killed at {WALL_LIMIT_S:.0f} s)"
    assert "Traceback" not in text and "MemoryError" not in text, text[-2000:]
    assert "internal error" not in text, text[-2000:]
    assert code == case.rc, text[-2000:]
    for needle in case.needles:
        assert needle in text, f"{needle!r} not in {text[-2000:]!r}"
    assert rss_mb <= RSS_LIMIT_MB, f"{case.id}: peak RSS {rss_mb:.0f} MB"


def test_there_are_at_least_80_distinct_bad_inputs() -> None:
    every = CASES + BOUNDED
    assert len({case.id for case in every}) == len(every) >= 80


def schema_keys(spec: stored.Spec, where: str = "") -> set[str]:
    """Every key path a schema names (a map's values as ``*``)."""
    if isinstance(spec, stored.Obj):
        keys: set[str] = set()
        for key, value in spec.fields.items():
            path = f"{where}.{key}" if where else key
            keys |= {path} | schema_keys(value, path)
        return keys
    if isinstance(spec, stored.MapOf):
        return schema_keys(spec.value, f"{where}.*")
    if isinstance(spec, stored.ListOf):
        return schema_keys(spec.item, where)
    return set()


def test_every_key_of_the_baseline_schema_has_a_wrong_type_case() -> None:
    def general(key: str) -> str:
        parts = key.split(".")
        if parts[0] == "nccl" and len(parts) > 1:
            parts[1] = "*"
        if parts[:2] == ["fingerprint", "gpus"] and len(parts) > 2:
            parts[2] = "*"
        if parts[:3] == ["nccl", "*", "busbw_gbs"] and len(parts) > 3:
            parts[3] = "*"
        return ".".join(parts)

    covered = {general(key) for key, _, _ in BASELINE_KEYS}
    assert schema_keys(stored.BASELINE) <= covered, schema_keys(stored.BASELINE) - covered


def call(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors and --help
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = case.setup(tmp_path)
    code, out, err = call(argv, capsys)
    assert "Traceback" not in out + err
    assert "internal error" not in err, err
    assert code == case.rc, err[-2000:]
    for needle in case.needles:
        assert needle in err, f"{needle!r} not in {err[-2000:]!r}"
    if code == BAD:
        assert len(err.strip().splitlines()) <= 8, err  # a message, not a dump


# -- cases that need a real process or a real inventory -------------------------------------------------


def cli(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    code = "import sys; from rdmaforge.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, timeout=120, **kwargs)


def test_stdin_binary_is_named(tmp_path: Path) -> None:
    proc = cli("nccl-report", "-", input=bytes(1 << 16))
    assert proc.returncode == BAD and b"<stdin>: holds binary data" in proc.stderr
    assert b"Traceback" not in proc.stderr


@pytest.mark.parametrize(("copies", "form"), [(20_000, ["--json"]), (500, ["--json"]), (500, [])])
def test_broken_pipe_ends_quietly(tmp_path: Path, copies: int, form: list[str]) -> None:
    """500 copies: an output of a few hundred KB, written in one go at the end, which the kernel cuts short when the
    reader goes away; Python's text stream took the short count for success, and the command exited 0 with most of
    its output lost (review round 29a)."""
    log = write(tmp_path / "big.log", LOG * copies)
    code = "import sys; from rdmaforge.cli import main; sys.exit(main(sys.argv[1:]))"
    producer = subprocess.Popen(
        [sys.executable, "-c", code, "nccl-report", *form, str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert producer.stdout is not None and producer.stderr is not None
    producer.stdout.read(100)
    producer.stdout.close()  # the reader goes away, as `| head -c 100` does
    err = producer.stderr.read()
    assert producer.wait(timeout=120) == ExitCode.ERROR
    assert err == b"", err


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_a_slow_reader_of_a_non_blocking_stdout_gets_the_whole_output(tmp_path: Path, encoding: str) -> None:
    """Review round 31a: write_all met EAGAIN on a non-blocking stdout whose reader is slower and ended in an
    internal error (exit 70); it waits for the pipe instead. Every byte arrives, exit 0. Round 32: an encoding with
    a byte-order mark went around that wait and lost all but 64 KiB, exit 0."""
    import fcntl
    import time

    log = write(tmp_path / "big.log", LOG * 500)
    environment = {**os.environ, "PYTHONIOENCODING": encoding}
    whole = cli("nccl-report", str(log), env=environment).stdout
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETFL, fcntl.fcntl(write_end, fcntl.F_GETFL) | os.O_NONBLOCK)
    code = "import sys; from rdmaforge.cli import main; sys.exit(main(sys.argv[1:]))"
    producer = subprocess.Popen([sys.executable, "-c", code, "nccl-report", str(log)], stdout=write_end,
                                stderr=subprocess.PIPE, env=environment)  # fmt: skip
    os.close(write_end)
    time.sleep(0.5)  # the reader starts late: the pipe is full before it reads
    received = b""
    with os.fdopen(read_end, "rb") as reader:
        while chunk := reader.read(4096):
            received += chunk
            time.sleep(0.001)
    assert producer.wait(timeout=120) == ExitCode.OK, producer.stderr.read() if producer.stderr else ""
    assert received == whole and len(whole) > 1 << 16


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig"])
def test_an_encoding_with_a_byte_order_mark_has_one(tmp_path: Path, encoding: str) -> None:
    """Review round 31a: write_all encoded each block on its own, so an output of more than one block carried a
    second byte-order mark in its middle."""
    log = write(tmp_path / "big.log", LOG * 3000)  # about 1 MB of text: more than one block
    plain = cli("nccl-report", str(log)).stdout.decode("utf-8")
    encoded = cli("nccl-report", str(log), env={**os.environ, "PYTHONIOENCODING": encoding}).stdout
    assert encoded.decode(encoding) == plain  # one mark, at the start (the codec takes it off), and nowhere else
    assert "\ufeff" not in encoded.decode(encoding)


def test_internal_error_saves_the_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rdmaforge.commands import summary as summary_command

    def broken(node: dict[str, Any]) -> list[str]:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(summary_command, "format_node", broken)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    code, out, err = call(summary(SUMMARY)(tmp_path), capsys)
    assert code == ExitCode.INTERNAL and "Traceback" not in err
    assert "internal error (ZeroDivisionError: a bug); traceback saved to" in err
    saved = Path(err.split("traceback saved to ")[1].split(";")[0])
    assert saved.parent == tmp_path and "Traceback" in saved.read_text() and "a bug" in saved.read_text()


def test_render_relative_paths_and_names_that_become_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """-i relative to the caller's directory (not the project's), a host that would escape -o, and strings
    where the role's argument_specs declare lists: all named, nothing written (one ansible-inventory run)."""
    hosts = "all:\n  children:\n    cluster:\n      hosts:\n        ../../escape:\n        n1:\n"
    group_vars = "workload_manifests_command: python train.py\nworkload_manifests_kinds: docker\n"
    inventory(tmp_path, group_vars=group_vars, hosts=hosts)
    monkeypatch.chdir(tmp_path)
    code, out, err = call(["render", "-i", "inv/hosts.yml", "-o", "out"], capsys)
    assert code == BAD and "Traceback" not in err
    assert "../../escape: the host name becomes a directory name under -o" in err
    assert "n1: workload_manifests_command is str \"python train.py\"; allowed: a list" in err
    assert "n1: workload_manifests_kinds is str" in err
    assert "nothing written" in err
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "escape").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory the test cannot write")
def test_render_output_not_writable_as_user(tmp_path: Path) -> None:
    # root writes anywhere: drop to nobody for this one check
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    tmp_path.chmod(0o755)
    proc = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
         "import sys; from rdmaforge.cli import main; sys.exit(main(sys.argv[1:]))",
         "render", "-i", "x,", "-o", str(locked / "out")],
        capture_output=True, text=True, timeout=120, check=False, cwd="/",
    )  # fmt: skip
    if "Permission denied" in proc.stderr and "python" in proc.stderr.lower() and proc.returncode != BAD:
        pytest.skip("the venv is not readable by nobody")
    assert proc.returncode == BAD, proc.stderr
    assert str(locked) in proc.stderr and "Traceback" not in proc.stderr
    assert "not a writable directory" in proc.stderr or "Permission denied" in proc.stderr


# -- output that cannot be written: a full disk, a reader gone before the first byte ---------------------------


def env_with(unbuffered: bool) -> dict[str, str]:
    """The environment with stdout buffered (a plain shell) or unbuffered (PYTHONUNBUFFERED=1, as in CI)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def cli_to(stdout: Any, argv: list[str], unbuffered: bool) -> subprocess.CompletedProcess[bytes]:
    """The CLI in its own process with stdout on ``stdout`` (a file or a descriptor); stderr captured."""
    code = "import sys; from rdmaforge.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], stdout=stdout, stderr=subprocess.PIPE, timeout=120,
                          env=env_with(unbuffered), check=False)  # fmt: skip


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("command", ["summary", "report", "nccl-report", "completion"])
def test_stdout_on_a_full_disk_is_named_not_an_internal_error(
    command: str, unbuffered: bool, tmp_path: Path
) -> None:
    """stdout on a full disk (`> /dev/full`): one line saying the output could not be written, exit 1 (the job was
    not done), never "internal error ... please report it" nor Python's "Exception ignored" at exit (120)."""
    argv = {
        "summary": lambda: summary(SUMMARY)(tmp_path),
        "report": lambda: report(RUN)(tmp_path),
        "nccl-report": lambda: nccl(LOG)(tmp_path),
        "completion": lambda: ["completion", "bash"],
    }[command]()
    with open("/dev/full", "wb") as full:
        proc = cli_to(full, argv, unbuffered)
    err = proc.stderr.decode()
    assert "internal error" not in err and "Exception ignored" not in err and "Traceback" not in err, err
    assert proc.returncode == ExitCode.ERROR, err
    assert err.splitlines() == [f"rdmaforge {command}: cannot write the output: No space left on device"], err


@pytest.mark.parametrize("command", ["summary", "report"])
def test_reader_gone_before_the_first_byte_ends_quietly(command: str, tmp_path: Path) -> None:
    """A short output, buffered (a plain shell), to a pipe whose reader is already gone (`| true`): the write
    happens at exit, and must end as quietly as a long one (exit 1), not with Python's "Exception ignored" (120)."""
    argv = summary(SUMMARY)(tmp_path) if command == "summary" else report(RUN)(tmp_path)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = cli_to(write_end, argv, unbuffered=False)
    finally:
        os.close(write_end)
    assert proc.stderr == b"", proc.stderr
    assert proc.returncode == ExitCode.ERROR


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs: room for a run.json, none for the report's files (a link to /dev/full stood in for a full
    disk before round 29b; the report now replaces such a link rather than write through it)."""
    mount = tmp_path / "small"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True,
                          text=True)  # fmt: skip
    if proc.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here (needs root): {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_report_on_a_full_disk_names_the_file(small_filesystem: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """results.json cannot be written (its disk is full): the message names it (not the temporary name it is
    written under), exit 64 like any other results.json that cannot be written (a directory in its place)."""
    argv = report(RUN)(small_filesystem)
    write(small_filesystem / "filler", b"x" * (60 << 10))
    code, out, err = call(argv, capsys)
    assert "internal error" not in err, err
    assert code == BAD, err
    assert f"{small_filesystem / 'run' / 'results.json'}: No space left on device" in err, err
    assert not list((small_filesystem / "run").glob(".*"))  # the temporary file is gone


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("argv", [["--help"], ["summary", "--help"], ["nccl-report", "--help"], ["--version"]],
                         ids=["help", "summary-help", "nccl-report-help", "version"])  # fmt: skip
def test_help_on_a_full_disk_is_named(argv: list[str], unbuffered: bool) -> None:
    """--help (and --version) on a full disk: the help was not printed, so exit 1 with the same one line as any other
    output, not 0 (argparse drops the write error) nor Python's 120 ("Exception ignored" at exit)."""
    with open("/dev/full", "wb") as full:
        proc = cli_to(full, argv, unbuffered)
    err = proc.stderr.decode()
    prog = "rdmaforge" if argv[0].startswith("-") else f"rdmaforge {argv[0]}"
    assert err.splitlines() == [f"{prog}: cannot write the output: No space left on device"], err
    assert proc.returncode == ExitCode.ERROR, err


@pytest.mark.parametrize("argv", [["--version", "summary", "run"], ["--vers", "extra"], ["--version", "--help"]])
def test_version_with_more_arguments_is_a_usage_error(argv: list[str]) -> None:
    """Review round 29b: argparse printed the version and exited 0 at --version, the rest unread, so a script's
    `rdmaforge --version summary ...` ran nothing and passed."""
    proc = cli(*argv)
    err = proc.stderr.decode()
    assert proc.returncode == ExitCode.BAD_INPUT and proc.stdout == b"", (proc.returncode, err)
    assert f"rdmaforge: error: --version takes no other argument: {' '.join(argv[1:])}" in err, err
    alone = cli("--version")
    assert alone.returncode == ExitCode.OK and alone.stdout.decode().startswith("rdmaforge "), alone


# -- text that the terminal would act on, and a terminal that cannot show every character ------------------------

#: Erase the screen, then reverse the rest of the line: what a forged log, run.json or summary.json could carry.
HOSTILE = "evil\x1b[2J\u202ecod.exe\r\x00\x07\x9b"
#: How each of HOSTILE's characters that a terminal acts on must be shown.
SHOWN = ("\\x1b[2J", "\\u202e", "\\x0d", "\\x00", "\\x07", "\\x9b")
RAW = ("\x1b", "\u202e", "\r", "\x00", "\x07", "\x9b")


def hostile_log(tmp: Path) -> list[str]:
    info = f"{HOSTILE}:1001:1001 [0] NCCL INFO Using network {HOSTILE}\n"
    return nccl(LOG.replace("#  Rank  1", info + "#  Rank  1"))(tmp)


HOSTILE_CASES = {
    # A host name with control characters is refused by summary.json's schema (tests/unit/test_cluster_summary.py);
    # free text such as the OS name and the previous-summary problem is printed, escaped.
    "summary": lambda t: summary({"nodes": [with_key(NODE, "os", HOSTILE)], "previous_summary_problem": HOSTILE})(t),
    "report": lambda t: report(with_key(RUN, "nccl.reason", HOSTILE))(t),
    "nccl-report": hostile_log,
    # Also what goes to stderr: a file name given on the command line is named in the message.
    "summary-missing-file": lambda t: ["summary", str(t / f"{HOSTILE.replace(chr(0), '')}.json")],  # argv has no NUL
}


@pytest.mark.parametrize("name", list(HOSTILE_CASES))
def test_terminal_control_characters_are_shown_escaped(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A host name, a reason or an NCCL INFO line holding an escape sequence, a right-to-left override, a carriage
    return or NUL is printed with those characters escaped: read from a file, it must not rewrite the terminal."""
    code, out, err = call(HOSTILE_CASES[name](tmp_path), capsys)
    assert "internal error" not in err, err
    text = out + err
    for raw in RAW:
        assert raw not in text, (raw, text[-2000:])
    shown = text.count("\\x1b[2J")
    # All of them where the text reaches the output whole; a log's line ends at its \r, a path has no NUL.
    expected = SHOWN if name in ("summary", "report") else SHOWN[:2]
    assert shown >= 1 and all(escape in text for escape in expected), text[-2000:]
    assert "\n" in text  # the program's own newlines are kept


@pytest.mark.parametrize("argv", [["report", "--json"], ["nccl-report", "--json"]], ids=["report", "nccl-report"])
def test_json_output_escapes_control_characters(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json prints the same text as JSON escapes (json.dumps), which the text filter leaves as they are."""
    name = argv[0]
    built = HOSTILE_CASES[name](tmp_path)
    code, out, err = call([built[0], "--json", *built[1:]], capsys)
    assert "internal error" not in err, err
    assert not any(raw in out for raw in RAW), out[-2000:]
    assert "\\u001b[2J" in out and "\\u202e" in out
    json.loads(out)  # still valid JSON


@pytest.mark.parametrize(
    "env", [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}],
    ids=["PYTHONIOENCODING=ascii", "C-locale-without-UTF-8"],
)  # fmt: skip
@pytest.mark.parametrize("command", ["summary", "nccl-report", "report"])
def test_output_that_the_terminal_cannot_encode_is_degraded_not_an_internal_error(
    command: str, env: dict[str, str], tmp_path: Path
) -> None:
    """A non-ASCII host name (or log text) on an ASCII-only stdout: shown as a backslash escape, exit as usual."""
    host = "n\u0153ud-01"
    argv = {
        "summary": lambda: summary({"nodes": [with_key(NODE, "host", host)]})(tmp_path),
        "nccl-report": lambda: nccl(LOG.replace("#  Rank  1", f"{host}:1:1 [0] NCCL INFO Using network {host}\n"
                                                              "#  Rank  1"))(tmp_path),  # fmt: skip
        "report": lambda: report(with_key(RUN, "nccl.reason", f"no GPU on {host}"))(tmp_path),
    }[command]()
    proc = cli(*argv, env={**env_with(unbuffered=False), **env})
    out, err = proc.stdout.decode("ascii"), proc.stderr.decode("ascii")
    assert "internal error" not in err and "Traceback" not in err, err
    assert proc.returncode == (INCOMPLETE if command == "report" else 0), err  # RUN measures nothing
    assert "n\\u0153ud-01" in out + err, out


@pytest.mark.parametrize("name", ["results.json", "results.csv", "summary.md"])
def test_report_replaces_a_link_in_the_run_directory_and_never_writes_through_it(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run directory from elsewhere (a node, a CI artifact) holding ``results.csv -> ~/.ssh/authorized_keys``: the
    report wrote its output into that file (review round 29b). It replaces the link with its own file now."""
    target = run_dir(RUN)(tmp_path)
    victim = write(tmp_path / "victim.txt", "the user's own file\n")
    link(target / name, victim)
    code, _, err = call(["report", str(target)], capsys)
    assert code in (ExitCode.OK, ExitCode.BELOW_THRESHOLD, INCOMPLETE), err
    assert victim.read_text() == "the user's own file\n"
    assert not (target / name).is_symlink() and (target / name).stat().st_size > 0
    assert not list(target.glob(".*"))  # no temporary file left beside it



def test_a_report_file_the_user_restricted_keeps_its_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The report writes each file under a temporary name and renames it into place: an existing results.json of
    mode 0640 became 0644 (review round 30). Its mode is kept."""
    target = run_dir(RUN)(tmp_path)
    write(target / "results.json", "{}\n").chmod(0o640)
    code, _, err = call(["report", str(target)], capsys)
    assert code in (ExitCode.OK, ExitCode.BELOW_THRESHOLD, INCOMPLETE), err
    assert (target / "results.json").stat().st_mode & 0o777 == 0o640
    assert json.loads((target / "results.json").read_text())["verdict"]
