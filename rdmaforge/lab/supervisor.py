"""Keeps one lab node running: boots it with systemd-nspawn and boots it again when it rebooted.

systemd-nspawn exits with status 133 when the container's systemd asked for a reboot; any other exit
(poweroff, a crash, `lab down`) ends the supervisor. Started detached by `rdmaforge lab up`.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

REBOOT_EXIT_STATUS = 133


# Runs in the node's network namespace and a private mount namespace: a fresh sysfs there shows the node's NICs
# (a sysfs instance shows the namespace of whoever mounted it, and nspawn mounts the node's /sys from here),
# and the controller's cgroup mounts are carried over so that nspawn and the node's systemd still find them.
SYSFS_WRAPPER = (
    'set -e; mkdir -p "$RF_CGROUPS"; mount --rbind /sys/fs/cgroup "$RF_CGROUPS"; '
    'mount -t sysfs sysfs /sys; mount --rbind "$RF_CGROUPS" /sys/fs/cgroup; exec "$@"'
)


def cgroups_carrier(name: str) -> str:
    return f"/run/rdmaforge-cgroups-{name}"


def nspawn_argv(name: str, root: Path, netns: str, binds_ro: list[str]) -> list[str]:
    argv = [
        "nsenter", f"--net=/run/netns/{netns}", "unshare", "--mount", "--propagation", "private",
        "sh", "-c", SYSFS_WRAPPER, "sh",
        "systemd-nspawn", f"--directory={root}", f"--machine={name}", "--boot",
        f"--network-namespace-path=/run/netns/{netns}",
        # No systemd/machined on the controller: run in our own cgroup and do not register.
        "--register=no", "--keep-unit",
        "--resolv-conf=off", "--timezone=off", "--link-journal=no", "--settings=no",
        "--console=read-only",
        # A real host's root may raise its memlock limit (pam_limits) and lock memory, which RDMA needs, and
        # configure its own NICs (systemd-networkd, ip rule): nspawn drops these capabilities by default. The
        # network namespace is the node's own, so CAP_NET_ADMIN reaches no other node and not the controller.
        "--capability=CAP_SYS_RESOURCE,CAP_IPC_LOCK,CAP_NET_ADMIN",
    ]  # fmt: skip
    argv += [f"--bind-ro={spec}" for spec in binds_ro]
    return argv


CGROUP_PREFIX = "rdmaforge-lab-"


def cgroup_mounts() -> dict[str, str]:
    """{hierarchy key: mount point}; the key is what /proc/self/cgroup names the hierarchy by ("" for v2)."""
    mounts: dict[str, str] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        pre, _, post = line.partition(" - ")
        fields, post_fields = pre.split(), post.split()
        if not post_fields or post_fields[0] not in ("cgroup", "cgroup2"):
            continue
        if post_fields[0] == "cgroup2":
            mounts[""] = fields[4]
        else:
            options = [o for o in post_fields[2].split(",") if o not in ("rw", "ro")]
            mounts[",".join(options)] = fields[4]
    return mounts


def node_cgroups(name: str) -> list[Path]:
    """The node's own cgroup in each hierarchy that systemd in the node manages (name=systemd for v1, the
    unified v2 tree), below the cgroup of the calling process. v1 controllers such as cpuset would need their
    own setup before a process may join a new group, and the node's systemd does not use them."""
    mounts = cgroup_mounts()
    targets = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers in ("name=systemd", "") and controllers in mounts:
            targets.append(Path(mounts[controllers]) / path.lstrip("/") / f"{CGROUP_PREFIX}{name}")
    return targets


def enter_own_cgroup(name: str) -> None:
    """Move this process into the node's own cgroups. With --keep-unit, nspawn runs the node in its caller's
    cgroup, and nodes started from one cgroup would otherwise share (and fight over) one payload/ subtree:
    services then fail at random with status 219/CGROUP."""
    for target in node_cgroups(name):
        try:
            target.mkdir(exist_ok=True)
            (target / "cgroup.procs").write_text(f"{os.getpid()}\n")
        except OSError as exc:  # a read-only hierarchy: the node still runs, less isolated
            print(f"supervisor: cannot use cgroup {target}: {exc}", file=sys.stderr)


def cgroup_members(name: str) -> set[int]:
    """Every process still in the node's cgroups: after a crash (supervisor and nspawn killed) the node's own
    systemd and its services live on there, with nothing on their command lines naming the node."""
    members: set[int] = set()
    for top in node_cgroups(name):
        for procs in top.rglob("cgroup.procs") if top.is_dir() else ():
            try:
                members.update(int(pid) for pid in procs.read_text().split())
            except (OSError, ValueError):
                continue
    return members


def kill_cgroup_members(name: str, timeout: float = 10.0) -> None:
    """SIGKILL what is left in the node's cgroups and wait (up to ``timeout``) until they are empty."""
    deadline = time.monotonic() + timeout
    while (members := cgroup_members(name) - {os.getpid()}) and time.monotonic() < deadline:
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)


def remove_cgroups(name: str) -> None:
    """Remove the node's cgroups bottom-up once its processes are gone (what its systemd left behind too)."""
    carried = Path(cgroups_carrier(name))  # the mount point the sysfs wrapper used (empty on the controller)
    if carried.is_dir():
        carried.rmdir()
    for top in node_cgroups(name):
        if not top.is_dir():
            continue
        for directory in sorted((d for d in top.rglob("*") if d.is_dir()), key=lambda d: len(d.parts), reverse=True):
            directory.rmdir()
        top.rmdir()


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

    enter_own_cgroup(args.name)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    boots = 0
    while True:
        boots += 1
        env = {**os.environ, "RF_CGROUPS": cgroups_carrier(args.name)}
        child = subprocess.Popen(nspawn_argv(args.name, args.root, args.netns, args.bind_ro), env=env)
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
