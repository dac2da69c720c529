#!/usr/bin/python
# Copyright: rdmaforge contributors
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pairwise_iperf
short_description: One node's part of a round of rdmaforge's pairwise sweep with iperf3
description:
  - V(serve) starts, for each rail in O(jobs), two one-off iperf3 servers (one per direction) bound to the rail's
    address, and waits until both listen. Each exits after its one test, or after O(idle_seconds) without one.
  - V(measure) runs, for each rail in O(jobs) at the same time, an iperf3 client bound to the rail's address and
    device (C(-B address%nic)) with O(streams) streams for O(seconds) seconds, first sending to the peer, then
    receiving from it (C(-R)). Each client is killed after O(timeout) seconds; that measurement is then a
    V(hang). A refused or unroutable connection is V(unreachable), not a module failure.
  - Never reports a change, since the servers are one-off processes of the measurement, not configuration of the node.
  - V(stop) ends the servers this module started (by their pid files) that are still running.
  - The command lines and the reading of C(iperf3 -J) output are rdmaforge's C(rdmaforge/parsers/iperf3.py),
    shipped to the target as C(plugins/module_utils/iperf3.py) of the collection.
version_added: "0.1.0"
author:
  - rdmaforge contributors
options:
  mode:
    description: What to do.
    type: str
    required: true
    choices: [serve, measure, stop]
  jobs:
    description:
      - For V(serve), records C({nic, bind, ports}); for V(measure), records
        C({nic, bind, peer, peer_address, port_forward, port_reverse}), as rdmaforge.pairwise.plan.jobs makes them.
    type: list
    elements: dict
    default: []
  node:
    description: This node's inventory name (the sender of forward measurements).
    type: str
    default: ""
  round:
    description: The round's index, recorded in every measurement.
    type: int
    default: 0
  streams:
    description: Parallel TCP streams per client (iperf3 C(-P)).
    type: int
    default: 4
  seconds:
    description: Duration of each measurement (iperf3 C(-t)).
    type: int
    default: 2
  timeout:
    description: Seconds after which a client still running is killed and its measurement is a V(hang).
    type: int
    default: 20
  connect_timeout_ms:
    description: iperf3 C(--connect-timeout), in milliseconds.
    type: int
    default: 3000
  idle_seconds:
    description: A server with no client for this long exits (iperf3 C(--idle-timeout)).
    type: int
    default: 60
  pid_dir:
    description: Where the servers' pid files go.
    type: path
    default: /run
  iperf3:
    description: The iperf3 executable.
    type: str
    default: iperf3
attributes:
  check_mode:
    support: partial
    details: >-
      Runs in check mode but does nothing there, whatever O(mode): no server is started or stopped and no client
      measures, so RV(measurements) and RV(servers) are empty. Only a real run measures.
  diff_mode:
    support: none
requirements:
  - iperf3 3.7 or later on the node (C(--connect-timeout), C(--idle-timeout), C(-B address%device)).
"""

EXAMPLES = r"""
- name: Measure this node's pair on every rail, both directions
  pairwise_iperf:
    mode: measure
    node: "{{ inventory_hostname }}"
    jobs:
      - {nic: eth1, bind: 198.18.1.11, peer: node2, peer_address: 198.18.1.12, port_forward: 5301, port_reverse: 5302}
    seconds: 2
    timeout: 20
  register: pairwise_result
"""

RETURN = r"""
measurements:
  description: One record per direction and rail (V(measure) only); C(a) sends to C(b).
  returned: always
  type: list
  elements: dict
  contains:
    a:
      description: The sending node.
      type: str
    b:
      description: The receiving node.
      type: str
    nic:
      description: The rail.
      type: str
    gbps:
      description: The receiver's rate in Gbit/s; null when the measurement did not complete.
      type: float
    status:
      description: V(ok), V(hang), V(unreachable) or V(failed).
      type: str
    round:
      description: The round's index.
      type: int
    detail:
      description: iperf3's error, if any.
      type: str
servers:
  description: The pid files of the servers started (V(serve)) or ended (V(stop)).
  returned: always
  type: list
  elements: str
