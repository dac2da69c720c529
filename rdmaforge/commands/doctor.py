"""`rdmaforge doctor -i INVENTORY`: read-only health of every node in one pass: each node against what its
inventory implies, then the skew between nodes.

Runs playbooks/doctor.yml in check mode (its tasks only read; check mode makes sure nothing else could
change), reads the JSON file it writes per node into the run directory (doctor/), and prints one row per node:
RDMA devices and port states, MTU, memlock, huge pages, GPUs, ENIs, NCCL and plugin versions, clock offset,
then every check that is a problem, an accepted deviation (doctor_accept) or not checked. `--json` prints the
run's recap.json on stdout (``healthy``, ``exit_code``, ``nodes`` with each node's checks, ...), the rest on
stderr, as provision and verify do.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rdmaforge import doctor, doctor_result
from rdmaforge.errors import CannotRun
from rdmaforge.paths import playbook
from rdmaforge.runner import command, execute, junit
from rdmaforge.runner.exit_codes import ExitCode
from rdmaforge.runner.extravars import ExtraVars
from rdmaforge.runner.recap import one_line

NAME = "doctor"


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="read-only health of every node against its inventory, and skew across nodes (changes nothing)",
        description="Reads every node in one pass (playbooks/doctor.yml, in check mode) and judges each against "
        "what its inventory and fabric profile imply: memlock of a non-interactive login, the RDMA devices and "
        "ACTIVE ports the fabric needs, GPU count (doctor_expected_gpus), huge pages reserved and configured, ENI "
        "MTUs, the NCCL build, the net plugin and its API, the clock offset. Each check is ok, problem, accepted "
        "(listed in doctor_accept with a reason) or not checked. A value that differs from what most nodes have "
        "is flagged too. Exit 0 healthy, 6 a problem, 2 a doctor task failed, 3 a node unreachable, 5 (no problem on "
        "the nodes judged) a node without a result, a value a check needs not read, or no node at all: not judged.",
        codes=(ExitCode.INCOMPLETE, ExitCode.UNHEALTHY),
    )
    command.add_target_arguments(parser, tags=False, check=False)
    limit = doctor.DEFAULT_MAX_CLOCK_OFFSET
    parser.add_argument("--max-clock-offset", type=command.seconds_limit, default=limit, metavar="SECONDS",
                        help=f"flag a clock further off the controller's (default {limit})")  # fmt: skip
    command.add_json_argument(parser)
    command.add_output_arguments(parser)
    parser.set_defaults(func=run)


def read_nodes(directory: Path, hosts: list[str]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The result doctor.yml wrote for each of ``hosts`` (the nodes the run covered that answered), and for each
    one without a readable result why: that node is not judged, never left out."""
    nodes: dict[str, dict[str, Any]] = {}
    unread: dict[str, str] = {}
    for host in hosts:
        path = directory / f"{host}.json"
        if not path.is_file():
            unread[host] = f"doctor wrote no result for it ({path} is missing)"
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            unread[host] = f"its result {path} cannot be read ({exc.__class__.__name__}: {str(exc)[:120]})"
            continue
        if not isinstance(data, dict):
            unread[host] = f"its result {path} is not a JSON object"
            continue
        wrong = doctor_result.shape_problem(data)
        if wrong:
            unread[host] = f"its result {path} is not what doctor.yml writes: {wrong}"
            continue
        nodes[host] = data
    return nodes, unread


