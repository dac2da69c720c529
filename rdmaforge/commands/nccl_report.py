"""``rdmaforge nccl-report``: read nccl-tests outputs (text logs or ``-J`` JSON) and report every run.

With ``--json`` it prints one JSON object ``{"runs": [...], "transport": {...}}``: the runs of all files
concatenated (each with a ``source`` key), and ONE transport object merging the NCCL_DEBUG=INFO evidence of
all files (a cluster run is usually split into one log per collective, and the question "did NCCL use
RDMA?" is about the cluster). With ``--fabric PROFILE`` the transport object carries a ``verdict``.

Exit code: 0 when every run is ok; 1 when a run failed or is incomplete, a file holds no run at all, or the
transport verdict is a failure; 2 for usage errors and unreadable files.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from rdmaforge.nccl_tests import (
    FABRIC_PROFILES,
    Half,
    Report,
    Run,
    Transport,
    merge_reports,
    parse,
    parse_file,
    verdict,
)

if TYPE_CHECKING:
    from rdmaforge.nccl_tests import TransportVerdict

PROG = "rdmaforge nccl-report"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "nccl-report",
        help="summarise nccl-tests outputs (text or -J JSON) and check the NCCL transport",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="nccl-tests output ('-' for stdin)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument(
        "--fabric",
        choices=sorted(FABRIC_PROFILES),
        help="fabric profile the cluster was built for: fail when NCCL used another transport",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    reports: list[Report] = []
    for name in args.files:
        try:
            reports.append(_read(name))
        except OSError as exc:
            print(f"{PROG}: cannot read {name}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    report = merge_reports(reports)
    judged = verdict(report.transport, args.fabric) if args.fabric else None
    if args.json:
        _print_json(report, judged, sys.stdout)
    else:
        _print_text(report, judged, sys.stdout)
    empty = [name for name, item in zip(args.files, reports, strict=True) if not item.runs]
    for name in empty:
        print(f"{PROG}: no nccl-tests run found in {name}", file=sys.stderr)
    if empty or any(item.status != "ok" for item in report.runs):
        return 1
    return 1 if judged is not None and judged.failed else 0


def _read(name: str) -> Report:
    if name == "-":
        return parse(sys.stdin.buffer.read(), source="<stdin>")
    return parse_file(name)


def _print_json(report: Report, judged: TransportVerdict | None, out: TextIO) -> None:
    data: dict[str, Any] = report.to_dict()
    if judged is not None:
        data["transport"]["verdict"] = judged.to_dict()
    # allow_nan=False: the parsers only keep finite numbers, and the output must stay valid JSON.
    json.dump(data, out, indent=2, allow_nan=False)
    out.write("\n")


def _print_text(report: Report, judged: TransportVerdict | None, out: TextIO) -> None:
    for index, item in enumerate(report.runs, start=1):
        out.write(_format_run(index, item))
        out.write("\n")
    out.write(_format_transport(report.transport, judged))


def _format_run(index: int, item: Run) -> str:
    title = f"run {index}: {item.collective or 'unknown collective'}"
    if item.source:
        title += f" ({item.source})"
    facts = [
        f"nccl-tests {item.nccl_tests_version}" if item.nccl_tests_version else None,
        f"NCCL {item.nccl_version}" if item.nccl_version else None,
        f"{item.ranks} ranks" if item.ranks else None,
    ]
    lines = [title, "  " + ", ".join(f for f in facts if f) if any(facts) else "  (no version information)"]
    lines.append(f"  status: {item.status}" + (f" - {item.status_reason}" if item.status_reason else ""))
    if item.rows:
        lines.extend(_format_rows(item))
    if item.avg_busbw is not None or item.out_of_bounds is not None:
        lines.append(f"  avg bus bandwidth: {_maybe(item.avg_busbw)} GB/s, out of bounds: {_maybe(item.out_of_bounds)}")
    lines.extend(f"  error: {error}" for error in item.errors)
    lines.extend(f"  warning: {warning}" for warning in item.warnings)
    return "\n".join(lines) + "\n"


def _format_rows(item: Run) -> list[str]:
    header = (
        f"  {'size':>12} {'count':>12} {'type':>8} {'redop':>6} {'root':>4}"
        f" {'time(us)':>10} {'busbw':>8} {'#wrong':>6} {'ip time':>10} {'ip busbw':>8} {'#wrong':>6}"
    )
    lines = [header]
    for row in item.rows:
        lines.append(
            f"  {row.size:>12} {row.count:>12} {row.type:>8} {row.redop or '-':>6} {_maybe(row.root):>4}"
            f" {_format_half(row.out_of_place)} {_format_half(row.in_place)}"
        )
    return lines


def _format_half(half: Half | None) -> str:
    if half is None:
        return f"{'-':>10} {'-':>8} {'-':>6}"
    return f"{half.time_us:>10.2f} {half.busbw:>8.2f} {_maybe(half.wrong):>6}"


def _format_transport(transport: Transport, judged: TransportVerdict | None) -> str:
    if transport.info_lines == 0:
        text = "transport: unknown (no NCCL INFO lines; run with NCCL_DEBUG=INFO)\n"
    else:
        hcas = ", ".join(f"{h.name}:{h.port}/{h.link_layer}" for h in transport.hcas) or "none listed"
        text = (
            f"transport: network {_maybe(transport.network)}, HCAs {hcas}, GDR {_maybe(transport.gdr)}, "
            f"plugin {_maybe(transport.plugin_result)}"
            + (f" ({transport.plugin})" if transport.plugin else "")
            + f", NCCL {_maybe(transport.nccl_version)}\n"
        )
        text += "".join(f"  IB problem: {problem}\n" for problem in transport.ib_problems)
    if judged is not None:
        text += f"verdict ({judged.fabric}): {judged.status.upper()}\n"
        text += "".join(f"  {message}\n" for message in judged.messages)
    return text


def _maybe(value: float | int | str | None, spec: str = "") -> str:
    """``value`` formatted, or ``-`` when there is none (N/A columns, missing footer)."""
    return "-" if value is None else format(value, spec)
