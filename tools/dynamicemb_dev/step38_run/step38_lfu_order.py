"""Whether main's training step is repeatable under LFU evictions with refusals (runs 1-2 of step38: a lab variant
differed from main's path only under LFU / epoch-LFU evictions; the guess is that main's path differs from itself
there, because under LFU a new key (score 1) cannot evict a key of score 1, so when two new keys race for a bucket's
last free slot the one that arrives first is stored and the other refused). Trains the same 4 steps (the GPU test's
data: power-law ids from 4x the tables' 16K slots, Adam, pooling none) on fresh modules `--runs` times per policy
under main's default flags and reports whether outputs, stored keys, scores and rows are bitwise equal across runs."""

from __future__ import annotations

import argparse

import torch

from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._optimizers import Adam
from dynamicemb._options import DynamicEmbTableOptions


def run(policy, data, seed):
    tables = [DynamicEmbTableOptions(dim=16, max_capacity=1 << 14, on_refused="zero", score_policy=policy)
              for _ in range(2)]
    m = BatchedDynamicEmbeddingTables(tables, [0, 1, 1], pooling="none", optimizer=Adam(lr=0.05), device="cuda")
    m.backward_chunk = 1 << 20
    outs = []
    for s, (ids, off) in enumerate(data):
        out = m(ids, off)
        outs.append(out.detach().clone())
        R = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed + s)).cuda()
        (out * R).sum().backward()
    torch.cuda.synchronize()
    res = list(outs)
    for t in range(2):
        tab = m.tables[t]
        keys = tab.keys.view(torch.int64)
        slots = torch.nonzero(keys != -(2**63)).view(-1)
        slots = slots[torch.argsort(keys[slots])]
        res += [keys[slots].cpu(), tab.scores[slots].cpu()]
    return res


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--policies", default="lru,epoch_lru,lfu,epoch_lfu")
    a = p.parse_args()
    gen = torch.Generator().manual_seed(13)
    F, bags, vocab = 3, 6000, 1 << 16
    data = []
    for s in range(4):
        offsets = torch.arange(F * bags + 1, dtype=torch.int64)
        u = torch.rand(F * bags, generator=gen)
        data.append((((u ** 3) * vocab).long().add_(s * 1000).cuda(), offsets.cuda()))
    print("| policy | runs | results differing from run 0 (of 8: 4 outputs, 2 x (keys, scores)) |")
    print("|---|---:|---|")
    for policy in a.policies.split(","):
        ref = run(policy, data, 300)
        diff = []
        for r in range(1, a.runs):
            got = run(policy, data, 300)
            diff.append(sum(not torch.equal(x, y) for x, y in zip(ref, got)))
        print(f"| {policy} | {a.runs} | {diff} |")


if __name__ == "__main__":
    main()
