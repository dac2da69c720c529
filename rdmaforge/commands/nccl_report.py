"""``rdmaforge nccl-report``: read nccl-tests outputs (text logs or ``-J`` JSON) and report every run.

With ``--json`` it prints one JSON object ``{"runs": [...], "transport": {...}}``: the runs of all files
concatenated (each with a ``source`` key), and ONE transport object merging the NCCL_DEBUG=INFO evidence of
all files (a cluster run is usually split into one log per collective, and the question "did NCCL use
RDMA?" is about the cluster). With ``--fabric PROFILE`` the transport object carries a ``verdict``: each file
is judged from its own evidence (one log's NET/IB proves nothing of a log without INFO lines), and the
verdict is the worst of them, each message naming its file.

Input: each FILE is a text log (any nccl-tests version, NCCL INFO lines and MPI tags mixed in) or a ``-J``
JSON document, detected from the content; gzip-, bzip2- or xz-compressed either way; UTF-8 (with or without a
BOM) or UTF-16/UTF-32 with a BOM; ``-`` reads stdin. Files are read incrementally and runs are printed as they end,
so memory does not grow with the input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from rdmaforge.nccl_tests import (
    FABRIC_PROFILES,
    Half,
    Run,
    Transport,
    accel,
    check_input,
    stream_runs,
)
from rdmaforge.nccl_tests.rowstore import RowStore
from rdmaforge.nccl_tests.transport import OneNodeRuns, RunsWithoutInfoLines, merge_transports, verdict_of_logs
from rdmaforge.runner.exit_codes import OUTPUT_CUT, ExitCode, epilog
from rdmaforge.terminal import escaped, unwrapped, write_all
from rdmaforge.text import fixed, help_text

if TYPE_CHECKING:
    from rdmaforge.nccl_tests import TransportVerdict

PROG = "rdmaforge nccl-report"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "nccl-report",
        help="summarise nccl-tests outputs (text or -J JSON) and check the NCCL transport",
        description=help_text(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=epilog(ExitCode.BELOW_THRESHOLD, ExitCode.INCOMPLETE, meanings={
            ExitCode.OK: "every run is ok (and the transport verdict, when asked for, is ok)",
            ExitCode.ERROR: OUTPUT_CUT,
            ExitCode.BELOW_THRESHOLD: "a run failed or the transport verdict failed",
            ExitCode.INCOMPLETE: "a run is incomplete, a file holds no run at all, or the transport verdict is "
                                 "unknown (no NCCL INFO evidence) or a warning (RDMA used, with a reservation the "
                                 "verdict names): nothing failed, nothing was proven",
            ExitCode.BAD_INPUT: "bad command line or input file (one that cannot be read, binary or corrupt "
                                "compressed data)",
        }),  # fmt: skip
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="nccl-tests output ('-' for stdin)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument(
        "--fabric",
        choices=sorted(FABRIC_PROFILES),
        help="fabric profile the cluster was built for: fail when NCCL used another transport",
    )
    parser.set_defaults(func=run)


class _Sink:
    """Output gathered into large blocks: with PYTHONUNBUFFERED=1 every write() is a system call."""

    LIMIT = 1 << 20

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._parts: list[str] = []
        self._size = 0

    def write(self, text: str) -> None:
        if len(text) >= self.LIMIT:  # a block of rows: written as it is, not copied into a join
            if self._parts:
                write_all(self._out, "".join(self._parts))
                self._parts, self._size = [], 0
            write_all(self._out, text)
            return
        self._parts.append(text)
        self._size += len(text)
        if self._size >= self.LIMIT:
            self.flush()

    def flush(self) -> None:
        if self._parts:
            write_all(self._out, "".join(self._parts))
            self._parts, self._size = [], 0
        self._out.flush()


def run(args: argparse.Namespace) -> int:
    if args.files.count("-") > 1:  # the second read of stdin finds nothing: "no run found", exit 5
        print(f"{PROG}: - (standard input) is given {args.files.count('-')} times; it can be read once",
              file=sys.stderr)  # fmt: skip
        return int(ExitCode.BAD_INPUT)
    for name in args.files:
        if name != "-":
            check_input(name)  # every file readable and a possible log before any output (else exit 64)
    # JSON goes past rdmaforge.terminal's escaping: it is escaped as it is made (json.dumps, names through
    # _json_str, the C formatter's numbers), and scanning it again cost half the speed on a 200 MB run (its JSON
    # is 4 times the log).
    sink = _Sink(unwrapped(sys.stdout) if args.json else sys.stdout)
    transports: list[tuple[str, Transport]] = []  # each file's own evidence, judged on its own
    statuses: set[str] = set()
    empty: list[str] = []
    # Per file: whether each of its runs kept its ranks on one node (then its INFO lines say nothing of the fabric).
    nodes: dict[str, OneNodeRuns] = {}
    count = 0
    if args.json:
        sink.write('{\n  "runs": [')
    for name in args.files:
        runs_in_file = 0
        source = "<stdin>" if name == "-" else name
        silent = RunsWithoutInfoLines()
        for item in _runs_of(name, transports):
            silent.add(f"run {runs_in_file + 1} ({item.collective or 'unknown collective'})", item.has_table,
                       item.info_lines)  # fmt: skip
            statuses.add(item.status)
            nodes.setdefault(source, OneNodeRuns()).add(item.rank_hosts)
            if args.json:
                sink.write("\n" if count == 0 else ",\n")
                write_run_json(item, sink.write)
            else:
                write_run_text(count + 1, item, sink.write)
            item.rows.close()
            count += 1
            runs_in_file += 1
        if not runs_in_file:
            empty.append(name)
        if silent.borrowed:
            # One run's INFO lines prove nothing of another's: judged as a log of its own, without evidence, as the
            # same run in a file of its own is.
            transports.append((f"{source}, {', '.join(silent.borrowed)}", Transport()))
    transport = merge_transports(t for _, t in transports)
    judged = verdict_of_logs(transports, args.fabric, nodes) if args.fabric else None
    if args.json:
        data: dict[str, Any] = transport.to_dict()
        if judged is not None:
            data["verdict"] = judged.to_dict()
        # allow_nan=False: the parsers only keep finite numbers, and the output must stay valid JSON.
        body = json.dumps(data, indent=2, allow_nan=False).replace("\n", "\n  ")
        sink.write(("\n  ]" if count else "]") + ',\n  "transport": ' + body + "\n}\n")
    else:
        sink.write(_format_transport(transport, judged))
    sink.flush()
    for name in empty:
        print(f"{PROG}: no nccl-tests run found in {escaped(name, one_line=True)}", file=sys.stderr)
    if "failed" in statuses or (judged is not None and judged.failed):
        return ExitCode.BELOW_THRESHOLD
    if empty or "incomplete" in statuses or (judged is not None and judged.status != "ok"):
        return ExitCode.INCOMPLETE  # an unknown or warn verdict proves nothing either
    return ExitCode.OK


def _runs_of(name: str, transports: list[tuple[str, Transport]]) -> Iterator[Run]:
    """The runs of one file as they end (OSError and InputError reach the CLI: exit 64 naming the file)."""
    source = "<stdin>" if name == "-" else name
    stream, raw = stream_runs(name, source)
    try:
        yield from stream
    finally:
        if name != "-":
            raw.close()
    transports.append((source, stream.transport))


# -- JSON, written exactly as json.dumps(indent=2) would, but row by row from the packed store -------------

#: json.dumps' own string encoder (ensure_ascii=True), in C where the json module has its accelerator.
_json_str: Callable[[str], str] = json.encoder.encode_basestring_ascii

_RUN_PAD = "    "
_ROW_BATCH = 2048
_ROWS_MARK = '\n      "rows": [],'


def write_run_json(item: Run, write: Callable[[str], None]) -> None:
    """``item.to_dict()`` as ``json.dumps(indent=2)`` prints it inside the ``runs`` list, rows streamed."""
    head = _run_head_json(item.to_dict(with_rows=False))
    if not item.rows:
        write(head)
        return
    at = head.index(_ROWS_MARK) + len(_ROWS_MARK) - 3
    write(head[:at] + "[\n")
    fast = accel.fast
    if fast is not None:
        names = [_json_str(name) if name is not None else "null" for name in item.rows.names]
        separator = ""
        for chunk in item.rows.record_chunks():
            if separator:
                write(separator)
            write(fast.format_rows(chunk, names))
            separator = ",\n"
        write("\n      ]," + head[at + 3 :])
        return
    batch: list[str] = []
    separator = ""
    for text in _rows_json(item.rows):
        batch.append(text)
        if len(batch) == _ROW_BATCH:
            write(separator + ",\n".join(batch))
            batch, separator = [], ",\n"
    if batch:
        write(separator + ",\n".join(batch))
    write("\n      ]," + head[at + 3 :])


def _run_head_json(data: dict[str, Any]) -> str:
    """``json.dumps(data, indent=2, allow_nan=False)`` indented for the ``runs`` list, for a run's dict (values
    None, str, int, finite float or a list of str); anything else goes through json.dumps itself."""
    parts = []
    for key, value in data.items():
        kind = type(value)
        if value is None:
            text = "null"
        elif kind is str:
            text = _json_str(value)
        elif kind is list:
            if not value:
                text = "[]"
            elif set(map(type, value)) == {str}:
                text = "[\n        " + ",\n        ".join(map(_json_str, value)) + "\n      ]"
            else:
                return _head_by_json(data)
        elif kind is int:
            text = int.__repr__(value)
        elif kind is float and value - value == 0.0:  # finite
            text = float.__repr__(value)
        else:
            return _head_by_json(data)
        key_text = _KEY_TEXT.get(key)
        if key_text is None:
            key_text = _KEY_TEXT[key] = _json_str(key) + ": "
        parts.append(key_text + text)
    return _RUN_PAD + "{\n      " + ",\n      ".join(parts) + "\n    }"


#: ``"key": `` of each key seen (a run has a dozen).
_KEY_TEXT: dict[str, str] = {}


def _head_by_json(data: dict[str, Any]) -> str:
    text = json.dumps(data, indent=2, allow_nan=False)
    return _RUN_PAD + text.replace("\n", "\n" + _RUN_PAD)


def _rows_json(rows: RowStore) -> Iterator[str]:
    names = [json.dumps(name) if name is not None else "null" for name in rows.names]
    for r in rows.records():
        in_place = (
            "{\n            "
            f'"time_us": {r[11]!r},\n            "algbw": {r[12]!r},\n            "busbw": {r[13]!r},\n'
            f'            "wrong": {"null" if r[14] != r[14] else int(r[14])},\n'
            f'            "rel_error": {"null" if r[15] != r[15] else repr(r[15])}\n          }}'
            if r[3] & 1
            else "null"
        )
        yield (
            f'        {{\n          "size": {r[0]},\n          "count": {r[1]},\n          "type": {names[r[4]]},\n'
            f'          "redop": {names[r[5]]},\n          "root": {"null" if r[2] < 0 else r[2]},\n'
            f'          "out_of_place": {{\n            "time_us": {r[6]!r},\n            "algbw": {r[7]!r},\n'
            f'            "busbw": {r[8]!r},\n            "wrong": {"null" if r[9] != r[9] else int(r[9])},\n'
            f'            "rel_error": {"null" if r[10] != r[10] else repr(r[10])}\n          }},\n'
            f'          "in_place": {in_place}\n        }}'
        )


def write_run_text(index: int, item: Run, write: Callable[[str], None]) -> None:
    """One run as a readable block (title, facts, status, rows, footer, errors), rows written in batches."""
    title = f"run {index}: {item.collective or 'unknown collective'}"
    if item.source:
        title += f" ({escaped(item.source, one_line=True)})"
    facts = [
        f"nccl-tests {item.nccl_tests_version}" if item.nccl_tests_version else None,
        f"NCCL {item.nccl_version}" if item.nccl_version else None,
        f"{item.ranks} ranks" if item.ranks else None,
        # As to_dict's split_groups: the bandwidth is one group's communicator, not the whole job's.
        f"{item.split_groups} NCCL_TESTS_SPLIT groups (busbw per group)" if item.split_groups > 1 else None,
    ]
    lines = [title, "  " + ", ".join(f for f in facts if f) if any(facts) else "  (no version information)"]
    lines.append(f"  status: {item.status}" + (f" - {item.status_reason}" if item.status_reason else ""))
    unchecked = item.data_unchecked()
    if unchecked is not None:
        lines.append(f"  data: {unchecked}")
    write("\n".join(lines) + "\n")
    if item.rows:
        write(
            f"  {'size':>12} {'count':>12} {'type':>8} {'redop':>6} {'root':>4}"
            f" {'time(us)':>10} {'busbw':>8} {'#wrong':>6} {'ip time':>10} {'ip busbw':>8} {'#wrong':>6}\n"
        )
        batch: list[str] = []
        for row in item.rows:
            batch.append(
                f"  {row.size:>12} {row.count:>12} {row.type:>8} {row.redop or '-':>6} {_maybe(row.root):>4}"
                f" {_format_half(row.out_of_place)} {_format_half(row.in_place)}\n"
            )
            if len(batch) == _ROW_BATCH:
                write("".join(batch))
                batch = []
        write("".join(batch))
    tail = []
    if item.avg_busbw is not None or item.out_of_bounds is not None:
        tail.append(f"  avg bus bandwidth: {_maybe(item.avg_busbw)} GB/s, out of bounds: {_maybe(item.out_of_bounds)}")
    tail.extend(f"  error: {error}" for error in item.errors)
    tail.extend(f"  warning: {warning}" for warning in item.warnings)
    write("".join(line + "\n" for line in tail) + "\n")


def _format_half(half: Half | None) -> str:
    if half is None:
        return f"{'-':>10} {'-':>8} {'-':>6}"
    return f"{fixed(half.time_us, 2):>10} {fixed(half.busbw, 2):>8} {_maybe(half.wrong):>6}"


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
        # A message names its file: one whose name holds a newline must not print a line of its own (a verdict).
        text += "".join(f"  {escaped(message, one_line=True)}\n" for message in judged.messages)
    return text


def _maybe(value: float | int | str | None, spec: str = "") -> str:
    """``value`` formatted, or ``-`` when there is none (N/A columns, missing footer)."""
    return "-" if value is None else format(value, spec)
