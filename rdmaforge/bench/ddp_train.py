"""A small synthetic data-parallel training job for measuring end-to-end throughput (seeds 000, 001, 003).

Launched by torchrun on every node (c10d rendezvous). Each rank trains an MLP on random data with
DistributedDataParallel: NCCL on GPUs, gloo on CPUs. Rank 0 prints one JSON line with the per-step wall times
and the throughput percentiles, in samples per second for the whole job.

Standalone on purpose: it is copied to the nodes and imports nothing from rdmaforge.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    index = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["nccl", "gloo"], default=None, help="default: nccl with GPUs, else gloo")
    parser.add_argument("--batch-size", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
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
    for step in range(args.warmup + args.steps):
        started = time.perf_counter()
        optimiser.zero_grad()
        loss = torch.nn.functional.mse_loss(model(data), target)
        loss.backward()  # DDP all-reduces the gradients here
        optimiser.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        dist.barrier()
        if step >= args.warmup:
            step_times.append(time.perf_counter() - started)

    if rank == 0:
        ordered = sorted(step_times)
        global_batch = args.batch_size * world
        report = {
            "world_size": world,
            "nodes": int(os.environ.get("GROUP_WORLD_SIZE", os.environ.get("NNODES", "1")) or 1),
            "backend": backend,
            "device": device.type,
            "global_batch": global_batch,
            "params": sum(p.numel() for p in model.parameters()),
            "steps": len(step_times),
            "mean_step_s": statistics.fmean(step_times),
            # p50 of step time gives p50 throughput: higher percentiles of time are the slow steps
            "percentiles": {
                f"p{int(q * 100)}": {"step_s": step, "samples_per_s": global_batch / step}
                for q, step in ((q, percentile(ordered, q)) for q in (0.50, 0.75, 0.90, 0.95))
            },
        }
        print("RDMAFORGE_E2E " + json.dumps(report), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
