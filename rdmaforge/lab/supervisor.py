"""Keeps one lab node running: boots it with systemd-nspawn and boots it again when it rebooted.

systemd-nspawn exits with status 133 when the container's systemd asked for a reboot; any other exit
(poweroff, a crash, `lab down`) ends the supervisor. Started detached by `rdmaforge lab up`.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

REBOOT_EXIT_STATUS = 133


def nspawn_argv(name: str, root: Path, netns: str, binds_ro: list[str]) -> list[str]:
    argv = [
        "systemd-nspawn",
        f"--directory={root}",
        f"--machine={name}",
        "--boot",
        f"--network-namespace-path=/run/netns/{netns}",
        # No systemd/machined on the controller: run in our own cgroup and do not register.
        "--register=no",
        "--keep-unit",
        "--resolv-conf=off",
        "--timezone=off",
        "--link-journal=no",
        "--settings=no",
        "--console=read-only",
        # A real host's root may raise its memlock limit (pam_limits) and lock memory, which RDMA needs;
        # nspawn drops these two capabilities by default.
        "--capability=CAP_SYS_RESOURCE,CAP_IPC_LOCK",
    ]
    argv += [f"--bind-ro={spec}" for spec in binds_ro]
    return argv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--netns", required=True)
    parser.add_argument("--state", required=True, type=Path, help="the node's directory (pid files, stop flag)")
    parser.add_argument("--bind-ro", action="append", default=[])
    args = parser.parse_args(argv)

    child: subprocess.Popen[bytes] | None = None
    stopping = False

    def on_term(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)  # nspawn turns this into an orderly poweroff of the node

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    boots = 0
    while True:
        boots += 1
        child = subprocess.Popen(nspawn_argv(args.name, args.root, args.netns, args.bind_ro))
        (args.state / "nspawn.pid").write_text(f"{child.pid}\n")
        with (args.state / "boots.log").open("a") as log:
            log.write(f"{time.time():.3f} boot {boots} pid {child.pid}\n")
        status = child.wait()
        with (args.state / "boots.log").open("a") as log:
            log.write(f"{time.time():.3f} exit {status}\n")
        if stopping or (args.state / "stop").exists() or status != REBOOT_EXIT_STATUS:
            return 0 if status in (0, REBOOT_EXIT_STATUS) else status
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
