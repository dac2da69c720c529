"""The GPU path: one rank per node, nccl-tests' ``sendrecv_perf`` between the two nodes of a pair, on one rail.

The rail is chosen the way NCCL is told which NIC to use, and NCCL is held to the one transport that honours it:
where the NIC is an RDMA port's netdev on both nodes of the pair (their ``rdmaforge_node.rdma_netdevs``, read
from iproute2's ``rdma link``; or the inventory's ``pairwise_rail_hcas``, which wins), NCCL's IB transport
(``NCCL_NET=IB``) on that port (``NCCL_IB_HCA``); else its socket transport (``NCCL_NET=Socket``) on the NIC
(``NCCL_SOCKET_IFNAME``). ``NCCL_SOCKET_IFNAME`` alone picks no HCA: on an RDMA fabric every "rail" went over the
HCA NCCL chose itself (or the net plugin's), so a dead rail scored as healthy. The
output is read by the project's nccl-tests parser (rdmaforge.nccl_tests); the pair's value is the peak
out-of-place bus bandwidth of the sendrecv run, GB/s x 8 = Gb/s (for 2 ranks, busbw equals algbw).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rdmaforge.nccl_tests import TIMEOUT_EXIT, launch_problem, parse

SKIPPED_NO_GPU = "sendrecv_perf: skipped, no GPU"


@dataclass(frozen=True)
class SendrecvResult:
    gbps: float | None
    status: str  # ok | hang | failed
    detail: str


def pair_hcas(
    explicit: Mapping[str, str] | None, a_netdevs: Mapping[str, str] | None, b_netdevs: Mapping[str, str] | None
) -> dict[str, str]:
    """NIC -> RDMA port (``device:port``) for a pair's rails: the inventory's map (``explicit``) first, then each
    NIC that is the netdev of the same port on both nodes. mpirun exports one NCCL_IB_HCA to both ranks, so a NIC
    whose port differs between the nodes (or that one node lacks) is left out: measured over TCP, never over a port
    one node does not have."""
    a_netdevs, b_netdevs = a_netdevs or {}, b_netdevs or {}
    found = {nic: str(port) for nic, port in a_netdevs.items() if port and b_netdevs.get(nic) == port}
    return {**found, **{str(nic): str(port) for nic, port in (explicit or {}).items()}}


def socket_rails(rails: Sequence[str], explicit: Mapping[str, str] | None,
                 netdevs: Mapping[str, Mapping[str, str] | None]) -> list[str]:  # fmt: skip
    """Why a rail would be measured over TCP (NCCL_NET=Socket) for some pair: one line per rail NIC that the
    inventory's map (``explicit``) does not name and that is not the netdev of one same RDMA port on every node
    (``netdevs``: node -> its rdmaforge_node.rdma_netdevs). On an RDMA fabric such a measurement never touches the
    rail's RDMA path (HCA, GIDs, PFC), so a rail scored from it would read healthy untested (review round 27c)."""
    found = []
    for nic in rails:
        if nic in (explicit or {}):
            continue
        ports = {node: (table or {}).get(nic) for node, table in netdevs.items()}
        without = sorted(node for node, port in ports.items() if not port)
        if without:
            found.append(f"{nic}: no RDMA port behind it on {', '.join(without)}")
        elif len(set(ports.values())) > 1:
            found.append(f"{nic}: a different RDMA port on each node ("
                         + ", ".join(f"{node} {port}" for node, port in sorted(ports.items())) + ")")
    return found


