"""The sweep's outputs: results.json, the per-rail nodes x nodes matrix (Gb/s, suspects first), the heat-map
PNG per rail and ``hostfile.healthy`` (the nodes that are not node suspects, one MPI hostfile line each)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rdmaforge import output_files
from rdmaforge.errors import install_hint
from rdmaforge.pairwise.score import (
    Measurement,
    RailScore,
    SingleStream,
    Suspect,
    Thresholds,
    directions,
    suspects_first,
)
from rdmaforge.stored import drawable, undrawn_note
from rdmaforge.text import fixed, percent

CELL = 9


def results(
    measurements: Sequence[Measurement],
    rails: Sequence[RailScore],
    plan: Mapping[str, Any],
    limits: Thresholds,
    method: str,
    notes: Sequence[str] = (),
    single: Sequence[SingleStream] = (),
) -> dict[str, Any]:
    """The content of results.json: every directed measurement, every suspect, and what they were judged by."""
    suspects = suspects_first(rails)
    unmeasured = unmeasured_nodes(plan)
    unproven = unproven_nodes(rails, [n for n in plan["nodes"] if n not in unmeasured])
    return {
        "method": method,
        "nodes": list(plan["nodes"]),
        "nics": list(plan["rails"]),
        "rounds": plan["rounds"],
        "thresholds": asdict(limits),
        "notes": list(notes),
        "pairs": [m.to_dict() for m in measurements],
        "rails": {
            rail.nic: {
                "median_gbps": rail.median_gbps,
                "reference_gbps": rail.reference_gbps,
                "line_rate_gbps": limits.line_rate_gbps,
                "pairs": [dict(vars(p)) for p in rail.pairs],  # scalar fields: no deep copy (asdict)
                "nodes": [dict(vars(n)) for n in rail.nodes],
            }
            for rail in rails
        },
        "suspects": [s.to_dict() for s in suspects],
        # Rails where no pair completed: nothing to judge a pair against, so no suspect could be named there.
        "unjudged": [rail.nic for rail in rails if rail.reference_gbps is None],
        # Nodes in no pair of the schedule (--rounds K random matchings can leave a node out of every round): never
        # measured, so neither suspect nor healthy.
        "unmeasured": unmeasured,
        # Nodes none of whose pairs completed on some rail (rail -> ...): every measurement of them there failed or
        # hung, so nothing there shows them healthy.
        "unproven": unproven,
        # No pairwise_line_rate_gbps: pairs were compared with each other only, so a fleet slow alike names no
        # suspect and is not judged (exit 5), never called healthy.
        "line_rate_unjudged": limits.line_rate_gbps is None,
        "healthy_nodes": [n for n in healthy_nodes(plan["nodes"], suspects)
                          if n not in unmeasured and n not in unproven],  # fmt: skip
        # Seed 003: the first pair with one TCP stream against the sweep's streams; measured, not judged.
        "single_stream": [asdict(one) for one in single],
    }


def unmeasured_nodes(plan: Mapping[str, Any]) -> list[str]:
    """The plan's nodes that are in no pair of any round."""
    paired = {node for pairs in plan["rounds"] for pair in pairs for node in pair}
    return [n for n in plan["nodes"] if n not in paired]


def unproven_nodes(rails: Sequence[RailScore], nodes: Sequence[str]) -> dict[str, list[str]]:
    """Each of ``nodes`` that has no completed pair (both directions ok, moving more than 0 Gb/s) on some rail, with
    those rails."""
    found: dict[str, list[str]] = {}
    for rail in rails:
        done = {n for p in rail.pairs if p.status == "ok" and p.gbps is not None and p.gbps > 0 for n in (p.a, p.b)}
        for node in nodes:
            if node not in done:
                found.setdefault(node, []).append(rail.nic)
    return found


def healthy_nodes(nodes: Sequence[str], suspects: Sequence[Suspect]) -> list[str]:
    """Nodes not named as a node suspect on any rail (a link suspect names a path, not a node to drop)."""
    bad = {s.node for s in suspects if s.kind == "node"}
    return [n for n in nodes if n not in bad]


