"""The H200's rate of random 8-byte DRAM accesses at the dedup find's scale (350K uniques a step over 10 tables of
1M slots: an 80 MB keys array and an 80 MB scores array): torch gathers / scatters of N random int64 words (and of
4-word groups, the find's key-group sector) in an array of 10M words, CUDA events, median of --reps. If the number
pass's find (~0.04 ms for 350K uniques: a key group read and a score write each) is bound by random DRAM accesses,
these take about as long. Also the same accesses sorted by address (consecutive slots share DRAM pages)."""

from __future__ import annotations

import argparse
import statistics

import torch


def timed(fn, reps):
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    flush = torch.empty(64 << 20, dtype=torch.int64, device="cuda")  # 512 MB: the L2 holds none of the array
    for a, b in ev:
        flush.add_(1)
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev) * 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=15)
    a = p.parse_args()
    dev = torch.device("cuda")
    W = 10 << 20
    keys = torch.randint(0, 1 << 62, (W,), dtype=torch.int64, device=dev)
    scores = torch.zeros(W, dtype=torch.int64, device=dev)
    g = torch.Generator(device=dev).manual_seed(0)
    print("| accesses | N | random us | sorted us | G accesses/s (random) |")
    print("|---|---:|---:|---:|---:|")
    for N in (350_000, 1_048_570):
        idx = torch.randperm(W // 4, device=dev, generator=g)[:N] * 4
        sidx = idx.sort().values
        cases = {
            "read 8 B": (lambda i: lambda: keys[i]),
            "read 32 B group": (lambda i: lambda: keys.view(-1, 4)[i // 4]),
            "write 8 B": (lambda i: lambda: scores.index_fill_(0, i, 7)),
            "read 32 B + write 8 B": (lambda i: lambda: (keys.view(-1, 4)[i // 4], scores.index_fill_(0, i, 7))),
        }
        for name, mk in cases.items():
            r = timed(mk(idx), a.reps)
            s = timed(mk(sidx), a.reps)
            print(f"| {name} | {N} | {r:.1f} | {s:.1f} | {N / r / 1e3:.1f} |")
    e = torch.empty(0, device=dev)
    print(f"| empty launch | 0 | {timed(lambda: e.add_(1), a.reps):.1f} | | |")


if __name__ == "__main__":
    main()