def host_cases(diagnosis: doctor.Diagnosis, failed: dict[str, str]) -> list[junit.Case]:
    cases = []
    hosts = [*diagnosis.rows, *diagnosis.unreachable, *(h for h in failed if h not in diagnosis.rows),
             *(h for h in diagnosis.not_judged if h not in failed)]  # fmt: skip
    for host in hosts:
        findings = [f"{c.check}: {c.reason}" for c in diagnosis.problems if c.host == host]
        findings += [f.reason for f in diagnosis.findings if f.host == host]
        if host in diagnosis.unreachable:
            cases.append(junit.Case(host, f"rdmaforge.{NAME}", outcome="error", message="unreachable"))
        elif host in diagnosis.not_judged:
            cases.append(junit.Case(host, f"rdmaforge.{NAME}", outcome="error",
                                    message=f"not judged: {diagnosis.not_judged[host]}"))  # fmt: skip
        elif findings:
            cases.append(junit.Case(host, f"rdmaforge.{NAME}", outcome="failed", message=findings[0],
                                    details="\n".join(findings)))  # fmt: skip
        elif unmeasured := [f"{c.check} (expected {c.expected}): {c.reason}" for c in diagnosis.unmeasured
                            if c.host == host]:  # fmt: skip
            cases.append(junit.Case(host, f"rdmaforge.{NAME}", outcome="skipped",
                                    message=f"not judged: {unmeasured[0]}", details="\n".join(unmeasured)))  # fmt: skip
        else:
            cases.append(junit.Case(host, f"rdmaforge.{NAME}"))
    return cases


def stopped_before_contact(failed: list[str]) -> str:
    """The verdict of a run that failed on the controller before any task reached a node."""
    hosts = ", ".join(failed) if len(failed) <= 5 else f"{len(failed)} nodes"
    return (f"not judged: the run stopped before contacting the nodes: a check on the controller failed for {hosts} "
            "(the failure above: an argument or an inventory value); no node was read")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    try:
        variables = command.check_arguments(args)
    except CannotRun as exc:
        return command.cannot_run(NAME, str(exc), args)
    # With --json the human output goes to stderr: stdout holds the JSON document (recap.json) only.
    session = command.start(args, NAME, json_recap=args.json)
    output = session.run_dir / NAME
    # The output directory last: a user's -e cannot send the files elsewhere than where they are read.
    variables = [*variables, ExtraVars(inline={"doctor_output_dir": str(output)})]
    request = execute.Request(inventory=args.inventory, playbook=playbook("doctor.yml"), limit=args.limit,
                              check=True, extra_vars=variables, verbosity=args.verbose,
                              **command.ansible_options(args))  # fmt: skip
    outcome = command.run_playbook(session, request)
    if not outcome.ran:
        record = {**command.outcome_record(outcome), "healthy": False}
        cases = command.host_cases(outcome, f"rdmaforge.{NAME}")  # the run's own error case: why no host ran
        return command.finish(session, args, command.playbook_exit(outcome), cases, record)
    unreachable = [p.host for p in outcome.events.unreachable()]
    failed = {p.host: f"{p.task}: {one_line(p.message, p.action)}" for p in reversed(outcome.events.failures())}
    # The nodes the run covered (its recap) that answered: each one has a result, or is named as not judged (a node
    # whose doctor task failed is named by that failure).
    nodes, unread = read_nodes(output, [h for h in outcome.recaps if h not in unreachable])
    unread = {host: why for host, why in unread.items() if host not in failed}
    diagnosis = doctor.diagnose(nodes, unreachable, failed, args.max_clock_offset, unread)
    code = diagnosis.exit_code if outcome.status != "canceled" else ExitCode.INTERRUPTED
    if command.playbook_exit(outcome) == ExitCode.BAD_INPUT:  # the inventory's problem, not a node's (64)
        code = ExitCode.BAD_INPUT
    # Every failure came from a check on the controller (the role's argument spec, a fail on the inventory) before
    # any task went to a node: no node was asked, so "no node answered" and "0 unreachable" would mislead.
    stopped = bool(failed) and not outcome.events.contacted
    print("", file=session.out)
    text = stopped_before_contact(list(failed)) if stopped else doctor.render(diagnosis)
    if code == ExitCode.INTERRUPTED:
        # The nodes read before Ctrl-C may all look healthy: the run did not finish, so no verdict is given.
        text = text.rsplit("\n", 1)[0] + "\nnot judged: the run was interrupted before every node was read"
    print(text, file=session.out)
    record = {**command.outcome_record(outcome), "healthy": code == ExitCode.OK, "rows": diagnosis.rows,
              "nodes": diagnosis.per_node(), "findings": [f.to_dict() for f in diagnosis.findings],
              "unreachable": diagnosis.unreachable, "not_judged": diagnosis.not_judged,
              "stopped_before_contact": stopped}  # fmt: skip
    return command.finish(session, args, code, host_cases(diagnosis, failed), record)
