"""Trains a small recommendation model whose embedding tables are dynamic and sharded over the ranks.

    torchrun --nproc_per_node 2 examples/distributed_embedding.py              # CPU: gloo
    torchrun --nproc_per_node 8 examples/distributed_embedding.py --steps 200  # GPUs: nccl, one GPU per rank
    python examples/distributed_embedding.py                                   # one rank, no launcher

The model (TorchRec style): sparse features -> ``dynamicemb.ShardedDynamicEmbeddingTables`` (rows sharded
row-wise by key, fused optimizer on each row's owner) -> concatenated pooled embeddings + dense features -> an MLP
kept in sync by DistributedDataParallel -> a click logit. Ids are drawn from a power law, so a few hot ids
dominate, as in production traffic. Each rank trains on its own batch; rank 0 prints the loss and, at the end,
the mean step time.
"""

import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
from torch import nn

import dynamicemb as de


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=50, help="training steps (default 50)")
    p.add_argument("--batch-size", type=int, default=256, help="samples per rank and step (default 256)")
    p.add_argument("--tables", type=int, default=4, help="sparse features, one dynamic table each (default 4)")
    p.add_argument("--dim", type=int, default=32, help="embedding width (default 32)")
    p.add_argument("--ids", type=int, default=100_000, help="distinct ids per feature (default 100000)")
    p.add_argument("--ids-per-sample", type=int, default=8, help="ids per sample and feature (default 8)")
    p.add_argument("--capacity", type=int, default=1 << 18,
                   help="slots per table over all ranks (default 2**18; full tables evict by score)")
    p.add_argument("--routing", choices=de.ShardedDynamicEmbeddingTables.ROUTINGS, default="hash",
                   help="which rank owns a key (default hash)")
    p.add_argument("--optimizer", choices=["sgd", "adam", "adagrad", "rowwise_adagrad"], default="adam",
                   help="fused optimizer of the tables (default adam)")
    p.add_argument("--lr", type=float, default=1e-2, help="learning rate of tables and MLP (default 1e-2)")
    p.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto",
                   help="auto: nccl when every local rank has a GPU of its own, else gloo")
    p.add_argument("--print-every", type=int, default=10, help="loss print interval in steps (default 10)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def init_distributed(backend: str):
    """torchrun sets RANK/WORLD_SIZE/LOCAL_RANK; a plain ``python`` run becomes a world of one."""
    if "RANK" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend == "auto":  # NCCL needs a GPU of its own per rank: more ranks than GPUs run on gloo
        backend = "nccl" if gpus >= local_ranks else "gloo"
    if backend == "nccl":
        if gpus < local_ranks:
            raise SystemExit(f"--backend nccl: expected one GPU per local rank ({local_ranks} ranks), got {gpus} "
                             "visible GPUs; run fewer ranks per node or --backend gloo")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(backend)
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    return backend, device


def power_law_ids(gen, n, num_ids, device):
    """n ids in [0, num_ids) with P(id) ~ 1 / (id + 1)^1.05 (approximately, by inverse transform), scattered
    over the id space by a multiplicative hash so the hot ids are not the small ones."""
    u = torch.rand(n, generator=gen)
    rank = torch.floor(torch.exp(u * torch.log(torch.tensor(float(num_ids))))).long() - 1
    return ((rank * 2654435761) % num_ids).to(device)


def make_batch(gen, args, device):
    """One rank's batch: ids (F * B * k,), offsets (F * B + 1,), dense features (B, 8), labels (B,)."""
    F, B, k = args.tables, args.batch_size, args.ids_per_sample
    ids = power_law_ids(gen, F * B * k, args.ids, device)
    offsets = torch.arange(0, F * B * k + 1, k, device=device)
    dense = torch.randn(B, 8, generator=gen).to(device)
    # a label the model can learn from the rows: a click is likely (90 %) when most of the first feature's ids
    # are even, unlikely (10 %) otherwise; the sum-pooled rows can count them once the rows encode the parity
    even = (ids.view(F, B, k)[0] % 2 == 0).float().sum(1)
    p_click = torch.where(even * 2 > k, 0.9, torch.where(even * 2 == k, 0.5, 0.1))
    labels = (torch.rand(B, generator=gen).to(device) < p_click).float()
    return ids, offsets, dense, labels


class DenseTower(nn.Module):
    def __init__(self, emb_cols: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(emb_cols + 8, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, pooled, dense):
        return self.mlp(torch.cat([pooled, dense], dim=1)).squeeze(1)


def main(argv=None):
    args = parse_args(argv)
    backend, device = init_distributed(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    opt = {"sgd": de.SGD(lr=args.lr), "adam": de.Adam(lr=args.lr), "adagrad": de.Adagrad(lr=args.lr),
           "rowwise_adagrad": de.RowWiseAdagrad(lr=args.lr)}[args.optimizer]
    tables = [de.DynamicEmbTableOptions(dim=args.dim, max_capacity=args.capacity, bucket_capacity=128,
                                        score_policy="lfu") for _ in range(args.tables)]
    emb = de.ShardedDynamicEmbeddingTables(tables, pooling="sum", optimizer=opt, routing=args.routing,
                                           key_space=args.ids, device=device)
    tower = DenseTower(args.tables * args.dim).to(device)
    tower = nn.parallel.DistributedDataParallel(tower, device_ids=[device.index] if backend == "nccl" else None)
    dense_opt = torch.optim.Adam(tower.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
    loss_fn = nn.BCEWithLogitsLoss()
    times = []
    for step in range(args.steps):
        ids, offsets, dense, labels = make_batch(gen, args, device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits = tower(emb(ids, offsets), dense)
        loss = loss_fn(logits, labels)
        dense_opt.zero_grad()
        loss.backward()  # the embedding rows are updated on their owners inside the backward
        dense_opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        if rank == 0 and (step % args.print_every == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {float(mean_loss) / world:.4f}", flush=True)
    sizes = emb.sizes()
    warm = times[min(len(times) - 1, 2):]  # the first steps allocate
    if rank == 0:
        print(f"stored ids per table over {world} ranks: {sizes}")
        print(f"step time: {1e3 * sum(warm) / len(warm):.2f} ms (mean of {len(warm)} steps; world {world}, "
              f"{backend}, {device.type}, batch {args.batch_size} per rank, {args.tables} tables x D{args.dim}, "
              f"routing {args.routing})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
