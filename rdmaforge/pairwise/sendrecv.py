"""The GPU path: one rank per node, nccl-tests' ``sendrecv_perf`` between the two nodes of a pair, on one rail.

The rail is chosen the way NCCL is told which NIC to use, and NCCL is held to the one transport that honours it:
where the inventory maps the NIC to an RDMA device (``pairwise_rail_hcas``), NCCL's IB transport
(``NCCL_NET=IB``) on that device (``NCCL_IB_HCA``); else its socket transport (``NCCL_NET=Socket``) on the NIC
(``NCCL_SOCKET_IFNAME``). ``NCCL_SOCKET_IFNAME`` alone picks no HCA: on an RDMA fabric every "rail" went over the
HCA NCCL chose itself (or the net plugin's), so a dead rail scored as healthy. The
output is read by the project's nccl-tests parser (rdmaforge.nccl_tests); the pair's value is the peak
out-of-place bus bandwidth of the sendrecv run, GB/s x 8 = Gb/s (for 2 ranks, busbw equals algbw).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rdmaforge.nccl_tests import TIMEOUT_EXIT, launch_problem, parse

SKIPPED_NO_GPU = "sendrecv_perf: skipped, no GPU"


@dataclass(frozen=True)
class SendrecvResult:
    gbps: float | None
    status: str  # ok | hang | failed
    detail: str


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
    peak = max(row.out_of_place.busbw for row in run.rows)
    table = f"peak busbw {peak} GB/s over {len(run.rows)} sizes"
    if exited is not None:
        return SendrecvResult(None, "failed", f"table complete ({table}) but {exited}")
    return SendrecvResult(round(peak * 8, 3), "ok", table)