def command(
    a: str,
    b: str,
    nic: str,
    binary: str,
    hcas: Mapping[str, str] | None = None,
    min_bytes: str = "8",
    max_bytes: str = "1G",
    step_factor: int = 2,
    iterations: int = 20,
    mpirun: str = "mpirun",
    extra_mpirun_args: Sequence[str] = (),
) -> list[str]:
    """argv of one measurement: ``a`` and ``b`` (host names or addresses), 1 rank per node, 1 GPU per rank."""
    if hcas and nic in hcas:
        rail = ["NCCL_NET=IB", f"NCCL_IB_HCA=={hcas[nic]}"]
    else:  # measured over TCP on the NIC: neither NCCL's IB transport nor a net plugin picks another HCA
        rail = ["NCCL_NET=Socket", f"NCCL_SOCKET_IFNAME=={nic}"]
    env = [*rail, "NCCL_DEBUG=WARN", "PATH", "LD_LIBRARY_PATH"]  # bare names: mpirun exports the caller's values
    argv = [mpirun, "--allow-run-as-root", "-np", "2", "-H", f"{a}:1,{b}:1", "--map-by", "ppr:1:node",
            *extra_mpirun_args]  # fmt: skip
    for item in env:
        argv += ["-x", item]
    argv += [binary, "-b", min_bytes, "-e", max_bytes, "-f", str(step_factor), "-g", "1", "-n", str(iterations)]
    return argv


def read_output(text: str, exit_code: int | None = None) -> SendrecvResult:
    """The pair's result from sendrecv_perf's output (text or -J JSON) and the launch's exit status (None: not
    known). A run killed at the timeout is a hang; a launch that exited non-zero (a rank failing after the table,
    mpirun's error) is no measurement whatever its table shows: the same rule as the benchmark's collectives."""
    timed_out = exit_code == TIMEOUT_EXIT
    exited = launch_problem(exit_code, "pairwise_timeout")
    also = f"; {exited}" if exited is not None else ""
    runs = [run for run in parse(text).runs if run.collective == "sendrecv"]
    if not runs:
        status = "hang" if timed_out else "failed"
        return SendrecvResult(None, status, f"no sendrecv_perf run in the output{also}")
    run = runs[-1]
    if run.status == "failed":
        return SendrecvResult(None, "failed", (run.status_reason or "failed") + also)
    if run.status == "incomplete" or timed_out:
        reason = run.status_reason or "killed at the timeout"
        return SendrecvResult(None, "hang", reason + also)
    hosts = sorted(set(run.rank_hosts.values()))
    if len(run.rank_hosts) >= 2 and len(hosts) == 1:
        # Two inventory names for one machine (or a hostfile mpirun read its own way): NVLink or shared memory
        # between two GPUs of one node was measured, not the rail between two nodes.
        return SendrecvResult(None, "failed", f"both ranks ran on {hosts[0]}: not a measurement between two "
                              f"nodes{also}")  # fmt: skip
    peak = max(row.out_of_place.busbw for row in run.rows)
    table = f"peak busbw {peak} GB/s over {len(run.rows)} sizes"
    if exited is not None:
        return SendrecvResult(None, "failed", f"table complete ({table}) but {exited}")
    return SendrecvResult(round(peak * 8, 3), "ok", table)


def transport(argv: Sequence[str]) -> str:
    """The NCCL settings that held a launch to its rail (``NCCL_NET=IB NCCL_IB_HCA==mlx5_0:1``), from its argv."""
    return " ".join(str(item) for item in argv if str(item).startswith(("NCCL_NET=", "NCCL_IB_HCA=",
                                                                         "NCCL_SOCKET_IFNAME=")))  # fmt: skip


def measurements(runs: Sequence[Mapping[str, Any]], host: str, round_index: int) -> list[dict[str, Any]]:
    """Both directions of each launch of ``host`` in a round (sendrecv_perf sends both ways at once): ``runs`` are
    the registered results of the round's command loop (stdout, rc, cmd and the loop's ``pairwise_job``). A result
    without an exit status (a task that did not run) is a failed launch; the detail names the transport."""
    out: list[dict[str, Any]] = []
    for run in runs:
        job = run.get("pairwise_job") or {}
        rc = run.get("rc")
        result = read_output(str(run.get("stdout") or ""), exit_code=rc if isinstance(rc, int) else 1)
        via = transport(run.get("cmd") or [])
        detail = f"{result.detail} ({via})" if via else result.detail
        for a, b in ((host, str(job.get("peer"))), (str(job.get("peer")), host)):
            out.append({"gbps": result.gbps, "status": result.status, "detail": detail, "a": a, "b": b,
                        "nic": str(job.get("nic")), "round": int(round_index)})  # fmt: skip
    return out

