"""`lab down` leaves nothing behind and can be repeated. Runs last (file name) and brings the lab back up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rdmaforge.lab import Lab
from rdmaforge.lab import node as lab_node
from rdmaforge.lab import supervisor as lab_supervisor
from rdmaforge.lab.spec import LabPaths
from tests.conftest import LAB_NICS, LAB_NODES, LabHandle

pytestmark = pytest.mark.lab


def lab_leftovers(paths: LabPaths) -> dict[str, list[str]]:
    netns = [
        e["name"]
        for e in json.loads(
            subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True).stdout or "[]"
        )
    ]
    links = [
        e["ifname"]
        for e in json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True).stdout)
    ]
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    procs = subprocess.run(
        ["pgrep", "-af", "systemd-nspawn|rdmaforge.lab.supervisor|http.server 8080"],
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    return {
        "netns": [n for n in netns if n.startswith("rf-")],
        "links": [name for name in links if name.startswith("rf")],
        "mounts": [m for m in mounts if m.startswith(str(paths.state))],
        "processes": [p for p in procs if "pgrep" not in p],
    }


def test_down_after_half_finished_up_leaves_nothing_and_a_second_down_is_a_no_op(lab: LabHandle) -> None:
    """Simulate a crash: resources exist but the state file is gone, and node1's supervisor and systemd-nspawn were
    killed with SIGKILL, which leaves the node's own systemd and its services running in the node's cgroups with
    nothing on their command lines naming the node. One bring-down and bring-up serve both cases (each costs about
    15 s)."""
    target = Lab()
    node_dir = target.paths.node_dir("node1")
    init, supervisor_pid = lab_node.init_pid(node_dir), lab_node.supervisor_pid(node_dir)
    assert init is not None and supervisor_pid is not None
    nspawn = int((node_dir / "nspawn.pid").read_text().split()[0])
    os.kill(supervisor_pid, signal.SIGKILL)
    os.kill(nspawn, signal.SIGKILL)
    # Their parent gone, the two are reaped by PID 1 (an unreaped zombie would read as a leftover process below).
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in (supervisor_pid, nspawn)) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.kill(init, 0)  # the crash this test is about: the node's systemd outlived its nspawn
    target.paths.state_file.unlink()
    target.down()
    assert lab_leftovers(target.paths) == {"netns": [], "links": [], "mounts": [], "processes": []}
    assert not lab_supervisor.cgroup_members("node1")
    assert not [str(group) for group in lab_supervisor.node_cgroups("node1") if group.is_dir()]
    target.down()  # a second down is a no-op, not an error
    assert lab_leftovers(target.paths) == {"netns": [], "links": [], "mounts": [], "processes": []}
    assert not target.inventory_path.exists()
    # Leave a lab for whoever runs next (a developer's next pytest run reuses it).
    target.up(nodes=LAB_NODES, nics=LAB_NICS)
    assert target.status().running
    assert target.status().running
