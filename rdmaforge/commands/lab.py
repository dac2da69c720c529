"""`rdmaforge lab up|down|status|ssh`: the multi-node lab on this machine."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from rdmaforge.lab import Lab, LabError
from rdmaforge.lab import impair as impair_mod
from rdmaforge.lab.session import hold_lab
from rdmaforge.lab.spec import MAX_EXTRA_NICS, MAX_NODES
from rdmaforge.runner.exit_codes import epilog


def register(subparsers: Any) -> None:
    codes = epilog(note="`lab ssh NODE COMMAND` exits with the command's own code")
    lab = subparsers.add_parser("lab", help="the local multi-node lab (systemd-nspawn nodes, lab mirror)", epilog=codes)
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

    impair = verbs.add_parser(
        "impair",
        help="lab-only fault injection on a node's extra NIC (tc rate limit, link down, clear)",
        description="Changes a lab node's extra NIC inside the node's own network namespace: --rate limits every "
        "packet it sends (tc tbf); --rate with --to PEER limits only the traffic between NODE and PEER on that NIC, "
        "at both ends (tc htb + u32 filter), the rest going at --others; --down sets the link down; --clear removes "
        "the limit and sets the link up. NODE and NIC 'all' with --clear clear every extra NIC of every node; with "
        "--rate (no --to) they limit each of them.",
    )
    impair.add_argument("node", help="node1, node2, ... (or all, with --clear or --rate)")
    impair.add_argument("nic", help="an extra NIC: eth1, eth2, ... (or all, with --clear or --rate)")
    what = impair.add_mutually_exclusive_group(required=True)
    what.add_argument("--rate", help="token-bucket rate, e.g. 20mbit, 1gbit (tc units bit/kbit/mbit/gbit/tbit)")
    what.add_argument("--down", action="store_true", help="set the link down")
    what.add_argument("--clear", action="store_true", help="remove the limit and set the link up")
    impair.add_argument("--to", metavar="PEER", help="with --rate: limit only the link between NODE and PEER")
    others_help = f"with --to: rate of the NIC's other traffic (default {impair_mod.UNLIMITED})"
    impair.add_argument("--others", default=impair_mod.UNLIMITED, help=others_help)
    impair.set_defaults(func=cmd_impair)

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
    recorded = lab.recorded_inventory
    print(f"inventory: {recorded or lab.inventory_path}"
          + ("" if recorded is None or recorded.exists() else " (missing: bring the lab up again to rewrite it)"))
    return 0 if status.running else 1


def cmd_impair(args: argparse.Namespace) -> int:
    """Exit 0 done; 64 a bad node, NIC or rate (nothing changed); 1 the lab is not running or tc failed."""
    if (rc := _needs_root()) is not None:
        return rc
    state = Lab().status()
    if not state.nodes:
        print("rdmaforge lab impair: the lab is not running (rdmaforge lab up)", file=sys.stderr)
        return 1
    try:
        targets = _impair_targets(args, len(state.nodes), state.nics)
        if args.rate is not None:
            impair_mod.rate_bits(args.rate)
            impair_mod.rate_bits(args.others)
        peer = impair_mod.resolve(len(state.nodes), state.nics, args.to, args.nic) if args.to else None
        if args.to and args.rate is None:
            raise ValueError("--to PEER goes with --rate (a link is limited, not set down)")
    except (LabError, ValueError) as exc:
        print(f"rdmaforge lab impair: {exc}", file=sys.stderr)
        return 64
    try:
        for target in targets:
            if args.clear:
                impair_mod.clear(target)
            elif args.down:
                impair_mod.down(target)
            elif peer is not None:
                impair_mod.limit_link(target, peer, args.rate, args.others)
            else:
                impair_mod.limit(target, args.rate)
    except LabError as exc:
        print(f"rdmaforge lab impair: {exc}", file=sys.stderr)
        return 1
    for target in [*targets, *([peer] if peer is not None else [])]:
        print(impair_mod.describe(target))
    return 0


def _impair_targets(args: argparse.Namespace, nodes: int, nics: int) -> list[impair_mod.Target]:
    if "all" in (args.node, args.nic):
        if not (args.clear or (args.rate is not None and not args.to)):
            raise ValueError("NODE or NIC 'all' goes with --clear, or with --rate without --to")
        names = [f"node{i}" for i in range(1, nodes + 1)] if args.node == "all" else [args.node]
        extra = [f"eth{k}" for k in range(1, nics + 1)] if args.nic == "all" else [args.nic]
        return [impair_mod.resolve(nodes, nics, name, nic) for name in names for nic in extra]
    return [impair_mod.resolve(nodes, nics, args.node, args.nic)]


def cmd_ssh(args: argparse.Namespace) -> int:
    try:
        argv = Lab().ssh_argv(args.node)
    except LabError as exc:
        print(f"rdmaforge lab ssh: {exc}", file=sys.stderr)
        return 1
    if not args.command:
        argv.insert(1, "-t")
    os.execvp(argv[0], [*argv, *args.command])
