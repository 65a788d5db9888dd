"""What the sharded step puts on the wire, counted from the benchmark's workload on the CPU (lab tool, issue 37).

Draws each rank's batch exactly as benchmarks/embedding_distributed.py does (same generator seeds, the id space
growing with the world), routes every (table, id) with the module's ``hash`` routing and counts, per rank and step:

    ids        ids in the batch (N)
    sent       (owner, table, id) triples the step sends: the ids all_to_all's entries, one row back and one
               gradient sum out for each (the step dedups per destination before the ids all_to_all)
    repeats    N - sent: the ids that would travel again without that dedup
    self       the part of ``sent`` that the rank owns itself (NCCL copies it on the GPU; it never leaves)
    leaving    sent - self: rows (and gradients) that leave the GPU
    multi      at an owner, the received (table, id) pairs that came from more than one rank: the rows it sends
               more than once (inherent to a one-level all_to_all: each sender needs its own copy)

and the bytes of the rows' all_to_all per direction at D128 fp32, without and with the dedup.

    python tools/dynamicemb_dev/wire_count.py --worlds 1,2,4,8 [--preset nvidia]
"""

import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks"))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from embedding import make_batch  # noqa: E402  (the benchmarks' workload)

from dynamicemb._routing import route_keys_by_table  # noqa: E402


def rank_batch(rank, world, T, B, hotness, id_space, alpha):
    """Rank ``rank``'s first batch, drawn as embedding_distributed.py draws it (seed 1000 + rank)."""
    gen = torch.Generator().manual_seed(1000 + rank)
    ids, off = make_batch(T, B, hotness, id_space * world, alpha, gen)
    tbl = torch.repeat_interleave(torch.arange(T), off[B::B] - off[:-1:B])
    return ids, tbl


def count(world, T, B, hotness, id_space, alpha, dim, row_bytes):
    sent_by, per_owner = [], [[] for _ in range(world)]
    for r in range(world):
        ids, tbl = rank_batch(r, world, T, B, hotness, id_space, alpha)
        pair = torch.unique(torch.stack([tbl, ids]), dim=1)  # (2, sent): (table, id) uniques
        ut, uk = pair[0], pair[1]
        owner = route_keys_by_table(uk, ut, world, "hash", [None] * T)
        self_n = int((owner == r).sum())
        sent_by.append((ids.numel(), uk.numel(), self_n))
        for o in range(world):
            per_owner[o].append(pair[:, owner == o])
    multi = []
    for o in range(world):
        allp = torch.cat(per_owner[o], dim=1)
        _, cnt = torch.unique(allp, dim=1, return_counts=True)
        multi.append((allp.shape[1], int((cnt > 1).sum()), int((cnt[cnt > 1] - 1).sum())))
    n, s, sf = (sum(x[i] for x in sent_by) / world for i in range(3))
    recv, multi_u, extra = (sum(x[i] for x in multi) / world for i in range(3))
    rb = dim * row_bytes
    return dict(world=world, ids=n, sent=s, repeats=n - s, self=sf, leaving=s - sf, recv=recv, multi=multi_u,
                extra=extra, mb_nodedup=n * rb * (world - 1) / world / 1e6, mb_sent=s * rb / 1e6,
                mb_leaving=(s - sf) * rb / 1e6)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worlds", default="1,2,4,8")
    p.add_argument("--preset", choices=["nvidia"], default="nvidia")
    p.add_argument("--dim", type=int, default=128)
    args = p.parse_args(argv)
    T, B, hotness, id_space, alpha = 10, 104_857, 1, 1_677_721, 1.05  # NVIDIA's per-rank config
    print(f"per rank: {T} tables x {B} ids (one per sample), power law {alpha} over {id_space} ids per rank x world, "
          f"routing hash, D{args.dim} fp32 rows; per rank and step (mean over ranks)\n")
    print("| world | ids N | sent (uniques per owner, table) | repeats removed | self (stays) | leaving | "
          "received at an owner | of which from >1 rank (extra copies) | rows MB leaving, no dedup | "
          "rows MB in the a2a buffer | rows MB leaving |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in [int(x) for x in args.worlds.split(",")]:
        c = count(w, T, B, hotness, id_space, alpha, args.dim, 4)
        print(f"| {w} | {c['ids']:,.0f} | {c['sent']:,.0f} | {c['repeats']:,.0f} ({c['repeats'] / c['ids']:.1%}) | "
              f"{c['self']:,.0f} | {c['leaving']:,.0f} | {c['recv']:,.0f} | {c['multi']:,.0f} ({c['extra']:,.0f}) | "
              f"{c['mb_nodedup']:.1f} | {c['mb_sent']:.1f} | {c['mb_leaving']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
