"""`rdmaforge remove-node -i INVENTORY NODE...`: take nodes out of a running cluster (playbooks/remove_node.yml)."""

from __future__ import annotations

import argparse
from typing import Any

from rdmaforge.errors import UserError, non_empty
from rdmaforge.runner import command
from rdmaforge.runner.exit_codes import ExitCode

NAME = "remove-node"


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="take nodes out of the cluster (playbooks/remove_node.yml); you then delete them from the inventory",
        description="The remaining nodes stop listing the named nodes (/etc/hosts block, ssh_known_hosts, "
        "~/.ssh/config, MPI hostfile) and get a new cluster SSH key; a named node that still answers gives back "
        "the cluster's trust, hosts block and hostfile. The nodes must still be in the inventory: delete them from "
        "it afterwards, and the next provision changes nothing (unless the first node in sorted order was removed: "
        "the default cluster key is named after it, and the next provision installs a new one).",
        codes=(ExitCode.BUSY,),
    )
    parser.add_argument("nodes", nargs="+", metavar="NODE", type=node_name,
                        help="a host of group 'cluster' to take out")  # fmt: skip
    command.add_changing_arguments(parser)
    parser.set_defaults(func=run)


#: NODE: an empty name was answered by the playbook's check ('not in the cluster: none') after a run had started.
node_name = non_empty("an empty node name", "a host of group 'cluster'")


def run(args: argparse.Namespace) -> int:
    if args.limit is not None:
        # The check of the names and the groups every later play targets come from a play for localhost, which a
        # --limit leaves out: nothing ran (exit 1, 'no host was run'), and a name outside the cluster went unnamed.
        raise UserError(f"--limit {args.limit}: remove-node takes the nodes to remove as its arguments and changes "
                        "every remaining node (hosts block, trust, hostfile); allowed: no --limit")  # fmt: skip
    return command.run_changing_playbook(args, NAME, "remove_node.yml", {"rdmaforge_remove_nodes": list(args.nodes)})