def hostfile(results_data: Mapping[str, Any], slots: Mapping[str, int | None]) -> str:
    """hostfile.healthy: ``NODE slots=N`` per healthy node (as the mpi_launch role writes its hostfile); a node whose
    GPU count is unknown (None) gets 1 slot, and a comment line says so rather than pass it off as its GPUs."""
    lines = ["# rdmaforge pairwise: the nodes that are not node suspects (mpirun --hostfile hostfile.healthy)"]
    for s in results_data["suspects"]:
        if s["kind"] == "node":
            lines.append(f"# left out: {s['node']} ({s['nic']}: {s['evidence']})")
        elif s["kind"] == "link":
            lines.append(f"# kept, but suspect link {s['node']} on {s['nic']}: {s['evidence']}")
        else:
            lines.append(f"# kept, but slow with no node to blame on {s['nic']}: {s['evidence']}")
    for node in results_data.get("unmeasured") or []:
        lines.append(f"# left out: {node} (not measured: in no pair of the sweep's rounds)")
    for node, nics in (results_data.get("unproven") or {}).items():
        lines.append(f"# left out: {node} (no pair of it completed on {', '.join(nics)}: not judged)")
    for n in results_data["healthy_nodes"]:
        count = slots.get(n, 1)
        if count is None:
            lines.append(f"# {n}: GPU count unknown (rdmaforge_node.gpu_count null): 1 slot, not its GPUs")
        lines.append(f"{n} slots={max(1, int(count or 1))}")
    return "\n".join(lines) + "\n"


def matrix(results_data: Mapping[str, Any], nic: str) -> dict[tuple[str, str], str]:
    """Cell text per ordered pair (row sends to column): Gb/s, or the status of a measurement that failed; a
    direction measured in several rounds shows its worst, as it is judged (score.directions)."""
    cells: dict[tuple[str, str], str] = {}
    for (a, b), m in directions((Measurement.from_dict(m) for m in results_data["pairs"]), nic).items():
        ok = m.status == "ok" and m.gbps is not None
        cells[(a, b)] = fixed(m.gbps, 2) if ok and m.gbps is not None else m.status.upper()[: CELL - 1]
    return cells


def ordered_nodes(results_data: Mapping[str, Any], nic: str) -> list[str]:
    """Suspects of this rail first (node suspects, then the nodes of suspect links), then the others."""
    first: list[str] = []
    for s in results_data["suspects"]:
        if s["nic"] == nic:
            for n in s.get("nodes") or [s["node"]]:
                if n not in first:
                    first.append(n)
    return first + [n for n in results_data["nodes"] if n not in first]


