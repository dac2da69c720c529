"""`rdmaforge pairwise -i INVENTORY`: measure every node pair per rail (playbooks/pairwise.yml) and name the
suspect nodes and links.

The role writes results.json, table.txt, hostfile.healthy and heatmap-<nic>.png into this command's run
directory (pairwise/); this command prints the table (or, with --json, results.json) and exits 7 when a suspect
was found. The role's own "pairwise suspects" failure is that verdict, not a broken host.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rdmaforge.errors import CannotRun
from rdmaforge.pairwise import output
from rdmaforge.pairwise.plan import PlanError, parse_nic_selection
from rdmaforge.paths import playbook
from rdmaforge.runner import command, execute, extravars, junit
from rdmaforge.runner.events import ASSERT_ACTIONS, FAIL_ACTIONS, HostProblem
from rdmaforge.runner.exit_codes import ExitCode

NAME = "pairwise"


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="measure every node pair per rail and name the slow node or link; exit 7 with suspects",
        description="Runs playbooks/pairwise.yml: node pairs in rounds of disjoint pairs (a round-robin "
        "tournament, N-1 rounds; or --rounds K random perfect matchings), each pair measured on every rail "
        "(NICs of the same name) in both directions, with nccl-tests sendrecv_perf on GPU nodes and iperf3 "
        "elsewhere. Per rail, a node whose pairs are mostly slow while its partners' other pairs are fine is a "
        "node suspect; a single slow pair between two otherwise fine nodes is a link suspect. Writes "
        "results.json, table.txt, heatmap-<nic>.png and hostfile.healthy (the nodes that are not suspects) into "
        "the run directory's pairwise/. Thresholds are the pairwise role's variables, e.g. "
        "-e pairwise_slow_ratio=0.5 -e pairwise_line_rate_gbps=100.",
        codes=(ExitCode.INCOMPLETE, ExitCode.SUSPECTS),
    )
    command.add_target_arguments(parser, tags=False, check=False)
    parser.add_argument(
        "--rounds",
        type=int,
        default=0,
        metavar="K",
        help="K random perfect matchings instead of every pair once (default 0: every pair)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random matchings (default 0)")
    parser.add_argument(
        "--nics",
        default="all",
        metavar="all|NIC,...",
        help="the rails: all (every NIC with an address but the default route's) or eth1,eth2,...",
    )
    parser.add_argument("--json", action="store_true", help="print results.json on stdout (progress on stderr)")
    command.add_output_arguments(parser)
    parser.set_defaults(func=run)


def is_verdict_failure(problem: HostProblem) -> bool:
    return (
        not problem.unreachable
        and problem.action in FAIL_ACTIONS
        and problem.message.startswith(("pairwise suspects", "pairwise incomplete"))
    )


def is_plan_refusal(problem: HostProblem) -> bool:
    return not problem.unreachable and problem.action in ASSERT_ACTIONS and problem.message.startswith("pairwise: ")


def pairwise_exit(outcome: execute.Outcome, results: dict[str, Any] | None) -> ExitCode:
    """Unreachable (3), a refused plan (64) and other host failures (2) outrank the verdict; then suspects (7)."""
    base = command.playbook_exit(outcome)
    if base in (ExitCode.UNREACHABLE, ExitCode.INTERRUPTED, ExitCode.ERROR, ExitCode.BAD_INPUT):
        return base
    excused = {p.host: 0 for p in outcome.events.problems}
    for problem in outcome.events.problems:
        excused[problem.host] += 1 if is_verdict_failure(problem) or is_plan_refusal(problem) else 0
    # A node that failed on its own (its preflight: OS, free space) outranks the plan's refusal, which then only
    # says that node has no facts: a host failed (2), not bad input.
    if any(recap.failed > excused.get(host, 0) for host, recap in outcome.recaps.items()):
        return ExitCode.HOST_FAILED
    if any(is_plan_refusal(p) for p in outcome.events.problems):
        return ExitCode.BAD_INPUT
    if results is None:
        return ExitCode.INCOMPLETE if base == ExitCode.OK else base
    if results["suspects"]:
        return ExitCode.SUSPECTS
    return ExitCode.INCOMPLETE if output.not_judged(results) else ExitCode.OK


def kept_nodes_label(results: dict[str, Any]) -> str:
    """What the nodes of hostfile.healthy are: healthy only when the whole sweep was judged and named no suspect;
    otherwise what is known of them (no node suspect among them)."""
    if results["suspects"]:
        return "nodes kept (no node suspect; see the suspects above)"
    if output.not_judged(results):
        return "nodes with no suspect (not judged in full: see above)"
    return "healthy nodes"


def read_results(directory: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((directory / "results.json").read_text())
    except (OSError, ValueError):
        return None
    return data


def verdict_case(results: dict[str, Any] | None) -> junit.Case:
    if results is None:
        return junit.Case("pairwise verdict", f"rdmaforge.{NAME}", outcome="error", message="no pairwise results")
    suspects = results["suspects"]
    if not suspects and output.not_judged(results):
        why = [output.LINE_RATE_UNJUDGED] if results.get("line_rate_unjudged") else []
        why += [f"{nic} (no pair completed)" for nic in results.get("unjudged") or []]
        why += [f"{node} (in no pair: not measured)" for node in results.get("unmeasured") or []]
        why += [f"{node} (no pair of it completed on {', '.join(nics)})"
                for node, nics in (results.get("unproven") or {}).items()]  # fmt: skip
        return junit.Case("pairwise verdict", f"rdmaforge.{NAME}", outcome="error",
                          message=f"not judged: {', '.join(why)}")  # fmt: skip
    if not suspects:
        return junit.Case("pairwise verdict", f"rdmaforge.{NAME}", message="no suspect")
    named = "; ".join(f"{s['kind']} {s['node']} {s['nic']}: {s['evidence']}" for s in suspects)
    return junit.Case("pairwise verdict", f"rdmaforge.{NAME}", outcome="failed", message=named)


def check(args: argparse.Namespace) -> tuple[list[extravars.ExtraVars], list[str] | None]:
    variables = command.check_arguments(args)
    if args.rounds < 0:
        raise PlanError(f"--rounds must be 0 (every pair once) or a positive count, got {args.rounds}")
    return variables, parse_nic_selection(args.nics)


def run(args: argparse.Namespace) -> int:
    try:
        variables, nics = check(args)
    except CannotRun as exc:
        return command.cannot_run(NAME, str(exc), args)
    except PlanError as exc:
        print(f"rdmaforge {NAME}: {exc}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    session = command.start(args, NAME, out=sys.stderr if args.json else None)
    out_dir = session.run_dir / "pairwise"
    ours = extravars.ExtraVars(
        inline={"pairwise_output_dir": str(out_dir), "pairwise_rounds": args.rounds, "pairwise_seed": args.seed,
                "pairwise_nics": nics if nics else "all"}
    )  # fmt: skip
    request = execute.Request(inventory=args.inventory, playbook=playbook("pairwise.yml"), limit=args.limit,
                              extra_vars=[*variables, ours], verbosity=args.verbose,
                              **command.ansible_options(args))  # fmt: skip
    outcome = command.run_playbook(session, request)
    results = read_results(out_dir)
    if results is not None:
        print("", file=session.out)
        print(output.table(results, output.SHOWN_MATRIX_NODES).rstrip(), file=session.out)
        print(f"\n{kept_nodes_label(results)}: {' '.join(results['healthy_nodes']) or 'none'} "
              f"({out_dir / 'hostfile.healthy'})", file=session.out)  # fmt: skip
        if args.json:
            print(json.dumps(results, indent=2))
    code = pairwise_exit(outcome, results)
    hosts = command.host_cases(outcome, f"rdmaforge.{NAME}", ignore=is_verdict_failure)
    summary = {"results": str(out_dir / "results.json") if results else None,
               "suspects": results["suspects"] if results else None}  # fmt: skip
    record = {**command.outcome_record(outcome), "pairwise": summary}
    return command.finish(session, args, code, [*hosts, verdict_case(results)], record)
