"""`rdmaforge rollback-nccl -i INVENTORY`: switch nodes back to the NCCL build they replaced, a batch at a time
(playbooks/rollback_nccl.yml)."""

from __future__ import annotations

import argparse
from typing import Any

from rdmaforge.commands.upgrade_nccl import add_serial_argument, serial_variables
from rdmaforge.runner import command

NAME = "rollback-nccl"


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="switch each node back to the NCCL build it kept as 'previous', a batch at a time, each batch checked",
        description="Each batch's library must load and report the previous build's release before the next "
        "batch starts; a node with no previous build is refused by name. Then pin the inventory back to that "
        "build (nccl_build_version, ...): until then the next provision installs the newer build again.",
    )
    add_serial_argument(parser)
    command.add_changing_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return command.run_changing_playbook(args, NAME, "rollback_nccl.yml", serial_variables(args))
