"""`rdmaforge lab up|down|status|ssh`: the multi-node lab on this machine."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from rdmaforge.lab import Lab, LabError
from rdmaforge.lab.session import hold_lab
from rdmaforge.lab.spec import MAX_EXTRA_NICS, MAX_NODES


def register(subparsers: Any) -> None:
    lab = subparsers.add_parser("lab", help="the local multi-node lab (systemd-nspawn nodes, lab mirror)")
    verbs = lab.add_subparsers(dest="lab_command", metavar="VERB")
    verbs.required = True

    up = verbs.add_parser("up", help="build (once) and boot the lab; writes inventories/lab/")
    up.add_argument("--nodes", type=int, default=2, help=f"number of nodes, 1..{MAX_NODES} (default 2)")
    up.add_argument("--nics", type=int, default=2, help=f"extra NICs per node, 0..{MAX_EXTRA_NICS} (default 2)")
    up.set_defaults(func=cmd_up)

    down = verbs.add_parser("down", help="remove nodes, mounts, namespaces, bridges (safe to repeat)")
    down.set_defaults(func=cmd_down)

    status = verbs.add_parser("status", help="show nodes and the mirror; exit 1 when the lab is not running")
    status.set_defaults(func=cmd_status)

    ssh = verbs.add_parser("ssh", help="open a shell (or run a command) on a node as root")
    ssh.add_argument("node")
    ssh.add_argument("command", nargs=argparse.REMAINDER)
    ssh.set_defaults(func=cmd_ssh)


def _needs_root() -> int | None:
    if os.geteuid() != 0:
        print("rdmaforge lab: must run as root (network namespaces, mounts, systemd-nspawn)", file=sys.stderr)
        return 1
    return None


def cmd_up(args: argparse.Namespace) -> int:
    if (rc := _needs_root()) is not None:
        return rc
    started = time.monotonic()
    try:
        with hold_lab():  # not under a running test session or benchmark
            Lab().up(nodes=args.nodes, nics=args.nics)
    except (LabError, ValueError) as exc:
        print(f"rdmaforge lab up: {exc}", file=sys.stderr)
        return 1
    print(f"lab up: {args.nodes} node(s), {args.nics} extra NIC(s) each, in {time.monotonic() - started:.1f}s")
    return cmd_status(args)


def cmd_down(args: argparse.Namespace) -> int:
    if (rc := _needs_root()) is not None:
        return rc
    with hold_lab():  # not under a running test session or benchmark
        Lab().down()
    print("lab down: nodes, mounts, namespaces, bridges and mirror server removed")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    lab = Lab()
    status = lab.status()
    if not status.nodes:
        print("lab: not running")
        return 1
    print(f"{'node':8} {'address':14} {'running':8} {'ssh':5} boots")
    for n in status.nodes:
        print(f"{n.name:8} {n.address:14} {'yes' if n.running else 'no':8} {'yes' if n.ssh else 'no':5} {n.boots}")
    print(f"mirror: {status.mirror or 'not serving'}")
    print(f"inventory: {lab.inventory_path}")
    return 0 if status.running else 1


def cmd_ssh(args: argparse.Namespace) -> int:
    try:
        argv = Lab().ssh_argv(args.node)
    except LabError as exc:
        print(f"rdmaforge lab ssh: {exc}", file=sys.stderr)
        return 1
    if not args.command:
        argv.insert(1, "-t")
    os.execvp(argv[0], [*argv, *args.command])
