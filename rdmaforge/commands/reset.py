"""`rdmaforge reset -i INVENTORY --yes [--limit NODES]`: take off the nodes what rdmaforge installed and configured
(playbooks/reset.yml)."""

from __future__ import annotations

import argparse
from typing import Any

from rdmaforge.errors import UserError
from rdmaforge.runner import command
from rdmaforge.runner.exit_codes import ExitCode

NAME = "reset"


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="remove from the nodes what rdmaforge installed and configured (playbooks/reset.yml); needs --yes",
        description="Removes the NCCL settings, net plugin, NCCL and nccl-tests builds, benchmark environment, "
        "cluster SSH trust, /etc/hosts block and MPI hostfile, the memlock drop-in, the secondary NICs' policy "
        "routing, the huge page kernel arguments (rebooting only where hugepages_reboot is true), the erdma "
        "repository and key, and the packages rdmaforge added (those a node lacked before); other content stays. "
        "Use --limit for some nodes; to take nodes out of a cluster that keeps running, use remove-node. "
        "A provision afterwards converges the nodes again.",
        codes=(ExitCode.BUSY,),
    )
    parser.add_argument(
        "--yes", action="store_true",
        help="confirm: without it nothing runs (a reset removes packages and builds from every targeted node)",
    )  # fmt: skip
    command.add_changing_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.yes:
        target = f"the nodes of --limit {args.limit}" if args.limit else "every node of the inventory"
        # a UserError: exit 64 with the message on stderr, and with --json the error document stdout promises
        raise UserError(f"removes what rdmaforge installed from {target}; nothing was changed. Add --yes to go ahead "
                        "(--limit NODES for some nodes only).")  # fmt: skip
    return command.run_changing_playbook(args, NAME, "reset.yml", {"rdmaforge_reset_confirm": True})
