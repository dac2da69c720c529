"""`rdmaforge provision -i INVENTORY`: converge the cluster with playbooks/site.yml through ansible-runner."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rdmaforge.errors import CannotRun, UserError
from rdmaforge.paths import playbook
from rdmaforge.runner import command, execute, junit
from rdmaforge.runner.events import HostChange
from rdmaforge.runner.exit_codes import ExitCode
from rdmaforge.runner.recap import HostRecap, first_line
from rdmaforge.text import named_first

NAME = "provision"


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="converge the cluster (playbooks/site.yml) with live progress, artifacts and CI exit codes",
        description="Runs playbooks/site.yml through ansible-runner: a progress line per task, a table per host "
        "at the end, and a run directory with the events, Ansible's output, recap.json and junit.xml.",
        codes=(ExitCode.DRIFT, ExitCode.BUSY),
    )
    command.add_target_arguments(parser)
    command.add_mitogen_argument(parser)
    command.add_json_argument(parser)
    command.add_output_arguments(parser)
    command.add_no_wait_argument(parser)
    parser.add_argument(
        "--fail-on-drift", action="store_true",
        help=f"with --check: exit {int(ExitCode.DRIFT)} when a run would change a host and none failed or was "
        "unreachable (a drift check for CI); the recap lists what would change",
    )  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.fail_on_drift and not args.check:
        raise UserError("--fail-on-drift needs --check: a run without it repairs the drift it finds; "
                        "allowed: rdmaforge provision --check --fail-on-drift ...")  # fmt: skip
    try:
        variables = command.check_arguments(args)
    except CannotRun as exc:
        return command.cannot_run(NAME, str(exc), args)
    return command.under_inventory_lock(args, NAME, lambda: converge(args, variables))


def converge(args: argparse.Namespace, variables: list[Any]) -> int:
    session = command.start(args, NAME, json_recap=args.json)
    request = execute.Request(
        inventory=args.inventory,
        playbook=playbook("site.yml"),
        limit=args.limit,
        tags=args.tags,
        check=args.check,
        diff=args.diff,
        extra_vars=variables,
        verbosity=args.verbose,
        **command.ansible_options(args),
    )
    outcome = command.run_playbook(session, request)
    for line in fast_path_lines(outcome.events.fact("converge_state_cluster_in_sync"),
                                outcome.events.fact("converge_state_reasons"),
                                outcome.events.fact("converge_state_in_sync_hosts"),
                                outcome.events.fact("converge_state_cluster_changes"),
                                outcome.events.fact("converge_state_lost_hosts"),
                                outcome.events.fact("converge_state_drift_local")):  # fmt: skip
        print(line, file=session.out)
    code = command.playbook_exit(outcome)
    cases = command.host_cases(outcome, f"rdmaforge.{NAME}")
    if args.fail_on_drift:
        code = drift_exit(code, outcome.recaps)
        cases = drift_cases(cases, outcome.recaps, outcome.events.changes)
    return command.finish(session, args, code, cases, command.outcome_record(outcome))


def drift_exit(code: ExitCode, recaps: Mapping[str, HostRecap]) -> ExitCode:
    """A check run's exit with --fail-on-drift: DRIFT where it would otherwise exit 0 and a host would change (a
    failed or unreachable host, which was not fully checked, keeps its own code)."""
    return ExitCode.DRIFT if code == ExitCode.OK and any(r.changed for r in recaps.values()) else code


def drift_cases(
    cases: Sequence[junit.Case], recaps: Mapping[str, HostRecap], changes: Sequence[HostChange]
) -> list[junit.Case]:
    """A drift check's JUnit: a host that passed but would change fails, naming its first change (every one in the
    details), so a CI dashboard shows which node drifted."""
    marked = []
    for case in cases:
        recap = recaps.get(case.name)
        if case.outcome == "passed" and recap is not None and recap.changed:
            lines = [f"{c.task}: {c.message}" if c.message else c.task for c in changes if c.host == case.name]
            first = f": {first_line(lines[0])}" if lines else ""
            case = replace(case, outcome="failed", details="\n".join(lines),
                           message=f"drift: a run would change {recap.changed} task(s){first}")  # fmt: skip
        marked.append(case)
    return marked


CLUSTER_PLAYS = "(/etc/hosts, SSH trust, MPI launch)"


def fast_path_lines(in_sync: Any, reasons: Any, skipping: Any = None, cluster_changes: Any = None,
                    lost: Any = None, drift_local: Any = False, most: int = 5) -> list[str]:  # fmt: skip
    """What site.yml's fast path decided, in plain words (nothing when the gate did not run). ``skipping``: the
    nodes in sync that skip their own roles while the nodes in ``reasons`` converge; ``cluster_changes``: the
    nodes recorded for another cluster (a node added or removed), which make every node run the cluster-wide
    plays; ``lost``: the nodes that could not be checked (unreachable or failed before the check), which do
    too; ``drift_local``: what differs is the drifted nodes' own, so the nodes in sync skip the cluster-wide
    plays as well."""
    if in_sync is True:
        return [
            "fast path: every node is in sync with its last complete converge; nothing ran after the inventory "
            "checks (-e converge_state_fast_path=false runs every task)"
        ]
    reasons = reasons if isinstance(reasons, dict) else {}
    changed = sorted(cluster_changes) if isinstance(cluster_changes, (dict, list)) else []
    skipping = sorted(skipping) if isinstance(skipping, list) else []
    lost = sorted(lost) if isinstance(lost, list) else []
    lines: list[str] = []
    if reasons and skipping and drift_local is True:
        lines.append(
            f"converge: {len(reasons)} node(s) differ from their last complete converge in their own files, packages "
            f"or services and converge in full; {len(skipping)} node(s) in sync skip their own roles and the "
            f"cluster-wide plays {CLUSTER_PLAYS}, which run on the drifted node(s) alone"
        )
    elif reasons and skipping:
        lines.append(
            f"converge: {len(reasons)} node(s) differ from their last complete converge and converge in full; "
            f"{len(skipping)} node(s) in sync skip their own roles and run only the cluster-wide plays {CLUSTER_PLAYS}"
        )
    elif reasons:
        lines.append(f"full converge: {len(reasons)} node(s) differ from their last complete converge")
    elif changed and skipping:
        lines.append(
            f"converge: every node is in sync with its last complete converge, but the cluster changed since "
            f"{len(changed)} node(s) recorded it (a node added or removed, or another host's variables); "
            f"{len(skipping)} node(s) run only the cluster-wide plays {CLUSTER_PLAYS}"
        )
    elif changed:
        lines.append(f"full converge: the cluster changed since {len(changed)} node(s) recorded it")
    elif lost and skipping:
        lines.append(
            f"converge: every node checked is in sync with its last complete converge, but {len(lost)} node(s) "
            f"could not be checked; {len(skipping)} node(s) run only the cluster-wide plays {CLUSTER_PLAYS}"
        )
    elif lost:
        lines.append(f"full converge: {len(lost)} node(s) could not be checked")
    if lost:
        lines.append(f"  not checked (unreachable or failed before the check): {named_first(lost, most)}")
    for host, why in sorted(reasons.items())[:most]:
        first = why[0] if isinstance(why, list) and why else str(why)
        more = f" (+{len(why) - 1} more)" if isinstance(why, list) and len(why) > 1 else ""
        lines.append(f"  {host}: {first}{more}")
    if len(reasons) > most:
        lines.append(f"  ... and {len(reasons) - most} more node(s)")
    return lines
