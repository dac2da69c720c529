"""Turn one benchmark run directory into results.json, results.csv, summary.md and plots, with a verdict.

A run directory (written by the `benchmark` role, or by hand) holds:
  run.json                 what was asked: fabric, nodes, expected line rate, threshold, baseline, statuses
  nccl-<collective>.log    raw nccl-tests output (NCCL_DEBUG=INFO included) for each collective that ran
  e2e.json                 the e2e DDP benchmark result (1-GPU, 1-node and N-node runs), when it ran
  e2e-*.log                the training runs' output (NCCL_DEBUG=INFO), named in e2e.json's ``logs``
`rdmaforge report RUN_DIR` re-renders everything from these files.

results.json carries ``"verdict"`` (pass, fail or incomplete), ``"reasons"`` and ``"components"``: one entry per
nccl-tests collective, the transport check, the e2e benchmark (linearity across nodes and within one node), the
training accelerators the inventory enables (ACSpeed, the NCCL net plugin: rdmaforge.bench.accelerators) and
each baseline comparison, with its status, whether it is required, its reason, threshold and value
(rdmaforge.bench.verdict).
"""

from __future__ import annotations

import csv
import json
import math
import sys
import textwrap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from rdmaforge import fabrics, output_files, stored
from rdmaforge.bench import accelerators, baseline
from rdmaforge.bench.e2e import count, percentile
from rdmaforge.bench.line_rate import CEILING_FACTOR, expected_line_rate, rate_ceiling
from rdmaforge.bench.verdict import (
    Component,
    Status,
    describe,
    mark_required,
    optional_float,
    overall,
    required_groups,
)
from rdmaforge.errors import install_hint
from rdmaforge.hostnames import short_name
from rdmaforge.nccl_tests import Run, launch_problem, parse_file, verdict
from rdmaforge.nccl_tests.source import InputError
from rdmaforge.nccl_tests.transport import (
    OneNodeRuns,
    RunsWithoutInfoLines,
    Transport,
    TransportVerdict,
    combined_verdict,
    merge_transports,
    parse_transport,
    within_one_node,
)
from rdmaforge.plain_data import whole_number
from rdmaforge.stored import PERCENTILES, drawable, undrawn_note
from rdmaforge.terminal import escaped
from rdmaforge.text import LARGE, distinct, figure, fixed, listed, named_first, percent

#: Per-node line rate of each fabric profile, Gbit/s (rdmaforge.fabrics; eRDMA on ebmgn7ex 2 x 80, IB 200, VPC 25).
DEFAULT_LINE_RATE_GBPS = {name: float(rate) for name, rate in fabrics.line_rates().items()}


def line_rate(run: dict[str, Any]) -> dict[str, Any]:
    """The per-node line rate the run is judged by (rdmaforge.bench.line_rate): ``{gbps, source, detail}``."""
    fallback = DEFAULT_LINE_RATE_GBPS["tcp"]
    fabric = str(run.get("fabric", "tcp"))
    configured = float(run.get("line_rate_gbps") or DEFAULT_LINE_RATE_GBPS.get(fabric, fallback))
    nodes = [str(node) for node in run.get("nodes") or []]
    return expected_line_rate(fabric, configured, run.get("port_line_rates"), nodes)


def expected_busbw_gbs(run: dict[str, Any]) -> float:
    return float(line_rate(run)["gbps"]) / 8.0


#: How many nodes of unknown GPU count gpu_words names before it only counts the rest.
NAMED_UNKNOWN = 5


def gpu_words(run: dict[str, Any]) -> str:
    """The run's GPUs in words: "16 GPUs on 2 nodes"; a node whose count is null or absent is named as unknown,
    never counted as 0 ("8 GPUs on 1 of 2 nodes, the GPU count of n1 unknown")."""
    gpus = run.get("gpus") if isinstance(run.get("gpus"), dict) else {}
    nodes = run.get("nodes") or []
    if not gpus:
        return _many(len(nodes), "node")
    total = _known_gpus(run)
    unknown = _lacking_gpu_counts(run)
    count = len(nodes) or len(gpus)
    if not unknown:
        return f"{_many(total, 'GPU')} on {_many(count, 'node')}" if total else f"CPU only, {_many(count, 'node')}"
    if len(unknown) == count:
        return f"{_many(count, 'node')}, {'its GPU count' if count == 1 else 'their GPU counts'} unknown"
    named = named_first(unknown, NAMED_UNKNOWN)
    plural = "s" if len(unknown) > 1 else ""
    known = _many(total, "GPU") if total else "no GPU"
    return f"{known} on {count - len(unknown)} of {count} nodes, the GPU count{plural} of {named} unknown"


