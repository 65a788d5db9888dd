"""A CPU model of the sm80-class backward's split list kernel (hstu/csrc/sm80/hstu_bwd_sm80_split.cuh, issue 39):
the three-pass kernel on main (bc920f66) and zipfb38's one-pass kernel (db70e3cd / 692353cc: the blocks of pass 1
cached in shared memory, a warp's bucket scan), thread by thread (warp w: sequences w, w + 32, ...; lane l: key
blocks l, l + 32, ...), the atomics in a random order. Checks on the many-sequences test's batch
(test_sm80_backward_split_many_sequences) and random jagged batches: both lists hold the same items (b, block,
chunk word, slots) up to the order inside a bucket and the slot numbering, every key block's chunks cover its walk
once (the body's rule: chunk c of nc walks tiles [c len, min((c + 1) len, n_mt)), len = ceil(n_mt / nc)), items
are heaviest first, slots within bounds.
Usage: python list_model.py [cases]"""
import math
import random
import sys

BUCKETS, MIN_CHUNK, CACHED = 64, 4, 4


def row_range(mk, j0, j1, ctx_rows=True):
    """SeqMask::row_range (NVIDIA rule, no GR)"""
    lk, hist, ctx, group, wl, wr = mk["lk"], mk["hist"], mk["ctx"], mk["group"], mk["wl"], mk["wr"]
    begin, end = lk, 0
    if j0 < hist:
        jh1 = min(j1, hist)
        rb = 0 if wr < 0 else max(0, j0 - wr)
        re = lk if wl < 0 else min(lk, jh1 + wl)
        if hist < lk and (wl < 0 or jh1 - 1 + wl >= hist):
            re = lk
        if ctx_rows and ctx > 0:
            rb = 0
            re = max(re, min(ctx, lk))
        begin, end = min(begin, rb), max(end, re)
    if j1 > hist:
        jt0 = max(j0, hist)
        begin = min(begin, hist + ((jt0 - hist) // group) * group)
        end = max(end, min(lk, hist + ((j1 - 1 - hist) // group + 1) * group))
    return begin, end


def work_tiles(si, n0, BM, BN, skip_gap):
    """bwd_work_tiles: (mb_begin, n_a, gap, n_mt)"""
    mk = si
    keys_used = max(0, min(BN, si["lk"] - n0))
    mb_begin = mb_end = 0
    if keys_used > 0 and si["lq"] > 0:
        rb, re = row_range(mk, n0, n0 + keys_used)
        ib, ie = max(0, rb - mk["offset"]), min(si["lq"], re - mk["offset"])
        if ie > ib:
            mb_begin, mb_end = ib // BM, -(-ie // BM)
    a_end, gap = mb_end, 0
    if skip_gap and mk["ctx"] > 0 and mb_end > mb_begin:
        rb, re = row_range(mk, n0, n0 + keys_used, ctx_rows=False)
        ic = min(si["lq"], mk["ctx"] - mk["offset"])
        t_ctx = -(-ic // BM) if ic > 0 else 0
        t_b = min(mb_end, max(0, rb - mk["offset"]) // BM) if re > rb else mb_end
        if t_ctx > mb_begin and t_b > t_ctx:
            a_end, gap = t_ctx, t_b - t_ctx
    return mb_begin, a_end - mb_begin, gap, mb_end - mb_begin - gap


def seqs(lens, nt, nc, wl=-1, wr=0, group=1):
    return [dict(lk=L, lq=L, lk_alloc=L, offset=0, hist=L - t, ctx=c, group=group, wl=wl, wr=wr)
            for L, t, c in zip(lens, nt, nc)]


def list_kernel(S, heads, BM, BN, skip_gap, ctas, cap, slot_cap, forced, one_pass, rng):
    """the list (items in list order) and the header (count, L, slots used)"""
    threads = [(w, l) for w in range(32) for l in range(32)]

    def blocks_of(w, l, frm=0):
        j = 0
        for b in range(w, len(S), 32):
            nb = -(-S[b]["lk_alloc"] // BN)
            for nbk in range(l, nb, 32):
                if j >= frm:
                    yield b, nbk, work_tiles(S[b], nbk * BN, BM, BN, skip_gap)[3]
                j += 1

    cache = {}
    work = 0
    for t in threads:
        mine = list(blocks_of(*t))
        work += sum(n for _, _, n in mine)
        cache[t] = [(b, nbk, min(n, 0xFFFF)) for b, nbk, n in mine[:CACHED]]
        cache[t + ("n",)] = len(mine)

    def again(t):
        if not one_pass:
            return list(blocks_of(*t))
        out = list(cache[t])
        if cache[t + ("n",)] > CACHED:
            out += list(blocks_of(*t, frm=CACHED))
        return out

    w = work * heads
    L = forced if forced > 0 else max(MIN_CHUNK, -(-w // ctas))
    L = max(L, -(-w // (2 * ctas)))
    chunks = lambda n: -(-n // L) if n > L else 1
    bucket = lambda n, nc: min(-(-n // nc), BUCKETS - 1)
    cnt = [0] * BUCKETS
    for t in threads:
        for _, _, n in again(t):
            cnt[bucket(n, chunks(n))] += chunks(n)
    if one_pass:  # a warp's scan: lane l the buckets 63 - 2 l, 62 - 2 l
        c0 = [cnt[63 - 2 * l] for l in range(32)]
        c1 = [cnt[62 - 2 * l] for l in range(32)]
        incl = [c0[l] + c1[l] for l in range(32)]
        for d in (1, 2, 4, 8, 16):
            incl = [incl[l] + (incl[l - d] if l >= d else 0) for l in range(32)]
        for l in range(32):
            excl = incl[l] - c0[l] - c1[l]
            cnt[63 - 2 * l], cnt[62 - 2 * l] = excl, excl + c0[l]
        total = incl[31]
    else:
        at = 0
        for b in range(BUCKETS - 1, -1, -1):
            cnt[b], at = at, at + cnt[b]
        total = at
    lst = [None] * cap
    slot_next = 0
    order = [(t, e) for t in threads for e in again(t)]
    rng.shuffle(order)  # (the atomics' order)
    for _, (b, nbk, n) in order:
        nc = chunks(n)
        pos = cnt[bucket(n, nc)]
        cnt[bucket(n, nc)] += nc
        slot = 0
        if nc > 1:
            slot, slot_next = slot_next, slot_next + nc
            if slot + nc > slot_cap:
                nc = -nc
        for c in range(abs(nc)):
            if pos + c < cap:
                lst[pos + c] = (b, nbk, -1 if nc < 0 else (c | nc << 16), slot)
    return lst, min(total, cap), L, min(slot_next, slot_cap)


def layout(total_k, batch, heads, ctas):
    extra = -(-2 * ctas // heads)
    return None, 2 * extra, extra  # (cap computed by the caller with BN)


def check(S, heads, D, ctx, forced=0, ctas=132, rng=None):
    BM = 128 if D == 64 else 64
    BN = 64 if D == 256 else 128
    total_k = sum(s["lk_alloc"] for s in S)
    extra = -(-2 * ctas // heads)
    cap, slot_cap = -(-total_k // BN) + len(S) + extra, 2 * extra
    res = {}
    for one_pass in (False, True):
        lst, count, L, used = list_kernel(S, heads, BM, BN, ctx, ctas, cap, slot_cap, forced, one_pass, rng)
        items = lst[:count]
        assert all(x is not None for x in items), "unwritten item below count"
        # weights non-increasing
        wts = []
        for b, nbk, cw, slot in items:
            n = work_tiles(S[b], nbk * BN, BM, BN, ctx)[3]
            nc = cw >> 16 if cw >= 0 else 1
            wts.append(min(-(-n // nc), BUCKETS - 1))
        assert all(wts[i] >= wts[i + 1] for i in range(len(wts) - 1)), "order"
        # cover: each block's chunks once
        seen = {}
        for b, nbk, cw, slot in items:
            assert cw >= 0, "skipped item (slots past the bound)"
            seen.setdefault((b, nbk), []).append((cw & 0xFFFF, cw >> 16, slot))
        for b, s in enumerate(S):
            for nbk in range(-(-s["lk_alloc"] // BN)):
                ch = sorted(seen.get((b, nbk), []))
                n = work_tiles(s, nbk * BN, BM, BN, ctx)[3]
                assert ch and len(ch) == ch[0][1] and [c for c, _, _ in ch] == list(range(len(ch))), (b, nbk, ch)
                assert len({sl for _, _, sl in ch}) == 1
                nc = ch[0][1]
                ln = -(-n // nc)
                tiles = sum(max(0, min(ln, n - c * ln)) for c in range(nc))
                assert tiles == n, (b, nbk, n, nc)
                if nc > 1:
                    assert ch[0][2] + nc <= slot_cap
        assert len(seen) == sum(-(-s["lk_alloc"] // BN) for s in S)
        res[one_pass] = (sorted((b, nbk, cw) for b, nbk, cw, _ in items), count, L, used)
    assert res[False] == res[True], "one-pass and three-pass lists differ"
    return res[True][1], res[True][2], res[True][3]


def main():
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    rng = random.Random(0)
    # the many-sequences test's batch: torch.randint(0, 1000, (80,), Generator().manual_seed(D)) + [4000],
    # context_target (targets 0..min(L, 4), contexts 0..min(L - t, 5))
    try:
        import torch
        have_torch = True
    except ImportError:
        have_torch = False
    for D in (64, 128, 256):
        if have_torch:
            g = torch.Generator().manual_seed(D)
            lens = torch.randint(0, 1000, (80,), generator=g).tolist() + [4000]
        else:
            lens = [rng.randint(0, 999) for _ in range(80)] + [4000]
        for rep in range(3):
            nt = [rng.randint(0, min(L, 4)) for L in lens]
            nc = [rng.randint(0, min(L - t, 5)) for L, t in zip(lens, nt)]
            count, L, used = check(seqs(lens, nt, nc), 2, D, True, rng=rng)
        print(f"many_sequences D{D}: {count} items, L {L}, slots {used}: both kernels agree")
    for i in range(cases):
        B = rng.choice([1, 3, 17, 33, 81, 200, 700])
        lens = [int(min(8192, rng.paretovariate(1.2) * rng.choice([1, 30, 200]))) for _ in range(B)]
        if rng.random() < 0.2:
            lens = [rng.choice([0, 1, 64, 127, 128, 129, 4000])] * B
        ctx = rng.random() < 0.5
        nt = [rng.randint(0, min(L, 9)) for L in lens]
        ncx = [rng.randint(0, min(L - t, 200)) if ctx else 0 for L, t in zip(lens, nt)]
        D = rng.choice([64, 128, 256])
        H = rng.choice([1, 2, 4, 8])
        forced = rng.choice([0, 0, 2, 3])
        check(seqs(lens, nt, ncx, group=rng.choice([1, 4])), H, D, ctx, forced=forced, rng=rng)
    print(f"{cases} random batches: both kernels agree, chunks cover every walk once")


if __name__ == "__main__":
    main()
