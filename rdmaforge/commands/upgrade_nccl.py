"""`rdmaforge upgrade-nccl -i INVENTORY`: roll the inventory's NCCL build out a batch at a time
(playbooks/upgrade_nccl.yml)."""

from __future__ import annotations

import argparse
from typing import Any

from rdmaforge.runner import command

NAME = "upgrade-nccl"


def add_serial_argument(parser: argparse.ArgumentParser) -> None:
    """--serial, checked by the playbook's first play (check_upgrade_serial.yml) like -e rdmaforge_upgrade_serial."""
    parser.add_argument(
        "--serial", metavar="N|N%", default=None,
        help="nodes per batch: a number (default 1) or a percentage of the cluster, e.g. 25%%",
    )  # fmt: skip


def serial_variables(args: argparse.Namespace) -> dict[str, Any]:
    if args.serial is None:
        return {}
    text = str(args.serial).strip()
    return {"rdmaforge_upgrade_serial": int(text) if text.isdigit() else text}


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="build the inventory's NCCL once, then install it a batch of nodes at a time, each batch checked",
        description="Set nccl_build_version (or nccl_cuda_archs, nccl_build_only_funcs) in the inventory first. "
        "Preflight runs, the new build is compiled once before any node switches, then each batch installs it and "
        "its library must load and report the new release before the next batch starts. A failed batch stops the "
        "rollout; rollback-nccl switches nodes back to the build they replaced.",
    )
    add_serial_argument(parser)
    command.add_changing_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return command.run_changing_playbook(args, NAME, "upgrade_nccl.yml", serial_variables(args))
