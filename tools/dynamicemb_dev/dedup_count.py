"""CPU model of the dedup's insert at NVIDIA's config (benchmarks/embedding.py --preset nvidia: 10 tables x 104,857
ids, power law 1.05 over 1,677,721 ids): uniques and repeats, the insert's block leaders (one per (block, table, id):
the block pre-dedup), CASes that take a FREE slot or meet an earlier block's, the set's load and linear-probe
lengths, and the global loop's iterations per warp (until all of its ids are done) and per block (its slowest warp,
which the block's last barrier waits for), per set capacity. Probes are modelled with a uniform hash and the
uniques inserted in random order. Claimers (first occurrences) per chunk of 1,024 ids for the count / number passes.

    python tools/dynamicemb_dev/dedup_count.py [--caps 1.25,2.5,4]
"""

import argparse

import numpy as np
import torch


def preset_ids(seed=0, T=10, B=104_857, id_space=1_677_721, alpha=1.05):
    gen = torch.Generator().manual_seed(seed)
    u = torch.rand(T * B, generator=gen, dtype=torch.float64)
    a = 1.0 - alpha
    k = ((id_space**a - 1.0) * u + 1.0) ** (1.0 / a)
    k = k.floor().clamp_(1, id_space).to(torch.int64).numpy()
    return k + np.repeat(np.arange(T, dtype=np.int64), B) * (1 << 40)  # (table, id) as one value


def probe_lengths(num, cap, rng):
    """Slots each of num distinct keys visits when inserted in random order into a linear-probing set of cap."""
    home = rng.integers(0, cap, num)
    occ = np.zeros(cap, bool)
    out = np.zeros(num, np.int64)
    for i in rng.permutation(num):
        s, c = home[i], 1
        while occ[s]:
            s = s + 1 if s + 1 < cap else 0
            c += 1
        occ[s] = True
        out[i] = c
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--caps", default="1.25,2.5,4", help="set capacities as multiples of n (+ 1024 slots)")
    a = p.parse_args()
    key = preset_ids()
    n = key.size
    uniq, first, inv, cnt = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    U = uniq.size
    print(f"n {n:,}  uniques {U:,} ({U / n:.1%}; repeats {1 - U / n:.1%})  top id {cnt.max():,} occurrences; "
          f"{(cnt > 128).sum()} ids with > 128 hold {cnt[cnt > 128].sum() / n:.1%} of the ids")
    pos = np.arange(n)
    blk = pos // 1024
    nb = int(blk.max()) + 1
    kb = blk.astype(np.int64) * U + inv
    _, lfirst = np.unique(kb, return_index=True)
    leader = np.zeros(n, bool)
    leader[lfirst] = True
    per_u = np.bincount(inv[leader], minlength=U)
    print(f"insert: {nb} blocks of 1,024 ids; block leaders {leader.sum():,} ({leader.sum() / nb:.0f} per block), "
          f"{U:,} take a FREE slot, {leader.sum() - U:,} meet an earlier block's; most leaders on one slot {per_u.max()}")
    claim = np.bincount(blk[first], minlength=nb)
    print(f"count / number: claimers per chunk min {claim.min()} mean {claim.mean():.0f} max {claim.max()}")
    t = (pos % 1024) % 256
    warp = blk * 8 + t // 32
    print("| set slots | load | mean probe | CASes on other keys' slots | loop iterations per warp | per block (slowest warp) |")
    print("|---|---:|---:|---:|---:|---:|")
    for m in [float(x) for x in a.caps.split(",")]:
        cap = int(m * n) + 1024
        pl = probe_lengths(U, cap, np.random.default_rng(1))
        pr = np.where(leader, pl[inv], 0)
        wmax = np.zeros(nb * 8, np.int64)
        np.maximum.at(wmax, warp, pr)
        bmax = wmax.reshape(nb, 8).max(1)
        print(f"| {m} n + 1024 ({cap:,}) | {U / cap:.3f} | {pl.mean():.3f} | {int(pr.sum() - leader.sum()):,} | "
              f"{wmax.mean():.2f} | {bmax.mean():.2f} |")


if __name__ == "__main__":
    main()
