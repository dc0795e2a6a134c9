#!/usr/bin/env python3
"""Faultline's reference torch_ddp workload: DistributedDataParallel training of a small MLP
on synthetic, seeded data, deterministic on CPU.

Every rank builds the same model from --seed, draws its own batches from (seed, step, rank),
and trains --warmup + --steps steps of SGD under DDP over the scenario's CCL. The result line
carries the SHA-256 of the final parameters: two runs with the same seed and a lossless CCL
end with the same hash, faults or not. Options of its own (the scenario's workload.args):
--hidden (width, 512), --layers (hidden layers, 3), --batch (per rank, 32), --features (64),
--classes (10), --lr (0.05), --bucket-mb (DDP bucket size, 1).

Over nccl (a CUDA build of PyTorch) each rank trains on GPU rank % device_count; the CPU
determinism settings do not make CUDA kernels bit-reproducible across runs.
"""
import argparse
import math
import sys

import torch
import torch.nn as nn

import faultline_torch


def main():
    rank = faultline_torch.Rank.from_argv()
    p = argparse.ArgumentParser(prog="ddp_train.py", allow_abbrev=False)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--bucket-mb", type=float, default=1.0)
    opt, unknown = p.parse_known_args(rank.extra)
    if unknown:
        print(f"ddp_train.py: unknown options {unknown}", file=sys.stderr)
        sys.exit(faultline_torch.EXIT_USAGE)

    # Determinism: one thread, deterministic kernels, every random draw seeded.
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(rank.args.seed)
    layers, width = [], opt.features
    for _ in range(opt.layers):
        layers += [nn.Linear(width, opt.hidden), nn.ReLU()]
        width = opt.hidden
    layers.append(nn.Linear(width, opt.classes))
    model = nn.Sequential(*layers)
    device = torch.device("cpu")
    if rank.args.ccl == "nccl":
        device = torch.device("cuda", rank.args.rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        model = model.to(device)

    try:
        rank.init_process_group()
        ddp = nn.parallel.DistributedDataParallel(
            model, bucket_cap_mb=opt.bucket_mb,
            device_ids=[device.index] if device.type == "cuda" else None)
    except Exception as e:  # joining failed: nothing to train
        rank.join_failed(e)
    sgd = torch.optim.SGD(ddp.parameters(), lr=opt.lr)
    loss_fn = nn.CrossEntropyLoss()
    # One allreduce per gradient bucket (DDP's first bucket is smaller: one more).
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    rank.header(model, collectives_per_step=math.ceil(grad_bytes / (opt.bucket_mb * 2**20)) + 1)
    rank.wait_start()

    loss = torch.tensor(float("nan"))
    for step in rank.steps():
        g = torch.Generator().manual_seed((rank.args.seed * 1_000_003 + step) * 4099 + rank.args.rank)
        x = torch.randn(opt.batch, opt.features, generator=g).to(device)
        y = torch.randint(0, opt.classes, (opt.batch,), generator=g).to(device)
        try:
            sgd.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(x), y)
            loss.backward()  # DDP allreduces the gradients, bucket by bucket
            sgd.step()
        except Exception as e:
            rank.step_failed(e)
    rank.finish(model, loss.item())


if __name__ == "__main__":
    main()
