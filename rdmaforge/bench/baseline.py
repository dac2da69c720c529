"""Baselines: made from a judged run (`rdmaforge baseline RUN_DIR -o FILE`), compared per collective and size.

A baseline holds the run's cluster fingerprint (fabric, nodes, GPUs per node), nccl-tests' out-of-place bus
bandwidth per collective and message size, and the e2e throughput (p50 samples/s of the 1-node and N-node
runs) with the workload it was measured on (WORKLOAD: backend, world size, per-rank batch, warm-up and measured
steps). A later run is compared with it within a tolerance (``benchmark_regression_tolerance``): a size whose
busbw dropped by more than the tolerance is named, and so is an e2e throughput that dropped. An e2e throughput
of another workload is not compared (not judged, naming what differs): samples/s of another batch or backend
measure something else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rdmaforge import stored
from rdmaforge.bench.e2e import count, percentile
from rdmaforge.bench.verdict import Component
from rdmaforge.errors import UserError
from rdmaforge.text import fixed

KIND = "rdmaforge-baseline"
VERSION = 1


class BaselineError(UserError):
    """A baseline file that is missing, unreadable or not a baseline; the message names the path."""


def fingerprint(run: Mapping[str, Any]) -> dict[str, Any]:
    """The run's cluster shape; a node whose GPU count is null (unknown) has none in ``gpus``, never 0."""
    nodes = [str(n) for n in run.get("nodes") or []]
    gpus = run.get("gpus") if isinstance(run.get("gpus"), Mapping) else {}
    return {"fabric": run.get("fabric"), "nodes": nodes, "node_count": len(nodes),
            "gpus": {str(k): int(v) for k, v in (gpus or {}).items() if v is not None}}  # fmt: skip


