"""The FP8 backward (issue 36, hstu/_fp8_bwd.py): its device pre-pass (layout definition on the CPU, the CUDA op
bit-equal to it), the reference that emulates its rounding points, and the `kernel_options(fp8_bwd=...)`
routing (the Hopper kernel: its accuracy test below runs once `hstu_attn::fp8_bwd_sm90` exists; until then the
option refuses with NotImplementedError, which is tested).

The error rule: |kernel - fp64 emulation| <= 5 * |bf16 emulation - fp64 emulation| + atol (the "same-dtype PyTorch"
of an FP8 op is its emulation computed in bf16, as in test_fp8.py).
"""

import math
import os
import random
import sys

import pytest
import torch

import hstu_attn
from hstu_attn import _fp8_bwd as fb
from hstu_attn._fp8 import BLOCK_ROWS, FP8_DTYPE, FP8_MAX, dequantize_fp8, hstu_attn_fp8_reference_backward

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp8_checks import (MASKS, assert_rel, capture_and_replay, lengths_args, make_case, max_err,  # noqa: E402
                        poison_allocator, quantized)
import fp8_bwd_sync_model  # noqa: E402


def jagged(seed, lens, H, D, device="cpu", dtype=torch.bfloat16, extra_rows=0, seqused=False):
    """q8 / k8 (block mode), dout (std 1 with larger rows) and the lengths; optional seqused (< the lengths) and rows
    of no sequence at the end (NaN in dout: they must not reach do8)."""
    rng = random.Random(seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    cu = torch.tensor([0] + lens, device=device).cumsum(0).to(torch.int32)
    total = sum(lens) + extra_rows
    x = torch.randn(total, H, D, generator=gen, device=device) * (1 + 3 * torch.rand(total, H, 1, generator=gen,
                                                                                       device=device))
    q8, _ = hstu_attn.quantize_fp8(x.to(dtype), cu, "block")
    k8, _ = hstu_attn.quantize_fp8((x.flip(0) * 0.5).to(dtype), cu, "block")
    dout = (torch.randn(total, H, D, generator=gen, device=device) * 1e-3).to(dtype)
    used = None
    if seqused:
        used = torch.tensor([rng.randint(0, n) for n in lens], dtype=torch.int32, device=device)
        for b, n in enumerate(lens):  # rows past seqused: garbage the pre-pass must ignore
            dout[int(cu[b]) + int(used[b]):int(cu[b + 1])] = float("nan")
    if extra_rows:
        dout[sum(lens):] = float("nan")
    return dout, q8, k8, cu, used


# ------------------------------------------------------------------------------------------------ layouts (CPU)
def test_permutations_are_bijections_and_pair_keys_j_and_j_plus_8():
    assert sorted(fb.fp8_key_perm(s) for s in range(32)) == list(range(32))
    assert sorted(fb.fp8_pair_perm(s) for s in range(16)) == list(range(16))
    for i in range(8):  # one thread's dS bytes of one query: keys i and i + 8, adjacent in Kᵀ
        assert (fb.fp8_pair_perm(2 * i), fb.fp8_pair_perm(2 * i + 1)) == (i, i + 8)
    # the forward's Vt permutation: slot 4 t + i holds key 2 t + (i & 1) + 8 (i >> 1)
    assert [fb.fp8_key_perm(s) for s in range(8)] == [0, 1, 8, 9, 2, 3, 10, 11]
    assert fb.fp8_vt_start(17, 2) == 32 + 96 and fb.fp8_vt_cols(100, 3) % 16 == 0


def test_kernel_index_maps_match_the_prepass_permutations():
    """The host mirror of hstu_bwd_fp8_sm90_kernel.cuh's index arithmetic: (a) fp8_pack_a64 puts into RS A k-slot k
    of a thread's row the Sᵀ element whose query is fp8_key_perm(k) (Qᵀ / dOᵀ's column order); (b) the dS stores
    (128-byte rows, 128-byte swizzle: 16-byte chunk XOR row % 8), their byte pairs permuted out of the packed A
    fragments, put key j of query c at the byte whose Kᵀ column holds key j (fp8_pair_perm)."""
    for w in range(4):
        for lane in range(32):
            def elem(e):  # m64nN accumulator: (row = key, column = query) of element e
                return 16 * w + lane // 4 + 8 * ((e % 4) // 2), 8 * (e // 4) + 2 * (lane % 4) + (e % 2)
            for ks in range(2):
                for q in range(4):
                    e0 = 16 * ks + 8 * (q >> 1) + 2 * (q & 1)
                    for byte, e in enumerate((e0, e0 + 1, e0 + 4, e0 + 5)):
                        k = 4 * (lane % 4) + byte + 16 * (q >> 1)  # the A fragment's k-slot of this byte
                        assert elem(e) == (16 * w + lane // 4 + 8 * (q & 1), 32 * ks + fb.fp8_key_perm(k))
            for wg in range(2):
                for odd in range(2):
                    t = 2 * (lane % 4) + odd
                    base = t * 128 + (((4 * wg + w) ^ t) << 4) + 2 * (lane // 4)
                    for c in range(8):
                        # the stored pair: bytes bsel and 4 + bsel of (da[c / 4][2 ((c % 4) / 2)], + 1), one prmt
                        bsel = 2 * (c % 2) + odd
                        q0 = 2 * ((c % 4) // 2)
                        src = [16 * (c // 4) + 8 * (qq >> 1) + 2 * (qq & 1) + d
                               for qq in (q0, q0 + 1) for d in (0, 1, 4, 5)]
                        assert (src[bsel], src[4 + bsel]) == (4 * c + odd, 4 * c + 2 + odd)
                        for hb in range(2):  # low byte: element 4 c + odd (key row + 0), high: + 2 (key row + 8)
                            addr = base + 8 * c * 128 + hb
                            row, col = addr // 128, addr % 128
                            col = (((col // 16) ^ (row % 8)) << 4) + col % 16  # unswizzled byte
                            key, query = elem(4 * c + odd + 2 * hb)
                            assert row == query and (col & ~15) + fb.fp8_pair_perm(col & 15) == 64 * wg + key



def test_d256_kernel_ds8_store_map():
    """The host mirror of hstu_bwd_fp8_sm90_d256_kernel.cuh's store_ds8: warpgroup hq's packed dS8 words (its k-step
    of the m64n64 tile, queries 32 hq ..; at query split the m64n32 accumulator of warpgroup hq), byte-permuted into
    four stmatrix.x4.trans registers, land each (key, query) of the warp's 16 keys at the byte of the 64-key dS8 row
    (64-byte rows, 64-byte swizzle: 16-byte chunk XOR (row / 2) % 4) whose Kᵀ column holds that key
    (fp8_pair_perm), every byte of the 64 x 64 tile once."""
    seen = set()
    for hq in range(2):
        for w in range(4):
            for lane in range(32):
                def elem(e):  # m64n32 accumulator of warpgroup hq: (key, query) of element e
                    return 16 * w + lane // 4 + 8 * ((e % 4) // 2), 32 * hq + 8 * (e // 4) + 2 * (lane % 4) + e % 2
                word = {}  # (q, byte) -> element: fp8_pack_a64's order (bytes e0, e0 + 1, e0 + 4, e0 + 5)
                for q in range(4):
                    e0 = 8 * (q >> 1) + 2 * (q & 1)
                    for byte, e in enumerate((e0, e0 + 1, e0 + 4, e0 + 5)):
                        word[q, byte] = e
                for m in range(4):
                    s0 = 2 * (m % 2)
                    x, y = 2 * (m // 2), 2 * (m // 2) + 1  # prmt(w[x], w[y], s0 | 4 + s0 | s0 + 1 | 5 + s0)
                    halves = [(word[x, s0 + h], word[y, s0 + h]) for h in range(2)]  # (low byte, high byte)
                    for h, (lo, hi) in enumerate(halves):
                        # .trans: fragment element (row lane / 4, column 2 (lane % 4) + h) of matrix m goes to the
                        # row addressed by lane 8 m + column, 16-bit column lane / 4 of its 16-byte chunk
                        c = 2 * (lane % 4) + h
                        row = 32 * hq + 8 * m + c
                        chunk = w ^ ((row >> 1) & 3)
                        for hb, e in enumerate((lo, hi)):
                            addr = row * 64 + (chunk << 4) + 2 * (lane // 4) + hb
                            r, col = addr // 64, addr % 64
                            col = (((col // 16) ^ ((r >> 1) & 3)) << 4) + col % 16  # unswizzled byte
                            key, query = elem(e)
                            assert r == query and (col & ~15) + fb.fp8_pair_perm(col & 15) == key
                            assert addr not in seen
                            seen.add(addr)
    assert len(seen) == 64 * 64


def test_kernel_sync_protocol_model():
    """The kernel's barriers and buffers (fp8_bwd_sync_model: named barriers arrived at by one warpgroup and waited
    for by the other, mbarrier rings, the dS8 buffers and amax words they guard) under random interleavings: no
    deadlock, every barrier generation completed by the two warpgroups' events of one tile, no tile reading another
    tile's data, for 0 to 9 query tiles, with two and three ring stages, and the late part's dS8 stores and dQ issue
    ahead of its amax barrier (kFp8BwdDs8Early, four dS8 buffers: the default). And the model fails the first drift
    version's fault (tile -1's dS8 barrier seeded although iteration 0 arrives at it: the device run hung), and the
    early dS8 stores with three buffers (a write into the buffer the other warpgroup's dQ of tile i - 4 may read)."""
    for n in range(10):
        for seed in range(60):
            fp8_bwd_sync_model.run(n, seed)
            fp8_bwd_sync_model.run(n, seed, seeds=(("amax", -1),), late_fence=True)  # kFp8BwdLateFence
            fp8_bwd_sync_model.run(n, seed, stages=3)  # kFp8BwdStages3
            fp8_bwd_sync_model.run(n, seed, stages=3, ds8_early=True, ds8_bufs=4)  # kFp8BwdDs8Early
    with pytest.raises(fp8_bwd_sync_model.SyncError, match="written into buffer"):
        for n in range(5, 10):
            for seed in range(200):
                fp8_bwd_sync_model.run(n, seed, stages=3, ds8_early=True)
    with pytest.raises(fp8_bwd_sync_model.SyncError, match="completed by"):
        for seed in range(20):
            fp8_bwd_sync_model.run(2, seed, seeds=(("ds8", -2), ("ds8", -1), ("amax", -1)))
    with pytest.raises(fp8_bwd_sync_model.SyncError, match="completed by"):  # the late-fence kernel with the seed
        for seed in range(20):
            fp8_bwd_sync_model.run(2, seed, late_fence=True)


def test_kernel_dq_staging_map_is_the_reduce_boxes_layout():
    """The host mirror of the kernel's dQ staging stores: each warp's m64n64 accumulator elements (rows lane / 4 + 8
    half, columns 8 j + 2 (lane % 4) + t) land once each in its two 2 KB panels at the bytes where the dq_accum
    tensor map's 16 x 32 fp32 boxes (128B swizzle: 16-byte chunk XOR row % 8) read element (row, column)."""
    seen = set()
    for lane in range(32):
        rowa = (lane // 4) * 128 + (lane % 2) * 8
        for j in range(8):
            for half in range(2):
                a = rowa + (j // 4) * 2048 + half * 8 * 128 + (((2 * (j % 4) + (lane % 4) // 2) ^ (lane // 4)) << 4)
                for t in range(2):
                    r, c = lane // 4 + 8 * half, 8 * j + 2 * (lane % 4) + t
                    pn, cb = c // 32, 4 * (c % 32)
                    assert a + 4 * t == pn * 2048 + r * 128 + (((cb // 16) ^ (r % 8)) << 4) + cb % 16
                    seen.add(a + 4 * t)
    assert len(seen) == 1024

def _quant_slot_of_row(r):
    """hstu_fp8_bwd_prepass.cu quant_slot_of_row: the slot (within 32) whose fp8_key_perm is r."""
    lo8 = r & 15
    return (r & 16) + 4 * ((lo8 & 7) >> 1) + ((lo8 & 1) | ((lo8 >> 3) << 1))


@pytest.mark.parametrize("seed", range(3))
def test_prepass_quant_blocks_write_every_dot_column(seed):
    """The host mirror of the quantization blocks' dO^T columns (hstu_fp8_bwd_prepass.cu fp8_quant_do_kernel): block
    (sequence b, 128-row block m) writes columns [first + 128 m, end) (end: the next sequence's first column after
    b's last block), slot s holding its row (s & ~31) + fp8_key_perm(s & 31) (0 past the used rows, slots >= 128 0),
    the extra block the columns before sequence 0's; together every column of dO^T gets the byte
    `fp8_bwd_prepass_reference` puts there (fp8_vt_start / fp8_key_perm), whoever writes it (blocks past a
    sequence's last one write zeros only)."""
    assert all(fb.fp8_key_perm(_quant_slot_of_row(r)) == r for r in range(32))
    rng = random.Random(seed)
    for _ in range(60):
        lens = [rng.choice([0, 1, 16, 31, 32, 33, 127, 128, 129, 256, 257, rng.randint(0, 700)])
                for _ in range(rng.randint(1, 6))]
        cu = [rng.choice([0, 0, 5, 16])]
        for n in lens:
            cu.append(cu[-1] + n)
        used = [rng.randint(0, n) for n in lens] if rng.random() < 0.5 else lens
        total, B = cu[-1] + rng.choice([0, 3, 200]), len(lens)
        q_cols, do_cols = fb.fp8_vt_cols(total, B), total // 128 + B

        def ref(c):  # hstu_fp8_col_src_row
            b = max([i for i in range(B) if fb.fp8_vt_start(cu[i], i) <= c], default=0)
            first = fb.fp8_vt_start(cu[b], b)
            if c < first:
                return -1
            row = ((c - first) & ~31) + fb.fp8_key_perm((c - first) & 31)
            return cu[b] + row if row < min(used[b], lens[b]) else -1

        out = {c: -1 for c in range(fb.fp8_vt_start(cu[0], 0))}  # the extra block
        for col in range(do_cols):
            b = max(i for i in range(B) if cu[i] // 128 + i <= col)
            m = col - (cu[b] // 128 + b)
            nu = max(0, min(128, min(used[b], lens[b]) - 128 * m))
            first = fb.fp8_vt_start(cu[b], b)
            seq_end = fb.fp8_vt_start(cu[b + 1], b + 1) if b + 1 < B else q_cols
            c_begin = first + 128 * m
            c_end = seq_end if 128 * (m + 1) >= lens[b] else min(c_begin + 128, seq_end)
            tile = {(r & ~31) + _quant_slot_of_row(r & 31): (cu[b] + 128 * m + r if r < nu else -1)
                    for r in range(128)}
            for c in range(c_begin, c_end):
                v = tile[c - c_begin] if c - c_begin < 128 else -1
                assert out.setdefault(c, v) == v, (lens, c)
        assert sorted(out) == list(range(q_cols)), lens
        assert all(out[c] == ref(c) for c in range(q_cols)), lens


@pytest.mark.parametrize("D", [64, 128, 256])
def test_dq_red_workspace_maps_back_to_each_row_once(D):
    """The kernel's dq workspace (kFp8BwdDqRedV4, hstu_fp8_bwd_dq_tiled_floats): the float each thread's
    red.global.add.v4 adds an accumulator element to (rows lane / 4 + 8 (c // 2), columns (D / 2) wg + 8 j +
    2 (lane % 4) + c % 2 of the warp's 16-row group (cu[b] + 16 b) // 16 + row0 // 16) is the float the finishing pass
    (fp8_bwd_finish_tiled_kernel<T, D>) reads back for that (row, column) (its owner search and float4 order), every
    used float once, inside the allocation (jagged, an empty sequence, a start off 16, the last tiles' warps past their
    sequence)."""
    lens = [37, 0, 130, 16, 1, 200]
    cu = [3]
    for n in lens:
        cu.append(cu[-1] + n)
    total, B, H = cu[-1] + 5, len(lens), 1
    groups = total // 16 + B + 4  # hstu_fp8_bwd_dq_tiled_groups
    bases = [(cu[b] + 16 * b) // 16 for b in range(B)]
    written = {}
    for b, n in enumerate(lens):
        for m0 in range(0, n, 64):  # 64-row tiles; each warp a 16-row group, rows past the sequence too
            for warp in range(4):
                g = bases[b] + (m0 + 16 * warp) // 16
                assert g < groups
                for wg in range(2):
                    for lane in range(32):
                        for j in range(D // 16):  # (kDqF4)
                            for c in range(4):
                                row = m0 + 16 * warp + lane // 4 + 8 * (c // 2)
                                col = (D // 2) * wg + 8 * j + 2 * (lane % 4) + c % 2
                                f = ((g * H) * 2 + wg) * (8 * D) + 4 * lane + 128 * j + c
                                assert f < groups * H * 16 * D  # hstu_fp8_bwd_dq_tiled_floats
                                if row < n:
                                    assert written.setdefault(f, (cu[b] + row, col)) == (cu[b] + row, col)
    back = {}
    for x in range(total // 16 + B + 1):  # the finishing pass: group x's owner and rows
        lo = max([b for b in range(B) if bases[b] <= x], default=0)
        first = 16 * (x - bases[lo])
        rows = min(16, lens[lo] - first)
        if first < 0 or rows <= 0:
            continue
        for t in range(256):
            for k in range(D // 64):
                i = t + 256 * k
                blk, j, lane = i // (2 * D), (i % (2 * D)) // 32, i % 32
                for c in range(4):
                    r, col = lane // 4 + 8 * (c // 2), (D // 2) * blk + 8 * j + 2 * (lane % 4) + c % 2
                    if r < rows:
                        back[x * H * 16 * D + 4 * i + c] = (cu[lo] + first + r, col)
    assert back == written and len(back) == sum(lens) * D


@pytest.mark.parametrize("D", [64, 128, 256])
def test_dq_bf16_workspace_maps_back_to_each_row_once(D):
    """kFp8BwdDqBf16's bf16 workspace (half of hstu_fp8_bwd_dq_tiled_floats): thread lane's reduce-add j
    (0 .. D / 32 - 1) adds accumulator elements 8 j .. 8 j + 7 (float4 2 j and 2 j + 1 of the fp32 order) at bf16
    16 D (g H + h) + 8 D wg + 256 j + 8 lane; the finishing pass's (fp8_bwd_finish_quad_kernel<T, kHoist, D>) uint4 u
    of a (group, head) pair reads them back for the same (row, column), every used element once (the fp32 test's
    jagged case); its blocks' threads cover each pair once. At D = 256 (hstu_bwd_fp8_sm90_d256_kernel.cuh) warpgroup
    wg's reduce-add j is its dQ half j // 4's jj = j % 4 (two m64n64 halves of its 128 columns: the m64n128
    accumulator's order), and each finishing thread takes two uint4 of a pair (t, t + 256)."""
    lens = [37, 0, 130, 16, 1, 200]
    cu = [3]
    for n in lens:
        cu.append(cu[-1] + n)
    total, B, H = cu[-1] + 5, len(lens), 2
    bases = [(cu[b] + 16 * b) // 16 for b in range(B)]
    written = {}
    for b, n in enumerate(lens):
        for m0 in range(0, n, 64):
            for warp in range(4):
                g = bases[b] + (m0 + 16 * warp) // 16
                for h in range(H):
                    for wg in range(2):
                        for lane in range(32):
                            for j in range(D // 32):  # (kBf16Red)
                                for k in range(8):  # acc[8 j + k] = float4 2 j + k // 4, element k % 4
                                    c = k % 4
                                    row = m0 + 16 * warp + lane // 4 + 8 * (c // 2)
                                    col = (D // 2) * wg + 8 * (2 * j + k // 4) + 2 * (lane % 4) + c % 2
                                    e = (g * H + h) * 16 * D + 8 * D * wg + 256 * j + 8 * lane + k
                                    if row < n:
                                        assert written.setdefault(e, (h, cu[b] + row, col)) == (h, cu[b] + row, col)
    if D == 256:  # the kernel's halves: reduce-add 4 half + jj of acc_dq (m64n64) element 8 jj + k
        for half in range(2):
            for jj in range(4):
                for k in range(8):
                    c, j = k % 4, 4 * half + jj
                    # m64n64 half's float4 2 jj + k // 4 is the m64n128 accumulator's float4 8 half + 2 jj + k // 4
                    assert 8 * (2 * j + k // 4) == 64 * half + 8 * (2 * jj + k // 4)
    ng = total // 16 + B + 1
    split = 2 * D // 256 if 2 * D > 256 else 1  # (kSplit: uint4 of one pair per thread)
    quad, sub = 4, 256 * split // (2 * D)  # (kQuadPairs, kSub: pairs side by side)
    seen = set()
    for blk_x in range((ng * H + quad - 1) // quad):  # (fp8_bwd_finish_quad_kernel's blocks)
        for tid in range(256):
            t, s = (tid, 0) if sub == 1 else (tid % (2 * D), tid // (2 * D))
            for k in range(quad // sub):  # (kPer)
                pair = blk_x * quad + k * sub + s
                for sp in range(split):
                    if pair < ng * H:
                        assert (pair, t + 256 * sp) not in seen
                        seen.add((pair, t + 256 * sp))
    assert len(seen) == ng * H * 2 * D
    back = {}
    for x in range(ng):
        lo = max([b for b in range(B) if bases[b] <= x], default=0)
        first = 16 * (x - bases[lo])
        rows = min(16, lens[lo] - first)
        if first < 0 or rows <= 0:
            continue
        for h in range(H):
            for t in range(2 * D):  # (fp8_bwd_finish_quad_kernel's uint4 t of the pair)
                blk, j, lane = t // D, 2 * ((t % D) // 32), t % 32
                for w in range(4):  # word w: float4 j + w // 2, row lane / 4 + 8 (w % 2), its two columns
                    for half in range(2):
                        r = lane // 4 + 8 * (w % 2)
                        col = (D // 2) * blk + 8 * (j + w // 2) + 2 * (lane % 4) + half
                        assert 8 * ((D // 16) * blk + j + w // 2) + 2 * (lane % 4) == col - half  # (c8, word)
                        if r < rows:
                            back[(x * H + h) * 16 * D + 8 * t + 2 * w + half] = (h, cu[lo] + first + r, col)
    assert back == written and len(back) == sum(lens) * D * H


@pytest.mark.parametrize("seed", range(4))
def test_prepass_reference_layout(seed):
    rng = random.Random(seed)
    lens = [rng.choice([0, 1, 31, 33, 64, 129, rng.randint(0, 300)]) for _ in range(rng.randint(1, 5))]
    lens[0] = max(lens[0], 1)
    H, D = 2, 32
    dout, q8, k8, cu, used = jagged(seed, lens, H, D, extra_rows=3 * (seed % 2), seqused=seed >= 2)
    do8, ds, qt, dot, kt = fb.fp8_bwd_prepass_reference(dout, q8, k8, cu, cu, used, used)
    total, batch = dout.shape[0], len(lens)
    assert do8.dtype == FP8_DTYPE and tuple(ds.shape) == (H, total // BLOCK_ROWS + batch)
    assert qt.shape == dot.shape == kt.shape == (H, D, fb.fp8_vt_cols(total, batch))
    n_used = [min(n, int(used[b])) if used is not None else n for b, n in enumerate(lens)]
    # every element by its own loop: column -> row, 0 where no used row lands
    for name, t, src, group, perm in (("qt", qt, q8, 32, fb.fp8_key_perm), ("dot", dot, do8, 32, fb.fp8_key_perm),
                                      ("kt", kt, k8, 16, fb.fp8_pair_perm)):
        want = torch.zeros_like(t)
        raw = src.view(torch.uint8)
        for b in range(batch):
            c0 = fb.fp8_vt_start(int(cu[b]), b)
            for slot in range(-(-lens[b] // group) * group):
                row = slot // group * group + perm(slot % group)
                if row < n_used[b]:
                    want[:, :, c0 + slot] = raw[int(cu[b]) + row]
        assert torch.equal(t, want), name
    # dO: rows past seqused and of no sequence are 0, the rest within the e4m3 round-trip bound of its block
    deq = dequantize_fp8(do8, ds, cu, "block")
    mask = fb._used_rows_mask(total, cu, used)
    assert not torch.isnan(deq).any() and torch.equal(deq[~mask], torch.zeros_like(deq[~mask]))
    x = dout.float()[mask]
    assert ((deq[mask] - x).abs() <= 2 ** -4 * x.abs() + 2 ** -10 * ds.max()).all()
    assert (ds > 0).all() and torch.isfinite(ds).all()


@pytest.mark.parametrize("D", [128, 256])
def test_pow2_ceil_and_running_group_factors(D):
    """The dS factor groups: DS_ROWS query rows x ds_keys(D) keys (D = 256's kernel: 64-key blocks)."""
    x = torch.tensor([1.0, 1.5, 3.0, 4.0, 2 ** -130, 1e30, 0.0])
    assert fb._pow2_ceil(x).tolist() == [1.0, 2.0, 4.0, 4.0, 2 ** -126, 2.0 ** 100, 0.0]
    gen = torch.Generator().manual_seed(0)
    R, K = fb.DS_ROWS, fb.ds_keys(D)
    assert K == (64 if D == 256 else 128)
    ds = torch.randn(2, 2 * R + 22, K + 2, generator=gen, dtype=torch.float64)
    ds[:, R:2 * R] *= 10  # the second query tile's factors grow, the third's keep the running maximum
    u = fb.ds_group_factors(ds, K)
    for h in range(2):
        for g in range(2):
            run = 0.0
            for t in range(3):
                blk = ds[h, R * t:R * t + R, K * g:K * g + K]
                f = (blk.abs().max().float() / torch.tensor(FP8_MAX)).item()  # float32, as the kernel
                run = max(run, 2.0 ** math.ceil(math.log2(f)))
                assert (u[h, R * t:R * t + R, K * g:K * g + K] == run).all()
    assert ((ds / u).abs() <= FP8_MAX).all()


@pytest.mark.parametrize("mode", ["tensor", "block"])
@pytest.mark.parametrize("mask", ["causal", "context_target_group", "local"])
def test_backward_reference_against_exact_gradients(mode, mask):
    """The emulation costs FP8's few percent against the exact gradients of the dequantized math, no more, and it
    does round (it is farther from them than its own bf16 computation is from it)."""
    c = make_case(7 + len(mask), [300, 0, 150, 77], 2, 64, mask)
    (q8, k8, v8), scales = quantized(c, mode)
    gen = torch.Generator().manual_seed(1)
    dout = torch.randn(q8.shape, generator=gen).to(torch.bfloat16)
    alpha = 64 ** -0.5
    args = dict(alpha=alpha, **lengths_args(c))
    exact = hstu_attn_fp8_reference_backward(dout.double(), q8, k8, v8, *scales, mode, None,
                                             compute_dtype=torch.float64, **args)
    emul = fb.hstu_attn_fp8_backward_reference(dout.double(), q8, k8, v8, *scales, mode,
                                               compute_dtype=torch.float64, **args)
    for name, e, g in zip(("dq", "dk", "dv"), emul, exact):
        scale = g.abs().max().item()
        assert not torch.isnan(e).any() and 1e-4 * scale < max_err(e, g) < 0.15 * scale, name


def test_prepass_op_cpu_and_fake_shapes():
    dout, q8, k8, cu, _ = jagged(3, [70, 130], 2, 32)
    outs = fb.fp8_bwd_prepass(dout, q8, k8, cu, cu)
    ref = fb.fp8_bwd_prepass_reference(dout, q8, k8, cu, cu)
    for a, b in zip(outs, ref):
        assert torch.equal(a.view(torch.uint8) if a.dtype == FP8_DTYPE else a,
                           b.view(torch.uint8) if b.dtype == FP8_DTYPE else b)
    with torch._subclasses.fake_tensor.FakeTensorMode():
        fake = torch.ops.hstu_attn.fp8_bwd_prepass(torch.empty(200, 2, 32, dtype=torch.bfloat16),
                                                   torch.empty(200, 2, 32, dtype=FP8_DTYPE),
                                                   torch.empty(90, 2, 32, dtype=FP8_DTYPE),
                                                   torch.zeros(3, dtype=torch.int32), torch.zeros(3, dtype=torch.int32),
                                                   None, None)
        assert [tuple(t.shape) for t in fake] == [(200, 2, 32), (2, 200 // 128 + 2), (2, 32, fb.fp8_vt_cols(200, 2)),
                                                  (2, 32, fb.fp8_vt_cols(200, 2)), (2, 32, fb.fp8_vt_cols(90, 2))]


def test_fp8_bwd_option_leaves_the_cpu_path_alone():
    c = make_case(5, [90, 40], 2, 32, "causal")
    leaves = [c[n].clone().requires_grad_() for n in ("q", "k", "v")]
    g0 = torch.autograd.grad(hstu_attn.hstu_attn_varlen_func(*leaves, fp8_quant_mode="head", **lengths_args(c)).sum(),
                             leaves)
    with hstu_attn._ops.kernel_options(fp8_bwd=True):
        out = hstu_attn.hstu_attn_varlen_func(*leaves, fp8_quant_mode="head", **lengths_args(c))
    g1 = torch.autograd.grad(out.sum(), leaves)
    assert all(torch.equal(a, b) for a, b in zip(g0, g1))


# ------------------------------------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("seqused", [False, True])
def test_cuda_prepass_bit_equal_to_reference(D, dtype, seqused):
    lens = [300, 0, 129, 77, 1, 640]  # an empty sequence, unaligned starts, blocks and 32-groups cut short
    dout, q8, k8, cu, used = jagged(D + seqused, lens, 3, D, device="cuda", dtype=dtype, extra_rows=5,
                                    seqused=seqused)
    poison_allocator(16 * dout.numel())
    outs = fb.fp8_bwd_prepass(dout, q8, k8, cu, cu, used, used)
    ref = fb.fp8_bwd_prepass_reference(*(None if t is None else t.cpu() for t in (dout, q8, k8, cu, cu, used, used)))
    for name, a, b in zip(("do8", "do_descale", "qt", "dot", "kt"), outs, ref):
        a = a.cpu()
        assert torch.equal(a.view(torch.uint8) if a.dtype == FP8_DTYPE else a,
                           b.view(torch.uint8) if b.dtype == FP8_DTYPE else b), name


@pytest.mark.gpu
def test_cuda_prepass_no_host_sync_and_graph_capture():
    dout, q8, k8, cu, _ = jagged(11, [500, 260], 2, 128, device="cuda")
    fb.fp8_bwd_prepass(dout, q8, k8, cu, cu)  # warm (the op's first call may load things)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        first = fb.fp8_bwd_prepass(dout, q8, k8, cu, cu)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fb.fp8_bwd_prepass(dout, q8, k8, cu, cu)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        captured = fb.fp8_bwd_prepass(dout, q8, k8, cu, cu)
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(first, captured):
        assert torch.equal(a.view(torch.uint8) if a.dtype == FP8_DTYPE else a,
                           b.view(torch.uint8) if b.dtype == FP8_DTYPE else b)


def fp8_bwd_kernel_built(d=128):
    return fb.fp8_bwd_kernel_built(d)


@pytest.mark.sm90
def test_cuda_fp8_bwd_option_refuses_what_it_cannot_run():
    q96 = torch.zeros(4, 2, 96, device="cuda").to(FP8_DTYPE)  # (no FP8 forward at D = 96: the refusal alone)
    assert "expected head dim in [64, 128, 256]" in fb.fp8_bwd_refusal(q96, None, 0)
    c = make_case(22, [200, 90], 2, 128, "causal", device="cuda")
    leaves = [c[n].clone().requires_grad_() for n in ("q", "k", "v")]
    rab = torch.randn(2, 2, 200, 200, device="cuda", dtype=torch.bfloat16)
    with hstu_attn._ops.kernel_options(fp8_bwd=True):
        out = hstu_attn.hstu_attn_varlen_func(*leaves, fp8_quant_mode="block", rab=rab, **lengths_args(c))
    with pytest.raises(NotImplementedError, match="rab: expected None"):
        out.sum().backward()
    if not fp8_bwd_kernel_built():
        with hstu_attn._ops.kernel_options(fp8_bwd=True):
            out = hstu_attn.hstu_attn_varlen_func(*leaves, fp8_quant_mode="block", **lengths_args(c))
        with pytest.raises(NotImplementedError, match="fp8_bwd_sm90"):
            out.sum().backward()


# The path's private variants (option bits of the op's `options`, fb.FP8_BWD_VARIANT_BITS, hstu_bwd_fp8_sm90.h
# kOptFp8Bwd*), the same math as the default: kernel variants (dq up to the order of its fp32 additions).
VARIANTS = dict(fb.FP8_BWD_VARIANT_BITS)


@pytest.mark.sm90
@pytest.mark.parametrize("mode", ["tensor", "head", "batch_head", "block"])
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_cuda_fp8_bwd_kernel_matches_emulating_reference(mode, mask):
    """The Hopper FP8 backward (kernel_options(fp8_bwd=True), D = 128) against its fp64 emulation, 5x the bf16
    emulation's error; and against the dequantized bf16 backward (the default path) within FP8's few percent."""
    _check_against_emulation(mode, mask)


@pytest.mark.sm90
@pytest.mark.parametrize("mode", ["tensor", "head", "batch_head", "block"])
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_cuda_fp8_bwd_d64_matches_emulating_reference(mode, mask):
    """The FP8 backward at D = 64 (its own unit: dQ by m64n32 per warpgroup, 64-byte swizzled K / V / Q / dO rows)
    by D = 128's rule: 5x the bf16 emulation's error against the fp64 emulation, the dequantized path within 15 %."""
    _check_against_emulation(mode, mask, d=64)


@pytest.mark.sm90
@pytest.mark.parametrize("mode", ["tensor", "head", "batch_head", "block"])
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_cuda_fp8_bwd_d256_matches_emulating_reference(mode, mask):
    """The FP8 backward at D = 256 (its own split-D kernel: 64-key blocks, the warpgroups' column halves, dS factors
    per 64 x 64 tile) by D = 128's rule: 5x the bf16 emulation's error against the fp64 emulation, the dequantized
    path within 15 %."""
    _check_against_emulation(mode, mask, d=256)


@pytest.mark.sm90
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_cuda_fp8_bwd_d256_sync_matches_emulating_reference(mask):
    """D = 256's lab kernel (the op's diag kFp8BwdD256Sync = 512: warpgroup 0's S^T and pointwise pass, warpgroup 1's
    dP^T and dS' after) by the same rule."""
    _check_against_emulation("block", mask, d=256, diag=512)


@pytest.mark.sm90
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_cuda_fp8_bwd_variant_matches_emulating_reference(variant, mask, d):
    """A private kernel variant (VARIANTS) against the fp64 emulation, by the kernel's own rule (5x the bf16
    emulation's error): jagged, an empty sequence, delta-q (make_case)."""
    _check_against_emulation("block", mask, VARIANTS[variant], d=d)


@pytest.mark.sm90
def test_cuda_fp8_bwd_rows_outside_sequences_are_zero():
    """dk / dv get no zero fill before the kernel: the rows past every sequence (from cu_seqlens[B] on; NaN in dout
    there) come back 0 from the op's finishing pass (dq's rounding: the rows put back from the groups, the rows
    outside zeroed), the rest as the fp64 emulation (5x the bf16 emulation's error). (Rows before cu_seqlens[0] > 0:
    quantize_fp8's block mode does not take them.)"""
    for d in (128, 64, 256):
        grads = _check_against_emulation("block", "causal", 0, extra_rows=9, d=d)
        for name, g in zip(("dq", "dk", "dv"), grads):
            assert torch.equal(g[-9:], torch.zeros_like(g[-9:])), (name, d)


@pytest.mark.sm90
def test_cuda_fp8_bwd_graph_capture():
    """The whole FP8 backward (pre-pass, kernel, finishing pass) captured into a CUDA graph and replayed: the eager
    call's dk / dv bit for bit, dq up to the order of its bf16 additions."""
    if not fp8_bwd_kernel_built():
        pytest.skip("the Hopper FP8 backward kernel (hstu_attn::fp8_bwd_sm90) is not in this build")
    c = make_case(51, [700, 0, 129, 300], 2, 128, "causal", device="cuda")
    (q8, k8, v8), scales = quantized(c, "block")
    gen = torch.Generator(device="cuda").manual_seed(3)
    dout = (torch.randn(q8.shape, generator=gen, device="cuda") * 1e-2).to(torch.bfloat16)
    lens = lengths_args(c)
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]

    def run():
        return torch.ops.hstu_attn.fp8_bwd(
            dout, q8, k8, v8, *scales, 3, 0, lens["cu_seqlens_q"], lens["cu_seqlens_k"], lens["max_seqlen_q"],
            lens["max_seqlen_k"], None, None, 1, *lens["window_size"], 128 ** -0.5, None,
            float(lens["max_seqlen_q"]), None, None, False, opts)

    eager, captured = capture_and_replay(run, fill=float("nan"))  # (the replay must write every element)
    assert torch.equal(captured[1], eager[1]) and torch.equal(captured[2], eager[2]), "dk / dv"
    a, b = eager[0].float(), captured[0].float()
    assert not (a - b).abs().gt(2 ** -7 * a.abs() + dq_order_atol(a, lens)).any(), "dq"


@pytest.mark.sm90
@pytest.mark.parametrize("variant", ["default", "main_path"])
def test_cuda_fp8_bwd_bad_scale_recorded_and_nan(variant):
    """The one-op path checks the descale factors on the device (by default in the pre-pass's first block; main_path:
    a launch of its own): a NaN q_descale makes every gradient NaN and is recorded without a host sync (raised by
    check_errors), the first bad factor in q, k, v order and flat index; a good call after it is clean."""
    if not fp8_bwd_kernel_built():
        pytest.skip("the Hopper FP8 backward kernel (hstu_attn::fp8_bwd_sm90) is not in this build")
    if variant != "default" and variant not in VARIANTS:
        pytest.skip(f"variant {variant} is not in this build")
    c = make_case(31, [300, 129], 2, 128, "causal", device="cuda")
    (q8, k8, v8), good = quantized(c, "block")
    scales = [t.clone() for t in good]
    scales[0][1, 2] = float("nan")
    scales[0][1, 3] = -1.0  # (later in q: not the one recorded)
    scales[2][0, 0] = 0.0  # (in v: after q's)
    dout = (torch.randn(q8.shape, device="cuda") * 1e-2).to(torch.bfloat16)
    lens = lengths_args(c)
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"] | VARIANTS.get(variant, 0)

    def call(sc):
        return torch.ops.hstu_attn.fp8_bwd(
            dout, q8, k8, v8, *sc, 3, 0, lens["cu_seqlens_q"], lens["cu_seqlens_k"], lens["max_seqlen_q"],
            lens["max_seqlen_k"], None, None, 1, *lens["window_size"], 128 ** -0.5, None,
            float(lens["max_seqlen_q"]), None, None, False, opts)

    hstu_attn.check_errors()
    grads = call(scales)
    for name, g in zip(("dq", "dk", "dv"), grads):
        assert torch.isnan(g).all(), name
    with pytest.raises(hstu_attn.DeviceInputError, match=r"q_descale: expected finite descale factors > 0") as info:
        hstu_attn.check_errors()
    assert info.value.index == scales[0].shape[1] + 2, str(info.value)
    grads = call(good)
    torch.cuda.synchronize()
    hstu_attn.check_errors()
    for name, g in zip(("dq", "dk", "dv"), grads):
        assert not torch.isnan(g).any(), name


@pytest.mark.gpu
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cuda_prepass_nan_blocks_bit_equal_to_reference(D, dtype):
    """The pre-pass's quantization on blocks holding NaN (descale 1: the block's infinities saturate to +-448) beside
    finite ones: the same bytes and factors as the reference (the register-resident blocks at D <= 128 and their
    NaN flag through the amax barrier). (Not a block whose amax is inf: there inf / inf is a NaN whose sign differs
    between the CPU reference and the GPU.)"""
    lens = [300, 129, 640]
    dout, q8, k8, cu, _ = jagged(D + 3, lens, 2, D, device="cuda", dtype=dtype)
    dout[5, 1, 3] = float("nan")  # sequence 0, block 0, head 1
    dout[300 + 100, 0, D - 1] = float("nan")  # sequence 1, block 0, head 0 (its last column)
    dout[429 + 300, 0, 7] = float("nan")  # sequence 2, block 2, head 0, with +-inf in the same block
    dout[429 + 301, 0, 8] = float("inf")
    dout[429 + 383, 0, 0] = -float("inf")
    outs = fb.fp8_bwd_prepass(dout, q8, k8, cu, cu)
    ref = fb.fp8_bwd_prepass_reference(*(t.cpu() for t in (dout, q8, k8, cu, cu)))
    for name, a, b in zip(("do8", "do_descale", "qt", "dot", "kt"), outs, ref):
        a = a.cpu()
        assert torch.equal(a.view(torch.uint8) if a.dtype == FP8_DTYPE else a,
                           b.view(torch.uint8) if b.dtype == FP8_DTYPE else b), name


# Bad int32 vectors on the FP8 backward's one-op path (base: sequences of 300 and 129 rows, cu [0, 300, 429]):
# name -> (overrides, the argument the validation names). Offsets far outside the rows: the pre-pass, launched before
# the validation's verdict, must bound its reads and writes itself.
BAD_VECTORS = {
    "cu_q_decreasing": (dict(cu_seqlens_q=[0, 400, 300]), "cu_seqlens_q"),
    "cu_q_first_far_negative": (dict(cu_seqlens_q=[-(1 << 30), 300, 429]), "cu_seqlens_q"),
    "cu_q_last_far_beyond": (dict(cu_seqlens_q=[0, 300, 1 << 30]), "cu_seqlens_q"),
    "cu_k_last_far_beyond": (dict(cu_seqlens_k=[0, 300, 1 << 30]), "cu_seqlens_k"),
    "cu_k_middle_far_negative": (dict(cu_seqlens_k=[0, -(1 << 30), 429]), "cu_seqlens_k"),
    "seqused_q_far_beyond": (dict(seqused_q=[300, 1 << 30]), "seqused_q"),
    "seqused_k_negative": (dict(seqused_k=[-5, 129]), "seqused_k"),
}


@pytest.mark.sm90
@pytest.mark.parametrize("variant", ["default", "main_path"])
@pytest.mark.parametrize("case", sorted(BAD_VECTORS))
def test_cuda_fp8_bwd_bad_int32_vectors_recorded(case, variant):
    """Bad cu_seqlens / seqused values reach the FP8 backward's one op (no forward before it): no memory fault (the
    pre-pass runs first and reads them raw), the validation's DeviceInputError names the argument, every gradient
    comes back zero or NaN (the kernels see empty sequences), and a good call afterwards matches one before."""
    if not fp8_bwd_kernel_built():
        pytest.skip("the Hopper FP8 backward kernel (hstu_attn::fp8_bwd_sm90) is not in this build")
    if variant != "default" and variant not in VARIANTS:
        pytest.skip(f"variant {variant} is not in this build")
    c = make_case(37, [300, 129], 2, 128, "causal", device="cuda")
    (q8, k8, v8), scales = quantized(c, "tensor")
    gen = torch.Generator(device="cuda").manual_seed(9)
    dout = (torch.randn(q8.shape, generator=gen, device="cuda") * 1e-2).to(torch.bfloat16)
    lens = lengths_args(c)
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"] | VARIANTS.get(variant, 0)

    def call(cu_seqlens_q=None, cu_seqlens_k=None, seqused_q=None, seqused_k=None):
        i32 = lambda v, d: d if v is None else torch.tensor(v, dtype=torch.int32, device="cuda")  # noqa: E731
        return torch.ops.hstu_attn.fp8_bwd(
            dout, q8, k8, v8, *scales, 0, 0, i32(cu_seqlens_q, lens["cu_seqlens_q"]),
            i32(cu_seqlens_k, lens["cu_seqlens_k"]), lens["max_seqlen_q"], lens["max_seqlen_k"], None, None, 1,
            *lens["window_size"], 128 ** -0.5, None, float(lens["max_seqlen_q"]), i32(seqused_q, None),
            i32(seqused_k, None), False, opts)

    hstu_attn.check_errors()
    good = call()
    torch.cuda.synchronize()
    over, arg = BAD_VECTORS[case]
    grads = call(**over)
    torch.cuda.synchronize()  # (a memory fault would raise here)
    with pytest.raises(hstu_attn.DeviceInputError) as info:
        hstu_attn.check_errors()
    assert info.value.arg == arg, str(info.value)
    for name, g in zip(("dq", "dk", "dv"), grads):
        assert bool((torch.isnan(g.float()) | (g == 0)).all()), name
    again = call()
    torch.cuda.synchronize()
    hstu_attn.check_errors()
    assert torch.equal(again[1], good[1]) and torch.equal(again[2], good[2]), "dk / dv"
    a, b = good[0].float(), again[0].float()
    assert not (a - b).abs().gt(2 ** -7 * a.abs() + dq_order_atol(a, lens)).any(), "dq"


@pytest.mark.gpu
def test_cuda_check_scales_first_violation_over_many_factors():
    """hstu_attn::fp8_check_scales (the FP8 paths' device check of their descale factors, one block of 512 threads)
    over thousands of factors a tensor: good factors copied bit for bit; with bad ones every copy NaN and the first
    bad factor (in q, k, v order, then flat index) recorded, a later one not."""
    gen = torch.Generator(device="cuda").manual_seed(12)
    good = [torch.rand(n, generator=gen, device="cuda") + 0.5 for n in (3 * 4096 + 7, 1, 9001)]
    hstu_attn.check_errors()
    outs = torch.ops.hstu_attn.fp8_check_scales(*good)
    torch.cuda.synchronize()
    hstu_attn.check_errors()
    assert all(torch.equal(g, o) for g, o in zip(good, outs))
    for which, idx, later in ((0, 2 * 4096 + 3, (0, 3 * 4096 + 1)), (2, 8999, (2, 9000)), (2, 0, (2, 4097))):
        bad = [g.clone() for g in good]
        bad[which][idx] = float("nan") if idx % 2 else 0.0
        bad[later[0]][later[1]] = -1.0
        outs = torch.ops.hstu_attn.fp8_check_scales(*bad)
        torch.cuda.synchronize()
        assert all(bool(torch.isnan(o).all()) for o in outs)
        name = ("q_descale", "k_descale", "v_descale")[which]
        with pytest.raises(hstu_attn.DeviceInputError, match=rf"{name}: expected finite descale factors > 0") as info:
            hstu_attn.check_errors()
        assert info.value.index == idx, str(info.value)


@pytest.mark.sm90
@pytest.mark.parametrize("variant", ["main_path"])
def test_cuda_fp8_bwd_variant_matches_the_kernel_fp16_out(variant):
    """A private variant against the default with float16 dout (dq / dk / dv in float16: dq's groups converted from
    the bf16 workspace by the finishing pass): dk / dv bit-equal, dq up to the order of its additions."""
    if not fp8_bwd_kernel_built() or variant not in VARIANTS:
        pytest.skip(f"the Hopper FP8 backward kernel or its variant {variant} is not in this build")
    c = make_case(741, [1100, 0, 700, 77, 390, 129], 2, 128, "causal", device="cuda")
    (q8, k8, v8), scales = quantized(c, "block")
    gen = torch.Generator(device="cuda").manual_seed(8)
    dout = (torch.randn(q8.shape, generator=gen, device="cuda") * 1e-2).to(torch.float16)
    lens = lengths_args(c)
    args = (q8, k8, v8, *scales, 3, 0, lens["cu_seqlens_q"], lens["cu_seqlens_k"], lens["max_seqlen_q"],
            lens["max_seqlen_k"], lens["num_contexts"], lens["num_targets"], lens["target_group_size"],
            *lens["window_size"], 128 ** -0.5, None, float(lens["max_seqlen_q"]), None, None)
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]
    poison_allocator(32 * q8.numel())
    base = fb.fp8_bwd_cuda(dout, args, False, opts)
    poison_allocator(32 * q8.numel())
    var = fb.fp8_bwd_cuda(dout, args, False, opts | VARIANTS[variant])
    torch.cuda.synchronize()
    assert all(g.dtype == torch.float16 for g in base + var)
    assert torch.equal(var[1], base[1]) and torch.equal(var[2], base[2]), "dk / dv"
    a, b = base[0].float(), var[0].float()
    assert not torch.isnan(a).any() and not torch.isnan(b).any()
    assert not (a - b).abs().gt(2 ** -7 * a.abs() + dq_order_atol(a, lens)).any(), "dq"


def _check_against_emulation(mode, mask, bits=0, extra_rows=0, d=128, diag=0):
    """The FP8 backward (bits: a private variant's option bits; d: the head dim; diag: the op's private kernel
    variant) against the fp64 emulation and the dequantized path; extra_rows: rows of no sequence behind the
    sequences (q / k / v random, dout NaN there). Returns the gradients."""
    if not fp8_bwd_kernel_built(d):
        pytest.skip(f"the Hopper FP8 backward kernel at D = {d} (hstu_attn::fp8_bwd_sm90) is not in this build")
    c = make_case(300 + len(mask) + len(mode) + (d != 128) * d, [300, 0, 700, 77, 129], 2, d, mask, device="cuda")
    if extra_rows:
        gen = torch.Generator(device="cuda").manual_seed(11)
        for n in ("q", "k", "v"):
            c[n] = torch.cat([c[n], torch.randn(extra_rows, 2, d, generator=gen, device="cuda").to(c[n].dtype)])
    alpha = d ** -0.5
    (q8, k8, v8), scales = quantized(c, mode)
    gen = torch.Generator(device="cuda").manual_seed(5)
    dout = (torch.randn(q8.shape, generator=gen, device="cuda") * 1e-2).to(torch.bfloat16)
    if extra_rows:
        dout[dout.shape[0] - extra_rows:] = float("nan")
    lens = lengths_args(c)
    ops_args = (q8, k8, v8, *scales, ["tensor", "head", "batch_head", "block"].index(mode), 0,
                lens["cu_seqlens_q"], lens["cu_seqlens_k"], lens["max_seqlen_q"], lens["max_seqlen_k"],
                lens["num_contexts"], lens["num_targets"], lens["target_group_size"], *lens["window_size"], alpha,
                None, float(lens["max_seqlen_q"]), None, None, False)
    poison_allocator(32 * q8.numel())
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]
    grads = (fb.fp8_bwd_cuda(dout, ops_args[:-1], False, opts | bits, diag=diag) if diag else
             torch.ops.hstu_attn.fp8_bwd(dout, *ops_args, opts | bits))
    base = torch.ops.hstu_attn.fp8_bwd(dout, *ops_args, hstu_attn._ops.FP8_BWD_DEQUANT_BIT)  # dequantize + bf16 bwd
    cpu = {n: (t.cpu() if isinstance(t, torch.Tensor) else t) for n, t in lens.items()}
    host = [t.cpu() for t in (q8, k8, v8, *scales)]
    gold = fb.hstu_attn_fp8_backward_reference(dout.cpu().double(), *host, mode, alpha=alpha,
                                               compute_dtype=torch.float64, **cpu)
    low = fb.hstu_attn_fp8_backward_reference(dout.cpu(), *host, mode, alpha=alpha, compute_dtype=torch.bfloat16,
                                              **cpu)
    for name, g, gg, gl, b in zip(("dq", "dk", "dv"), grads, gold, low, base):
        assert not torch.isnan(g).any(), name
        assert_rel(f"{name} ({mode}, {mask})", g.cpu(), gg, gl, 5)
        if not extra_rows:  # (the dequantized path reads dout's NaN rows of no sequence)
            assert max_err(g.cpu(), b.cpu()) <= 0.15 * b.abs().max().item() + 1e-6, name
    return grads


@pytest.mark.sm90
def test_cuda_fp8_bwd_op_refuses_a_variant_not_built():
    """The op runs the variants of hstu_bwd_fp8_sm90.h's one list (Fp8BwdDiagBuilt, which the launcher instantiates:
    the option bits' variants; the timing-only diag values only in dev builds) and refuses others on the host
    before any launch."""
    if not fp8_bwd_kernel_built():
        pytest.skip("the Hopper FP8 backward kernel (hstu_attn::fp8_bwd_sm90) is not in this build")
    c = make_case(710, [300, 129], 2, 128, "causal", device="cuda")
    (q8, k8, v8), scales = quantized(c, "tensor")
    dout = (torch.randn(q8.shape, device="cuda") * 1e-2).to(torch.bfloat16)
    lens = lengths_args(c)
    args = (q8, k8, v8, *scales, 0, 0, lens["cu_seqlens_q"], lens["cu_seqlens_k"], lens["max_seqlen_q"],
            lens["max_seqlen_k"], lens["num_contexts"], lens["num_targets"], lens["target_group_size"],
            *lens["window_size"], 128 ** -0.5, None, float(lens["max_seqlen_q"]), None, None)
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]
    for bad in (3, 5, 33, 256, 512, -1, (1 << 21) + 1):
        with pytest.raises(RuntimeError, match="diag: expected 0 or a built variant"):
            fb.fp8_bwd_cuda(dout, args, False, opts, diag=bad)
    for bits in VARIANTS.values():
        fb.fp8_bwd_cuda(dout, args, False, opts | bits)
        with pytest.raises(RuntimeError, match="diag: expected 0 or a built variant"):
            fb.fp8_bwd_cuda(dout, args, False, opts | bits, diag=3)
    torch.cuda.synchronize()


@pytest.mark.sm90
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("mode", ["tensor", "block"])
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_cuda_fp8_bwd_variant_matches_the_kernel(variant, mode, mask):
    """A private variant of the kernel (its option bits) against the default kernel: dk / dv bit-equal (the same
    math), dq up to the order of the fp32 additions (one bf16 rounding)."""
    if not fp8_bwd_kernel_built():
        pytest.skip("the Hopper FP8 backward kernel (hstu_attn::fp8_bwd_sm90) is not in this build")
    # several key blocks, a sequence of one block, an empty one, delta-q (make_case)
    c = make_case(700 + len(mask) + len(mode), [1100, 0, 700, 77, 390, 129, 640, 257], 2, 128, mask, device="cuda")
    _variant_against_default(c, mode, variant)


@pytest.mark.sm90
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_cuda_fp8_bwd_variant_matches_the_kernel_with_many_groups(variant):
    """As above with 128 key blocks (S = 16K): the grid has a group per (batch, head) pair, and its CTAs hundreds
    of tiles (the rings' stages and the kept registers over many iterations); every CTA runs once (poisoned
    outputs)."""
    if not fp8_bwd_kernel_built():
        pytest.skip("the Hopper FP8 backward kernel (hstu_attn::fp8_bwd_sm90) is not in this build")
    c = make_case(770, [16384, 300, 0, 1000, 77], 2, 128, "causal", device="cuda")
    _variant_against_default(c, "block", variant)


def _variant_against_default(c, mode, variant):
    alpha = 128 ** -0.5
    (q8, k8, v8), scales = quantized(c, mode)
    gen = torch.Generator(device="cuda").manual_seed(7)
    dout = (torch.randn(q8.shape, generator=gen, device="cuda") * 1e-2).to(torch.bfloat16)
    lens = lengths_args(c)
    args = (q8, k8, v8, *scales, ["tensor", "head", "batch_head", "block"].index(mode), 0, lens["cu_seqlens_q"],
            lens["cu_seqlens_k"], lens["max_seqlen_q"], lens["max_seqlen_k"], lens["num_contexts"],
            lens["num_targets"], lens["target_group_size"], *lens["window_size"], alpha, None,
            float(lens["max_seqlen_q"]), None, None)
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]
    poison_allocator(32 * q8.numel())
    base = fb.fp8_bwd_cuda(dout, args, False, opts)
    poison_allocator(32 * q8.numel())
    var = fb.fp8_bwd_cuda(dout, args, False, opts | VARIANTS[variant])
    torch.cuda.synchronize()
    a, b = base[0].float(), var[0].float()
    assert not torch.isnan(b).any() and not torch.isnan(var[1]).any()
    assert torch.equal(var[1], base[1]) and torch.equal(var[2], base[2]), "dk / dv"
    bad = (a - b).abs() > 2 ** -7 * a.abs() + dq_order_atol(a, lens)
    assert not bad.any(), f"dq: {int(bad.sum())} elements differ beyond one bf16 rounding"


def dq_order_atol(a, lens):
    """The absolute part of the bound between two FP8 backward dq of one call that differ in the order of their
    reduce-adds (or in their dtype: main_kernel's fp32): the default rounds each key block's partial and each of its
    reduce-adds to bf16 (2^-9 relative), so a row's sum differs by ~sqrt(key blocks) bf16 roundings of its magnitude
    (its accuracy: the emulation tests and test_cuda_fp8_bwd_dq_error_at_16k)."""
    nblk = (int(lens["max_seqlen_k"]) + 127) // 128
    return (2 ** -8 * math.sqrt(nblk) + 1e-5) * a.abs().max().item()


def one_16k_sequence(seed, d, dout_seed):
    """One causal sequence of 16,384 rows at head dim d, block descale, H2 (the 16K error checks): alpha, the
    lengths, dout and the op's positional arguments (q8, k8, v8 and the 3 descale tensors first)."""
    c = make_case(seed, [16384], 2, d, "causal", device="cuda", delta_q=False)
    alpha = d ** -0.5
    (q8, k8, v8), scales = quantized(c, "block")
    gen = torch.Generator(device="cuda").manual_seed(dout_seed)
    dout = (torch.randn(q8.shape, generator=gen, device="cuda") * 1e-2).to(torch.bfloat16)
    lens = lengths_args(c)
    args = (q8, k8, v8, *scales, 3, 0, lens["cu_seqlens_q"], lens["cu_seqlens_k"], lens["max_seqlen_q"],
            lens["max_seqlen_k"], lens["num_contexts"], lens["num_targets"], lens["target_group_size"],
            *lens["window_size"], alpha, None, float(lens["max_seqlen_q"]), None, None)
    return alpha, lens, dout, args


@pytest.mark.sm90
def test_cuda_fp8_bwd_dq_error_at_16k():
    """The default's dq (its key-block partials reduce-added in bf16) where its rounding is largest: one causal
    sequence of 16K (128 key blocks per row at the end) against the fp64 emulation on the GPU, within the 5x rule of
    the bf16 emulation's error; dk / dv bit-equal to main_kernel's. Prints both kernels' errors."""
    if not fp8_bwd_kernel_built() or "main_kernel" not in VARIANTS:
        pytest.skip("the Hopper FP8 backward kernel and its main_kernel variant are not in this build")
    alpha, lens, dout, args = one_16k_sequence(916, 128, 17)
    q8, k8, v8, scales = args[0], args[1], args[2], args[3:6]
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]
    var = fb.fp8_bwd_cuda(dout, args, False, opts)  # (the default: bf16 dQ)
    base = fb.fp8_bwd_cuda(dout, args, False, opts | VARIANTS["main_kernel"])
    assert torch.equal(var[1], base[1]) and torch.equal(var[2], base[2]), "dk / dv"
    ref = dict(alpha=alpha, **lens)
    gold = fb.hstu_attn_fp8_backward_reference(dout.double(), q8, k8, v8, *scales, "block",
                                               compute_dtype=torch.float64, **ref)[0]
    low = fb.hstu_attn_fp8_backward_reference(dout, q8, k8, v8, *scales, "block", compute_dtype=torch.bfloat16,
                                              **ref)[0]
    e_var, e_base, e_low = max_err(var[0], gold), max_err(base[0], gold), max_err(low, gold)
    rms = lambda x: (x.double() - gold).pow(2).mean().sqrt().item()  # noqa: E731
    print(f"dq at 16K: max err default {e_var:.3e} / main_kernel {e_base:.3e} / bf16 emulation {e_low:.3e}; rms "
          f"{rms(var[0]):.3e} / {rms(base[0]):.3e}; max |dq| {gold.abs().max().item():.3e}")
    assert not torch.isnan(var[0]).any()
    assert_rel("dq (16K)", var[0], gold, low, 5)


@pytest.mark.sm90
def test_cuda_fp8_bwd_d256_dq_error_at_16k():
    """D = 256's split-D kernel where its dq rounding is largest: one causal sequence of 16K (256 key blocks of 64
    per row at the end, each partial reduce-added in bf16) against the fp64 emulation on the GPU, within the 5x rule of
    the bf16 emulation's error for dq, dk and dv; and within FP8's few percent of the dequantized path. The check that
    lets D = 256's FP8 calls take this kernel by default (FP8_BWD_DEFAULT_HEAD_DIMS)."""
    if not fp8_bwd_kernel_built(256):
        pytest.skip("the Hopper FP8 backward kernel at D = 256 is not in this build")
    alpha, lens, dout, args = one_16k_sequence(917, 256, 19)
    q8, k8, v8, scales = args[0], args[1], args[2], args[3:6]
    poison_allocator(32 * q8.numel())
    grads = fb.fp8_bwd_cuda(dout, args, False, hstu_attn._ops.OPTION_BITS["fp8_bwd"])
    base = torch.ops.hstu_attn.fp8_bwd(dout, *args, False, hstu_attn._ops.FP8_BWD_DEQUANT_BIT)
    ref = dict(alpha=alpha, **lens)
    gold = fb.hstu_attn_fp8_backward_reference(dout.double(), q8, k8, v8, *scales, "block",
                                               compute_dtype=torch.float64, **ref)
    low = fb.hstu_attn_fp8_backward_reference(dout, q8, k8, v8, *scales, "block", compute_dtype=torch.bfloat16,
                                              **ref)
    for name, g, gg, gl, b in zip(("dq", "dk", "dv"), grads, gold, low, base):
        print(f"{name} at 16K, D = 256: max err kernel {max_err(g, gg):.3e} / bf16 emulation {max_err(gl, gg):.3e} "
              f"/ dequantized path {max_err(b, gg):.3e}; max |{name}| {gg.abs().max().item():.3e}")
        assert not torch.isnan(g).any(), name
        assert_rel(f"{name} (16K, D = 256)", g, gg, gl, 5)
        assert max_err(g, b) <= 0.15 * b.abs().max().item() + 1e-6, name


@pytest.mark.sm90
def test_cuda_fp8_backward_default_routing():
    """kernel_options(fp8_bwd=None), the default: the backward of an FP8 call runs the Hopper FP8 backward where it
    applies (D = 128, 64 and 256, no rab: dk / dv bit-equal to fp8_bwd=True, dq equal up to its atomics' order)
    without a host sync, and the dequantized backward (bit-equal to fp8_bwd=False) where it does not (rab,
    deterministic=True)."""
    if not fp8_bwd_kernel_built():
        pytest.skip("the Hopper FP8 backward kernel (hstu_attn::fp8_bwd_sm90) is not in this build")

    def grads(c, switch, rab=None, deterministic=False):
        leaves = [c[n].clone().requires_grad_() for n in ("q", "k", "v")]
        gen = torch.Generator(device="cuda").manual_seed(7)
        with hstu_attn._ops.kernel_options(**switch):
            out = hstu_attn.hstu_attn_varlen_func(*leaves, fp8_quant_mode="block", rab=rab,
                                                  deterministic=deterministic, **lengths_args(c))
        dout = torch.randn(out.shape, generator=gen, device="cuda").to(out.dtype)
        poison_allocator(32 * c["q"].numel())
        return torch.autograd.grad(out, leaves, dout)

    for d in (128, 64, 256):
        if not fp8_bwd_kernel_built(d):
            continue
        c = make_case({128: 41, 64: 44, 256: 45}[d], [700, 0, 129, 300], 2, d, "context_target_group", device="cuda")
        default, forced, dequant = grads(c, {}), grads(c, dict(fp8_bwd=True)), grads(c, dict(fp8_bwd=False))
        assert torch.equal(default[1], forced[1]) and torch.equal(default[2], forced[2]), d
        assert max_err(default[0], forced[0]) <= 1e-2 * forced[0].abs().max().item() + 1e-6, d
        assert not torch.equal(default[2], dequant[2]), d  # (other roundings: the kernel ran, not the dequantized path)
        for a, b in zip(default, dequant):
            assert max_err(a, b) <= 0.15 * b.abs().max().item() + 1e-6, d
    c = make_case(41, [700, 0, 129, 300], 2, 128, "context_target_group", device="cuda")
    grads(c, {})  # warm
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        grads(c, {})
    finally:
        torch.cuda.set_sync_debug_mode("default")
    short = make_case(42, [200, 90], 2, 128, "causal", device="cuda")  # (<= 2 key tiles: dq adds in any order agree)
    rab = torch.randn(2, 2, 200, 200, device="cuda", dtype=torch.bfloat16)
    short256 = make_case(43, [200, 90], 2, 256, "causal", device="cuda")  # (short's lengths and heads: its rab fits)
    for case, kw in ((short, dict(rab=rab)), (short, dict(deterministic=True)), (short256, dict(rab=rab)),
                     (short256, dict(deterministic=True))):
        for a, b in zip(grads(case, {}, **kw), grads(case, dict(fp8_bwd=False), **kw)):
            assert torch.equal(a, b), kw
