"""A walk model of the portable backward's grid on the Zipf pair (issue 39, zipfb38): each CTA costs a (its fixed
part: K / V, prologue, epilogue, in tile steps) + its walk's query tiles (causal + 3 contexts, the context gap
skipped), an empty CTA (key block past its sequence) e; CTAs start in grid order on the earliest free slot (one CTA
an SM, 132 SMs). main: the grid (batch, key blocks, heads) or heads first (max_seqlen_k <= 2,048); split: the list
(chunks of L = max(4, ceil(W H / slots)) tiles, heaviest first, heads fastest), a split chunk + m (its partial's
write, the last one's sums). Prints each makespan and Zipf / dense work ratio (FLOPs ratio 0.7485 divided by the
makespans' ratio).
Usage: python walk_model.py [a e m]"""
import heapq
import math
import sys

import torch


def zipf_lengths(batch, max_len, seed=0, exponent=1.2):
    gen = torch.Generator().manual_seed(seed)
    weights = torch.arange(1, max_len + 1, dtype=torch.float64).pow(-exponent)
    return (torch.multinomial(weights, batch, replacement=True, generator=gen) + 1).tolist()


def walk(L, n0, BM, BN, ctx=3):
    """n_mt of bwd_work_tiles with the gap skipped (causal, contexts)"""
    last = math.ceil(L / BM)
    first_causal = n0 // BM
    t_ctx = math.ceil(min(ctx, L) / BM) if ctx else 0
    if t_ctx > 0 and first_causal > t_ctx:
        return t_ctx + (last - first_causal)
    return last - min(first_causal, 0 if t_ctx else first_causal)


def makespan(costs, slots=132):
    h = [0.0] * slots
    for c in costs:
        t = heapq.heappop(h)
        heapq.heappush(h, t + c)
    return max(h)


def model(lens, D, a, e, m, heads=4, slots=132, chunk=None):
    BM = 128 if D == 64 else 64
    BN = 64 if D == 256 else 128
    S = max(lens)
    nb = math.ceil(S / BN)
    heads_first = S <= 2048
    grid = []
    if heads_first:
        order = [(b, n, h) for b in range(len(lens)) for n in range(nb) for h in range(heads)]
    else:
        order = [(b, n, h) for h in range(heads) for n in range(nb) for b in range(len(lens))]
    for b, n, h in order:
        grid.append(a + walk(lens[b], n * BN, BM, BN) if n * BN < lens[b] else e)
    W = sum(walk(L, n * BN, BM, BN) for L in lens for n in range(math.ceil(L / BN)))
    Lc = chunk or max(4, math.ceil(W * heads / slots))
    items = []
    for L in lens:
        for n in range(math.ceil(L / BN)):
            w = walk(L, n * BN, BM, BN)
            nc = math.ceil(w / Lc) if w > Lc else 1
            for c in range(nc):
                cl = min(math.ceil(w / nc), w - c * math.ceil(w / nc))
                items.append((math.ceil(w / nc), a + cl + (m if nc > 1 else 0)))
    items.sort(key=lambda x: -x[0])
    split = [c for _, c in items for _ in range(heads)]
    return makespan(grid, slots), makespan(split, slots), W * heads / slots, Lc, max(walk(L, 0, BM, BN) for L in lens)


def main():
    a, e, m = (float(x) for x in sys.argv[1:4]) if len(sys.argv) > 3 else (1.5, 0.15, 0.5)
    jag = zipf_lengths(32, 4096)
    dense = [sum(jag) // 2] * 2
    print(f"a {a} e {e} m {m}; Zipf {sum(jag)} tokens max {max(jag)}; dense B2 S{dense[0]}")
    for D in (64, 128, 256):
        zm, zs, zmean, zl, zw = model(jag, D, a, e, m)
        dm, ds, dmean, dl, dw = model(dense, D, a, e, m)
        print(f"D{D}: Zipf main {zm:.1f} split {zs:.1f} (L {zl}, mean {zmean:.1f}, longest walk {zw}) -> "
              f"{zs / zm:.2f}x; dense main {dm:.1f} split {ds:.1f} (L {dl}, mean {dmean:.1f}) -> {ds / dm:.2f}x; "
              f"Zipf / dense work main {0.7485 * dm / zm * 100:.0f} %, split {0.7485 * ds / zs * 100:.0f} %")


if __name__ == "__main__":
    main()