def make(run: Mapping[str, Any], results: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The baseline of a rendered run; BaselineError when the run measured nothing to compare with, when a collective
    it would hold (or the transport) did not pass (not judged: all ranks on one node, no threshold, no NCCL INFO
    lines), or when run.json records no GPU count for some node (a baseline without them could never be compared)."""
    nccl: dict[str, Any] = {}
    for name, entry in (results.get("nccl") or {}).get("collectives", {}).items():
        sizes = {str(row["size"]): row["out_of_place"]["busbw"] for row in entry.get("rows") or []
                 if row["out_of_place"].get("busbw") is not None}  # fmt: skip
        if sizes and entry.get("status") == "ok":
            nccl[name] = {"busbw_gbs": sizes}
    e2e: dict[str, Any] = {}
    measured = results.get("e2e") or {}
    for key in ("single", "multi"):
        if measured.get(key):
            e2e[f"{key}_p50_samples_per_s"] = percentile(measured[key], "p50")
            e2e.update({f"{key}_{field}": value for field, value in workload(measured[key]).items()})
    if not nccl and not e2e:
        raise BaselineError(f"{source}: the run has no nccl-tests table and no e2e result to make a baseline from")
    if not nccl and not e2e.get("multi_p50_samples_per_s"):
        # compare() judges the N-node throughput only: a baseline of the 1-node one would compare nothing.
        why = "no nccl-tests table and no N-node e2e p50 throughput (e2e.json: multi.percentiles.p50.samples_per_s)"
        raise BaselineError(f"{source}: the run has {why}: a baseline of it would compare nothing")
    shape = fingerprint(run)
    lacking = _gpus_lacking(shape)
    if lacking is not None:
        # compare() cannot tell a later run of another shape from a like one without them: every comparison would be
        # "GPUs per node not compared" (not judged), so such a baseline is not made.
        raise BaselineError(f"{Path(source) / 'run.json'}: records no GPU count for {', '.join(lacking)} (run.json: "
                            "gpus, one count per node; an older run.json, or one written by hand): a baseline of it "
                            "could not tell a later run of another cluster shape from a like one (GPUs per node not "
                            "compared: not judged), so none is made")  # fmt: skip
    unjudged = _not_passed(results, [f"nccl-tests {name}" for name in nccl] + (["transport"] if nccl else []))
    if unjudged:
        # compare() measures a later run against these numbers: values never judged (one node's NVLink bandwidth, no
        # threshold, a transport not shown) would make a like run "within the baseline" without any check.
        raise BaselineError(f"{source}: its nccl-tests busbw did not pass ({'; '.join(unjudged)}): a baseline holds "
                            "only busbw that passed the line rate over the fabric's transport (later runs would be "
                            "compared with values never checked), so none is made")  # fmt: skip
    unjudged_e2e = _not_passed(results, ["e2e"]) if e2e.get("multi_p50_samples_per_s") is not None else []
    if unjudged_e2e:
        # The same rule for the training: an N-node throughput of a run on one node, or never held against a
        # linearity floor, would be the reference a later 2-node run is "within" without any check.
        raise BaselineError(f"{source}: its e2e training did not pass ({'; '.join(unjudged_e2e)}): a baseline holds "
                            "only an N-node throughput whose linearity passed (set benchmark_e2e_min_linearity), so "
                            "none is made")  # fmt: skip
    compared = e2e.get("multi_p50_samples_per_s") is not None
    unknown = [WORKLOAD[key] for key in REQUIRED_WORKLOAD if compared and e2e.get(f"multi_{key}") is None]
    if unknown:
        # compare_e2e() leaves a throughput of an unknown workload not judged: such a baseline could never be compared.
        raise BaselineError(f"{source}: its N-node e2e result does not say its {', '.join(unknown)} (e2e.json: multi."
                            "backend, multi.world_size, multi.global_batch): a later run could not be told to train "
                            "the same workload, so none is made")  # fmt: skip
    return {"kind": KIND, "version": VERSION, "source": source, "fingerprint": shape,
            "nccl": nccl, "e2e": e2e}  # fmt: skip


def _not_passed(results: Mapping[str, Any], names: list[str]) -> list[str]:
    """The components of ``names`` in ``results`` that did not pass, as "NAME: STATUS: REASON" (one absent: none)."""
    found = {str(c.get("name")): c for c in results.get("components") or [] if isinstance(c, Mapping)}
    problems = []
    for name in names:
        component = found.get(name)
        if component is None:
            problems.append(f"{name}: no result")
        elif component.get("status") != "pass":
            problems.append(f"{name}: {str(component.get('status')).replace('_', ' ')}: {component.get('reason')}")
    return problems


def load(path: str | Path) -> dict[str, Any]:
    """Read a baseline file and check it against rdmaforge.stored.BASELINE; BaselineError naming the path, the
    key, the value found and what is allowed."""
    where = Path(path)
    name = f"benchmark baseline {where}"
    try:
        raw = stored.read_bounded(where)
    except IsADirectoryError as exc:
        raise BaselineError(f"{name}: cannot read it (is a directory)") from exc
    except OSError as exc:
        raise BaselineError(f"{name}: cannot read it ({exc.strerror or exc})") from exc
    if raw is None:
        raise BaselineError(f"{name}: more than {stored.MAX_BYTES >> 20} MiB, too large for a baseline")
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise BaselineError(f"{name}: not JSON (not UTF-8 text: {exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{name}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
    except (ValueError, RecursionError) as exc:
        raise BaselineError(f"{name}: not JSON ({exc})") from exc
    problems = stored.BASELINE_KIND.problems(data, "")
    if problems:
        raise BaselineError(f"{name}: not an rdmaforge baseline ({problems[0]}); "
                            "make one with `rdmaforge baseline RUN_DIR -o FILE`")  # fmt: skip
    try:
        stored.check(data, stored.BASELINE, name, "rdmaforge baseline")
        stored.check(data, stored.BASELINE_WORKLOAD, name, "rdmaforge baseline")
    except UserError as exc:
        raise BaselineError(str(exc)) from exc
    result: dict[str, Any] = data
    return result


def fingerprint_mismatch(baseline: Mapping[str, Any], run: Mapping[str, Any]) -> str | None:
    """Why the baseline is from another cluster shape (fabric, node count, GPUs per node); None when it is not."""
    theirs, ours = baseline.get("fingerprint") or {}, fingerprint(run)
    differences = []
    for key in ("fabric", "node_count"):
        if theirs.get(key) != ours[key]:
            differences.append(f"{key} {theirs.get(key)!r} in the baseline, {ours[key]!r} now")
    if not gpus_unknown(theirs, ours) and sorted(theirs["gpus"].values()) != sorted(ours["gpus"].values()):
        differences.append(f"GPUs per node {sorted(theirs['gpus'].values())} in the baseline, "
                           f"{sorted(ours['gpus'].values())} now")  # fmt: skip
    return "; ".join(differences) or None


def _gpus_lacking(shape: Mapping[str, Any]) -> list[str] | None:
    """The nodes of a fingerprint without a GPU count; None when it has GPU counts for all of its nodes."""
    gpus = shape.get("gpus") or {}
    lacking = [str(n) for n in shape.get("nodes") or [] if str(n) not in gpus]
    return lacking or (None if gpus else ["its nodes"])


def gpus_unknown(theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> str | None:
    """Why the GPUs per node of the baseline (``theirs``) and the run (``ours``) cannot be compared: a side that
    records no GPU count for some node (a baseline or run.json made by hand, a null count). None when both can."""
    why = []
    for side, shape in (("the baseline", theirs), ("this run", ours)):
        lacking = _gpus_lacking(shape)
        if lacking is not None:
            why.append(f"{side} records no GPU count for {', '.join(lacking)}")
    return "; ".join(why) or None


#: A message size is compared with the baseline when its baseline busbw is at least this share of the baseline's peak:
#: below it the size is latency-bound (a few microseconds of jitter, two printed decimals), not a bandwidth figure.
BANDWIDTH_BOUND_SHARE = 0.1


def compare_collective(name: str, base: Mapping[str, Any], entry: Mapping[str, Any] | None,
                       tolerance: float, status: str | None = None) -> Component:  # fmt: skip
    """One collective against the baseline, size by size: the sizes that regressed are named. ``status`` is the
    collective's own verdict: the table of one that failed (a crash, a non-zero exit, wrong values, a hang) is not
    compared, so its line never says it is within the baseline."""
    component_name = f"baseline nccl-tests {name}"
    rows = {str(row["size"]): row["out_of_place"].get("busbw") for row in (entry or {}).get("rows") or []}
    if not rows:
        return Component(component_name, "baseline", "skipped", f"{name} has no nccl-tests table in this run")
    if status == "fail":
        return Component(component_name, "baseline", "not_judged",
                         f"nccl-tests {name} failed: its table is not compared with the baseline")
    not_comparable = (entry or {}).get("not_comparable")
    if not_comparable:  # whose job the table is, over what, or how its launch ended is not known
        return Component(component_name, "baseline", "not_judged",
                         f"nccl-tests {name} is not judged as this run's measurement ({not_comparable}): its table "
                         "is not compared with the baseline")  # fmt: skip
    regressed, compared, lacking, latency_bound = [], 0, [], 0
    peak = max((value for value in base["busbw_gbs"].values() if value), default=0.0)
    for size, previous in sorted(base["busbw_gbs"].items(), key=lambda item: int(item[0])):
        now = rows.get(size)
        if previous and previous < peak * BANDWIDTH_BOUND_SHARE:
            # Latency-bound (review round 27c): nccl-tests prints busbw with two decimals, so 0.02 -> 0.01 GB/s at
            # 1 KiB read as a 50% regression, and such sizes jitter by more than any tolerance from run to run.
            latency_bound += 1
            continue
        if now is None and previous:
            lacking.append(_bytes(int(size)))
        if now is None or not previous:
            continue  # a size the run lacks, or a busbw of 0 (tiny messages), cannot regress by a fraction
        compared += 1
        if now < previous * (1 - tolerance):
            regressed.append(f"{_bytes(int(size))} ({now:g} < {previous:g} GB/s)")
    within = f"{tolerance * 100:g}%"
    small = (f"; {latency_bound} latency-bound sizes (baseline busbw below {BANDWIDTH_BOUND_SHARE:.0%} of its peak, "
             f"{peak:g} GB/s) not compared") if latency_bound else ""  # fmt: skip
    threshold = f"within {within} of the baseline"
    if compared == 0:
        return Component(component_name, "baseline", "not_judged", "no message size in common with the baseline",
                         threshold=threshold)  # fmt: skip
    if regressed:
        return Component(component_name, "baseline", "fail",
                         f"busbw regressed by more than {within} at {len(regressed)} of {compared} sizes: "
                         + ", ".join(regressed) + small, threshold=threshold)  # fmt: skip
    if lacking:
        # A shorter sweep than the baseline's: the sizes left out (often the large ones, where a fabric's
        # bandwidth shows) were not compared, so "within the baseline" would claim more than was measured.
        shown = ", ".join(lacking[:6]) + (", ..." if len(lacking) > 6 else "")
        return Component(component_name, "baseline", "not_judged",
                         f"{compared} sizes within {within} of the baseline, but this run lacks {len(lacking)} "
                         f"of its sizes ({shown}): run the baseline's sweep (-b/-e) to compare it{small}",
                         threshold=threshold)  # fmt: skip
    return Component(component_name, "baseline", "pass", f"{compared} sizes within {within} of the baseline{small}",
                     threshold=threshold)  # fmt: skip


#: What a training's samples/s depend on besides the cluster (the fingerprint): the N-node runs of a baseline and
#: of a later run are compared only when each of these is the same. A larger per-rank batch raises samples/s even
#: on a slower fabric (less communication per sample), gloo on CPU measures neither the GPUs nor NCCL, another
#: world size is another job, and the warm-up and the measured steps decide which steps the p50 is taken over.
#: Keys of the baseline's ``e2e`` (``multi_`` + key) and how a reason names them.
WORKLOAD = {
    "backend": "backend",
    "world_size": "world size",
    "per_rank_batch": "per-rank batch",
    "warmup_steps": "warm-up steps",
    "steps": "measured steps",
}
#: The workload a baseline must know to be compared at all (make() refuses a result without them). The warm-up and
#: the measured steps are compared where the baseline records them: a baseline made from a result without them (a
#: hand-written e2e.json; ddp_train.py always prints both) holds null there, and they are not compared, as the
#: pass reason then says.
REQUIRED_WORKLOAD = ("backend", "world_size", "per_rank_batch")


def workload(run: Mapping[str, Any]) -> dict[str, Any]:
    """What a training run's throughput was measured on (WORKLOAD), from its e2e.json result; None for what it does not
    say (or says in a form that is no count: a string, a boolean, a negative number). The per-rank batch is
    ``global_batch / world_size`` (ddp_train.py prints the global batch; every rank trains the same batch)."""
    backend = run.get("backend")
    world = count(run, "world_size")
    world = world if world is not None and world > 0 else None
    batch = count(run, "global_batch")
    per_rank: int | float | None = None
    if world is not None and batch is not None and batch > 0:
        per_rank = batch // world if batch % world == 0 else batch / world
    steps = {key: count(run, key) for key in ("warmup_steps", "steps")}
    return {"backend": backend if isinstance(backend, str) and backend else None, "world_size": world,
            "per_rank_batch": per_rank,
            **{key: value if value is not None and value >= 0 else None for key, value in steps.items()}}  # fmt: skip


def other_workload(base: Mapping[str, Any], multi: Mapping[str, Any]) -> tuple[str | None, list[str]]:
    """Why the run's N-node training is not known to be the baseline's workload (None when it is), and the fields not
    compared because the baseline holds null for them (warm-up and measured steps only).

    A baseline without a required field (REQUIRED_WORKLOAD: its key absent, as in a baseline made before rdmaforge
    recorded the workload, or null) is never compared: its throughput may be of any batch or backend, and a pass
    against it would be a pass on an unknown workload. So is a run whose result does not say it."""
    ours = workload(multi)
    absent = [label for key, label in WORKLOAD.items() if key in REQUIRED_WORKLOAD and base.get(f"multi_{key}") is None]
    if absent:
        return (f"the baseline does not record its N-node run's {', '.join(absent)} (a baseline made before rdmaforge "
                "recorded the workload, or by hand): whether this run trained the same workload cannot be told; "
                "make a new baseline with `rdmaforge baseline RUN_DIR -o FILE`"), []  # fmt: skip
    differences, unknown, uncompared = [], [], []
    for key, label in WORKLOAD.items():
        theirs, mine = base.get(f"multi_{key}"), ours[key]
        if theirs is None:
            uncompared.append(label)
        elif mine is None:
            unknown.append(label)
        elif theirs != mine:
            differences.append(f"{label} {theirs!r} in the baseline, {mine!r} now")
    if differences:
        return (f"this run trained another workload than the baseline's: {'; '.join(differences)}: samples/s are only "
                "comparable for the same workload (make a baseline of this one, or run the baseline's)"), []
    if unknown:
        return (f"this run's N-node result does not say its {', '.join(unknown)} (e2e.json: multi.backend, "
                "world_size, global_batch, warmup_steps, steps): whether it trained the baseline's workload cannot "
                "be told"), []  # fmt: skip
    return None, uncompared


def compare_e2e(base: Mapping[str, Any], e2e: Mapping[str, Any] | None, tolerance: float) -> Component | None:
    """The N-node p50 throughput against the baseline's; None when the baseline has no e2e result. The throughput of
    a training that failed (e2e.json's ``error``: a run that exited non-zero) is not compared, so its line never
    says it is within the baseline. A linearity below its floor is no such failure: the throughput is measured.
    Neither is a training of another workload (other_workload: backend, world size, per-rank batch, warm-up or
    measured steps that differ, or that either side does not record): not judged, naming what differs."""
    previous = base.get("multi_p50_samples_per_s")
    if not previous:
        return None
    name = "baseline e2e"
    multi = (e2e or {}).get("multi")
    if not multi:
        return Component(name, "baseline", "skipped", "no N-node e2e result in this run")
    if (e2e or {}).get("error"):
        return Component(name, "baseline", "not_judged",
                         "e2e failed: its N-node throughput is not compared with the baseline")  # fmt: skip
    unlike, uncompared = other_workload(base, multi)
    if unlike is not None:
        return Component(name, "baseline", "not_judged", f"N-node p50 throughput not compared: {unlike}",
                         threshold=round(float(previous) * (1 - tolerance), 3), unit="samples/s")  # fmt: skip
    now = percentile(multi, "p50")
    if now is None:
        return Component(name, "baseline", "not_judged", "this run's N-node p50 throughput is missing (e2e.json: "
                         "multi.percentiles.p50.samples_per_s)", threshold=round(float(previous) * (1 - tolerance), 3),
                         unit="samples/s")  # fmt: skip
    floor = float(previous) * (1 - tolerance)
    if now < floor:
        return Component(name, "baseline", "fail", f"N-node p50 throughput {fixed(now)} samples/s regressed from the "
                         f"baseline's {fixed(previous)} by more than {tolerance * 100:g}%", threshold=round(floor, 3),
                         value=round(now, 3), unit="samples/s")  # fmt: skip
    note = f" ({' and '.join(uncompared)} not recorded by the baseline: not compared)" if uncompared else ""
    return Component(name, "baseline", "pass", f"N-node p50 throughput within {tolerance * 100:g}% of the baseline's "
                     f"{fixed(previous)} samples/s, on the same workload{note}", threshold=round(floor, 3),
                     value=round(now, 3), unit="samples/s")  # fmt: skip


def compare(baseline: Mapping[str, Any], run: Mapping[str, Any], results: Mapping[str, Any], tolerance: float,
            judged: Mapping[str, str]) -> list[Component]:  # fmt: skip
    """The baseline's components; ``judged`` holds the run's component statuses by name ("nccl-tests NAME")."""
    mismatch = fingerprint_mismatch(baseline, run)
    if mismatch:
        return [Component("baseline", "baseline", "not_judged", f"the baseline is from another cluster: {mismatch}")]
    unknown = gpus_unknown(baseline.get("fingerprint") or {}, fingerprint(run))
    if unknown:
        # As with a fabric or node count that differs: a shape not known to match is not compared size by size.
        return [Component("baseline", "baseline", "not_judged", f"GPUs per node not compared: {unknown}; the "
                          "baseline may be from another cluster shape")]  # fmt: skip
    collectives = (results.get("nccl") or {}).get("collectives") or {}
    components = [compare_collective(name, base, collectives.get(name), tolerance, judged.get(f"nccl-tests {name}"))
                  for name, base in baseline["nccl"].items()]  # fmt: skip
    e2e = compare_e2e(baseline["e2e"], results.get("e2e"), tolerance)
    if e2e is not None:
        components.append(e2e)
    return components


def _bytes(size: int) -> str:
    for unit, factor in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


def relative_problem(path: str | Path, source: str) -> str:
    """Why a baseline path recorded for later (run.json's ``baseline``) cannot be one, '' when it can: a relative path
    names another file from each directory a report is made in (the same run judged against two baselines)."""
    if Path(path).is_absolute():
        return ""
    return (f"{source}={path} is a relative path: run.json records it, and each directory `rdmaforge report` runs in "
            "would read another file; give an absolute path (`rdmaforge bench -e benchmark_baseline=FILE` resolves "
            "one against your directory)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """`python -m rdmaforge.bench.baseline FILE`: exit 0 when FILE is a readable baseline, else 64 with why (the
    benchmark role's check of benchmark_baseline, which run.json records: an absolute path only)."""
    import sys

    paths = sys.argv[1:] if argv is None else argv
    if len(paths) != 1:
        print("usage: python -m rdmaforge.bench.baseline FILE", file=sys.stderr)
        return 64
    relative = relative_problem(paths[0], "benchmark_baseline")
    if relative:
        print(relative, file=sys.stderr)
        return 64
    try:
        load(paths[0])
    except BaselineError as exc:
        print(exc, file=sys.stderr)
        return 64
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
