"""`rdmaforge rollback-nccl -i INVENTORY`: switch nodes back to the NCCL build they replaced, a batch at a time
(playbooks/rollback_nccl.yml)."""

from __future__ import annotations

import argparse
from typing import Any

from rdmaforge.commands.upgrade_nccl import add_allow_partial_argument, add_serial_argument, rollout_variables
from rdmaforge.runner import command
from rdmaforge.runner.exit_codes import ExitCode

NAME = "rollback-nccl"


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="switch each node back to the NCCL build it kept as 'previous', a batch at a time, each batch checked",
        description="Each batch's library must load and report the previous build's release before the next "
        "batch starts; a node with no previous build is refused by name. Then pin the inventory back to that "
        "build (nccl_build_version, ...): until then the next provision installs the newer build again. A --limit "
        "that leaves part of the cluster out is refused unless the nodes left out already run the build these go back "
        "to, or --allow-partial.",
        codes=(ExitCode.BUSY,),
    )
    add_serial_argument(parser)
    add_allow_partial_argument(parser, "roll back")
    command.add_changing_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return command.run_changing_playbook(args, NAME, "rollback_nccl.yml", rollout_variables(args))