"""

import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaforge.cluster.plugins.module_utils.iperf3 import (
    client_argv,
    listening,
    read_result,
    server_argv,
)

ARGUMENT_SPEC = {
    "mode": {"type": "str", "required": True, "choices": ["serve", "measure", "stop"]},
    "jobs": {"type": "list", "elements": "dict", "default": []},
    "node": {"type": "str", "default": ""},
    "round": {"type": "int", "default": 0},
    "streams": {"type": "int", "default": 4},
    "seconds": {"type": "int", "default": 2},
    "timeout": {"type": "int", "default": 20},
    "connect_timeout_ms": {"type": "int", "default": 3000},
    "idle_seconds": {"type": "int", "default": 60},
    "pid_dir": {"type": "path", "default": "/run"},
    "iperf3": {"type": "str", "default": "iperf3"},
}

PIDFILE_PREFIX = "rdmaforge-pairwise-iperf3-"
LISTEN_WAIT = 10.0


def pidfile(pid_dir: str, port: int) -> str:
    return os.path.join(pid_dir, f"{PIDFILE_PREFIX}{port}.pid")


def port_listens(port: int) -> bool:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                if listening(handle.read(), port):
                    return True
        except OSError:
            continue
    return False


def serve(module: AnsibleModule, params: dict[str, Any]) -> list[str]:
    started = []
    for job in params["jobs"]:
        for port in job["ports"]:
            path = pidfile(params["pid_dir"], int(port))
            stop_one(path)
            argv = server_argv(params["iperf3"], str(job["bind"]), str(job["nic"]), int(port), path,
                               params["idle_seconds"])  # fmt: skip
            rc, out, err = module.run_command(argv)
            if rc != 0:
                module.fail_json(msg=f"iperf3 server on {job['nic']} ({job['bind']}:{port}) did not start: "
                                     f"{(err or out).strip()}")  # fmt: skip
            started.append(path)
    deadline = time.monotonic() + LISTEN_WAIT
    waiting = [int(port) for job in params["jobs"] for port in job["ports"]]
    while waiting and time.monotonic() < deadline:
        waiting = [port for port in waiting if not port_listens(port)]
        if waiting:
            time.sleep(0.05)
    if waiting:
        module.fail_json(msg=f"iperf3 servers did not listen within {LISTEN_WAIT:.0f}s on port(s) {waiting}")
    return started


def stop_one(path: str) -> bool:
    try:
        with open(path) as handle:
            pid = int(handle.read().strip())
    except (OSError, ValueError):
        return False
    ended = False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            if pid > 1 and b"iperf3" in handle.read():
                os.kill(pid, signal.SIGTERM)
                ended = True
    except (OSError, ProcessLookupError):
        pass
    try:
        os.unlink(path)
    except OSError:
        pass
    return ended


def stop(params: dict[str, Any]) -> list[str]:
    names = sorted(n for n in os.listdir(params["pid_dir"]) if n.startswith(PIDFILE_PREFIX))
    return [os.path.join(params["pid_dir"], n) for n in names if stop_one(os.path.join(params["pid_dir"], n))]


def run_client(argv: list[str], timeout: int) -> dict[str, Any]:
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                              text=True, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return read_result("", -1, timed_out=True)
    except OSError as error:
        return {"gbps": None, "status": "failed", "detail": f"{argv[0]}: {error}"}
    return read_result(proc.stdout, proc.returncode, timed_out=False)


def measure(params: dict[str, Any]) -> list[dict[str, Any]]:
    jobs = params["jobs"]
    results: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        for reverse in (False, True):  # every rail at once, as NCCL drives its rails; one direction at a time
            argvs = [client_argv(params["iperf3"], str(job["peer_address"]), str(job["bind"]), str(job["nic"]),
                                 int(job["port_reverse" if reverse else "port_forward"]), params["streams"],
                                 params["seconds"], params["connect_timeout_ms"], reverse)
                     for job in jobs]  # fmt: skip
            outcomes = list(pool.map(lambda argv: run_client(argv, params["timeout"]), argvs))
            for index, job in enumerate(jobs):
                outcome = outcomes[index]
                sender, receiver = (str(job["peer"]), params["node"]) if reverse else (params["node"], str(job["peer"]))
                results.append({"a": sender, "b": receiver, "nic": str(job["nic"]), "round": params["round"],
                                **outcome})  # fmt: skip
    return results


#: The keys each mode reads from every job (a missing one raised KeyError: review round 37c).
JOB_KEYS = {"serve": ("nic", "bind", "ports"), "measure": ("peer", "peer_address", "bind", "nic", "port_forward",
                                                          "port_reverse")}  # fmt: skip


def job_problem(mode: str, jobs: list[Any]) -> str | None:
    for index, job in enumerate(jobs):
        if not isinstance(job, dict):
            return f"jobs[{index}] is {job!r}; allowed: a mapping with {', '.join(JOB_KEYS.get(mode, ()))}"
        missing = [key for key in JOB_KEYS.get(mode, ()) if job.get(key) in (None, "")]
        if missing:
            return f"jobs[{index}] has no {', '.join(missing)}; mode={mode} needs {', '.join(JOB_KEYS[mode])}"
        if mode == "serve" and not isinstance(job["ports"], list):
            return f"jobs[{index}].ports={job['ports']!r}; allowed: a list of TCP ports"
    return None


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    # changed stays false: the servers live only for the measurement (started, then stopped by the same play), and
    # nothing on the node is configured.
    result: dict[str, Any] = {"changed": False, "measurements": [], "servers": []}
    problem = job_problem(params["mode"], params["jobs"] or [])
    if problem:
        module.fail_json(msg=problem)
    if params["mode"] == "stop" and not os.path.isdir(params["pid_dir"]):
        module.fail_json(msg=f"pid_dir={params['pid_dir']} is not a directory; allowed: the pid_dir mode=serve used")
    if module.check_mode:
        module.exit_json(**result)
    if params["mode"] == "serve":
        result["servers"] = serve(module, params)
    elif params["mode"] == "stop":
        result["servers"] = stop(params)
    else:
        if not params["node"]:
            module.fail_json(msg="mode=measure needs node (this node's inventory name)")
        result["measurements"] = measure(params)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
