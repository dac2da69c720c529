"""Turn one benchmark run directory into results.json, results.csv, summary.md and plots, with a verdict.

A run directory (written by the `benchmark` role, or by hand) holds:
  run.json                 what was asked: fabric, nodes, expected line rate, threshold, baseline, statuses
  nccl-<collective>.log    raw nccl-tests output (NCCL_DEBUG=INFO included) for each collective that ran
  e2e.json                 the e2e DDP benchmark result (1-node and N-node runs), when it ran
`rdmaforge report RUN_DIR` re-renders everything from these files.

results.json carries ``"verdict"`` (pass, fail or incomplete), ``"reasons"`` and ``"components"``: one entry per
nccl-tests collective, the transport check, the e2e benchmark and each baseline comparison, with its status,
whether it is required, its reason, threshold and value (rdmaforge.bench.verdict).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from rdmaforge.bench import baseline
from rdmaforge.bench.verdict import Component, Status, describe, mark_required, overall, required_groups
from rdmaforge.nccl_tests import parse_file, verdict
from rdmaforge.nccl_tests.transport import merge_transports

#: Per-node line rate of each fabric profile, Gbit/s (issue 7: eRDMA on ebmgn7ex 2 x 80; IB 200; VPC 25).
DEFAULT_LINE_RATE_GBPS = {"erdma": 160.0, "infiniband": 200.0, "roce": 100.0, "acs_type1": 200.0,
                          "acs_type2": 50.0, "tcp": 25.0}  # fmt: skip


def expected_busbw_gbs(run: dict[str, Any]) -> float:
    gbps = run.get("line_rate_gbps") or DEFAULT_LINE_RATE_GBPS.get(run.get("fabric", "tcp"), 25.0)
    return float(gbps) / 8.0


def optional_float(value: Any) -> float | None:
    """A threshold from run.json: None, "" and "none" mean no threshold."""
    if value is None or str(value).strip().lower() in ("", "none", "null"):
        return None
    return float(value)


def gpu_words(run: dict[str, Any]) -> str:
    gpus = run.get("gpus") if isinstance(run.get("gpus"), dict) else {}
    nodes = run.get("nodes") or []
    if not gpus:
        return f"{len(nodes)} nodes"
    total = sum(int(n or 0) for n in gpus.values())
    return f"{total} GPUs on {len(nodes)} nodes" if total else f"CPU only, {len(nodes)} nodes"


def nccl_results(run_dir: Path, run: dict[str, Any], components: list[Component]) -> dict[str, Any]:
    nccl = run.get("nccl", {})
    if nccl.get("status") != "ran":
        reason = str(nccl.get("reason") or "not requested")
        components.append(Component("nccl-tests", "nccl-tests", "skipped", reason))
        components.append(Component("transport", "transport", "skipped", "nccl-tests did not run"))
        return {"status": nccl.get("status", "skipped"), "reason": nccl.get("reason"), "collectives": {}}
    expected = expected_busbw_gbs(run)
    threshold = optional_float(run.get("min_efficiency", 0.8))
    on = f"{run.get('fabric', 'tcp')} fabric, {gpu_words(run)}"
    collectives: dict[str, Any] = {}
    transports = []
    for name in nccl.get("collectives", []):
        log = run_dir / f"nccl-{name}.log"
        report = parse_file(log, source=log.name) if log.exists() else None
        runs = report.runs if report else []
        if report:
            transports.append(report.transport)
        entry: dict[str, Any] = {"status": "missing", "avg_busbw": None, "peak_busbw": None, "efficiency": None}
        component = Component(f"nccl-tests {name}", "nccl-tests", "fail", "", unit="GB/s", on=on)
        if not runs:
            component.reason = f"no nccl-tests result in {log.name} (crashed before the table)"
        else:
            last = runs[-1]
            peak = max((r.out_of_place.busbw for r in last.rows), default=None)
            entry = {"status": last.status, "avg_busbw": last.avg_busbw, "peak_busbw": peak,
                     "efficiency": (peak / expected) if peak is not None else None,
                     "errors": list(last.errors), "rows": [r.to_dict() for r in last.rows]}  # fmt: skip
            component.value = peak
            if last.status != "ok":
                component.reason = f"run {last.status}: {last.status_reason}"
            elif threshold is None:
                component.status = "not_judged"
                component.reason = "no threshold: benchmark_min_efficiency is empty"
            elif peak is None:
                component.reason = "the table has no bus bandwidth"
            else:
                component.threshold = round(threshold * expected, 3)
                component.status = "pass" if peak >= threshold * expected else "fail"
                relation = "reaches" if component.status == "pass" else "is below"
                component.reason = (f"peak busbw {peak} GB/s {relation} {threshold:.0%} of the expected "
                                    f"{expected:.1f} GB/s line rate")  # fmt: skip
        components.append(component)
        collectives[name] = entry
    transport = merge_transports(transports) if transports else None
    transport_dict = transport.to_dict() if transport else {}
    fabric = str(run.get("fabric", "tcp"))
    if transport is None:
        components.append(Component("transport", "transport", "skipped", "no nccl-tests log to read it from"))
    else:
        judged = verdict(transport, fabric)
        transport_dict["verdict"] = judged.to_dict()
        status: Status = {"ok": "pass", "warn": "pass", "fail": "fail"}.get(judged.status, "not_judged")  # type: ignore[assignment]
        components.append(Component("transport", "transport", status, "; ".join(judged.messages),
                                    threshold=judged.expected, value=", ".join(transport.all_networks) or None,
                                    on=f"{fabric} fabric"))  # fmt: skip
    return {"status": "ran", "expected_busbw_gbs": expected, "min_efficiency": threshold,
            "collectives": collectives, "transport": transport_dict}  # fmt: skip


def e2e_results(run_dir: Path, run: dict[str, Any], components: list[Component]) -> dict[str, Any] | None:
    path = run_dir / "e2e.json"
    if not path.exists():
        reason = "benchmark_e2e is false" if run.get("e2e_enabled") is False else "no e2e result (e2e.json missing)"
        components.append(Component("e2e", "e2e", "skipped", reason))
        return None
    e2e: dict[str, Any] = json.loads(path.read_text())
    single, multi = e2e.get("single"), e2e.get("multi")
    component = Component("e2e", "e2e", "fail", "", unit="linearity")
    if single and multi:
        nodes = int(multi.get("nodes") or 1)
        one = single["percentiles"]["p50"]["samples_per_s"]
        many = multi["percentiles"]["p50"]["samples_per_s"]
        e2e["linearity"] = many / (one * nodes) if one and nodes else None
        device = "GPU" if multi.get("backend") == "nccl" else "CPU"
        ranks = int(multi.get("world_size") or nodes)
        component.on = f"{multi.get('backend')} on {device}, {nodes} nodes, {ranks} ranks"
        component.value = round(e2e["linearity"], 3) if e2e["linearity"] is not None else None
        minimum = optional_float(e2e.get("min_linearity"))
        if e2e["linearity"] is None:
            component.reason = "the 1-node run measured no throughput"
        elif minimum is None:
            component.status = "not_judged"
            component.reason = "no threshold: benchmark_e2e_min_linearity is empty"
        else:
            component.threshold = minimum
            component.status = "pass" if e2e["linearity"] >= minimum else "fail"
            relation = "reaches" if component.status == "pass" else "is below"
            component.reason = f"linearity {e2e['linearity']:.2f} {relation} {minimum}"
    else:
        component.reason = f"e2e benchmark failed: {e2e.get('error') or 'no result line from the training run'}"
    components.append(component)
    return e2e


def load_baseline(path: str | None) -> dict[str, Any] | None:
    """The baseline named in run.json; BaselineError (with the path) when it is missing or malformed."""
    return baseline.load(path) if path else None


def judge(run_dir: Path, run: dict[str, Any]) -> dict[str, Any]:
    """Results with per-component statuses and the overall verdict, without writing anything."""
    reference = load_baseline(run.get("baseline"))  # before anything else: a bad path is an error, not ignored
    components: list[Component] = []
    results: dict[str, Any] = {"fabric": run.get("fabric"), "nodes": run.get("nodes", [])}
    results["nccl"] = nccl_results(run_dir, run, components)
    results["e2e"] = e2e_results(run_dir, run, components)
    if reference is not None:
        tolerance = float(run.get("tolerance", 0.1))
        components += baseline.compare(reference, run, results, tolerance)
        results["baseline"] = {"path": run.get("baseline"), "tolerance": tolerance}
    required = required_groups(run, (c.group for c in components if c.status != "skipped"))
    mark_required(components, required)
    status, reasons = overall(components, required)
    results["verdict"] = status
    results["reasons"] = reasons
    results["required"] = sorted(required)
    results["components"] = [c.to_dict() for c in components]
    return results


def render(run_dir: Path, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write results.json, results.csv, summary.md and the plots; return the results.

    ``overrides`` replace keys of run.json for this rendering (`rdmaforge report --baseline FILE`).
    BaselineError when the run names a baseline that is missing or malformed (nothing is written then).
    """
    run = {**json.loads((run_dir / "run.json").read_text()), **(overrides or {})}
    results = judge(run_dir, run)
    (run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    write_csv(run_dir / "results.csv", results)
    plots = write_plots(run_dir, results)
    (run_dir / "summary.md").write_text(summary_markdown(results, plots))
    return results


def write_csv(path: Path, results: dict[str, Any]) -> None:
    with path.open("w", newline="") as out:
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


def write_plots(run_dir: Path, results: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    written = []
    collectives = results["nccl"].get("collectives", {})
    if any(entry.get("rows") for entry in collectives.values()):
        fig, ax = plt.subplots(figsize=(8, 5))
        for name, entry in collectives.items():
            rows = [r for r in entry.get("rows", []) if r["size"] > 0]
            ax.plot([r["size"] for r in rows], [r["out_of_place"]["busbw"] for r in rows], marker="o", label=name)
        expected = results["nccl"]["expected_busbw_gbs"]
        ax.axhline(expected, linestyle="--", color="grey", label=f"line rate {expected:.1f} GB/s")
        ax.set_xscale("log", base=2)
        ax.set(xlabel="message size (bytes)", ylabel="bus bandwidth (GB/s)", title=f"nccl-tests, {results['fabric']}")
        ax.legend()
        fig.savefig(run_dir / "nccl_busbw.png", dpi=100)
        plt.close(fig)
        written.append("nccl_busbw.png")
    e2e = results.get("e2e") or {}
    if e2e.get("single") and e2e.get("multi"):
        labels = ["p50", "p75", "p90", "p95"]
        fig, ax = plt.subplots(figsize=(8, 5))
        width = 0.4
        for offset, (key, run) in enumerate(
            (("1 node", e2e["single"]), (f"{e2e['multi']['nodes']} nodes", e2e["multi"]))
        ):
            values = [run["percentiles"][label]["samples_per_s"] for label in labels]
            ax.bar([i + offset * width for i in range(len(labels))], values, width, label=key)
        ax.set_xticks([i + width / 2 for i in range(len(labels))], labels)
        ax.set(
            ylabel="samples/s",
            title=f"e2e DDP throughput ({e2e['multi']['backend']}), linearity {e2e['linearity']:.2f}",
        )
        ax.legend()
        fig.savefig(run_dir / "e2e_throughput.png", dpi=100)
        plt.close(fig)
        written.append("e2e_throughput.png")
    return written


def summary_markdown(results: dict[str, Any], plots: list[str]) -> str:
    lines = [f"# Benchmark: {results['fabric']} fabric, {len(results['nodes'])} nodes", "",
             f"**Verdict: {results['verdict']}**", ""]  # fmt: skip
    lines += [f"- {reason}" for reason in results["reasons"]] + [""]
    lines += ["What was measured, and against what:", ""]
    lines += [f"- {describe(component)}" for component in results["components"]] + [""]
    nccl = results["nccl"]
    if nccl["status"] == "ran":
        lines += [f"Expected bus bandwidth (line rate): {nccl['expected_busbw_gbs']:.1f} GB/s", ""]
        lines += ["| collective | status | avg busbw GB/s | peak busbw GB/s | efficiency |", "|---|---|---|---|---|"]
        for name, entry in nccl["collectives"].items():
            eff = f"{entry['efficiency']:.0%}" if entry.get("efficiency") is not None else "-"
            lines.append(f"| {name} | {entry['status']} | {entry['avg_busbw']} | {entry['peak_busbw']} | {eff} |")
        lines.append("")
    e2e = results.get("e2e")
    if e2e and e2e.get("multi"):
        lines += ["| e2e run | ranks | " + " | ".join(f"{p} samples/s" for p in ("p50", "p75", "p90", "p95")) + " |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for label, run in (("1 node", e2e.get("single")), (f"{e2e['multi']['nodes']} nodes", e2e["multi"])):
            if run:
                values = " | ".join(
                    f"{run['percentiles'][p]['samples_per_s']:.1f}" for p in ("p50", "p75", "p90", "p95")
                )
                lines.append(f"| {label} | {run['world_size']} | {values} |")
        if e2e.get("linearity") is not None:
            lines += ["", f"Linearity (N-node / (1-node x N), p50): {e2e['linearity']:.2f}"]
        lines.append("")
    lines += [f"![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n"
