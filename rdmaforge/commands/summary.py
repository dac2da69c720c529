"""`rdmaforge summary [FILE]`: print the per-node summary that playbooks/summary.yml wrote."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rdmaforge import stored
from rdmaforge.errors import input_path, missing_path
from rdmaforge.paths import WORKSPACE, playbook_to_run
from rdmaforge.runner.exit_codes import OUTPUT_CUT, ExitCode, epilog
from rdmaforge.terminal import escaped

DEFAULT = WORKSPACE / "artifacts" / "summary.json"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("summary", help="print the per-node summary of the last converge",
                                   epilog=epilog(meanings={ExitCode.ERROR: OUTPUT_CUT}))
    parser.add_argument("file", nargs="?", type=input_path(f"a summary JSON file (default {DEFAULT})"),
                        default=DEFAULT, help=f"summary JSON (default {DEFAULT})")  # fmt: skip
    parser.set_defaults(func=run)


#: Under an entry its last complete converge recorded (cluster_summary.entries): this run read the node's state only
#: as far as the converge record's comparison goes, and port rates are not part of it.
RECORDED_NOTE = ("(recorded by its last complete converge, which this run found the node still matches; its port "
                 "rates are as read then)")


def format_node(node: dict[str, Any]) -> list[str]:
    """The node's lines; a value holding a newline is written \\x0a, so it cannot fake a line of its own."""
    return [escaped(line, one_line=True) for line in _node_lines(node)]


def _node_lines(node: dict[str, Any]) -> list[str]:
    reason = node.get("not_in_this_run")
    if reason is not None:
        reason = reason or "not in this run (no reason recorded)"
        # Never shown as current: the entry (if any) is what an earlier run saw.
        if "os" not in node:
            # "no earlier run summarized it" would be false after a summary.json that could not be read
            return [f"{node['host']}: {reason}; no earlier summary of it is on record"]
        seen = f"as of {node['as_of']}" if node.get("as_of") else "from an earlier run"
        return [f"{node['host']}: {reason}; its last summary ({seen}):", *("  " + line for line in current(node))]
    if node.get("recorded"):
        # What the node still matches was read by its last complete converge; port rates are not part of the match.
        return [*current(node), f"  {RECORDED_NOTE}"]
    return current(node)


def gpu_words(gpus: object) -> str:
    """"8 GPUs"; a null count (no preflight fact, or one that could not read it) is unknown, never "None GPUs"."""
    return "GPU count unknown" if gpus is None else f"{gpus} GPUs"


def known(value: object, unknown: str) -> str:
    """A recorded value as printed; null (a fact the run could not read) in words, never "None"."""
    return unknown if value is None else str(value)


def current(node: dict[str, Any]) -> list[str]:
    api = ",".join(f"v{v}" for v in node.get("nccl_plugin_api_versions") or []) or "-"
    plugin = str(node.get("nccl_plugin") or "none")  # a scalar, as the schema has it: printed as recorded
    if node.get("nccl_plugin_version"):
        plugin += f" {node['nccl_plugin_version']}"
    packages = " ".join(f"{k}={v}" for k, v in sorted((node.get("rdma_packages") or {}).items())) or "-"
    settings = " ".join(f"{k}={v}" for k, v in sorted((node.get("nccl_settings") or {}).items())) or "-"
    devices = ", ".join(node.get("rdma_devices") or []) or "none"
    ports = [f"  RDMA ports:  {', '.join(node['rdma_ports'])}"] if node.get("rdma_ports") else []
    return [
        f"{node['host']} ({known(node.get('address'), 'address unknown')}): {known(node.get('os'), 'OS unknown')}, "
        f"fabric {known(node.get('fabric'), 'unknown')}, {known(node.get('cpus'), 'unknown')} CPUs, "
        f"{gpu_words(node.get('gpus'))}, RDMA devices: {devices}",
        *ports,
        f"  packages:    {packages}",
        f"  MPI:         {node.get('mpi_version') or '-'}",
        f"  NCCL:        {node.get('nccl_build') or '-'}",
        f"  NCCL plugin: {plugin} (net API {api})",
        f"  nccl.conf:   {settings}",
    ]


def run(args: argparse.Namespace) -> int:
    problem = missing_path(args.file, "summary")
    if problem:
        hint = (f" (rdmaforge provision writes it at its end; or run ansible-playbook {playbook_to_run('summary.yml')})"
                if problem == f"summary {args.file} does not exist" else "")  # fmt: skip
        print(f"rdmaforge summary: {problem}{hint}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    # Checked against the schema first (UserError: one line naming the key, exit 64 from rdmaforge.cli).
    data = stored.load(args.file, stored.SUMMARY_JSON, "cluster summary (summary.json)")
    if data.get("time"):
        print(f"summary written {escaped(str(data['time']), one_line=True)}")
    if not data["nodes"]:
        # A display, not a verdict (exit 0 means it was printed): say that there is nothing, not a blank line.
        print(f"no node in {args.file}: the summary lists none ({playbook_to_run('summary.yml')} summarized no host)")
    else:
        print("\n".join(line for node in data["nodes"] for line in format_node(node)))
    if data.get("previous_summary_problem"):
        print(f"WARNING: {escaped(str(data['previous_summary_problem']), one_line=True)}")
    return int(ExitCode.OK)
