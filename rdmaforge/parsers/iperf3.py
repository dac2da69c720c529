"""iperf3 for ``rdmaforge pairwise``: the client and server command lines, and one measurement read from
``iperf3 -J`` output.

The one implementation behind the ``pairwise_iperf`` Ansible module (shipped to targets as
``module_utils/rdmaforge_iperf3.py``, a symlink to this file): standard-library only, Python 3.8.

A measurement's status: ``ok`` (the receiver's rate), ``unreachable`` (no connection: refused, no route,
network down, connect timeout), ``hang`` (killed at the timeout) or ``failed`` (anything else iperf3 reports).
"""

from __future__ import annotations

import json
from typing import Any

UNREACHABLE_MARKS = (
    "unable to connect",
    "connection refused",
    "no route to host",
    "network is unreachable",
    "connection timed out",
    "control socket has closed unexpectedly",
    "unable to receive control message",
    "unable to send control message",
)


def client_argv(
    iperf3: str,
    peer: str,
    bind: str,
    nic: str,
    port: int,
    streams: int,
    seconds: int,
    connect_timeout_ms: int,
    reverse: bool,
) -> list[str]:
    """Client bound to the rail's address and device (SO_BINDTODEVICE, so traffic never leaves by another NIC)."""
    argv = [iperf3, "-c", peer, "-B", f"{bind}%{nic}", "-p", str(port), "-P", str(streams), "-t", str(seconds),
            "-J", "--connect-timeout", str(connect_timeout_ms)]  # fmt: skip
    if reverse:
        argv.append("-R")
    return argv


def server_argv(iperf3: str, bind: str, nic: str, port: int, pidfile: str, idle_seconds: int) -> list[str]:
    """A one-off daemon (one test, then it exits), which also exits after ``idle_seconds`` without a client. Bound to
    the rail's device as well as its address (``addr%nic``, as the client): in the -R direction the server sends, and
    bound to the address alone its data would leave by the routing table, over another NIC of the same subnet."""
    return [iperf3, "-s", "-1", "-D", "-B", f"{bind}%{nic}", "-p", str(port), "-I", pidfile,
            "--idle-timeout", str(idle_seconds)]  # fmt: skip


def classify_error(message: str) -> str:
    lowered = message.lower()
    return "unreachable" if any(mark in lowered for mark in UNREACHABLE_MARKS) else "failed"


def read_result(stdout: str, rc: int, timed_out: bool) -> dict[str, Any]:
    """{"gbps", "status", "detail"} of one client run."""
    if timed_out:
        return {"gbps": None, "status": "hang", "detail": "no result before the timeout"}
    try:
        data = json.loads(stdout) if stdout.strip() else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    error = data.get("error")
    if error:
        return {"gbps": None, "status": classify_error(str(error)), "detail": str(error)}
    received = _bits_per_second(data, "sum_received")
    if rc != 0 or received is None:
        tail = stdout.strip().splitlines()[-1:] if stdout.strip() else []
        why = tail[0] if tail else "no output"
        return {"gbps": None, "status": "failed", "detail": f"iperf3 exited {rc} without a result: {why}"}
    return {"gbps": round(received / 1e9, 4), "status": "ok", "detail": ""}


def _bits_per_second(data: dict[str, Any], key: str) -> float | None:
    end = data.get("end")
    if not isinstance(end, dict):
        return None
    summary = end.get(key)
    if not isinstance(summary, dict) or "bits_per_second" not in summary:
        return None
    try:
        return float(summary["bits_per_second"])
    except (TypeError, ValueError):
        return None


def listening(proc_net_tcp: str, port: int) -> bool:
    """Whether /proc/net/tcp (or tcp6) shows a socket in LISTEN state on ``port``."""
    wanted = f"{port:04X}"
    for line in proc_net_tcp.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 3 and fields[1].rsplit(":", 1)[-1] == wanted and fields[3] == "0A":
            return True
    return False
