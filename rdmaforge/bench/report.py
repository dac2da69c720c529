"""Turn one benchmark run directory into results.json, results.csv, summary.md and plots, with a verdict.

A run directory (written by the `benchmark` role, or by hand) holds:
  run.json                 what was asked: fabric, nodes, expected line rate, threshold, baseline, statuses
  nccl-<collective>.log    raw nccl-tests output (NCCL_DEBUG=INFO included) for each collective that ran
  e2e.json                 the e2e DDP benchmark result (1-node and N-node runs), when it ran
`rdmaforge report RUN_DIR` re-renders everything from these files.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rdmaforge.nccl_tests import parse_file, verdict
from rdmaforge.nccl_tests.transport import merge_transports

#: Per-node line rate of each fabric profile, Gbit/s (issue 7: eRDMA on ebmgn7ex 2 x 80; IB 200; VPC 25).
DEFAULT_LINE_RATE_GBPS = {"erdma": 160.0, "infiniband": 200.0, "roce": 100.0, "acs_type1": 200.0,
                          "acs_type2": 50.0, "tcp": 25.0}  # fmt: skip


@dataclass
class Verdict:
    status: str = "pass"  # pass | fail | below_threshold | skipped
    reasons: list[str] = field(default_factory=list)

    def fail(self, status: str, reason: str) -> None:
        order = ["skipped", "pass", "below_threshold", "fail"]
        if order.index(status) > order.index(self.status):
            self.status = status
        self.reasons.append(reason)


def expected_busbw_gbs(run: dict[str, Any]) -> float:
    gbps = run.get("line_rate_gbps") or DEFAULT_LINE_RATE_GBPS.get(run.get("fabric", "tcp"), 25.0)
    return float(gbps) / 8.0


def nccl_results(run_dir: Path, run: dict[str, Any], outcome: Verdict) -> dict[str, Any]:
    nccl = run.get("nccl", {})
    if nccl.get("status") != "ran":
        outcome.reasons.append(f"nccl-tests not run: {nccl.get('reason', 'not requested')}")
        return {"status": nccl.get("status", "skipped"), "reason": nccl.get("reason"), "collectives": {}}
    expected = expected_busbw_gbs(run)
    threshold = float(run.get("min_efficiency", 0.8))
    baseline = load_baseline(run.get("baseline"))
    tolerance = float(run.get("tolerance", 0.1))
    collectives: dict[str, Any] = {}
    transports = []
    for name in nccl.get("collectives", []):
        log = run_dir / f"nccl-{name}.log"
        report = parse_file(log, source=log.name) if log.exists() else None
        runs = report.runs if report else []
        if report:
            transports.append(report.transport)
        entry: dict[str, Any] = {"status": "missing", "avg_busbw": None, "peak_busbw": None, "efficiency": None}
        if not runs:
            outcome.fail("fail", f"{name}: no nccl-tests result in {log.name} (crashed before the table)")
        else:
            last = runs[-1]
            peak = max((r.out_of_place.busbw for r in last.rows), default=None)
            entry = {"status": last.status, "avg_busbw": last.avg_busbw, "peak_busbw": peak,
                     "efficiency": (peak / expected) if peak is not None else None,
                     "errors": list(last.errors), "rows": [r.to_dict() for r in last.rows]}  # fmt: skip
            if last.status != "ok":
                outcome.fail("fail", f"{name}: run {last.status}: {last.status_reason}")
            elif peak is None or peak < threshold * expected:
                outcome.fail("below_threshold", f"{name}: peak busbw {peak} GB/s is below {threshold:.0%} of the "
                             f"expected {expected:.1f} GB/s line rate")  # fmt: skip
            previous = (baseline.get("nccl", {}).get("collectives", {}).get(name) or {}).get("avg_busbw")
            if previous and last.avg_busbw is not None and last.avg_busbw < previous * (1 - tolerance):
                outcome.fail("below_threshold", f"{name}: avg busbw {last.avg_busbw} GB/s regressed from the "
                             f"baseline's {previous} GB/s (tolerance {tolerance:.0%})")  # fmt: skip
        collectives[name] = entry
    transport = merge_transports(transports) if transports else None
    transport_dict = transport.to_dict() if transport else {}
    if transport is not None:
        transport_verdict = verdict(transport, run.get("fabric", "tcp"))
        transport_dict["verdict"] = transport_verdict.to_dict()
        if transport_verdict.failed:
            outcome.fail("fail", "; ".join(transport_verdict.messages))
    return {"status": "ran", "expected_busbw_gbs": expected, "min_efficiency": threshold,
            "collectives": collectives, "transport": transport_dict}  # fmt: skip


def e2e_results(run_dir: Path, outcome: Verdict) -> dict[str, Any] | None:
    path = run_dir / "e2e.json"
    if not path.exists():
        return None
    e2e: dict[str, Any] = json.loads(path.read_text())
    single, multi = e2e.get("single"), e2e.get("multi")
    if single and multi:
        nodes = int(multi.get("nodes") or 1)
        one = single["percentiles"]["p50"]["samples_per_s"]
        many = multi["percentiles"]["p50"]["samples_per_s"]
        e2e["linearity"] = many / (one * nodes) if one and nodes else None
        minimum = e2e.get("min_linearity")
        if minimum is not None and e2e["linearity"] is not None and e2e["linearity"] < float(minimum):
            outcome.fail("below_threshold", f"e2e linearity {e2e['linearity']:.2f} is below {minimum}")
    elif e2e.get("error"):
        outcome.fail("fail", f"e2e benchmark failed: {e2e['error']}")
    return e2e


def load_baseline(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        data: dict[str, Any] = json.loads(Path(path).read_text())
        return data
    except (OSError, ValueError):
        return {}


def render(run_dir: Path) -> dict[str, Any]:
    """Write results.json, results.csv, summary.md and the plots; return the results."""
    run = json.loads((run_dir / "run.json").read_text())
    outcome = Verdict()
    results: dict[str, Any] = {"fabric": run.get("fabric"), "nodes": run.get("nodes", [])}
    results["nccl"] = nccl_results(run_dir, run, outcome)
    results["e2e"] = e2e_results(run_dir, outcome)
    if results["nccl"]["status"] != "ran" and results["e2e"] is None and outcome.status == "pass":
        outcome.status = "skipped"
    results["verdict"] = {"status": outcome.status, "reasons": outcome.reasons}
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
             f"**Verdict: {results['verdict']['status']}**", ""]  # fmt: skip
    lines += [f"- {reason}" for reason in results["verdict"]["reasons"]] + [""]
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
