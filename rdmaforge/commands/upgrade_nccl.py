"""`rdmaforge upgrade-nccl -i INVENTORY`: roll the inventory's NCCL build out a batch at a time
(playbooks/upgrade_nccl.yml)."""

from __future__ import annotations

import argparse
from typing import Any

from rdmaforge import batch_size
from rdmaforge.errors import UserError
from rdmaforge.runner import command
from rdmaforge.runner.exit_codes import ExitCode

NAME = "upgrade-nccl"


def serial_size(text: str) -> str:
    """argparse type of --serial: the playbook's rule (rdmaforge.batch_size) applied before anything runs, so that a
    bad value is a usage error (exit 64) and not a host failed (exit 2, node1 blamed). Blanks around the value are
    dropped, as rollout_variables always did."""
    value = text.strip()
    if batch_size.allowed(value):
        return value
    raise argparse.ArgumentTypeError(f"{text!r}: allowed: {batch_size.ALLOWED}")


def add_serial_argument(parser: argparse.ArgumentParser) -> None:
    """--serial, checked as the playbook's first play (check_upgrade_serial.yml) checks -e rdmaforge_upgrade_serial
    (serial_size: before the run, exit 64)."""
    parser.add_argument(
        "--serial", metavar="N|N%", default=None, type=serial_size,
        help="nodes per batch: a number (default 1) or a percentage of the cluster, e.g. 25%%",
    )  # fmt: skip


def add_allow_partial_argument(parser: argparse.ArgumentParser, switches: str) -> None:
    """--allow-partial: -e nccl_build_allow_partial=true (limit_check.yml of the nccl_build role)."""
    parser.add_argument(
        "--allow-partial", action="store_true",
        help=f"with --limit: {switches} the nodes it picks even though the cluster's other nodes then stay on another "
        "NCCL build (without it such a run is refused before any node switches, naming the nodes left out and their "
        "builds, unless every one of them already runs the build this run goes to)",
    )  # fmt: skip


def rollout_variables(args: argparse.Namespace) -> dict[str, Any]:
    """The variables of --serial and --allow-partial: none for an option not given (an -e value then stands; Ansible's
    serial reads no inventory variable, so one set only in the inventory leaves batches of 1)."""
    if getattr(args, "allow_partial", False) and not getattr(args, "limit", None):
        # without --limit every node of the cluster is in the run: there is no part to allow, and the option (the
        # synopsis nests it in --limit) was taken silently (review round 29a)
        raise UserError("--allow-partial applies with --limit only (it lets a limited run switch part of the "
                        "cluster); without --limit every node switches")  # fmt: skip
    variables: dict[str, Any] = {"nccl_build_allow_partial": True} if getattr(args, "allow_partial", False) else {}
    if args.serial is None:
        return variables
    text = str(args.serial).strip()
    # isascii: "²" and "３" are digits to str.isdigit but no number int() reads the same way (or at all)
    return {**variables, "rdmaforge_upgrade_serial": int(text) if text.isascii() and text.isdigit() else text}


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="build the inventory's NCCL once, then install it a batch of nodes at a time, each batch checked",
        description="Set nccl_build_version (or nccl_cuda_archs, nccl_build_only_funcs) in the inventory first. "
        "Preflight runs, the new build is compiled once before any node switches, then each batch installs it and "
        "its library must load and report the new release before the next batch starts. A failed batch stops the "
        "rollout; rollback-nccl switches nodes back to the build they replaced. A --limit that leaves part of the "
        "cluster out is refused before the build unless the nodes left out already run the new build, or "
        "--allow-partial.",
        codes=(ExitCode.BUSY,),
    )
    add_serial_argument(parser)
    add_allow_partial_argument(parser, "upgrade")
    command.add_changing_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return command.run_changing_playbook(args, NAME, "upgrade_nccl.yml", rollout_variables(args))