def single_stream_lines(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """Seed 003's one-stream check, one line per direction and rail: a measurement shown, not a verdict."""
    lines = []
    for one in entries:
        what = f"{one['nic']} {one['a']}->{one['b']}"
        if one["share"] is not None:
            lines.append(f"one TCP stream (seed 003; measured, not judged): {what} {fixed(one['single_gbps'], 2)} "
                         f"Gb/s, {percent(one['share'])} of its {one['streams']}-stream {fixed(one['multi_gbps'], 2)} "
                         "Gb/s")  # fmt: skip
        else:
            multi = f"the {one['streams']}-stream run"
            done = f"{multi} did not complete" if one["multi_gbps"] is None else f"{multi} moved 0 Gb/s"
            why = one["status"] if one["status"] != "ok" else done
            lines.append(f"one TCP stream (seed 003): {what} not compared: {why}"
                         + (f" ({one['detail']})" if one.get("detail") else ""))  # fmt: skip
    return lines


#: Why a sweep without pairwise_line_rate_gbps is not judged (the table, the command's verdict, its JUnit case).
LINE_RATE_UNJUDGED = ("the line rate (no pairwise_line_rate_gbps): pairs were compared with each other only, so a "
                      "fleet slow alike names no suspect")


def not_judged(results_data: Mapping[str, Any]) -> bool:
    """A sweep with part of it not judged: a rail where no pair completed, a node in no pair or with no completed
    pair, or no line rate to judge the pairs' level against."""
    return bool(results_data.get("unjudged") or results_data.get("unmeasured") or results_data.get("unproven")
                or results_data.get("line_rate_unjudged"))  # fmt: skip


def not_judged_lines(results_data: Mapping[str, Any]) -> list[str]:
    """What of a sweep was not judged, one line each (empty when not_judged is false): the table's "not judged:"
    lines, and the role's failure for a plain ansible-playbook run, which exited 0 where the CLI exits 5."""
    out = [f"{nic}: no pair completed, so there is nothing to compare a pair with"
           for nic in results_data.get("unjudged") or []]  # fmt: skip
    out += [f"{node}: in no pair of the {len(results_data.get('rounds') or [])} round(s), so never measured (random "
            "matchings leave nodes out; more --rounds, or 0 for every pair, measure it)"
            for node in results_data.get("unmeasured") or []]  # fmt: skip
    out += [f"{node}: no pair of it completed on {', '.join(nics)}, so it is not healthy there"
            for node, nics in (results_data.get("unproven") or {}).items()]  # fmt: skip
    if results_data.get("line_rate_unjudged"):
        # Without a line rate, pairs are judged only against each other: a rail slow everywhere names no suspect.
        out.append(LINE_RATE_UNJUDGED)
    return out


#: The table's file in the output directory (every matrix in full).
TABLE_FILE = "table.txt"
#: The most nodes whose matrix the CLI and the role's output show: a 1000-node rail's matrix is 9 MB of text,
#: which no terminal or Ansible log reads (review round 21b); table.txt keeps it.
SHOWN_MATRIX_NODES = 32


def slowest_node_line(results_data: Mapping[str, Any], nic: str) -> str | None:
    """The rail's node whose median pair is lowest against the rail's median pair: a node at 60% of its peers is
    no suspect with the default slow_ratio 0.5, and its ratio was only in results.json (review round 21b). Named
    for the ticket, measured and not a verdict."""
    scored = [n for n in results_data["rails"][nic].get("nodes") or [] if n.get("ratio_to_cluster") is not None]
    if not scored:
        return None
    low = min(scored, key=lambda n: (n["ratio_to_cluster"], n["node"]))
    slow_ratio = results_data.get("thresholds", {}).get("slow_ratio")
    rule = f" (a pair below {slow_ratio:g} x the reference is slow)" if isinstance(slow_ratio, int | float) else ""
    return (f"slowest node: {low['node']}, its median pair {fixed(low['median_gbps'], 2)} Gb/s is "
            f"{low['ratio_to_cluster']:.2f} x the pair median{rule}")


def table(results_data: Mapping[str, Any], matrix_limit: int | None = None) -> str:
    """Suspects, then one matrix per rail (row = sender, column = receiver, Gb/s). With ``matrix_limit``, a rail of
    more nodes gets one line instead of its matrix (what a terminal can show; table.txt keeps every matrix)."""
    out: list[str] = []
    suspects = results_data["suspects"]
    if suspects:
        out.append(f"suspects ({len(suspects)}):")
        # a rail suspect is named by its rail ("rail eth1"): the kind column already says rail
        out += [f"  {s['kind']:4} {'(rail-wide)' if s['kind'] == 'rail' else s['node']:<16} {s['nic']:<8} "
                f"{s['evidence']}" for s in suspects]  # fmt: skip
    elif not_judged(results_data):
        out.append("suspects: none named")
    else:
        out.append("suspects: none")
    out += [f"not judged: {line}" for line in not_judged_lines(results_data)]
    for note in results_data.get("notes") or []:
        out.append(f"note: {note}")
    out += single_stream_lines(results_data.get("single_stream") or [])
    for nic in results_data["nics"]:
        rail = results_data["rails"][nic]
        median = rail["median_gbps"]
        line = f", line rate {rail['line_rate_gbps']} Gb/s" if rail.get("line_rate_gbps") else ""
        out.append("")
        reference = rail.get("reference_gbps")
        out.append(f"{nic}: Gb/s, row sends to column; pair median {fixed(median, 2)} Gb/s, reference "
                   f"{fixed(reference, 2)} Gb/s{line}" if median is not None and reference is not None
                   else f"{nic}: no pair completed")  # fmt: skip
        names = ordered_nodes(results_data, nic)
        if matrix_limit is not None and len(names) > matrix_limit:
            out.append(f"({len(names)} x {len(names)} matrix not shown here, more than {matrix_limit} nodes: it is in "
                       f"{TABLE_FILE})")  # fmt: skip
            slowest = slowest_node_line(results_data, nic)
            if slowest:
                out.append(slowest)
            continue
        width = max(len(n) for n in names) + 1
        cells = matrix(results_data, nic)
        cell = max([CELL, *(len(text) + 1 for text in cells.values())])  # an absurd rate (1.798e+308) stays apart
        flagged = {n for s in suspects if s["nic"] == nic for n in (s.get("nodes") or [s["node"]])}
        out.append(" " * (width + 1) + "".join(f"{n:>{cell}}" for n in names))
        for row in names:
            mark = "*" if row in flagged else " "
            out.append(f"{mark}{row:<{width}}" + "".join(f"{cells.get((row, col), '-' if row == col else '?'):>{cell}}"
                                                         for col in names))  # fmt: skip
        slowest = slowest_node_line(results_data, nic)
        if slowest:
            out.append(slowest)
    return "\n".join(out) + "\n"


#: The largest side of a heat map, in inches (at 100 dpi): 4000 pixels.
HEATMAP_INCHES = 40.0
#: The most nodes a heat map names on its axes (their names stay readable).
NAMED_NODES = 64


def path_name(nic: str) -> str:
    return f"heatmap-{nic}.png"


#: A top rate at or below this is no range to colour: matplotlib widens such a range (its nonsingular rule) to +-0.1.
_FLAT_BELOW = 1e21 * sys.float_info.min


def heatmaps(results_data: Mapping[str, Any], out_dir: Path) -> tuple[list[Path], list[str]]:
    """One PNG per rail (heatmap-<nic>.png) and the notes to show: that matplotlib is missing (no file then), or
    which rates a map left out (``rdmaforge.stored.drawable``: not finite, or too large for a plot to scale)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], [f"heat maps not drawn: matplotlib is not installed ({install_hint('matplotlib')})"]
    import numpy  # matplotlib's own dependency

    files, notes = [], []
    for nic in results_data["nics"]:
        names = list(results_data["nodes"])
        index = {name: i for i, name in enumerate(names)}
        # One float a cell (a list of lists of floats and of label strings was 400 MB at 1,000 nodes); the labels
        # only where they are drawn (16 nodes or fewer).
        values = numpy.full((len(names), len(names)), numpy.nan)
        labelled = len(names) <= 16
        labels: list[list[str]] = [["" for _ in names] for _ in names] if labelled else []
        undrawn: list[str] = []
        for m in results_data["pairs"]:
            if m["nic"] != nic:
                continue
            i, j = index[m["a"]], index[m["b"]]
            ok = m["status"] == "ok" and m["gbps"] is not None
            if labelled:
                labels[i][j] = fixed(m["gbps"], 2) if ok else str(m["status"])
            if ok and not drawable(m["gbps"]):
                # its cell keeps the number, no colour
                undrawn.append(f"{m['a']}->{m['b']} {fixed(m['gbps'], 2)} Gb/s")
                continue
            values[i, j] = float(m["gbps"]) if ok else 0.0
        # The map grows with the nodes up to a size any viewer opens: at 0.9 inch a node, 200 nodes took 9 GB to
        # draw and 730 ran out of memory, before results.json was written (review round 21b). Past NAMED_NODES
        # the axes count nodes instead of naming them (table.txt names them, in this order).
        size = min(max(4.0, 0.9 * len(names) + 2), HEATMAP_INCHES)
        fig, ax = plt.subplots(figsize=(size, size * 0.85))
        # Coloured here, one byte a channel: imshow resampled a float map to the figure's pixels in float64 (430 MB
        # for 4,000 pixels square). A cell without a rate (NaN) is the colour map's "bad" colour, transparent, as
        # imshow leaves it.
        finite = values[~numpy.isnan(values)]
        top = float(finite.max()) if finite.size else 0.0
        # From 0 to the top rate; a range with nothing above 0 widened to -0.1..0.1, as imshow's colour bar widens
        # it (every rate 0, or none: review round 32), so the maps look as imshow drew them.
        low, high = (0.0, top) if top > _FLAT_BELOW else (-0.1, 0.1)
        norm = matplotlib.colors.Normalize(vmin=low, vmax=high)
        colormap = matplotlib.colormaps["viridis"]
        ax.imshow(colormap(norm(numpy.ma.masked_invalid(values)), bytes=True), interpolation="nearest")
        image = matplotlib.cm.ScalarMappable(norm=norm, cmap=colormap)
        if len(names) <= NAMED_NODES:
            ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
            ax.set_yticks(range(len(names)), names)
        else:
            notes.append(f"{path_name(nic)}: {len(names)} nodes, more than {NAMED_NODES}: the axes give each node's "
                         "place in the order of results.json's nodes, not its name")  # fmt: skip
        ax.set_xlabel("receiver")
        ax.set_ylabel("sender")
        ax.set_title(f"rdmaforge pairwise: {nic} (Gb/s)")
        if labelled:
            for i, row in enumerate(labels):
                for j, text in enumerate(row):
                    if text:
                        light = top > 0 and values[i, j] > 0.6 * top  # dark text on the bright end of viridis
                        ax.text(j, i, text, ha="center", va="center", color="black" if light else "white", fontsize=8)
        path = out_dir / path_name(nic)
        if undrawn:
            notes.append(undrawn_note(path.name, undrawn))
            fig.text(0.01, 0.01, f"{len(undrawn)} rate(s) not coloured: not finite or too large", fontsize=7)
        fig.colorbar(image, ax=ax, label="Gb/s")
        fig.tight_layout()
        with output_files.replaced(path) as png:
            fig.savefig(png, dpi=100)
        plt.close(fig)
        files.append(path)
    return files, notes


#: The most measurements results.json is indented for (64 nodes on two rails).
INDENTED_PAIRS = 16384


def write_all(results_data: dict[str, Any], out_dir: Path, slots: Mapping[str, int | None]) -> None:
    """results.json, table.txt, hostfile.healthy and the heat maps into out_dir; what the heat maps note (no
    matplotlib, rates left out) joins the notes first, so that results.json and the table say it too."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # A heat map that cannot be drawn must not cost the sweep its verdict (review round 21b: out of memory at 730
    # nodes, before results.json was written): it is a note.
    try:
        files, notes = heatmaps(results_data, out_dir)
    except (MemoryError, ValueError, RuntimeError, OSError) as exc:
        files, notes = [], [f"heat maps not drawn: {type(exc).__name__}: {exc}"]
    results_data["notes"] = [*results_data.get("notes", []), *notes]
    results_data["files"] = {"heatmaps": [p.name for p in files], "hostfile": "hostfile.healthy",
                             "table": TABLE_FILE}  # fmt: skip
    # Indented while a person reads it; past that, json's C encoder (indent is the pure-Python one, 10x slower).
    indent = 2 if len(results_data["pairs"]) <= INDENTED_PAIRS else None
    output_files.write_text(out_dir / "results.json", json.dumps(results_data, indent=indent) + "\n")
    output_files.write_text(out_dir / TABLE_FILE, table(results_data))
    output_files.write_text(out_dir / "hostfile.healthy", hostfile(results_data, slots))