def _many(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def other_job(run: Mapping[str, Any], ranks: int | None) -> str | None:
    """Why a log's rank count shows it is not the job the run asked for (one rank per GPU of every node), or None.

    A log of fewer ranks measured part of the cluster (or another job), so its bus bandwidth must not pass for it;
    so does a log of GPU ranks in a run whose nodes have none. None when the run records no GPUs (no_gpu_record
    leaves the log not judged then), or lacks a node's count (unknown_gpu_counts says so first).
    """
    gpus = run.get("gpus")
    if ranks is None or not isinstance(gpus, Mapping) or not gpus:
        return None
    total = _known_gpus(run)
    if ranks == total:
        return None
    least = "at least " if _lacking_gpu_counts(run) else ""
    return (f"it is not this run's job: the log has {ranks} ranks, the run asked for {least}{total} "
            f"({gpu_words(dict(run))})")  # fmt: skip


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _known_gpus(run: Mapping[str, Any]) -> int:
    """The known GPU counts of the run's nodes, summed (a key of a node outside ``nodes`` counts for nothing)."""
    gpus = run.get("gpus")
    if not isinstance(gpus, Mapping):
        return 0
    nodes = [str(n) for n in run.get("nodes") or []]
    return sum(n for host, n in gpus.items() if _is_count(n) and (not nodes or str(host) in nodes))


def _lacking_gpu_counts(run: Mapping[str, Any]) -> list[str]:
    """The nodes of a run whose GPUs mapping has no count for them (null or absent)."""
    gpus = run.get("gpus")
    if not isinstance(gpus, Mapping):
        return []
    nodes = [str(n) for n in run.get("nodes") or []] or [str(n) for n in gpus]
    return [n for n in nodes if not _is_count(gpus.get(n))]


def unknown_gpu_counts(run: Mapping[str, Any], ranks: int | None) -> str | None:
    """Why a log's rank count cannot be checked against the run: some node's GPU count is null or absent (the role
    records null for a node without its preflight fact: unknown, never 0). Summing the known counts would claim the
    run asked for fewer ranks than it did, and fail a log that may be its whole job. None when every count is known,
    or when the run records no GPUs at all (no_gpu_record), or when the known counts alone already exceed the log's
    ranks (other_job fails it: the run asked for at least that many)."""
    gpus = run.get("gpus")
    if ranks is None or not isinstance(gpus, Mapping) or not gpus:
        return None
    lacking = _lacking_gpu_counts(run)
    if not lacking or _known_gpus(run) > ranks:
        return None
    return (f"run.json records no GPU count for {listed(lacking)}: whether the log's {ranks} ranks are this run's "
            "whole job cannot be told")  # fmt: skip


def no_gpu_record(run: Mapping[str, Any], ranks: int) -> str | None:
    """Why a log's rank count cannot be checked at all: run.json has no ``gpus`` (or an empty one). The benchmark role
    always records it (roles/benchmark/tasks/report.yml): its absence means an older run.json, or one written by
    hand, whose log may be another job's; like a run without its nodes' host names (ranks_elsewhere), not judged."""
    gpus = run.get("gpus")
    if isinstance(gpus, Mapping) and gpus:
        return None
    return (f"run.json records no GPUs per node (its `gpus` is missing or empty: an older run.json, or one written by "
            f"hand): whether the log's {ranks} ranks are this run's whole job cannot be told")  # fmt: skip


def ranks_elsewhere(run: Mapping[str, Any], rank_hosts: Mapping[int, str]) -> tuple[Status, str] | None:
    """Whether the log's ranks ran on the run's nodes: None when they did, else (fail or not_judged, why).

    The hosts are those of the ``#  Rank`` lines; run.json's ``hostnames`` (node -> host name, recorded by the role
    from the nodes' facts) say which host each node is. A job on other nodes (mpirun filling a hostfile that lists
    nodes this run left out) or on fewer of them (all ranks on one node: NVLink, not the fabric) measured something
    else, and fails. Without ``hostnames`` (a run recorded before they were kept, or by hand) the hosts are compared
    with the node names; when they differ, which nodes ran cannot be told: not judged.
    """
    nodes = [str(n) for n in run.get("nodes") or []]
    ran = sorted({short_name(h) for h in rank_hosts.values()})
    if not ran:
        return "not_judged", "its '#  Rank' lines name no host: which nodes ran the job cannot be told"
    if not nodes:
        return "not_judged", f"run.json names no nodes: the ranks ran on {listed(ran)}, against nothing to compare"
    twice = sorted({n for n in nodes if nodes.count(n) > 1})
    if twice:
        return "not_judged", (f"run.json lists node {listed(twice)} more than once ({len(nodes)} entries): how many "
                              "nodes the run had cannot be told")  # fmt: skip
    recorded = run.get("hostnames")
    hosts = {n: short_name(str(recorded[n])) for n in nodes if isinstance(recorded, Mapping) and recorded.get(n)}
    if len(hosts) < len(nodes):  # not recorded: compared with the node names
        named = {short_name(n) for n in nodes}
        if len(named) == len(nodes) and named == set(ran):
            return None  # a run directory that names its nodes by host name (each node by its own)
        if len(ran) > len(nodes):
            return "fail", (f"the ranks ran on {len(ran)} hosts ({listed(ran)}), the run has {len(nodes)} "
                            f"node(s) ({listed(nodes)}): ranks ran on hosts outside the run")  # fmt: skip
        if len(ran) < len(nodes):
            return "fail", (f"the ranks ran on {len(ran)} host(s) ({listed(ran)}), the run has {len(nodes)} nodes "
                            f"({listed(nodes)}): the job did not span the run's nodes")  # fmt: skip
        return "not_judged", (f"run.json records no host names of its nodes: the ranks ran on {listed(ran)}, not "
                              f"named like the run's nodes ({listed(nodes)}); whether they are the same nodes "
                              "cannot be told")  # fmt: skip
    shared = sorted({h for h in hosts.values() if list(hosts.values()).count(h) > 1})
    if shared:
        return "not_judged", (f"nodes {listed(n for n in nodes if hosts[n] in shared)} have the same host name "
                              f"({listed(shared)}): which of them ran the ranks cannot be told")  # fmt: skip
    expected = {hosts[n]: n for n in nodes}
    if set(ran) == set(expected):
        return None
    others = [h for h in ran if h not in expected]
    idle = [f"{expected[h]} ({h})" for h in sorted(expected) if h not in ran]
    parts = ([f"ranks on {listed(others)}, not nodes of this run"] if others else []) + (
        [f"no rank on {listed(idle)}"] if idle else [])  # fmt: skip
    return "fail", f"it is not this run's nodes' job: {'; '.join(parts)}"


def significant(value: float) -> float:
    """``value`` to 3 decimals, or to 3 significant digits below 0.001 (a tiny threshold is never shown as 0)."""
    return round(value, 3) if abs(value) >= 0.001 or value == 0 else float(f"{value:.3g}")


def runs_of(runs: Sequence[Run], name: str) -> list[Run]:
    """The runs of collective ``name`` in its log, the unnamed ones included: nccl-tests before 2.13 does not print
    the name, which then comes only from a command line echoed before the run. A rerun without one was left out
    when an earlier run had it, and a log whose last run failed passed on the first (review round 33b)."""
    return [r for r in runs if r.collective in (name, None)]


def run_of(runs: Sequence[Run], name: str, log: str) -> tuple[Run | None, str]:
    """The last run of collective ``name`` in a log (or of an unnamed one: nccl-tests before 2.13 does not print
    it), and why there is none: another collective's output is not this one's result."""
    mine = runs_of(runs, name)
    if mine:
        return mine[-1], ""
    if not runs:
        return None, f"no nccl-tests result in {log} (crashed before the table)"
    others = ", ".join(dict.fromkeys(str(r.collective) for r in runs))
    return None, f"{log} holds no {name} run (it holds {others}): it is another collective's output"


def earlier_runs(runs: Sequence[Run], name: str, log: str) -> tuple[str | None, str | None]:
    """What the runs of ``name`` before the last one (the one judged) say: why one failed, and a note on those that
    ended incomplete; (None, None) when there is no earlier run or every one was ok.

    A log may hold several runs of one collective (a rerun appended to the same file). A measured failure (#wrong
    > 0, a NCCL error) is never hidden by a later clean run: it fails the collective. An incomplete earlier run (a
    start that crashed before its table, then retried) measured nothing wrong: it is only named.
    """
    mine = runs_of(runs, name)
    earlier = list(enumerate(mine[:-1], 1))
    where = f"of {len(mine)} {name} runs in {log}"
    failed = [f"run {i} {where} failed: {r.status_reason}" for i, r in earlier if r.status == "failed"]
    partial = [str(i) for i, r in earlier if r.status == "incomplete"]
    if not partial:
        return ("; ".join(failed) or None), None
    plural = "s" if len(partial) > 1 else ""
    note = f"run{plural} {', '.join(partial)} {where} ended incomplete (not judged; the last run is)"
    return ("; ".join(failed) or None), note


def exit_problem(run: Mapping[str, Any], name: str) -> str | None:
    """Why the launch of ``name`` did not end well (run.json's nccl_exit_codes): a table printed in full and then a
    rank that failed, an mpirun that reported an error, or the benchmark's timeout. None when it exited 0 or when
    the run recorded no exit codes (runs before they were recorded)."""
    return launch_problem((run.get("nccl_exit_codes") or {}).get(name), "benchmark_timeout")


def exit_unrecorded(run: Mapping[str, Any], name: str) -> tuple[bool, str] | None:
    """Why the launch of ``name`` is not known to have ended well, or None when run.json records its exit status:
    (True, why) where run.json records exit codes but none for it (not judged), (False, note) where it records none at
    all (a run.json from before they were recorded, or written by hand: judged, and the reason says so). A log that
    ends well says nothing of a rank that failed after it (review round 33b)."""
    codes = run.get("nccl_exit_codes")
    if codes is None:
        return False, "; its launch's exit status is not recorded (run.json has no nccl_exit_codes)"
    if isinstance(codes, Mapping) and codes.get(name) is None:
        return True, f"run ok but run.json records no exit status of its launch (nccl_exit_codes has none for {name})"
    return None


def fabric_untested(
    run: Mapping[str, Any], ranks: int | None, rank_hosts: Mapping[int, str] | None = None
) -> str | None:
    """Why a clean nccl-tests run says nothing about the fabric, or None when its traffic crossed it.

    The line rate is the fabric's: ranks that all live on one node talk over NVLink, PCIe or shared memory, so
    their bus bandwidth would pass (8 GPUs of one node reach hundreds of GB/s) or fail (one rank moves no data:
    busbw 0, measured on an H100) without a byte on the network. A log whose Rank lines name more than one host did
    not stay on one node, whatever run.json's ``nodes`` says: ranks_elsewhere judges it (a host outside the run).
    """
    if ranks == 1:
        return "one rank: a collective of one moves no data over any link (busbw 0 by definition)"
    nodes = run.get("nodes")
    if len({short_name(h) for h in (rank_hosts or {}).values()}) > 1:
        return None
    if isinstance(nodes, list) and len(nodes) == 1:
        return (f"all {ranks or 'the'} ranks on one node ({nodes[0]}): the traffic stayed inside it, the "
                f"fabric's line rate does not apply; run on two nodes or more to measure the fabric")  # fmt: skip
    return None


def implausible_busbw(last: Run, expected: float, per_rank: bool = False) -> str | None:
    """Why the table's highest bus bandwidth (either half, any size) is no measurement of the fabric: it is above
    the ceiling the run's own line rate implies (rdmaforge.bench.line_rate.rate_ceiling). Such a row fails its
    run, as a row of nan or inf bandwidth does: a pass against the line rate would be a pass of a corrupt number.
    None when every busbw is below the ceiling. Only for a run whose traffic crossed the fabric (fabric_untested
    leaves one node's NVLink bandwidth not judged first). ``per_rank``: ``expected`` is a rank's share of the node's
    line rate (PER_RANK_COLLECTIVES)."""
    ceiling = rate_ceiling(expected)
    highest = max(((half.busbw, row.size, name) for row in last.rows
                   for name, half in (("out-of-place", row.out_of_place), ("in-place", row.in_place))
                   if half is not None), default=None)  # fmt: skip
    if highest is None or highest[0] <= ceiling:
        return None
    busbw, size, name = highest
    # The line rate's source is in the report's header (results.json: nccl.line_rate); the reason stays one line.
    rate = "the line rate per rank" if per_rank else "line rate"
    return (f"busbw {busbw:g} GB/s ({name}, {size} B) is above the fabric's ceiling {ceiling:g} GB/s "
            f"({CEILING_FACTOR:g} x {rate}): an implausible measurement, or benchmark_line_rate_gbps too low")


#: alltoall's nccl-tests busbw is one rank's traffic, not its node's (busbw = algbw x (n-1)/n): every rank sends its
#: buffer to the others at once, so the ranks of a node share its line rate. It is judged against that share, not
#: the sum of the node's rails that all_reduce, all_gather and reduce_scatter (ring or tree over every rail) are
#: judged against (review round 19a: corpus file 02's healthy alltoall, one full 400 Gb/s rail per GPU, was judged
#: 13% of its node's eight rails).
PER_RANK_COLLECTIVES = frozenset({"alltoall"})
#: sendrecv's busbw is one pair's (busbw = algbw), the slowest pair the one across two nodes. With one rank per node
#: that pair is all its nodes carry, and the node's line rate applies; with more, it is one of a node's ranks, on
#: one rail of a rate the run does not record (the node's rate over its ranks is not that): no line rate applies,
#: and `rdmaforge pairwise` judges each rail against its own (review round 20).
ONE_PAIR_COLLECTIVES = frozenset({"sendrecv"})


def ranks_per_node(last: Run) -> int | None:
    """How many ranks each node ran (the log's Rank lines), or None where that is unknown or not one count."""
    per_host: dict[str, int] = {}
    for host in last.rank_hosts.values():
        per_host[short_name(host)] = per_host.get(short_name(host), 0) + 1
    counts = set(per_host.values())
    return counts.pop() if len(counts) == 1 and len(per_host) > 0 else None


def expected_for(name: str, last: Run | None, expected: float) -> tuple[float | None, str]:
    """The rate ``name``'s busbw is judged against and the words that say so: the node's line rate, or for a
    PER_RANK_COLLECTIVES its share per rank. None, and why, where no rate applies (ONE_PAIR_COLLECTIVES) or the
    ranks per node are unknown."""
    per_node = ranks_per_node(last) if last is not None else None
    if name in ONE_PAIR_COLLECTIVES and per_node != 1:
        return None, (f"run ok but {name}'s busbw is one pair's, with {per_node or 'an unknown count of'} ranks per "
                      "node: one rail carried it, whose rate the run does not record, so no line rate applies "
                      "(rdmaforge pairwise judges each rail against its own)")  # fmt: skip
    if name not in PER_RANK_COLLECTIVES or per_node == 1:
        return expected, f"the expected {figure(expected)} GB/s line rate"
    if per_node is None:
        return None, (f"run ok but {name}'s busbw is one rank's, and the log's Rank lines do not give one count of "
                      "ranks per node to share the node's line rate by")  # fmt: skip
    nodes = len({short_name(host) for host in last.rank_hosts.values()}) if last is not None else 0
    if nodes < 2:
        return expected / per_node, (f"the expected {figure(expected / per_node)} GB/s line rate per rank ({name}'s "
                                     f"busbw is one rank's: the node's {figure(expected)} GB/s over its {per_node} "
                                     "ranks)")  # fmt: skip
    # Of each rank's buffer only the part for the other nodes' ranks, (N-1)/N, crosses the fabric: a node's ranks
    # reach busbw = L/g x N/(N-1) x (n-1)/n at line rate L (g ranks per node, n ranks). L/g alone passed a 2-node,
    # 8-GPU run at 43% of what its fabric carries (review round 23a); at 10 nodes the factor is 1.10.
    ranks = nodes * per_node
    here = expected / per_node * nodes / (nodes - 1) * (ranks - 1) / ranks
    return here, (f"the expected {figure(here)} GB/s per rank ({name}'s busbw is one rank's: the node's "
                  f"{figure(expected)} GB/s over its {per_node} ranks, x {nodes}/{nodes - 1} for the traffic that "
                  f"stays in the node, x {ranks - 1}/{ranks} as busbw counts it)")


def gpu_rank_nodes(run: Mapping[str, Any], hosts: Iterable[str]) -> set[str]:
    """The run's nodes among ``hosts`` (those an nccl-tests log's Rank lines name: each rank is a CUDA device), by
    run.json's ``hostnames``, else by node name. A host of no node is left out here: only the run's own nodes can
    be made to count as GPU nodes (ranks_elsewhere judges, for each log's last run, ranks on hosts outside the run)."""
    nodes = [str(n) for n in run.get("nodes") or []]
    recorded = run.get("hostnames")
    named = recorded if isinstance(recorded, Mapping) else {}
    by_host = {short_name(str(named.get(n) or n)): n for n in nodes}
    return {by_host[short_name(h)] for h in hosts if short_name(h) in by_host}


def nccl_results(run_dir: Path, run: dict[str, Any], components: list[Component],
                 rank_hosts: set[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """The nccl-tests components and results; ``rank_hosts``, when given, gets every host the logs' Rank lines name
    (each a node that ran a GPU rank: gpu_rank_nodes, for required_groups)."""
    nccl = run.get("nccl", {})
    if nccl.get("status") != "ran":
        reason = str(nccl.get("reason") or "not requested")
        components.append(Component("nccl-tests", "nccl-tests", "skipped", reason))
        components.append(Component("transport", "transport", "skipped", "nccl-tests did not run"))
        return {"status": nccl.get("status", "skipped"), "reason": nccl.get("reason"), "collectives": {}}
    rate = line_rate(run)
    expected = float(rate["gbps"]) / 8.0
    threshold = optional_float(run.get("min_efficiency", 0.8))
    on = f"{run.get('fabric', 'tcp')} fabric, {gpu_words(run)}"
    collectives: dict[str, Any] = {}
    transports: dict[str, Transport | None] = {}  # each collective's own evidence; None: its log is missing
    placement: dict[str, OneNodeRuns] = {}  # where each log's runs ran their ranks (one node, unnamed hosts)
    unproven: dict[str, str] = {}  # each log whose judged run has no INFO lines of its own: why it proves nothing
    for name in nccl.get("collectives", []):
        log = run_dir / f"nccl-{name}.log"
        # Only a regular file is read: a pipe left in the run directory would block the report, a link to a device
        # (/dev/urandom) would never end.
        report, unreadable = None, ""
        if log.is_file():
            try:
                report = parse_file(log, source=log.name)
            except (InputError, OSError) as exc:  # this collective's output cannot be judged; the others still are
                unreadable = escaped(str(exc), one_line=True)
                unproven[name] = f"cannot check the transport: {log.name} cannot be read"
        runs = report.runs if report else []
        if unreadable:
            report_transport: Transport | None = Transport()  # no evidence; unproven[name] says why
        else:
            report_transport = report.transport if report else None
        if rank_hosts is not None:
            rank_hosts.update(h for one in runs for h in one.rank_hosts.values() if h)
        transports[name] = report_transport
        fold = OneNodeRuns()
        for one in runs_of(runs, name):
            fold.add(one.rank_hosts)
        placement[name] = fold
        entry: dict[str, Any] = {"status": "missing", "avg_busbw": None, "peak_busbw": None, "efficiency": None}
        component = Component(f"nccl-tests {name}", "nccl-tests", "fail", "", unit="GB/s", on=on)
        last, missing = run_of(runs, name, log.name)
        silent = RunsWithoutInfoLines()
        for index, one in enumerate(runs):
            silent.add(str(index), one.has_table or one is last, one.info_lines)
        if last is not None and any(runs[int(index)] is last for index in silent.borrowed):
            # The log's INFO lines are an earlier run's, not the judged one's.
            unproven[name] = (f"cannot check the transport: the last {name} run in {log.name} printed no NCCL INFO "
                              "lines of its own (those in the log are an earlier run's)")  # fmt: skip
        if unreadable:
            missing = f"{unreadable}: {name}'s output in the run directory cannot be read"
        elif report is None and log.exists():
            missing = (f"{log.name} is no regular file (a pipe, a device or a directory): not read, so {name}'s "
                       "output is not in the run directory")  # fmt: skip
        elif report is None:  # no log at all is no crash before the table: the run's result is gone
            missing = (f"{log.name} is not in the run directory (missing, or a link to nothing): run.json says "
                       f"{name} ran, and its output is gone")  # fmt: skip
        if last is None:
            component.reason = missing
        else:
            peak = max((r.out_of_place.busbw for r in last.rows), default=None)
            here, against = expected_for(name, last, expected)
            entry = {"status": last.status, "avg_busbw": last.avg_busbw, "peak_busbw": peak,
                     "efficiency": (peak / here) if peak is not None and here else None,
                     "errors": list(last.errors), "rows": [r.to_dict() for r in last.rows]}  # fmt: skip
            if here is not None and name in PER_RANK_COLLECTIVES:
                entry["expected_busbw_gbs"] = here
            component.value = peak
            earlier_failure, earlier_note = earlier_runs(runs, name, log.name)
            if last.status != "ok":
                component.reason = f"run {last.status}: {last.status_reason}"
                if earlier_failure is not None:
                    component.reason += f"; {earlier_failure}"
            elif earlier_failure is not None:  # a later clean run does not undo a measured failure
                component.reason = earlier_failure
            elif (exited := exit_problem(run, name)) is not None:
                component.reason = f"run ok but {exited}"
            elif (unrecorded_exit := exit_unrecorded(run, name)) is not None and unrecorded_exit[0]:
                component.status = "not_judged"
                component.reason = entry["not_comparable"] = unrecorded_exit[1]
            elif last.ranks is None:
                component.status = "not_judged"
                component.reason = ("run ok but the log lists no '#  Rank' lines: how many ranks ran, and on which "
                                    "nodes, cannot be told")  # fmt: skip
                entry["not_comparable"] = component.reason
            elif (unknown := unknown_gpu_counts(run, last.ranks)) is not None:
                component.status = "not_judged"
                component.reason = entry["not_comparable"] = f"run ok but {unknown}"
            elif (other := other_job(run, last.ranks)) is not None:
                component.reason = f"run ok but {other}"
            elif (crossing := fabric_untested(run, last.ranks, last.rank_hosts)) is not None:
                component.status = "not_judged"
                component.reason = entry["not_comparable"] = crossing
            elif (elsewhere := ranks_elsewhere(run, last.rank_hosts)) is not None:
                component.status, component.reason = elsewhere[0], f"run ok but {elsewhere[1]}"
                entry["not_comparable"] = component.reason
            elif (unrecorded := no_gpu_record(run, last.ranks)) is not None:
                component.status = "not_judged"
                component.reason = entry["not_comparable"] = f"run ok but {unrecorded}"
            elif last.split_groups > 1:
                # NCCL_TESTS_SPLIT_MASK: each group ran its own communicator and the table is one group's bandwidth
                # (a node's NVLink, one rail), not the fabric's across the run's nodes (review round 41c).
                component.status = "not_judged"
                component.reason = entry["not_comparable"] = (
                    f"run ok but its ranks form {last.split_groups} NCCL_TESTS_SPLIT groups (the Group the log gives "
                    "each rank): each ran its own communicator, so the busbw is one group's, not the fabric's across "
                    "the run's nodes (run without NCCL_TESTS_SPLIT_MASK to measure it)")  # fmt: skip
            elif here is None:
                component.status, component.reason = "not_judged", against
            elif (implausible := implausible_busbw(last, here, name in PER_RANK_COLLECTIVES)) is not None:
                component.reason = implausible
            elif threshold is None:
                component.status = "not_judged"
                component.reason = "no threshold: benchmark_min_efficiency is empty"
            elif peak is None:
                component.reason = "the table has no bus bandwidth"
            else:
                component.threshold = significant(threshold * here)
                component.status = "pass" if peak >= threshold * here else "fail"
                relation = "reaches" if component.status == "pass" else "is below"
                exit_note = unrecorded_exit[1] if unrecorded_exit is not None else ""
                component.reason = (f"peak busbw {peak} GB/s {relation} {percent(threshold)} of {against}"
                                    f"{unvalidated(last)}{exit_note}")  # fmt: skip
            if earlier_note is not None and earlier_failure is None:
                component.reason += f"; {earlier_note}"
        components.append(component)
        collectives[name] = entry
    fabric = str(run.get("fabric", "tcp"))
    transport_dict: dict[str, Any] = {}
    present = [t for t in transports.values() if t is not None]
    if not present:
        components.append(Component("transport", "transport", "skipped", "no nccl-tests log to read it from"))
    else:
        transport = merge_transports(present)  # the evidence of all logs, shown; each log is judged on its own
        judged = {name: collective_transport(name, own, fabric, placement.get(name), unproven.get(name))
                  for name, own in transports.items()}  # fmt: skip
        status, parts = transport_status_of(judged)
        combined = combined_verdict(list(judged.values()), parts)
        transport_dict = transport.to_dict()
        transport_dict["verdict"] = combined.to_dict()
        transport_dict["collectives"] = {name: item.to_dict() for name, item in judged.items()}
        networks = ", ".join(transport.all_networks) or None
        components.append(Component("transport", "transport", status, "; ".join(parts), threshold=combined.expected,
                                    value=networks, on=f"{fabric} fabric"))  # fmt: skip
    return {"status": "ran", "expected_busbw_gbs": expected, "line_rate": rate, "min_efficiency": threshold,
            "collectives": collectives, "transport": transport_dict}  # fmt: skip


def collective_transport(
    name: str,
    transport: Transport | None,
    fabric: str,
    placement: OneNodeRuns | None = None,
    unproven: str | None = None,
) -> TransportVerdict:
    """The transport verdict of one collective, from its own log only: another collective's log saying IB says
    nothing about a log cut before NCCL's INFO lines (or one without them). A missing log is no evidence either;
    a log whose runs kept their ranks on one node, or whose Rank lines name no host (``placement``), can fail, never
    pass, as nccl-report judges it (OneNodeRuns.verdict). ``unproven``: why the log's evidence is not the judged
    run's (its INFO lines are an earlier run's): a fallback they show still fails, nothing else is judged."""
    if unproven is not None and transport is not None:
        earlier = verdict(transport, fabric)
        if earlier.failed:
            return earlier
        return replace(verdict(Transport(), fabric), messages=(unproven,))
    if placement is not None and transport is not None:
        return placement.verdict(transport, fabric)
    judged = verdict(transport or Transport(), fabric)
    if transport is None:
        return replace(judged, messages=(f"cannot check the transport: nccl-{name}.log is missing",))
    return judged


STATUS_ORDER: tuple[Status, ...] = ("fail", "not_judged", "pass")


def transport_status_of(judged: Mapping[str, TransportVerdict]) -> tuple[Status, list[str]]:
    """The transport component's status and reason (its parts) from each collective's own verdict (the verdict
    over them all is rdmaforge.nccl_tests.transport's combined_verdict).

    It fails when any collective's log shows a fallback (or another network), is not judged when any log shows no
    transport, and passes only when every log shows the one the fabric expects. With several collectives each part
    names its collectives: those that failed first, then those not judged, then those that passed.
    """
    reasons: dict[tuple[Status, str], list[str]] = {}
    for name, item in judged.items():
        reasons.setdefault(transport_status(item.status, item.messages), []).append(name)
    status = min((found for found, _ in reasons), key=STATUS_ORDER.index)
    if len(judged) == 1:
        return status, [next(iter(reasons))[1]]
    ranked = sorted(reasons.items(), key=lambda item: STATUS_ORDER.index(item[0][0]))
    return status, [f"{', '.join(names)}: {reason}" for (_, reason), names in ranked]


def transport_status(status: str, messages: Sequence[str]) -> tuple[Status, str]:
    """One collective's transport status and reason from its verdict (rdmaforge.nccl_tests.transport).

    A warn verdict met the fabric's transport (RDMA or Socket) but with a warning (GPUDirect RDMA off, an HCA on
    another link layer than the profile's: NCCL may have picked the wrong NIC): not judged, never a pass, as
    nccl-report's WARN (exit 5) on the same log. The reason names the warning; a cluster where it is expected makes
    the transport optional (benchmark_optional).
    """
    if status == "warn" and len(messages) > 1:
        return "not_judged", f"{messages[0]}; with a warning, not judged: {'; '.join(messages[1:])}"
    found: Status = {"ok": "pass", "fail": "fail"}.get(status, "not_judged")  # type: ignore[assignment]
    return found, "; ".join(messages)


#: e2e.json's training runs and how the report names them.
RUN_LABELS = {"one": "1-GPU", "single": "1-node", "multi": "N-node"}


def p50(run: Mapping[str, Any]) -> float | None:
    return percentile(run, "p50")


def shown(value: Any) -> str:
    """A value of e2e.json in the summary: "-" where it is missing."""
    if value is None:
        return "-"
    return fixed(value) if isinstance(value, float) else str(value)


def training_on(run: Mapping[str, Any], nodes: str) -> str:
    """What a training run ran on, in words (e.g. "gloo on CPU, 2 nodes, 2 ranks")."""
    backend = run.get("backend")
    device = "GPU" if backend == "nccl" else "CPU" if backend else "?"
    return f"{backend or 'unknown backend'} on {device}, {nodes}, {shown(count(run, 'world_size'))} ranks"


def no_e2e_reason(run: dict[str, Any]) -> str:
    """Why a run has no e2e.json: benchmark_e2e false, the reason the role gave for not training (a node of unknown
    GPU count), or nothing known (the file is missing)."""
    if run.get("e2e_enabled") is False:
        return "benchmark_e2e is false"
    asked = run.get("e2e")
    if isinstance(asked, Mapping) and asked.get("status") == "skipped" and asked.get("reason"):
        return str(asked["reason"])
    return "no e2e result (e2e.json missing)"


def e2e_results(run_dir: Path, run: dict[str, Any], components: list[Component]) -> dict[str, Any] | None:
    path = run_dir / "e2e.json"
    if not path.exists():
        components.append(Component("e2e", "e2e", "skipped", no_e2e_reason(run)))
        return None
    e2e: dict[str, Any] = json.loads(path.read_text(encoding="utf-8-sig"))  # as stored.load read it: BOM and all
    single, multi = e2e.get("single"), e2e.get("multi")
    minimum = optional_float(e2e.get("min_linearity"))
    component = Component("e2e", "e2e", "fail", "", unit="linearity")
    e2e["linearity"] = None
    error = e2e.get("error")
    if single and multi:
        # Seed 003, across nodes: multi-node throughput / single-node throughput / node count.
        nodes = count(multi, "nodes")
        one, many = p50(single), p50(multi)
        if one is not None and many is not None and nodes is not None and nodes >= 2:
            e2e["linearity"] = many / (one * nodes) if one else None
        component.on = training_on(multi, f"{shown(nodes)} nodes")
        # Unrounded: a fail of 0.7996 stored as 0.8 read as its own threshold of 0.8 in results.json.
        component.value = e2e["linearity"]
        if error:  # a run that exited non-zero failed, whatever its result line says
            component.reason = f"e2e benchmark failed: {error}"
        elif diverged := out_of_sync(e2e):
            component.reason = diverged
        elif nodes is None:
            component.status = "not_judged"
            component.reason = ("e2e.json does not say how many nodes the N-node run trained on (multi.nodes is "
                                "missing or null): its linearity across nodes cannot be computed")  # fmt: skip
        elif nodes < 2:
            component.status = "not_judged"
            component.reason = f"the N-node run trained on {nodes} node: a linearity across nodes needs 2 or more"
        elif (other := other_training(run, multi, nodes)) is not None:
            component.status, component.reason = other
        elif (off_gpu := trained_off_the_gpus(run, single, multi)) is not None:
            component.status, component.reason = "not_judged", off_gpu
        elif (reference_nodes := count(single, "nodes")) not in (None, 1):
            component.status = "not_judged"
            component.reason = (f"the 1-node run trained on {reference_nodes} nodes (e2e.json single.nodes): the "
                                "linearity across nodes needs one node's throughput to compare with")  # fmt: skip
        elif (unlike := unlike_runs(single, multi, nodes)) is not None:
            component.status, component.reason = "not_judged", unlike
        elif one is None or many is None:
            component.status = "not_judged"
            which, key = ("1-node", "single") if one is None else ("N-node", "multi")
            component.reason = (f"the {which} run's p50 throughput is missing (e2e.json: {key}.percentiles.p50."
                                "samples_per_s is null): the linearity cannot be computed")  # fmt: skip
        else:
            judge_linearity(component, e2e["linearity"], minimum, "benchmark_e2e_min_linearity",
                            "the 1-node run measured no throughput",
                            "N nodes cannot train more than N times faster than one at the same per-rank batch; "
                            "the 1-node or N-node measurement (or multi.nodes) is wrong",
                            {"1-node": one, "N-node": many})  # fmt: skip
            component.reason += few_steps_note({"1-node": single, "N-node": multi})
    else:
        component.reason = f"e2e benchmark failed: {error or 'no result line from the training run'}"
    components.append(component)
    intra_node_result(e2e, minimum, components, gpus_per_node(run), run)
    # A ratio of runs that were not judged (other workloads, no threshold, ...) is carried with the reason, so that
    # results.json, summary.md and the plot never show it bare, as if it had been judged (review round 41c). So is
    # one whose component failed for another reason than the ratio (the training exited non-zero, the replicas
    # diverged: review round 42): judge_linearity's own verdicts, the ratio's, all start with "linearity ".
    for key, name in (("linearity", "e2e"), ("linearity_intra_node", "e2e intra-node")):
        reasons = [c.reason for c in components if c.name == name and (
            c.status == "not_judged" or (c.status == "fail" and not c.reason.startswith("linearity ")))]
        e2e[f"{key}_not_judged"] = reasons[-1] if reasons else None
    return e2e


def not_judged_note(e2e: Mapping[str, Any], key: str) -> str:
    """' (not judged: REASON)' after a linearity (``key``) whose component was not judged; '' otherwise."""
    reason = e2e.get(f"{key}_not_judged")
    return f" (not judged: {reason})" if reason else ""


def out_of_sync(e2e: Mapping[str, Any]) -> str:
    """Why the training was not data-parallel, '' when it was or no run says: a run whose ranks' model replicas ended
    different (ddp_train.py's replicas_in_sync false) did not train one model, whatever its throughput."""
    runs = [key for key in ("one", "single", "multi")
            if isinstance(e2e.get(key), Mapping) and e2e[key].get("replicas_in_sync") is False]  # fmt: skip
    if not runs:
        return ""
    return (f"the ranks' model replicas ended different in the {', '.join(runs)} run(s) (e2e.json "
            "replicas_in_sync false): DistributedDataParallel did not keep them in step, so the throughput is not "
            "that of data-parallel training")  # fmt: skip


#: The fewest measured steps (after the warm-up) whose p95 is more than the slowest step or two: with the nearest-
#: rank percentile ddp_train.py takes, p95 of n steps is the ceil(0.95 n)-th fastest, the slowest step itself below
#: 20 steps (and p90 below 10): the "p95" of fewer steps is one outlier, and p50 rests on a handful of samples. A
#: note only, not a verdict: the lab runs 10 measured steps on purpose (tests/integration/test_verdicts.py's SHORT,
#: to keep each bench run short on shared CPUs) and is judged on its p50 linearity; benchmark_e2e_steps (default
#: 30) is the user's to set.
MIN_MEASURED_STEPS = 20


def few_steps_note(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """A note for a linearity whose runs' percentiles rest on fewer than MIN_MEASURED_STEPS measured steps each
    (e2e.json: RUN.steps, what ddp_train.py prints), naming each such run and its count; '' when every run that says
    its step count measured enough (a run that does not say it gets no note: e2e.json written by hand)."""
    few = {label: steps for label, run in runs.items()
           if (steps := count(run, "steps")) is not None and steps < MIN_MEASURED_STEPS}  # fmt: skip
    if not few:
        return ""
    counted = ", ".join(f"{label} {steps}" for label, steps in few.items())
    return (f"; measured steps: {counted}: too few for p95 (with fewer than {MIN_MEASURED_STEPS}, p95 is the slowest "
            "step; benchmark_e2e_steps sets them)")  # fmt: skip


def unvalidated(run: Run) -> str:
    """A note for a table whose data was not checked (nccl-tests -c 0, the benchmark's default as in seed 000: every
    #wrong prints N/A and no relative error is given), so "#wrong > 0 fails" could not apply; '' otherwise."""
    unchecked = run.data_unchecked()
    return f"; the data was {unchecked}" if unchecked is not None else ""


def trained_off_the_gpus(run: Mapping[str, Any], single: Mapping[str, Any], multi: Mapping[str, Any]) -> str | None:
    """Why the training measured neither the GPUs nor NCCL, or None: a run on another backend than nccl (gloo on
    CPU: ddp_train takes it where torch sees no CUDA device) on nodes run.json records with GPUs."""
    gpus = run.get("gpus")
    recorded = gpus.items() if isinstance(gpus, Mapping) else []
    with_gpus = sorted(str(n) for n, c in recorded if (whole_number(c) or 0) > 0)
    backends = {str(r.get("backend")) for r in (single, multi) if r.get("backend") is not None}
    if not with_gpus or not backends or backends == {"nccl"}:
        return None
    return (f"the training ran on {', '.join(sorted(backends))}, not nccl, while run.json records GPUs on "
            f"{listed(with_gpus)}: it measured neither the GPUs nor NCCL over the fabric (torch saw no CUDA "
            "device there: a CPU-only torch, or a driver older than its CUDA)")  # fmt: skip


def unlike_runs(single: Mapping[str, Any], multi: Mapping[str, Any], nodes: int,
                labels: tuple[str, str] | None = None, scale: str = "nodes") -> str | None:  # fmt: skip
    """Why seed 003's linearity (N-node throughput / 1-node throughput / N; within a node: the 1-node run against the
    1-GPU run) does not compare like with like, or None. It assumes the scaled run is N copies of the reference, so
    the scaled run's ranks must be the reference's times N, and every rank must train the same workload
    (baseline.WORKLOAD: backend, per-rank batch, warm-up steps) where both runs say it: a larger per-rank batch
    raises samples/s on any fabric, gloo measures neither GPUs nor NCCL, and the warm-up decides which steps the p50
    is taken over. The measured steps may differ: a p50 over more of the same steps is the same figure, and too few
    are named (few_steps_note)."""
    small, large = labels or ("1-node", f"{nodes}-node")
    one, many = count(single, "world_size"), count(multi, "world_size")
    if one is not None and many is not None and many != one * nodes:
        return (f"the {small} run had {one} rank(s) and the {large} run {many} (not {one} x {nodes}): the linearity "
                f"compares {nodes} copies of the {small} job, so e2e.json's runs are not comparable")  # fmt: skip
    reference, scaled = baseline.workload(single), baseline.workload(multi)
    differences = [f"{label} {reference[key]!r} in the {small} run, {scaled[key]!r} in the {large} run"
                   for key, label in baseline.WORKLOAD.items()
                   if key not in ("world_size", "steps") and None not in (reference[key], scaled[key])
                   and reference[key] != scaled[key]]  # fmt: skip
    if differences:
        return (f"the {small} and {large} runs trained different workloads ({'; '.join(differences)}): the linearity "
                f"over {scale} compares the same job at another size, so e2e.json's runs are not comparable")
    return None


def gpus_per_node(run: Mapping[str, Any]) -> tuple[int, str] | None:
    """The most GPUs a node of the run has (run.json's ``gpus``) and which nodes have as many ("each node" where all
    do), or None when no count is known. The nodes' counts may differ: a node of more GPUs than the training's ranks
    per node left some of them out, whatever the other nodes have."""
    gpus = run.get("gpus")
    counts = {str(n): c for n, c in (gpus.items() if isinstance(gpus, Mapping) else []) if whole_number(c) is not None}
    if not counts:
        return None
    most = max(int(c) for c in counts.values())
    largest = sorted(n for n, c in counts.items() if int(c) == most)
    every = isinstance(gpus, Mapping) and len(largest) == len(gpus)  # (a node of unknown count is not one of them)
    return most, "each node" if every else f"node {named_first(largest, 3)}"


def other_training(run: Mapping[str, Any], multi: Mapping[str, Any], nodes: int) -> tuple[Status, str] | None:
    """Why e2e.json's N-node run is not a training of this run's nodes (run.json's ``nodes``), or None. On fewer
    nodes it did not span the run (fail, as an nccl-tests job on fewer hosts does); on more, or with fewer ranks
    than nodes (every node trains with one rank at least), e2e.json contradicts itself or the run: not judged."""
    names = [str(n) for n in run.get("nodes") or []]
    ranks = count(multi, "world_size")
    if ranks is not None and ranks < nodes:
        return "not_judged", (f"e2e.json's N-node run had {ranks} rank(s) on {nodes} nodes (multi.world_size below "
                              "multi.nodes): every node trains with one rank at least, so the file contradicts "
                              "itself")  # fmt: skip
    if not names or nodes == len(names):
        return None
    where = f"the run has {len(names)} nodes ({listed(names)})"
    if nodes < len(names):
        return "fail", f"the N-node run trained on {nodes} nodes, {where}: the training did not span the run's nodes"
    return "not_judged", (f"the N-node run trained on {nodes} nodes, {where}: it is not this run's training, or "
                          "e2e.json is wrong")  # fmt: skip


def unlike_reference(one: Mapping[str, Any], single: Mapping[str, Any], ranks: int) -> str | None:
    """Why the 1-GPU and 1-node runs do not measure the scaling within a node, or None: the 1-GPU run must be one
    rank on one node, the 1-node run one node with the ranks each node trains with (e2e.json ranks_per_node, the
    count the GPUs were checked against), and both the same workload (unlike_runs)."""
    shape = [(label, key, got, wanted) for label, run, key, wanted in (
        ("1-GPU", one, "world_size", 1), ("1-GPU", one, "nodes", 1), ("1-node", single, "nodes", 1),
        ("1-node", single, "world_size", ranks)) if (got := count(run, key)) is not None and got != wanted]
    if shape:
        label, key, got, wanted = shape[0]
        run_key = "one" if label == "1-GPU" else "single"
        return (f"the {label} run's {key} is {got} (e2e.json {run_key}.{key}), not {wanted}: the linearity within a "
                f"node compares one node's {ranks} rank(s) against one rank, so e2e.json's runs are not comparable")
    return unlike_runs(one, single, ranks, ("1-GPU", "1-node"), "a node's GPUs")


def intra_node_result(
    e2e: dict[str, Any],
    across_minimum: float | None,
    components: list[Component],
    gpus: tuple[int, str] | None = None,
    run: Mapping[str, Any] | None = None,
) -> None:
    """Seed 003, within one node: multi-GPU throughput / single-GPU throughput / GPUs per node.

    The role runs the 1-GPU reference when a node trains with more than one rank (``ranks_per_node``); a node
    with one GPU (or none: one CPU rank) has no within-node scaling to judge. Not judged, and named, when the
    nodes have more GPUs (``gpus``, run.json's count per node) than the training used ranks, or when e2e.json has
    no 1-GPU run (``one``: one written before rdmaforge ran it). Not judged either when the training failed
    (e2e.json's ``error``: a run exited non-zero; the across-node component fails on it) or when the 1-GPU and
    1-node runs trained off the GPUs run.json (``run``) records (gloo on CPU: trained_off_the_gpus, as across nodes).
    """
    single, one = e2e.get("single"), e2e.get("one")
    e2e["linearity_intra_node"] = None
    ranks = whole_number(e2e.get("ranks_per_node") or (single or {}).get("world_size") or 1) or 1
    minimum = optional_float(e2e.get("min_intra_node_linearity", across_minimum))
    component = Component("e2e intra-node", "e2e", "fail", "", unit="linearity")
    if gpus is not None and gpus[0] > ranks:
        most, where = gpus
        component.status = "not_judged"
        left = f"{most - ranks} GPU(s) per node" if where == "each node" else f"{most - ranks} of its GPUs"
        component.reason = (f"{where} has {most} GPUs (run.json) but trained with {ranks} rank(s) (e2e.json "
                            f"ranks_per_node): {left} took no part, and the scaling within a node was not "
                            "measured")  # fmt: skip
        components.append(component)
        return
    if ranks <= 1:
        return
    if e2e.get("error"):
        # e2e.json's error does not say (in a form to read) which run failed: any of them may be the 1-GPU or 1-node
        # run this linearity is computed from, and a run that exited non-zero measured nothing to pass.
        component.status = "not_judged"
        component.reason = (f"the e2e training failed ({e2e['error']}): the linearity within a node is not judged "
                            "from a training that exited non-zero")  # fmt: skip
        components.append(component)
        return
    if diverged := out_of_sync({key: e2e.get(key) for key in ("one", "single")}):
        component.reason = diverged  # its two runs: a fail, as the across-node component's (review round 35)
        components.append(component)
        return
    if "one" not in e2e:
        component.status = "not_judged"
        component.reason = (f"e2e.json has no 1-GPU run ('one'; an e2e.json written before rdmaforge ran it): the "
                            f"scaling over a node's {ranks} ranks cannot be computed")  # fmt: skip
        components.append(component)
        return
    if not single:
        component.reason = "the 1-node run printed no result"
    elif not one:
        component.reason = "the 1-GPU run printed no result"
    else:
        trained = count(single, "world_size")
        component.on = training_on(single, "1 node") + " against 1"
        reference, node = p50(one), p50(single)
        if (mismatch := unlike_reference(one, single, ranks)) is not None:
            component.status, component.reason = "not_judged", mismatch
        elif trained is None or reference is None or node is None:
            component.status = "not_judged"
            missing = "single.world_size" if trained is None else "one" if reference is None else "single"
            if trained is not None:
                missing += ".percentiles.p50.samples_per_s"
            component.reason = f"e2e.json has no {missing}: the linearity within a node cannot be computed"
        else:
            e2e["linearity_intra_node"] = node / (reference * trained) if reference else None
            if e2e["linearity_intra_node"] is not None:
                component.value = e2e["linearity_intra_node"]
            if (off_gpu := trained_off_the_gpus(run or {}, one, single)) is not None:
                component.status, component.reason = "not_judged", off_gpu
            else:
                judge_linearity(component, e2e["linearity_intra_node"], minimum,
                                "benchmark_e2e_min_intra_node_linearity", "the 1-GPU run measured no throughput",
                                "N GPUs cannot train more than N times faster than one at the same per-rank batch; "
                                "the 1-GPU or 1-node measurement (or single.world_size) is wrong",
                                {"1-GPU": reference, "1-node": node})  # fmt: skip
                component.reason += few_steps_note({"1-GPU": one, "1-node": single})
    components.append(component)


#: The highest linearity (across nodes or within one) that can be a measurement. Data-parallel training at a fixed
#: per-rank batch does N times the work on N nodes (or GPUs), so it cannot run much more than N times as fast: ideal
#: is 1.0, and 1.5 leaves generous room for noise and small superlinear effects (caches). Above it a throughput or
#: the node count is wrong, as a busbw above the fabric's ceiling is (line_rate.CEILING_FACTOR).
LINEARITY_CEILING = 1.5


def judge_linearity(component: Component, value: float | None, minimum: float | None, variable: str,
                    no_value: str, implausible: str,
                    throughputs: Mapping[str, float] | None = None) -> None:  # fmt: skip
    """Judge a linearity against its minimum (``variable``, the role variable that sets it); ``implausible`` says
    why a value above the ceiling cannot be measured, and which figures to suspect. ``throughputs``: the p50
    samples/s it is computed from, by run label.

    A value above LINEARITY_CEILING fails whether or not a minimum is set: it is a measurement error (wrong
    throughput or node count), not a question of threshold, and must never pass or be left merely not judged. So
    does a throughput that is negative or not finite (two negative throughputs make a positive ratio). A minimum of
    0 or less (or NaN) would pass anything: not judged, as no threshold is. The CLI's schema refuses both
    (rdmaforge.stored); this keeps a direct caller (report.render on an unchecked directory) from passing them.
    """
    corrupt = {label: t for label, t in (throughputs or {}).items() if not (math.isfinite(t) and t >= 0)}
    if value is None:
        component.reason = no_value
    elif corrupt or not value >= 0:  # NaN too
        component.threshold = minimum
        named = ", ".join(f"{label} {fixed(t)} samples/s" for label, t in corrupt.items())
        source = f"from a p50 throughput that is negative or not finite ({named})" if corrupt else "is not 0 or more"
        component.reason = f"linearity {fixed(value, 2)} {source}: no measurement, the result is corrupt"
    elif value > LINEARITY_CEILING:
        component.threshold = minimum
        component.reason = f"linearity {fixed(value, 2)} is above {LINEARITY_CEILING}: {implausible}"
    elif minimum is None:
        component.status = "not_judged"
        component.reason = f"no threshold: {variable} is empty"
    elif not minimum > 0:
        component.status = "not_judged"
        component.reason = (f"no threshold: {variable} is {minimum:g}, not above 0 (every linearity would reach "
                            "it)")  # fmt: skip
    else:
        component.threshold = minimum
        component.status = "pass" if value >= minimum else "fail"
        relation = "reaches" if component.status == "pass" else "is below"
        shown, shown_minimum = distinct(value, minimum, fixed(value, 2), f"{minimum:g}")
        component.reason = f"linearity {shown} {relation} {shown_minimum}"


#: The largest training log read: the role's runs log a few MiB with NCCL_DEBUG=INFO; a larger file (a sparse or
#: runaway one) is named as not read, never read whole into memory.
TRAINING_LOG_MAX_BYTES = 64 << 20


def read_training_log(label: str, path: Path) -> accelerators.TrainingLog:
    """One training log of the run directory: its text, or None with why it was not read (missing, not a file, it
    cannot be read, or more than TRAINING_LOG_MAX_BYTES). What is not read is not judged, never an error."""
    if not path.is_file():
        return accelerators.TrainingLog(label, path.name, None)
    try:
        data = stored.read_bounded(path, TRAINING_LOG_MAX_BYTES)
    except OSError as exc:
        return accelerators.TrainingLog(label, path.name, None, f"unreadable ({exc.strerror or exc})")
    if data is None:
        return accelerators.TrainingLog(label, path.name, None,
                                        f"larger than {TRAINING_LOG_MAX_BYTES >> 20} MiB, not read")  # fmt: skip
    return accelerators.TrainingLog(label, path.name, data.decode("utf-8", errors="replace"))


def training_logs(
    run_dir: Path, e2e: dict[str, Any] | None, nodes: Sequence[object] = ()
) -> list[accelerators.TrainingLog]:
    """The training logs e2e.json names (``logs``: run key to file names), read from the run directory. A run that
    e2e.json has but names no log for, and an N-node run with fewer logs than ``nodes`` (run.json's: the role keeps
    one per node), count as missing logs: what is not there shows nothing of the nodes it would cover."""
    named = (e2e or {}).get("logs")
    logs = []
    for key, label in RUN_LABELS.items():
        names = named.get(key) if isinstance(named, dict) else None
        listed = [names] if isinstance(names, str) else list(names or [])
        for name in listed:
            path = run_dir / Path(str(name)).name  # a file of this run directory, never a path elsewhere
            logs.append(read_training_log(label, path))
        wanted = len(nodes) if key == "multi" and nodes else 1
        if (e2e or {}).get(key) and len(listed) < wanted:
            unlisted = f"{wanted - len(listed)} of {wanted} {label} logs" if wanted > 1 else f"the {label} log"
            logs.append(accelerators.TrainingLog(label, f"{unlisted} (not in e2e.json's list)", None))
    return logs


def trained_on(e2e: dict[str, Any]) -> str | None:
    """The training's backend: that of e2e.json's first run that names one (multi, single, one)."""
    runs: list[dict[str, Any]] = [e2e[key] for key in ("multi", "single", "one") if e2e.get(key)]
    return next((str(r["backend"]) for r in runs if r.get("backend")), None)


def accelerator_results(run: dict[str, Any], e2e: dict[str, Any] | None, logs: Sequence[accelerators.TrainingLog],
                        components: list[Component]) -> dict[str, Any] | None:  # fmt: skip
    """Whether ACSpeed and the NCCL net plugin the inventory enables were used by the training (seed 003), from its
    ``logs`` (training_logs, read once for this and e2e_transport)."""
    acspeed, provider = accelerators.expectations(run)
    if not acspeed and provider == "none":
        return None
    result: dict[str, Any] = {"acspeed": {"enabled": acspeed}, "net_plugin": {"provider": provider}}
    wanted = (["e2e acspeed"] if acspeed else []) + ([f"e2e net plugin {provider}"] if provider != "none" else [])
    if e2e is None:
        disabled = run.get("e2e_enabled") is False
        reason = f"no training log: {no_e2e_reason(run)}"
        for name in wanted:
            components.append(Component(name, accelerators.GROUP, "skipped" if disabled else "not_judged", reason))
        return result
    runs: list[dict[str, Any]] = [e2e[key] for key in ("multi", "single", "one") if e2e.get(key)]
    backend = trained_on(e2e)
    warmup = next((int(r["warmup_steps"]) for r in runs if r.get("warmup_steps") is not None), None)
    if acspeed:
        torch = next((str(r["torch"]) for r in runs if isinstance(r.get("torch"), str)), None)
        component, result["acspeed"] = accelerators.judge_acspeed(logs, warmup, torch)
        result["acspeed"]["status"] = component.status
        components.append(component)
    if provider != "none":
        multi_logs = [log for log in logs if log.run == RUN_LABELS["multi"]]
        fabric = str(run.get("fabric", "tcp"))
        component, result["net_plugin"] = accelerators.judge_net_plugin(provider, fabric, multi_logs, backend)
        result["net_plugin"]["status"] = component.status
        components.append(component)
    return result


def training_transport(
    fabric: str, logs: Sequence[accelerators.TrainingLog], backend: str | None, nodes: Sequence[str] = ()
) -> Component | None:
    """NCCL's transport in the N-node training on an RDMA fabric, from each node's log (NCCL_DEBUG=INFO): the same
    verdict nccl-tests' logs get. Only nccl-tests' logs were read for it, and the net plugin check (the one that
    read the training's ``Using network`` lines) runs only where a plugin is enabled, so a training that fell back
    to sockets on an RDMA profile without a default plugin passed with throughput alone (review round 23a). None
    where nothing applies: a socket fabric, or a training on gloo (no GPU: no NCCL). With fewer than two ``nodes``
    (the run's) the training's traffic never left its node, and a log can fail but never pass (within_one_node, as
    for nccl-tests: 'Using network IB' is printed on one node too; review round 24)."""
    if not fabrics.is_rdma(fabric) or backend != "nccl":
        return None
    expected = f"RDMA as fabric profile '{fabric}'"
    component = Component("e2e transport", "transport", "not_judged", "", threshold=expected)
    present = [log for log in logs if not log.blank]
    blank = [f"{log.name} is {log.blank}" for log in logs if log.blank]
    if not present:
        component.reason = "no N-node training log to read" + (f" ({', '.join(blank)})" if blank else "")
        return component
    one_node = len(nodes) < 2
    judged = {log.name: within_one_node(parse_transport(log.text or ""), fabric, list(nodes) or ["one node"])
              if one_node else verdict(parse_transport(log.text or ""), fabric) for log in present}  # fmt: skip
    status, reasons = transport_status_of(judged)
    networks = merge_transports(parse_transport(log.text or "") for log in present).all_networks
    component.value = ", ".join(networks) or None
    component.status, component.reason = status, "; ".join(reasons)
    if blank and status == "pass":
        component.status = "not_judged"
        component.reason += f"; but {', '.join(blank)}: what its ranks used cannot be told"
    return component


def e2e_transport(run: dict[str, Any], e2e: dict[str, Any] | None,
                  logs: Sequence[accelerators.TrainingLog]) -> Component | None:  # fmt: skip
    """training_transport over the N-node run's logs, where the run trained (run.json's fabric, e2e.json's backend).
    None where a net plugin is enabled (judge_net_plugin reads the same lines and fails a fallback to sockets), and
    for a run whose e2e.json names no log (recorded before the logs were kept, or written by hand): judged as before."""
    if e2e is None or not e2e.get("multi") or not e2e.get("logs") or accelerators.expectations(run)[1] != "none":
        return None
    nodes = [str(node) for node in run.get("nodes") or ()]
    multi = [log for log in logs if log.run == RUN_LABELS["multi"]]
    return training_transport(str(run.get("fabric", "tcp")), multi, trained_on(e2e), nodes)


def load_baseline(path: str | None) -> dict[str, Any] | None:
    """The baseline named in run.json; BaselineError (with the path) when it is missing, malformed or relative (a
    relative path would name another file from each directory the report is made in)."""
    if path and (relative := baseline.relative_problem(path, "run.json's baseline")):
        raise baseline.BaselineError(relative)
    return baseline.load(path) if path else None


def unmeasured_fabric(fabric: str, components: Sequence[Component], required: set[str]) -> list[str]:
    """What a verdict on an RDMA fabric did not measure when NCCL's transport was neither checked nor required: a
    cluster without GPUs runs no nccl-tests and trains with gloo over TCP sockets, and its pass (the training's
    throughput) said nothing about RDMA between the nodes, under a header naming the RDMA fabric. Where the
    transport is required its absence is already a reason of the verdict."""
    transport = [c for c in components if c.group == "transport"]
    if not fabrics.is_rdma(fabric) or "transport" in required or any(c.status == "pass" for c in transport):
        return []
    why = "; ".join(f"{c.status.replace('_', ' ')}: {c.reason}" for c in transport) or "no nccl-tests result"
    trained = next((c.on for c in components if c.group == "e2e" and c.on), "")
    on = f"; the e2e training ran on {trained}" if trained else ""
    return [f"RDMA over the {fabric} fabric: NCCL's transport was not checked ({why}){on}; this verdict says "
            "nothing about RDMA between the nodes"]  # fmt: skip


def judge(run_dir: Path, run: dict[str, Any]) -> dict[str, Any]:
    """Results with per-component statuses and the overall verdict, without writing anything."""
    reference = load_baseline(run.get("baseline"))  # before anything else: a bad path is an error, not ignored
    components: list[Component] = []
    results: dict[str, Any] = {"fabric": run.get("fabric"), "nodes": run.get("nodes", [])}
    hosts: set[str] = set()
    results["nccl"] = nccl_results(run_dir, run, components, hosts)
    results["e2e"] = e2e_results(run_dir, run, components)
    logs = training_logs(run_dir, results["e2e"], run.get("nodes") or ()) if results["e2e"] is not None else []
    results["accelerators"] = accelerator_results(run, results["e2e"], logs, components)
    trained = e2e_transport(run, results["e2e"], logs)
    if trained is not None:
        components.append(trained)
    if reference is not None:
        tolerance = float(run.get("tolerance", 0.1))
        components += baseline.compare(reference, run, results, tolerance, {c.name: c.status for c in components})
        results["baseline"] = {"path": run.get("baseline"), "tolerance": tolerance}
    gpu_nodes = gpu_rank_nodes(run, hosts)
    multi = (results["e2e"] or {}).get("multi")
    if isinstance(multi, Mapping) and multi.get("backend") == "nccl":  # ddp_train takes nccl only where CUDA is
        gpu_nodes |= {str(n) for n in run.get("nodes") or []}  # (a training short of the nodes: other_training)
    required = required_groups(run, (c.group for c in components if c.status != "skipped"), gpu_nodes)
    mark_required(components, required)
    status, reasons = overall(components, required)
    results["verdict"] = status
    results["reasons"] = reasons
    results["not_measured"] = unmeasured_fabric(str(run.get("fabric")), components, required)
    results["required"] = sorted(required)
    results["components"] = [c.to_dict() for c in components]
    return results


def render(run_dir: Path, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write results.json, results.csv, summary.md and the plots; return the results.

    ``overrides`` replace keys of run.json for this rendering (`rdmaforge report --baseline FILE`).
    BaselineError when the run names a baseline that is missing or malformed (nothing is written then).
    """
    run = {**json.loads((run_dir / "run.json").read_text(encoding="utf-8-sig")), **(overrides or {})}
    results = judge(run_dir, run)
    with named(run_dir / "results.json"):
        output_files.write_text(run_dir / "results.json", json.dumps(results, indent=2) + "\n")
    with named(run_dir / "results.csv"), output_files.replaced(run_dir / "results.csv") as csv_file:
        write_csv(csv_file, results)
    plots, plot_notes = write_plots(run_dir, results)
    with named(run_dir / "summary.md"):
        # UTF-8 whatever the locale: a host name or reason from the run must not fail the report in a C locale.
        output_files.write_text(run_dir / "summary.md", summary_markdown(results, plots, plot_notes))
    return results


@contextmanager
def named(path: Path) -> Iterator[None]:
    """Give ``path`` to an OSError that has no file name: write() on a full disk names none (open() does), and
    the message must say which file could not be written, not that stdout or rdmaforge failed."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def write_csv(path: Path, results: dict[str, Any]) -> None:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["collective", "size_bytes", "count", "type", "redop", "oop_time_us", "oop_algbw_gbs",
                         "oop_busbw_gbs", "ip_time_us", "ip_algbw_gbs", "ip_busbw_gbs"])  # fmt: skip
        for name, entry in results["nccl"].get("collectives", {}).items():
            for row in entry.get("rows", []):
                oop, inp = row["out_of_place"], row.get("in_place") or {}
                halves = [
                    oop["time_us"],
                    oop["algbw"],
                    oop["busbw"],
                    inp.get("time_us"),
                    inp.get("algbw"),
                    inp.get("busbw"),
                ]
                writer.writerow([name, row["size"], row["count"], row["type"], row["redop"], *halves])


def write_plots(run_dir: Path, results: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The plots drawn (file names) and the notes on them: a value that is not finite or too large for a plot to
    scale (``rdmaforge.stored.drawable``: a corrupt row the verdict already fails) is left out, and a note says
    which, rather than an overflowing axis."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:  # an optional extra: pip install 'rdmaforge[plots]'
        print(
            f"rdmaforge report: plots not drawn: matplotlib is not installed ({install_hint('matplotlib')}); "
            "results.json, results.csv and summary.md are complete without them",
            file=sys.stderr,
        )
        return [], []

    written, notes = [], []
    collectives = results["nccl"].get("collectives", {})
    if any(entry.get("rows") for entry in collectives.values()):
        fig, ax = plt.subplots(figsize=(8, 5))
        undrawn: list[str] = []
        drawn_sizes = False  # a log axis of no point cannot be drawn (matplotlib: "cannot be log-scaled")
        for name, entry in collectives.items():
            rows = [r for r in entry.get("rows", []) if r["size"] > 0]
            undrawn += [f"{name} {r['size']} B busbw {fixed(r['out_of_place']['busbw'])} GB/s" for r in rows
                        if not drawable(r["out_of_place"]["busbw"])]  # fmt: skip
            rows = [r for r in rows if drawable(r["out_of_place"]["busbw"])]
            drawn_sizes = drawn_sizes or bool(rows)
            ax.plot([r["size"] for r in rows], [r["out_of_place"]["busbw"] for r in rows], marker="o", label=name)
        expected = results["nccl"]["expected_busbw_gbs"]
        if drawable(expected):
            ax.axhline(expected, linestyle="--", color="grey", label=f"line rate {fixed(expected)} GB/s")
        else:
            undrawn.append(f"the line rate {fixed(expected)} GB/s")
        if drawn_sizes:
            ax.set_xscale("log", base=2)
        ax.set(xlabel="message size (bytes)", ylabel="bus bandwidth (GB/s)", title=f"nccl-tests, {results['fabric']}")
        ax.legend()
        if undrawn:
            notes.append(undrawn_note("nccl_busbw.png", undrawn))
            fig.text(0.01, 0.01, f"{len(undrawn)} value(s) left out: not finite or too large (summary.md)", fontsize=7)
        with named(run_dir / "nccl_busbw.png"):
            with output_files.replaced(run_dir / "nccl_busbw.png") as png:
                fig.savefig(png, dpi=100)
        plt.close(fig)
        written.append("nccl_busbw.png")
    e2e = results.get("e2e") or {}
    if e2e.get("single") and e2e.get("multi"):
        labels = list(PERCENTILES)
        fig, ax = plt.subplots(figsize=(8, 5))
        runs = e2e_runs(e2e)
        width = 0.8 / len(runs)
        undrawn = []
        for offset, (key, run) in enumerate(runs):
            bars = [(i, value) for i, name in enumerate(labels) if (value := percentile(run, name)) is not None]
            undrawn += [f"{key} {labels[i]} {fixed(value)} samples/s" for i, value in bars if not drawable(value)]
            bars = [(i, value) for i, value in bars if drawable(value)]
            ax.bar([i + offset * width for i, _ in bars], [value for _, value in bars], width, label=key)
        ax.set_xticks([i + width * (len(runs) - 1) / 2 for i in range(len(labels))], labels)
        linearity = e2e.get("linearity")
        title = textwrap.fill(f"e2e DDP throughput ({shown(e2e['multi'].get('backend'))}), linearity " + (
            fixed(linearity, 2) + not_judged_note(e2e, "linearity") if linearity is not None else "-"), 90,
            break_on_hyphens=False)
        ax.set_ylabel("samples/s")
        # A reason is long: wrapped to the figure, smaller; text from e2e.json is no mathtext (a '$' ends the plot).
        ax.set_title(title, parse_math=False, fontsize="small" if "\n" in title else "large")
        fig.subplots_adjust(top=0.88 - 0.035 * title.count("\n"))  # room for the title's lines
        ax.legend()
        if undrawn:
            notes.append(undrawn_note("e2e_throughput.png", undrawn))
            fig.text(0.01, 0.01, f"{len(undrawn)} value(s) left out: not finite or too large (summary.md)", fontsize=7)
        with named(run_dir / "e2e_throughput.png"):
            with output_files.replaced(run_dir / "e2e_throughput.png") as png:
                fig.savefig(png, dpi=100)
        plt.close(fig)
        written.append("e2e_throughput.png")
    return written, notes


def e2e_runs(e2e: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, result) of each e2e training run that printed a result: 1 GPU, 1 node, N nodes."""
    runs = []
    if e2e.get("one"):
        runs.append(("1 GPU", e2e["one"]))
    if e2e.get("single"):
        runs.append(("1 node", e2e["single"]))
    if e2e.get("multi"):
        runs.append((f"{shown(count(e2e['multi'], 'nodes'))} nodes", e2e["multi"]))
    return runs


def accelerator_lines(found: dict[str, Any] | None) -> list[str]:
    """What the training logs say about the accelerators the inventory enables (nothing when none is)."""
    if not found:
        return []
    lines = ["Training accelerators the inventory enables, as the training logs show them:", ""]
    acspeed = found.get("acspeed") or {}
    if acspeed.get("enabled"):
        counts = acspeed.get("init_lines") or {}
        seen = ", ".join(f"{name}: {n}" for name, n in counts.items()) or "no log"
        lines.append(f"- ACSpeed ({acspeed.get('status', '?')}): '{accelerators.ACSPEED_LINE}' lines per log: {seen}")
    plugin = found.get("net_plugin") or {}
    if plugin.get("provider", "none") != "none":
        networks = ", ".join(plugin.get("networks") or []) or "none seen"
        loaded = f", loaded: {plugin['plugin']}" if plugin.get("plugin") else ""
        lines.append(f"- NCCL net plugin {plugin['provider']} ({plugin.get('status', '?')}): "
                     f"NCCL used {networks}{loaded}")  # fmt: skip
    return lines + [""]


def efficiency_text(efficiency: object) -> str:
    """A collective's efficiency for summary.md's table: a percentage cut (not rounded) to one decimal, so that it is
    never shown above what was measured; "-" where there is none."""
    if not isinstance(efficiency, (int, float)) or isinstance(efficiency, bool) or not math.isfinite(efficiency):
        return "-"
    if abs(efficiency * 100) >= LARGE:
        return percent(float(efficiency))
    return f"{math.floor(efficiency * 1000) / 10:.1f}%"


def summary_markdown(results: dict[str, Any], plots: list[str], plot_notes: Sequence[str] = ()) -> str:
    lines = [f"# Benchmark: {results['fabric']} fabric, {len(results['nodes'])} nodes", "",
             f"**Verdict: {results['verdict']}**", ""]  # fmt: skip
    lines += [f"- {reason}" for reason in results["reasons"]]
    lines += [f"- Not measured: {line}" for line in results.get("not_measured") or []] + [""]
    lines += ["What was measured, and against what:", ""]
    lines += [f"- {describe(component)}" for component in results["components"]] + [""]
    nccl = results["nccl"]
    if nccl["status"] == "ran":
        lines += [f"Expected bus bandwidth (line rate): {figure(nccl['expected_busbw_gbs'])} GB/s"]
        if nccl.get("line_rate"):
            lines += [f"({nccl['line_rate']['source']}: {nccl['line_rate']['detail']})"]
        lines += [""]
        # "verdict" is the collective's component (pass, fail, not judged); "run" whether its table was read whole.
        # The efficiency is cut to one decimal, not rounded: 79.99% of the line rate printed as 80%, beside a
        # threshold of 80%.
        verdicts = {str(c.get("name")): str(c.get("status")).replace("_", " ") for c in results["components"]}
        lines += ["| collective | verdict | run | avg busbw GB/s | peak busbw GB/s | efficiency |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for name, entry in nccl["collectives"].items():
            eff = efficiency_text(entry.get("efficiency"))
            verdict = verdicts.get(f"nccl-tests {name}", "not judged")
            lines.append(f"| {name} | {verdict} | {entry['status']} | {entry['avg_busbw']} | {entry['peak_busbw']} "
                         f"| {eff} |")  # fmt: skip
        shares = [f"{name} against {figure(entry['expected_busbw_gbs'])} GB/s" for name, entry in
                  nccl["collectives"].items() if entry.get("expected_busbw_gbs") is not None]  # fmt: skip
        if shares:
            lines += ["", f"Efficiency per rank (the busbw is one rank's: the line rate shared by a node's ranks): "
                          f"{', '.join(shares)}."]  # fmt: skip
        lines.append("")
    e2e = results.get("e2e")
    if e2e and e2e.get("multi"):
        lines += ["| e2e run | ranks | " + " | ".join(f"{p} samples/s" for p in PERCENTILES) + " |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for label, run in e2e_runs(e2e):
            values = " | ".join(shown(percentile(run, p)) for p in PERCENTILES)
            lines.append(f"| {label} | {shown(count(run, 'world_size'))} | {values} |")
        warmup = e2e["multi"].get("warmup_steps")
        if warmup is not None:
            lines += ["", f"Each run's first {warmup} steps are warm-up, left out of the percentiles "
                      f"({e2e['multi'].get('steps', '?')} steps measured in the N-node run)."]  # fmt: skip
        if e2e.get("linearity") is not None:
            lines += ["", f"Linearity (N-node / (1-node x N), p50): {fixed(e2e['linearity'], 3)}"
                          f"{not_judged_note(e2e, 'linearity')}"]  # fmt: skip
        if e2e.get("linearity_intra_node") is not None:
            gpus = e2e["single"]["world_size"]
            lines += ["", f"Linearity within one node (1-node / (1-GPU x {gpus}), p50): "
                          f"{fixed(e2e['linearity_intra_node'], 3)}"
                          f"{not_judged_note(e2e, 'linearity_intra_node')}"]  # fmt: skip
        elif (e2e.get("single") and int(e2e.get("ranks_per_node") or e2e["single"].get("world_size") or 1) <= 1
              and not any(c.get("name") == "e2e intra-node" for c in results["components"])):
            # (with more GPUs than that, the intra-node component above says they took no part)
            lines += ["", "Linearity within one node: not measured, a node trains with one rank"]
        lines.append("")
    lines += accelerator_lines(results.get("accelerators"))
    lines += [f"![{p}]({p})" for p in plots]
    lines += ["", *(f"Note: {note}" for note in plot_notes)] if plot_notes else []
    # Each entry is one line: a newline in stored text (a reason in run.json) must not forge another, such as a
    # second verdict line (review round 19a).
    return "\n".join(escaped(line, one_line=True) for line in lines) + "\n"
