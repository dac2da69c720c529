"""`rdmaforge provision -i INVENTORY`: converge the cluster with playbooks/site.yml through ansible-runner."""

from __future__ import annotations

import argparse
from typing import Any

from rdmaforge.paths import playbook
from rdmaforge.runner import command, execute

NAME = "provision"


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="converge the cluster (playbooks/site.yml) with live progress, artifacts and CI exit codes",
        description="Runs playbooks/site.yml through ansible-runner: a progress line per task, a table per host "
        "at the end, and a run directory with the events, Ansible's output, recap.json and junit.xml.",
    )
    command.add_target_arguments(parser)
    command.add_output_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        variables = command.check_arguments(args)
    except command.UsageError as exc:
        return command.usage_error(NAME, str(exc))
    session = command.start(args, NAME)
    request = execute.Request(
        inventory=args.inventory,
        playbook=playbook("site.yml"),
        limit=args.limit,
        tags=args.tags,
        check=args.check,
        diff=args.diff,
        extra_vars=variables,
        verbosity=args.verbose,
    )
    outcome = command.run_playbook(session, request)
    code = command.playbook_exit(outcome)
    return command.finish(session, args, code, command.host_cases(outcome, f"rdmaforge.{NAME}"),
                          command.outcome_record(outcome))  # fmt: skip
