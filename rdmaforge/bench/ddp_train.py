"""A small synthetic data-parallel training job for measuring end-to-end throughput (seeds 000, 001, 003).

Launched by torchrun on every node (c10d rendezvous). Each rank trains an MLP on random data with
DistributedDataParallel: NCCL on GPUs, gloo on CPUs. Rank 0 prints one JSON line with the per-step wall times
and the throughput percentiles, in samples per second for the whole job, and whether every rank's model replica
ended the same (``replicas_in_sync``): each rank starts from its own seed and trains on its own data, so only
DistributedDataParallel (rank 0's weights broadcast, the gradients averaged every step) keeps them equal.
The first ``--warmup`` steps are run but not measured (seed 003: ACSpeed's autotuner takes 200-400 steps,
about 950 with bucket tuning, and seed 003 recommends warming up 400 before measuring).

Standalone on purpose: it is copied to the nodes and imports nothing from rdmaforge.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list: the ceil(fraction x n)-th smallest value."""
    rank = math.ceil(fraction * len(sorted_values) - 1e-9)  # 0.95 x 20 is 19, not the 20th value
    return sorted_values[max(0, min(len(sorted_values) - 1, rank - 1))]


def summarize(step_times: list[float], warmup: int, global_batch: int) -> dict[str, object]:
    """Throughput percentiles of the steps after the first ``warmup`` (which are left out), in samples/s.

    The p50 of step time gives the p50 throughput; higher percentiles of time are the slow steps.
    """
    measured = step_times[max(0, warmup) :]
    if not measured:
        raise ValueError(f"no step left to measure: {len(step_times)} steps, {warmup} of them warm-up")
    ordered = sorted(measured)
    return {
        "warmup_steps": max(0, warmup),
        "steps": len(measured),
        "mean_step_s": statistics.fmean(measured),
        "percentiles": {
            f"p{int(q * 100)}": {"step_s": step, "samples_per_s": global_batch / step}
            for q, step in ((q, percentile(ordered, q)) for q in (0.50, 0.75, 0.90, 0.95))
        },
    }


#: How far apart (relative) the ranks' parameter sums may be and still be one replica: DDP's replicas are the same
#: numbers (same weights, same averaged gradients, same update), so only the sum's own rounding may differ between
#: GPU models; ranks that trained apart differ in the first digits.
SYNC_TOLERANCE = 1e-6


def replicas_in_sync(sums: list[float]) -> bool:
    """Whether the ranks' parameter sums after training are one replica's (within SYNC_TOLERANCE, relative)."""
    if not sums or any(math.isnan(x) or math.isinf(x) for x in sums):
        return False
    return max(sums) - min(sums) <= SYNC_TOLERANCE * max(1.0, max(abs(x) for x in sums))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["nccl", "gloo"], default=None, help="default: nccl with GPUs, else gloo")
    parser.add_argument("--batch-size", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=400, help="steps run before measuring (seed 003: 400)")
    args = parser.parse_args()

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    use_cuda = torch.cuda.is_available()
    backend = args.backend or ("nccl" if use_cuda else "gloo")
    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}") if use_cuda and backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(1234 + rank)

    layers: list[torch.nn.Module] = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU()]
    model = DistributedDataParallel(torch.nn.Sequential(*layers).to(device))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(args.batch_size, args.hidden, device=device)
    target = torch.randn(args.batch_size, args.hidden, device=device)

    step_times: list[float] = []
    for _ in range(args.warmup + args.steps):
        started = time.perf_counter()
        optimiser.zero_grad()
        loss = torch.nn.functional.mse_loss(model(data), target)
        loss.backward()  # DDP all-reduces the gradients here
        optimiser.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        dist.barrier()
        step_times.append(time.perf_counter() - started)

    # Every rank's parameter sum, to rank 0: equal only if DDP kept the replicas in step.
    total = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum().reshape(1)
    gathered = [torch.zeros_like(total) for _ in range(world)]
    dist.all_gather(gathered, total)
    sums = [float(t.item()) for t in gathered]
    # None where a sum is not a number (the training diverged): nothing to tell of DDP then, and JSON holds no NaN.
    finite = all(map(math.isfinite, sums))

    if rank == 0:
        global_batch = args.batch_size * world
        report = {
            "world_size": world,
            "nodes": int(os.environ.get("GROUP_WORLD_SIZE", os.environ.get("NNODES", "1")) or 1),
            "backend": backend,
            "device": device.type,
            "torch": torch.__version__,  # ACSpeed's features each support a range of releases (seed 003)
            "global_batch": global_batch,
            "params": sum(p.numel() for p in model.parameters()),
            "replicas_in_sync": replicas_in_sync(sums) if finite else None,
            "replica_param_sum_spread": max(sums) - min(sums) if finite else None,
            **summarize(step_times, args.warmup, global_batch),
        }
        print("RDMAFORGE_E2E " + json.dumps(report), flush=True)
    # Every rank leaves together, and without the process group's C++ teardown: it aborted a rank (SIGABRT,
    # "terminate called without an active exception") after a complete measurement, rank 0's in the fresh clone of
    # b26f798 and, after a barrier was added here, rank 2's in that of 9816600 (torch 2.13, gloo). The measurement
    # is printed and every rank is past the barrier: no collective follows, so the process ends here, its output
    # flushed, without running the destructors that abort. The likely mechanism (pytorch/pytorch issue 190489 and
    # PR 179291, closed unmerged; not reproduced here): gloo's worker threads still hold work objects whose tensors
    # reference Python objects, and freeing them while the interpreter finalizes aborts. destroy_process_group() was
    # called before the abort of 9816600, but DDP's reducer keeps its own reference to the group until the model is
    # freed, which happens only during that finalization.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
