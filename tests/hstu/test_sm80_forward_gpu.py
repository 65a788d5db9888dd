"""Issue 39's candidate sm80-class forward kernels (kernel_options(sm90=False, fwd_sm80_cfg=n), bf16; FwdSm80Candidate
in hstu/csrc/sm80/hstu_fwd_sm80_kernel.cuh): each meets the error rule of test_kernels_gpu.py against the fp32
reference (outputs poisoned, unused rows exactly zero) and agrees with the default kernel, and the kernel that runs
is the candidate's (fp16, D = 32 and a head dim without the candidate run the default)."""

import os
import sys
import zlib

import pytest
import torch

from hstu_attn import _ops, hstu_attn_varlen_func

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hstu_kernel_checks as kg  # noqa: E402
from hstu_kernel_checks import _no_tf32, kernel_opts  # noqa: E402, F401  (the fixtures)

pytestmark = pytest.mark.gpu

# hstu_fwd_kernel's template arguments after T and D: BM, BN, BNS, warps, min blocks, K/V stages, SKIP, PAIR.
_DEFAULT = {32: (128, 64, 64, 8, 2, 2, 0, 1), 64: (128, 64, 32, 8, 2, 2, 0, 1), 128: (128, 64, 64, 8, 2, 2, 0, 1),
            256: (64, 32, 32, 4, 1, 2, 0, 1)}


def fwd_tile(D, cfg, dtype=torch.bfloat16, pairs=True):
    """The end of the name of the kernel that kernel_options(fwd_sm80_cfg=cfg) runs at head dim D (pairs: the device
    holds the 105 KB per block of 1, 3 and 4 at D = 256 and is no sm86 / sm89)."""
    t = _DEFAULT[D]
    if dtype == torch.bfloat16 and D != 32:
        fa2 = (64 if D == 256 else 128, 64, 64, 4, 2, 1)
        if cfg == 1 and D != 256:  # (D = 64: FA2's 128 x 128 tile in 64-key sub-tiles)
            t = (128, 128 if D == 64 else 64, 64, 4, 2, 2, 0, 1)
        elif (cfg == 1 or (cfg == 3 and D == 256)) and pairs:  # D = 256: warp pairs, 64 x 64 (3: short chunks capped)
            t = (64, 64, 64, 4, 2, 1, 0, 2)
        elif cfg == 2:
            t = fa2 + (0, 1)
        elif cfg == 3 and D == 64:  # 1's tile, Q in registers (hstu_fwd_qreg_kernel)
            t = (128, 128, 64, 4, 2, 2, 0, 1)
        elif cfg == 3 and D == 128:  # 128 x 64, 32-key sub-tiles, K / V double-buffered, Q in registers
            t = (128, 64, 32, 4, 2, 2, 0, 1)
        elif cfg == 5 and D == 64:  # 3's tile (Q in registers), the context tiles' warp skip (hstu_fwd_qreg_ctx_kernel)
            t = (128, 128, 64, 4, 2, 2, 5, 1)
        elif cfg == 5 and D == 128:
            t = (128, 64, 32, 4, 2, 2, 5, 1)
        elif cfg == 4 and D != 256:  # the default's tile, the context tiles' warp skip
            t = (128, 128 if D == 64 else 64, 64, 4, 2, 2 if D == 64 else 1, 5, 1)
        elif cfg == 4 and pairs:  # D = 256: warp pairs 64 x 64 with the context tiles' warp skip
            t = (64, 64, 64, 4, 2, 1, 5, 2)
    return ", ".join(str(x) for x in (D,) + t) + ">"


def _pairs_fit():
    """D = 256's warp pairs in 64 x 64 tiles (candidate 1, the bf16 default there) run here: no sm86 / sm89, and their
    105 KB per block fit"""
    major, minor = torch.cuda.get_device_capability()
    optin = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    return not (major == 8 and minor != 0) and optin >= (64 + 2 * 64) * 256 * 2 + 64 * 16 + 64 * 64 * 2


def _fwd_kernel_event(name):
    """a profiler event of an sm80-class forward tile kernel (not the split's or its work list's)"""
    return any(k in name for k in ("hstu_fwd_kernel<", "hstu_fwd_qearly_kernel<", "hstu_fwd_xadd_kernel<",
                                   "hstu_fwd_xpf_kernel<", "hstu_fwd_ctx_xpf_kernel<", "hstu_fwd_xpf_rab_kernel<",
                                   "qreg"))


def _rabw_two_fit():
    """two blocks per SM of D = 64's rab tile with the warps' rab slots (FwdSm80QregRabW: Q, two K / V stages of 128
    rows of 128 B, the row table and one 16 KB slot behind) hold in the opt-in shared memory (the SM's less 1 KB)"""
    optin = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    return 2 * ((128 + 4 * 128) * 128 + 128 * 16 + 128 * 128 + 1024) <= optin + 1024


def _qreg128_two_fit():
    """two blocks per SM of D = 128's Q-in-registers tile (candidate 3: 128 + 2 x 2 x 64 rows of 256 B and the row
    table, the bf16 default at D = 128 where they fit) hold in the opt-in shared memory (the SM's less 1 KB)"""
    optin = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    return 2 * ((128 + 4 * 64) * 256 + 128 * 16 + 1024) <= optin + 1024


@pytest.mark.parametrize("mask,delta_q,rab_heads,seqused", [
    ("causal", False, 0, False), ("causal", True, 2, True), ("local_causal", False, 1, False),
    ("context_target_group", True, 0, False), ("local_context_target", False, 2, True), ("none", False, 0, False)])
@pytest.mark.parametrize("lens", ["jagged", "dense"])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_forward_candidates(D, lens, mask, delta_q, rab_heads, seqused, kernel_opts):
    """Every candidate forward (FWD_SM80_CFGS) and the default meet the error rule, jagged lengths at the 32 / 64 / 128 tile
    edges and dense ones across several tiles, masks that cut tiles on the diagonal (the warp skip), windows,
    targets with groups, contexts, delta-q, seqused, rab; and each agrees with the default's output (the same keys,
    fp32 sums in the same or another tile order)."""
    lk = [300, 0, 1, 129, 128, 77, 64, 33, 700] if lens == "jagged" else [384] * 3
    case = kg.make_case(zlib.crc32(repr(("fwd", D, lens, mask, rab_heads)).encode()), lk, 2, D, torch.bfloat16, mask,
                        rab_heads, delta_q=delta_q, seqused=seqused)
    outs = {}
    for cfg in (0,) + _ops.FWD_SM80_CFGS:
        kernel_opts(sm90=False, fwd_sm80_cfg=cfg)
        kg.check_case(case, 0.5, backward=False)
        kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
        outs[cfg] = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, rab=case["rab"],
                                          **kg._varlen_kwargs(case))
    for cfg in _ops.FWD_SM80_CFGS:
        kg.assert_agree(("out",), (outs[cfg],), (outs[0],), f"fwd_sm80_cfg={cfg} vs the default")


@pytest.mark.parametrize("mask", ["gr_local_context", "gr_local_context_target"])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_forward_candidates_gr_convention(mask, D, kernel_opts):
    """The candidates under mask_convention="meta_gr" (the warp skip's key ranges follow the GR window rule)."""
    case = kg._gr_case(mask, D, True, 1 if D == 128 else 0)
    for cfg in _ops.FWD_SM80_CFGS:
        kernel_opts(sm90=False, fwd_sm80_cfg=cfg)
        kg.check_case(case, 0.5, backward=False, mask_convention="meta_gr")


@pytest.mark.parametrize("D", [32, 64, 128, 256])
def test_sm80_forward_candidate_runs_its_kernel(D, kernel_opts):
    """kernel_options(sm90=False, fwd_sm80_cfg=n) runs the candidate's hstu_fwd_kernel for bf16 where the head dim
    has it, else (fp16, D = 32, 1 / 4 at D = 256 where their 105 KB per block do not fit) the default one (at these short rows the old tiles; for bf16 at D = 256 the warp pairs where they fit)."""
    for dtype in (torch.bfloat16, torch.float16):
        ctype = "__nv_bfloat16" if dtype == torch.bfloat16 else "__half"
        case = kg.make_case(13, [200, 64], 2, D, dtype, "causal", 0)
        for cfg in (0,) + _ops.FWD_SM80_CFGS:
            kernel_opts(sm90=False, fwd_sm80_cfg=cfg, fwd_split_tiles=0)  # (the tiles; the split: below)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                hstu_attn_varlen_func(case["q"], case["k"], case["v"], **kg._varlen_kwargs(case))
                torch.cuda.synchronize()
            names = {e.name for e in prof.events() if _fwd_kernel_event(e.name)}
            # (the default at D = 256 for bf16: the warp pairs wherever they fit with Q's copy early, xadd addresses
            # and fragments ahead, FwdSm80PairsPf; 1 without the fragments ahead; 5 with Q's copy early only)
            early = cfg in (0, 5) and D == 256 and dtype == torch.bfloat16 and _pairs_fit()
            shown = 1 if early else cfg
            # (5 at D = 128 where two of its blocks fit per SM, else the default)
            qreg = D in (64, 128) and dtype == torch.bfloat16 and cfg in (3, 5) and (
                cfg == 3 or D == 64 or _qreg128_two_fit())
            kernel = ("hstu_fwd_qreg_ctx_kernel" if cfg == 5 else "hstu_fwd_qreg_kernel") if qreg else "hstu_fwd_kernel"
            if cfg == 5 and not qreg:
                shown = 0
            if early:
                kernel, shown = "hstu_fwd_qearly_kernel", 1
            tile = fwd_tile(D, shown, dtype, _pairs_fit())
            if cfg == 0 and early:  # (xadd, fragments ahead)
                kernel = "hstu_fwd_xpf_kernel"
            if cfg == 1 and D == 256 and dtype == torch.bfloat16 and _pairs_fit():  # (the pairs' xadd kernel)
                kernel, tile = "hstu_fwd_xadd_kernel", tile[:-1] + ", true>"
            want = f"{kernel}<{ctype}, {tile}(hstu::HstuParams)"
            assert len(names) == 1 and next(iter(names)).endswith(want), (dtype, cfg, names, want)


@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_forward_default_long_rows_runs_candidate_2(D, kernel_opts):
    """The default (fwd_sm80_cfg=0) runs candidate 2 (D = 64: 3, Q in registers, here scaled by alpha / 2; D = 128: 3
    where two of its blocks fit per SM, with Q's copy before the mask's setup) for bf16 once the mean query rows per sequence reach FWD_SM80_LONG_ROWS
    (bitwise that candidate's output), the old tiles just below it and for fp16;
    at D = 256 candidate 3's tile (the warp pairs, the grid's chunks capped) with Q's copy early, xadd addresses and
    fragments ahead for bf16 at both row counts where its 105 KB fit (bitwise candidate 3; elsewhere the rule above);
    fwd_sm80_cfg=6 runs the old tiles whatever the shape (bitwise the old default's output)."""
    pairs = D == 256 and _pairs_fit()
    cand = 3 if D == 64 or pairs or (D == 128 and _qreg128_two_fit()) else 2
    long_rows = _ops.FWD_SM80_LONG_ROWS
    for dtype in (torch.bfloat16, torch.float16):
        ctype = "__nv_bfloat16" if dtype == torch.bfloat16 else "__half"
        for lens, is_long in (([long_rows + 40, long_rows - 40], True), ([long_rows + 40, long_rows - 41], False)):
            case = kg.make_case(zlib.crc32(repr(("long", D, lens, str(dtype))).encode()), lens, 2, D, dtype,
                                "causal", 0)
            outs, names = {}, {}
            for cfg in (0, cand, _ops.FWD_SM80_CFG_OLD):
                kernel_opts(sm90=False, fwd_sm80_cfg=cfg, fwd_split_tiles=0)  # (the tiles; the split: below)
                kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    outs[cfg] = hstu_attn_varlen_func(case["q"], case["k"], case["v"], **kg._varlen_kwargs(case))
                    torch.cuda.synchronize()
                names[cfg] = {e.name for e in prof.events() if _fwd_kernel_event(e.name)}
            runs_cand = dtype == torch.bfloat16 and (is_long or pairs)
            tile = fwd_tile(D, cand if runs_cand else 0, dtype, pairs=pairs)
            kernel = "hstu_fwd_qreg_kernel" if runs_cand and D in (64, 128) and cand == 3 else "hstu_fwd_kernel"
            if runs_cand and D == 64:  # (alpha 1: Q scaled by alpha / 2 = 2^-1, FwdSm80QregIlv)
                kernel = "hstu_fwd_qreg_ilv_kernel"
            if runs_cand and D == 128 and cand == 3:  # (Q's copy before the mask's setup: FwdSm80QregEarly)
                kernel = "hstu_fwd_qreg_qearly_kernel"
            if runs_cand and D == 256:  # (Q's copy early, xadd addresses, fragments ahead: FwdSm80PairsPf)
                kernel = "hstu_fwd_xpf_kernel"
            want = f"{kernel}<{ctype}, {tile}(hstu::HstuParams)"
            assert len(names[0]) == 1 and next(iter(names[0])).endswith(want), (dtype, lens, names[0], want)
            old = f"hstu_fwd_kernel<{ctype}, {fwd_tile(D, 0, dtype)}(hstu::HstuParams)"
            assert len(names[6]) == 1 and next(iter(names[6])).endswith(old), (dtype, lens, names[6], old)
            same = cand if runs_cand else _ops.FWD_SM80_CFG_OLD
            assert torch.equal(outs[0], outs[same]), (dtype, lens)
            if runs_cand:  # the error rule on the default's candidate
                kernel_opts(sm90=False)
                kg.check_case(case, 0.5, backward=False)


@pytest.mark.parametrize("mask,delta_q,rab_heads,seqused", [
    ("causal", False, 0, False), ("causal", True, 2, True), ("local_causal", False, 1, False),
    ("target_group", True, 0, True), ("local_target", False, 2, False), ("none", False, 1, False)])
def test_sm80_forward_pairs_xadd(mask, delta_q, rab_heads, seqused, kernel_opts):
    """The bf16 default at D = 256 (no contexts) runs the warp pairs with Q's copy before the mask's setup, their
    ldmatrix addresses as L::xadd and their fragments loaded two MMA steps ahead (hstu_fwd_xpf_kernel,
    FwdSm80PairsPf) at every row count, fwd_sm80_cfg=1 the pairs without the fragments ahead (hstu_fwd_xadd_kernel):
    both meet the error rule against the fp32 reference (outputs poisoned) and give bit for bit the output of
    candidate 3 (main's pairs, Q's copy late) and of 5 (Q's copy early: main's default at short rows) on jagged
    lengths at the tile edges (11 query tiles or at most 4; empty walks: seqused, delta-q's short query rows),
    windows, targets with groups, delta-q, seqused and rab."""
    if not _pairs_fit():
        pytest.skip("the warp pairs do not fit here")
    tile = fwd_tile(256, 3)
    kernels = {0: f"hstu_fwd_xpf_kernel<__nv_bfloat16, {tile}",
               1: f"hstu_fwd_xadd_kernel<__nv_bfloat16, {tile[:-1]}, true>",
               3: f"hstu_fwd_kernel<__nv_bfloat16, {tile}", 5: f"hstu_fwd_qearly_kernel<__nv_bfloat16, {tile}"}
    for lk in ([700, 0, 1, 63, 64, 65, 129, 300, 17, 256, 128], [256, 0, 1, 63, 64, 65, 129, 200, 17, 256, 128]):
        case = kg.make_case(zlib.crc32(repr(("xadd", mask, rab_heads, delta_q, lk[0])).encode()), lk, 2, 256,
                            torch.bfloat16, mask, rab_heads, delta_q=delta_q, seqused=seqused)
        outs = {}
        for cfg, want in kernels.items():
            if cfg == 0 and case["rab"] is not None and case["rab"].shape[-1] % 8 == 0:
                # (16-byte rab rows: the default copies the rab tiles into shared memory, test_sm80_forward_rab_smem)
                want = f"hstu_fwd_xpf_rab_kernel<__nv_bfloat16, {tile[:-1]}, true, 0>"
            kernel_opts(sm90=False, fwd_sm80_cfg=cfg, fwd_split_tiles=0)
            if cfg in (0, 1):
                kg.check_case(case, 0.5, backward=False)
            kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                outs[cfg] = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, rab=case["rab"],
                                                  **kg._varlen_kwargs(case))
                torch.cuda.synchronize()
            names = {e.name for e in prof.events() if _fwd_kernel_event(e.name)}
            assert len(names) == 1 and next(iter(names)).endswith(want + "(hstu::HstuParams)"), (cfg, names, want)
        for cfg in (1, 3, 5):
            assert torch.equal(outs[0], outs[cfg]), (lk[0], cfg)


@pytest.mark.parametrize("mask,rab_heads", [("context", 0), ("local_context_target", 1), ("target_group", 0)])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_forward_default_contexts_run_candidate_4(D, mask, rab_heads, kernel_opts):
    """For bf16 calls with contexts the default runs candidate 5's tile with SKIP 6 at D = 64 and at D = 128 where
    two of its blocks fit per SM (3's Q-in-registers tile, the warp skip in the query tiles with context rows and
    their context-only KV tiles two per step: test_sm80_forward_context_pairs; at D = 64 with alpha / 2 a power of
    two the other tiles in the interleaved groups, hstu_fwd_qreg_ctx_ilv_kernel), else candidate 4 (the tile
    without Q in registers, the same skip) where it would run 1 / 2 (long rows; at D = 256 the pairs where they fit,
    the other tiles in the pairs' prefetched xadd body: hstu_fwd_ctx_xpf_kernel), unsplit: it meets the error rule
    and agrees with the tile without the skip (fwd_sm80_cfg=1 / 2); targets alone run the default's tile (3 / 2;
    D = 256: the pairs with their fragments two MMA steps ahead)."""
    pairs = _pairs_fit()
    base = 2 if D == 128 or (D == 256 and not pairs) else 1
    five = D == 64 or (D == 128 and _qreg128_two_fit())
    if "context" in mask and (D != 256 or pairs):
        shown = 5 if five else 4
    else:
        shown = 3 if D == 64 or (D == 128 and _qreg128_two_fit()) else base
    lens = [_ops.FWD_SM80_LONG_ROWS + 300, 700, 600, 520]
    case = kg.make_case(zlib.crc32(repr(("ctx4", D, mask)).encode()), lens, 2, D, torch.bfloat16, mask, rab_heads)
    outs, names = {}, {}
    for cfg in (0, base, 4, 5):
        kernel_opts(sm90=False, fwd_sm80_cfg=cfg, fwd_split_tiles=0)  # (the tiles; the split runs its own)
        kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            outs[cfg] = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, rab=case["rab"],
                                              **kg._varlen_kwargs(case))
            torch.cuda.synchronize()
        names[cfg] = {e.name for e in prof.events() if _fwd_kernel_event(e.name)}
    kernel = {3: "hstu_fwd_qreg_kernel", 5: "hstu_fwd_qreg_ctx_kernel"}.get(shown, "hstu_fwd_kernel")
    if shown == 3 and D == 64:  # (targets alone at D = 64: Q scaled by alpha / 2 = 2^-2, FwdSm80QregIlv)
        kernel = "hstu_fwd_qreg_ilv_kernel"
    if shown == 3 and D == 128:  # (targets alone at D = 128: Q's copy before the mask's setup, FwdSm80QregEarly)
        kernel = "hstu_fwd_qreg_qearly_kernel"
    if shown == 1 and D == 256 and pairs:  # (targets alone at D = 256: the pairs' default, FwdSm80PairsPf)
        kernel = "hstu_fwd_xpf_kernel"
    if shown == 5 and D == 64:  # (alpha / 2 = 2^-2: the tiles without context rows in FwdSm80QregIlv's body)
        kernel = "hstu_fwd_qreg_ctx_ilv_kernel"
    if shown == 4 and D == 256:  # (the pairs: the tiles without context rows in FwdSm80PairsPf's body)
        kernel = "hstu_fwd_ctx_xpf_kernel"
    tile = fwd_tile(D, shown, pairs=pairs)
    if shown == 5:  # (SKIP 6: candidate 5 with the paired KV tiles)
        tile = tile.replace(", 5, 1>", ", 6, 1>")
    want = f"{kernel}<__nv_bfloat16, {tile}(hstu::HstuParams)"
    assert len(names[0]) == 1 and next(iter(names[0])).endswith(want), (names[0], want)
    kg.assert_agree(("out",), (outs[0],), (outs[base],), f"the default vs fwd_sm80_cfg={base}")
    if D != 256:  # candidates 4 and 5 (with the skip) agree with the tile without it
        for cfg in (4, 5):
            kg.assert_agree(("out",), (outs[cfg],), (outs[base],), f"fwd_sm80_cfg={cfg} vs fwd_sm80_cfg={base}")
        if five and "context" in mask:  # (the default's pairs sum tile 0's halves apart: not bitwise cfg 5's)
            kg.assert_agree(("out",), (outs[0],), (outs[5],), "the default vs fwd_sm80_cfg=5")
    kernel_opts(sm90=False, fwd_split_tiles=0)
    kg.check_case(case, 0.5, backward=False)


@pytest.mark.parametrize("mask,rab_heads", [("context", 0), ("context_target_group", 1), ("local_context_target", 0)])
@pytest.mark.parametrize("D", [64, 128])
def test_sm80_forward_context_pairs(D, mask, rab_heads, kernel_opts):
    """The bf16 default with contexts (D = 64; D = 128 where two blocks fit per SM) walks query tile 0's KV tiles that
    only its first 64 rows see two per step (SKIP 6, hstu_fwd_block's PAIRKV: warps 2-3 take the second tile for
    warps 0-1's rows and hand their fp32 partial over through shared memory): over jagged lengths at tile edges
    (odd and even numbers of such tiles, none, rows 64-127 absent) with 0 / 1 / 31 / 63 / 64 / 65 / 100 / 128
    contexts (65 and more: rows past 64 see every key, no pairs), windows, targets with groups and rab, it meets the
    error rule against the fp32 reference (outputs poisoned), agrees with candidate 5 (one KV tile per step),
    repeats bitwise and runs the SKIP 6 kernel (D = 64, alpha / 2 a power of two: the other tiles in the interleaved
    groups, hstu_fwd_qreg_ctx_ilv_kernel; agrees with kernel_options(fwd_sm80_interleave=False), the kernel
    without them)."""
    if D == 128 and not _qreg128_two_fit():
        pytest.skip("D = 128: the default with contexts is candidate 4 here (two Q-in-registers blocks do not fit)")
    lens = [2000, 1153, 700, 640, 257, 129, 100, 64, 1]
    case = kg.make_case(zlib.crc32(repr(("pairs", D, mask)).encode()), lens, 2, D, torch.bfloat16, mask, rab_heads)
    nt = case["num_targets"].tolist() if case["num_targets"] is not None else [0] * len(lens)
    want = [64, 1, 31, 63, 128, 65, 100, 0, 1]
    nc = [max(0, min(c, lk - t)) for c, lk, t in zip(want, lens, nt)]
    case["num_contexts"] = torch.tensor(nc, dtype=torch.int32, device="cuda")
    outs = {}
    # (rep 2: kernel_options(fwd_sm80_interleave=False), the context kernel without the interleaved groups)
    for cfg, rep in ((0, 0), (0, 1), (5, 0)) + (((0, 2),) if D == 64 else ()):
        kernel_opts(sm90=False, fwd_sm80_cfg=cfg, fwd_split_tiles=0, fwd_sm80_interleave=rep != 2)
        kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            outs[cfg, rep] = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, rab=case["rab"],
                                                   **kg._varlen_kwargs(case))
            torch.cuda.synchronize()
        names = {e.name for e in prof.events() if "hstu_fwd_kernel<" in e.name or "qreg" in e.name}
        skip = 6 if cfg == 0 else 5
        tile = fwd_tile(D, 5).replace(", 5, 1>", f", {skip}, 1>")
        ilv = D == 64 and cfg == 0 and rep != 2
        kernel = f"hstu_fwd_qreg_ctx{'_ilv' if ilv else ''}_kernel<__nv_bfloat16, {tile}(hstu::HstuParams)"
        assert len(names) == 1 and next(iter(names)).endswith(kernel), (cfg, rep, names, kernel)
    assert torch.equal(outs[0, 0], outs[0, 1]), "the default with contexts repeats bitwise"
    kg.assert_agree(("out",), (outs[0, 0],), (outs[5, 0],), "the default (pairs) vs fwd_sm80_cfg=5")
    if D == 64:
        kg.assert_agree(("out",), (outs[0, 0],), (outs[0, 2],), "the default vs fwd_sm80_interleave=False")
    kernel_opts(sm90=False, fwd_split_tiles=0)
    kg.check_case(case, 0.5, backward=False)


@pytest.mark.parametrize("mask,rab_heads", [("context", 0), ("context_target_group", 1), ("local_context_target", 0)])
def test_sm80_forward_context_xpf(mask, rab_heads, kernel_opts):
    """The bf16 default with contexts at D = 256 where the pairs fit (FwdSm80PairsCtxPf, hstu_fwd_ctx_xpf_kernel):
    query tile 0 in candidate 4's warp-skip body, the other tiles in the pairs' prefetched xadd body. Over jagged
    lengths at tile edges with 0 / 1 / 63 / 64 / 65 / 128 / 200 contexts (tiles past 0 with context rows too),
    windows, targets with groups and rab it meets the error rule against the fp32 reference (outputs poisoned),
    agrees with candidate 4 (fwd_sm80_cfg=4: main's kernel with contexts), repeats bitwise and runs its kernel."""
    if not _pairs_fit():
        pytest.skip("D = 256: the warp pairs do not fit here")
    lens = [2000, 1153, 700, 640, 257, 129, 100, 64, 1]
    case = kg.make_case(zlib.crc32(repr(("ctxpf", mask)).encode()), lens, 2, 256, torch.bfloat16, mask, rab_heads)
    nt = case["num_targets"].tolist() if case["num_targets"] is not None else [0] * len(lens)
    want = [64, 200, 1, 63, 128, 65, 100, 0, 1]
    nc = [max(0, min(c, lk - t)) for c, lk, t in zip(want, lens, nt)]
    case["num_contexts"] = torch.tensor(nc, dtype=torch.int32, device="cuda")
    outs = {}
    for cfg, rep in ((0, 0), (0, 1), (4, 0)):
        kernel_opts(sm90=False, fwd_sm80_cfg=cfg, fwd_split_tiles=0)  # (the tiles; the split runs its own)
        kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            outs[cfg, rep] = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, rab=case["rab"],
                                                   **kg._varlen_kwargs(case))
            torch.cuda.synchronize()
        names = {e.name for e in prof.events() if _fwd_kernel_event(e.name)}
        kernel = f"{'hstu_fwd_ctx_xpf_kernel' if cfg == 0 else 'hstu_fwd_kernel'}<__nv_bfloat16, {fwd_tile(256, 4)}"
        assert len(names) == 1 and next(iter(names)).endswith(kernel + "(hstu::HstuParams)"), (cfg, names, kernel)
    assert torch.equal(outs[0, 0], outs[0, 1]), "the default with contexts repeats bitwise"
    kg.assert_agree(("out",), (outs[0, 0],), (outs[4, 0],), "the default vs fwd_sm80_cfg=4")
    kernel_opts(sm90=False, fwd_split_tiles=0)
    kg.check_case(case, 0.5, backward=False)


@pytest.mark.parametrize("mask,delta_q,rab_heads,seqused", [
    ("causal", False, 0, False), ("causal", True, 2, True), ("local_causal", False, 1, False),
    ("context_target_group", True, 0, False), ("local_context_target", False, 2, True), ("none", False, 0, False)])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_forward_split(D, mask, delta_q, rab_heads, seqused, kernel_opts):
    """fwd_sm80_cfg=7 (the default tile with the split of long KV ranges, hstu_fwd_sm80_split.h): chunks of 1, 2, 3
    KV tiles and the rule's meet the error rule against the fp32 reference on a batch of one long and many short
    sequences (tiles split in 2-12 chunks, others not), with windows, targets with groups, contexts (the masked gap),
    delta-q, seqused and rab; agree with the default's output; and repeat bit for bit (the partials are summed in
    chunk order whichever chunk arrives last)."""
    lk = [700, 0, 1, 129, 64, 33, 5, 300]
    case = kg.make_case(zlib.crc32(repr(("split", D, mask, rab_heads)).encode()), lk, 2, D, torch.bfloat16, mask,
                        rab_heads, delta_q=delta_q, seqused=seqused)
    run = lambda: hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, rab=case["rab"],  # noqa: E731
                                        **kg._varlen_kwargs(case))
    kernel_opts(sm90=False)
    want = run()
    for chunk in (1, 2, 3, None):
        kernel_opts(sm90=False, fwd_sm80_cfg=_ops.FWD_SM80_CFG_SPLIT, fwd_split_tiles=chunk)
        kg.check_case(case, 0.5, backward=False)
        kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
        got = run()
        kg.assert_agree(("out",), (got,), (want,), f"split chunks of {chunk} vs the default")
        kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
        assert torch.equal(run(), got), chunk


@pytest.mark.parametrize("mask", ["causal", "context_target_group", "local_context_target"])
@pytest.mark.parametrize("D", [64, 256])
def test_sm80_forward_split_against_main(D, mask, kernel_opts):
    """The split (the default) against the split as it was (fwd_sm80_split_main=True): its list kernel places the
    work items from its first walk's tiles kept in shared memory, and walks the sequences again where they have more
    than its 1,024 query tiles (a long sequence beside 1,100 short ones); its kernel loads the list's bound beside
    the item and Q before the mask's setup. With exact chunks both give bit for bit the same output (each tile's
    partials summed in chunk order) that agrees with the unsplit kernel's; with the rule (its least chunk rounded
    down, main's up) both meet the error rule against the fp32 reference."""
    if D == 256 and not _pairs_fit():
        pytest.skip("the warp pairs do not fit here")
    for lk in ([700, 0, 1, 129, 64, 33, 5, 300], [1000] + [3] * 1100):
        case = kg.make_case(zlib.crc32(repr(("cache", D, mask, len(lk))).encode()), lk, 2, D, torch.bfloat16, mask,
                            0)
        def run():
            return hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, **kg._varlen_kwargs(case))
        kernel_opts(sm90=False, fwd_split_tiles=0)
        want = run()
        outs = {}
        for main in (False, True):
            kernel_opts(sm90=False, fwd_sm80_cfg=_ops.FWD_SM80_CFG_SPLIT, fwd_split_tiles=2, fwd_sm80_split_main=main)
            kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
            outs[main] = run()
        assert torch.equal(outs[False], outs[True]), (D, mask, len(lk))
        kg.assert_agree(("out",), (outs[False],), (want,), f"split chunks of 2 vs unsplit ({len(lk)} sequences)")
        if len(lk) < 100:
            for main in (False, True):
                kernel_opts(sm90=False, fwd_sm80_cfg=_ops.FWD_SM80_CFG_SPLIT, fwd_sm80_split_main=main)
                kg.check_case(case, 0.5, backward=False)


@pytest.mark.parametrize("mask", ["causal", "context_target_group"])
@pytest.mark.parametrize("D", [64, 256])
def test_sm80_forward_split_over_two_waves(D, mask, kernel_opts):
    """The split's rule past two waves of query tiles (the default), on a batch of one long and several shorter
    sequences over 8 / 16 heads (over two waves of query tiles on an A100- or H100-class GPU): meets the error rule
    against the fp32 reference and agrees with the unsplit kernel."""
    lk = [3000, 900, 700, 513, 300, 129, 64, 1, 0, 47]
    case = kg.make_case(zlib.crc32(repr(("waves", D, mask)).encode()), lk, 16 if D == 64 else 8, D, torch.bfloat16,
                        mask, 0)
    def run():
        return hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, **kg._varlen_kwargs(case))
    kernel_opts(sm90=False, fwd_split_tiles=0)
    want = run()
    kernel_opts(sm90=False)
    kg.check_case(case, 0.5, backward=False)
    kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
    kg.assert_agree(("out",), (run(),), (want,), "the rule past two waves vs no split")


@pytest.mark.parametrize("mask", ["causal", "context_target_group", "local_context_target"])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_forward_split_sync(D, mask, kernel_opts):
    """On sm_90+ the split's list kernel and split kernel are programmatic dependent launches (each waits in-kernel
    for the kernel before it), a chunk's count is an acquire-release atomic and the list kernel sums its work per warp
    and divides by a reciprocal (kernel_options(fwd_sm80_split_plain=True): plain launches, full fences and the list
    kernel as it was): on a Zipf-like batch the default meets the error rule against
    the fp32 reference and gives bit for bit the plain path's output, called eagerly and replayed in a CUDA graph of
    three calls whose q / k / v a copy kernel rewrites just before each call (a read ahead of the waits would see
    the previous call's inputs; outputs poisoned before the replay)."""
    if D == 256 and not _pairs_fit():
        pytest.skip("the warp pairs do not fit here")
    lk = [1100, 260, 97, 64, 63, 40, 17, 9, 5, 3, 2, 1, 1, 0, 31, 65]
    cases = [kg.make_case(zlib.crc32(repr(("pdl", D, mask, i)).encode()), lk, 2, D, torch.bfloat16, mask,
                          0 if mask == "causal" else 1) for i in range(3)]
    src = {n: cases[0][n].clone() for n in "qkv"}

    def run(c=None):
        if c is not None:
            for n in "qkv":
                src[n].copy_(c[n])
        return hstu_attn_varlen_func(src["q"], src["k"], src["v"], alpha=0.5, rab=cases[0]["rab"],
                                     **kg._varlen_kwargs(cases[0]))
    kernel_opts(sm90=False)
    kg.check_case(cases[0], 0.5, backward=False)
    kernel_opts(sm90=False, fwd_sm80_split_plain=True)
    want = [run(c) for c in cases]
    for plain in (False, True):
        kernel_opts(sm90=False, fwd_sm80_split_plain=plain)
        kg.poison_allocator(4 * src["q"].numel() * src["q"].element_size())
        assert all(torch.equal(run(c), w) for c, w in zip(cases, want)), ("eager", plain)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run(cases[0])
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = [run(c) for c in cases]
        for o in outs:
            o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        for i, (o, w) in enumerate(zip(outs, want)):
            assert torch.equal(o, w), ("graph", plain, i)


def test_sm80_forward_split_long_walk(kernel_opts):
    """Walks past the list kernel's histogram (1,024 KV tiles) and more query tiles than it keeps (1,024): a
    66,000-key causal sequence beside two short ones at D = 64 in 64 x 64 tiles (its last query tiles walk 1,032 KV
    tiles, 1,037 query tiles in all), chunks of 250 KV tiles: the list kernel counts and places the items walking
    the sequences again; the default list gives bit for bit the output of main's (fwd_sm80_split_plain=True), both
    agreeing with the unsplit kernel's (outputs poisoned)."""
    case = kg.make_case(zlib.crc32(b"long walk"), [66000, 300, 5], 1, 64, torch.bfloat16, "causal", 0)
    run = lambda: hstu_attn_varlen_func(case["q"], case["k"], case["v"], **kg._varlen_kwargs(case))  # noqa: E731
    kernel_opts(sm90=False, fwd_split_tiles=0, fwd_sm80_bm64=2)
    want = run()
    outs = []
    for plain in (False, True):
        kernel_opts(sm90=False, fwd_split_tiles=250, fwd_sm80_bm64=2, fwd_sm80_split_plain=plain)
        kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            outs.append(run())
            torch.cuda.synchronize()
        assert any("hstu_fwd_split_" in e.name for e in prof.events()), "no split"
    assert torch.equal(outs[0], outs[1])
    kg.assert_agree(("out",), (outs[0],), (want,), "split chunks of 250 vs unsplit")


@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_forward_split_runs_its_kernel(D, kernel_opts):
    """fwd_sm80_cfg=7 runs hstu_fwd_split_qearly_kernel on the 128-row split tile (fwd_sm80_bm64=3; the rule's
    64-row tiles: test_sm80_forward_split_bm64_rule) where the plan splits (a batch below two waves of query tiles;
    hstu_fwd_split_kernel with fwd_sm80_split_main=True), the tile's own kernel with fwd_split_tiles=0 (no split;
    D = 256: candidate 1, the xadd pairs) and for fp16 the old tiles; so does the default (fwd_sm80_cfg=0)."""
    if D == 256 and not _pairs_fit():
        pytest.skip("the warp pairs do not fit here")
    tile = fwd_tile(D, 2 if D == 128 else 1)
    split = "hstu_fwd_split_qearly_kernel"
    for cfg, dtype, chunk, kernel, main in (
            (_ops.FWD_SM80_CFG_SPLIT, torch.bfloat16, None, split, False),
            (_ops.FWD_SM80_CFG_SPLIT, torch.bfloat16, 0, "hstu_fwd_kernel", False),
            (_ops.FWD_SM80_CFG_SPLIT, torch.float16, None, "hstu_fwd_kernel", False),
            (0, torch.bfloat16, None, split, False),
            (0, torch.bfloat16, None, "hstu_fwd_split_kernel", True)):
        ctype = "__nv_bfloat16" if dtype == torch.bfloat16 else "__half"
        case = kg.make_case(17, [2048, 100], 2, D, dtype, "causal", 0)
        kernel_opts(sm90=False, fwd_sm80_cfg=cfg, fwd_split_tiles=chunk, fwd_sm80_split_main=main, fwd_sm80_bm64=3)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            hstu_attn_varlen_func(case["q"], case["k"], case["v"], **kg._varlen_kwargs(case))
            torch.cuda.synchronize()
        names = {e.name for e in prof.events() if "hstu_fwd_" in e.name and "_kernel<" in e.name}
        end = tile if dtype == torch.bfloat16 else fwd_tile(D, 0, dtype)
        if D == 256 and chunk == 0:  # (candidate 1 at D = 256: FwdSm80PairsXadd)
            kernel, end = "hstu_fwd_xadd_kernel", tile[:-1] + ", true>"
        want = f"{kernel}<{ctype}, {end}(hstu::HstuParams)"
        assert len(names) == 1 and next(iter(names)).endswith(want), (cfg, dtype, chunk, names, want)


@pytest.mark.parametrize("mask,delta_q,rab_heads,seqused", [
    ("causal", False, 0, False), ("causal", True, 2, True), ("local_causal", False, 1, False),
    ("context_target_group", True, 0, False), ("local_context_target", False, 2, True), ("none", False, 0, False)])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("n", [1, 2])
def test_sm80_forward_split_bm64(n, D, mask, delta_q, rab_heads, seqused, kernel_opts):
    """kernel_options(fwd_sm80_bm64=n): the split in 64 x 64 tiles (FwdSm80SplitBm64<D, n>: 4 warps x 16 rows, 2
    warps x 32 rows at D = 64), with chunks of 1, 3 KV tiles, the rule's and none (fwd_split_tiles=0: its tile
    unsplit), meets the error rule against the fp32 reference on a batch of one long and many short sequences and on
    a Zipf-like one (outputs poisoned), with windows, targets with groups, contexts, delta-q, seqused and rab; agrees
    with the default's output and repeats bit for bit."""
    for lk in ([700, 0, 1, 129, 64, 33, 5, 300], [1100, 260, 97, 64, 63, 40, 17, 9, 5, 3, 2, 1, 1, 0, 31, 65]):
        case = kg.make_case(zlib.crc32(repr(("bm64", D, mask, rab_heads, len(lk))).encode()), lk, 2, D,
                            torch.bfloat16, mask, rab_heads, delta_q=delta_q, seqused=seqused)
        run = lambda: hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5,  # noqa: E731
                                            rab=case["rab"], **kg._varlen_kwargs(case))
        kernel_opts(sm90=False)
        want = run()
        for chunk in (1, 3, None, 0):
            kernel_opts(sm90=False, fwd_sm80_cfg=_ops.FWD_SM80_CFG_SPLIT, fwd_split_tiles=chunk, fwd_sm80_bm64=n)
            kg.check_case(case, 0.5, backward=False)
            kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
            got = run()
            kg.assert_agree(("out",), (got,), (want,), f"bm64={n} split chunks of {chunk} vs the default")
            kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
            assert torch.equal(run(), got), chunk
        kernel_opts(sm90=False, fwd_sm80_bm64=n)  # (the default with the option: the rule's split)
        kg.check_case(case, 0.5, backward=False)


@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("n", [1, 2])
def test_sm80_forward_split_bm64_runs_its_kernel(n, D, kernel_opts):
    """kernel_options(fwd_sm80_bm64=n) runs hstu_fwd_split_qearly_kernel on the 64 x 64 tile (1: 4 warps x 16 rows,
    2 blocks per SM in the launch bounds; 2: 2 warps x 32 rows, 4; at D = 128 as 1) at D = 64 / 128 where the plan
    splits,
    hstu_fwd_kernel on that tile with fwd_sm80_cfg=7 and fwd_split_tiles=0; D = 256 keeps its split tile (the warp
    pairs)."""
    if D == 256 and not _pairs_fit():
        pytest.skip("the warp pairs do not fit here")
    w = 2 if n == 2 and D == 64 else 4
    bm64 = f"{D}, 64, 64, 64, {w}, {8 // w}, {2 if D == 64 else 1}, 0, 1>"
    tile = fwd_tile(D, 1) if D == 256 else bm64
    case = kg.make_case(19, [2048, 100, 7, 1], 2, D, torch.bfloat16, "causal", 0)
    for cfg, chunk, kernel in ((0, None, "hstu_fwd_split_qearly_kernel"),
                               (_ops.FWD_SM80_CFG_SPLIT, 0, "hstu_fwd_kernel")):
        if D == 256 and chunk == 0:
            continue
        kernel_opts(sm90=False, fwd_sm80_cfg=cfg, fwd_split_tiles=chunk, fwd_sm80_bm64=n)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            hstu_attn_varlen_func(case["q"], case["k"], case["v"], **kg._varlen_kwargs(case))
            torch.cuda.synchronize()
        names = {e.name for e in prof.events() if "hstu_fwd_" in e.name and "_kernel<" in e.name}
        want = f"{kernel}<__nv_bfloat16, {tile}(hstu::HstuParams)"
        assert len(names) == 1 and next(iter(names)).endswith(want), (cfg, chunk, names, want)


# hstu_plan.h fwd_sm80_bm64_rule: the default's 64 x 64 split tile per head dim (fwd_sm80_bm64=n)
_BM64_RULE = {64: 2, 128: 1}


@pytest.mark.parametrize("D", [64, 128])
def test_sm80_forward_split_bm64_rule(D, kernel_opts):
    """The default (fwd_sm80_bm64=0, the rule) splits a Zipf-like batch and a short dense one (little work per block
    slot: the 128-row plan's least chunk of 4 KV tiles) in the 64 x 64 tiles of fwd_sm80_bm64=_BM64_RULE[D], and B2
    S4K over 8 heads (least chunks of 16 / 31 KV tiles) in the 128-row tiles, as fwd_sm80_bm64=3 does everywhere; the
    short batches meet the error rule against the fp32 reference (outputs poisoned)."""
    zipf = [1100, 260, 97, 64, 63, 40, 17, 9, 5, 3, 2, 1, 1, 0, 31, 65]
    w = 4 if _BM64_RULE[D] == 1 else 2
    bm64 = f"{D}, 64, 64, 64, {w}, {8 // w}, {2 if D == 64 else 1}, 0, 1>"
    b128 = fwd_tile(D, 2 if D == 128 else 1)
    for lens, heads, opt, tile in ((zipf, 2, 0, bm64), (zipf, 2, 3, b128), ([600, 600], 2, 0, bm64),
                                   ([600, 600], 2, 3, b128), ([4096, 4096], 8, 0, b128)):
        case = kg.make_case(zlib.crc32(repr(("rule", D, len(lens), opt)).encode()), lens, heads, D, torch.bfloat16,
                            "context_target_group", 1)
        kernel_opts(sm90=False, fwd_sm80_bm64=opt)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            hstu_attn_varlen_func(case["q"], case["k"], case["v"], rab=case["rab"], **kg._varlen_kwargs(case))
            torch.cuda.synchronize()
        names = {e.name for e in prof.events() if "hstu_fwd_" in e.name and "_kernel<" in e.name}
        want = f"hstu_fwd_split_qearly_kernel<__nv_bfloat16, {tile}(hstu::HstuParams)"
        assert len(names) == 1 and next(iter(names)).endswith(want), (lens, opt, names, want)
        if max(lens) < 2048:
            kg.check_case(case, 0.5, backward=False)


def test_sm80_forward_split_list_bound(kernel_opts):
    """The split's blocks come from the work list that hstu_sm80_fwd_list_kernel builds on the device (it runs with
    the split kernel); where the list's bound (query tile slots x chunks of the longest walk) passes the grid's y
    limit of 65,535 (chunks of 1 KV tile on a 16K-row sequence at D = 256: 257 x 256) the call runs without the
    split, bit for bit the unsplit kernel's output."""
    if not _pairs_fit():
        pytest.skip("the warp pairs do not fit here")
    tile = fwd_tile(256, 1)
    for lens, chunk, split in (([2048, 100], 3, True), ([16384], 1, False)):
        case = kg.make_case(zlib.crc32(repr(("list", lens)).encode()), lens, 2, 256, torch.bfloat16, "causal", 0)
        run = lambda: hstu_attn_varlen_func(case["q"], case["k"], case["v"], **kg._varlen_kwargs(case))  # noqa: E731
        kernel_opts(sm90=False, fwd_split_tiles=0)
        want = run()
        kernel_opts(sm90=False, fwd_split_tiles=chunk)
        kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            got = run()
            torch.cuda.synchronize()
        names = {e.name for e in prof.events() if "_kernel<" in e.name and ("hstu_fwd_" in e.name or "list" in e.name)}
        kernels = {"hstu_fwd_split_qearly_kernel", "hstu_sm80_fwd_list_kernel"} if split else {"hstu_fwd_xpf_kernel"}
        assert {n.split("<")[0].split("::")[-1].split(" ")[-1] for n in names} == kernels, (lens, names)
        assert any(n.endswith(f"{tile}(hstu::HstuParams)") for n in names), (lens, names, tile)
        if split:
            kg.assert_agree(("out",), (got,), (want,), "split vs unsplit")
        else:
            assert torch.equal(got, want), lens


@pytest.mark.parametrize("D", [128, 256])
def test_sm80_forward_split_workspace_bound(D, kernel_opts):
    """The rule's split of a dense batch of about three waves of query tiles (chunks of about two thirds of the walk:
    two chunks for most tiles) keeps its fp32 partials within 2 x the device's block slots (fwd_sm80_split_partials),
    not one per query tile slot, head and chunk of the longest walk: the call's peak device memory over its inputs
    stays under the output, the partials' bound and 4 MiB (counters, list, validation); the output agrees with the
    unsplit kernel's and repeats bit for bit (the partials' places differ from call to call, their sum order not).
    (D = 128 in the 128-row tiles: fwd_sm80_bm64=3.)"""
    if D == 256 and not _pairs_fit():
        pytest.skip("the warp pairs do not fit here")
    bm = 64 if D == 256 else 128
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    heads = 4
    S = max(1024, (3 * 2 * sms * bm // (2 * heads)) // bm * bm)  # two sequences: ~3 waves of 2 blocks per SM
    case = kg.make_case(zlib.crc32(repr(("ws", D)).encode()), [S, S], heads, D, torch.bfloat16, "causal", 0)
    run = lambda: hstu_attn_varlen_func(case["q"], case["k"], case["v"], **kg._varlen_kwargs(case))  # noqa: E731
    kernel_opts(sm90=False, fwd_split_tiles=0, fwd_sm80_bm64=3)
    want = run()
    kernel_opts(sm90=False, fwd_sm80_bm64=3)
    got = run()
    torch.cuda.synchronize()
    del got
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        got = run()
        torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - before
    assert any("hstu_fwd_split_" in e.name for e in prof.events()), "the rule did not split"
    partials = 2 * (2 * sms) * bm * D * 4
    old = (2 * S // bm + 2) * heads * 2 * bm * D * 4  # (one per slot, head and chunk of the longest walk: 2)
    assert old > partials + (4 << 20)
    assert extra <= got.numel() * got.element_size() + partials + (4 << 20), (extra, partials, old)
    kg.assert_agree(("out",), (got,), (want,), "split vs unsplit")
    assert torch.equal(run(), got)


@pytest.mark.parametrize("mask,delta_q,rab_heads,seqused", [
    ("causal", False, 0, False), ("causal", True, 2, True), ("local_causal", False, 1, False),
    ("target_group", False, 0, False), ("local_target", True, 2, False), ("none", False, 2, False)])
def test_sm80_forward_qscale(mask, delta_q, rab_heads, seqused, kernel_opts):
    """The bf16 D = 64 long-row default where alpha / 2 is a power of two runs hstu_fwd_qreg_ilv_kernel (candidate
    3's tile with the warps' Q fragments scaled by alpha / 2, no FMUL per score, its unmasked sub-tiles without rab
    in interleaved 16-key groups): it meets the error rule against the fp32 reference (outputs poisoned) and its
    output is bit for bit hstu_fwd_qreg_scaled_kernel's (fwd_sm80_interleave=False: the groups not interleaved) and
    candidate 3's (fwd_sm80_qscale=False: the unscaled kernel) on jagged lengths across several 128-row tiles,
    windows, targets with groups, delta-q, seqused and rab (scaled in the sum: alpha / 2 (S + rab)); alpha = 0.3 (no
    power of two) runs the unscaled kernel whatever the interleave switch."""
    lk = [2400, 1700, 2290, 1833, 2024] if delta_q else [1400, 700, 1290, 833, 1024]
    case = kg.make_case(zlib.crc32(repr(("qscale", mask, rab_heads, delta_q)).encode()), lk, 2, 64,
                        torch.bfloat16, mask, rab_heads, delta_q=delta_q, seqused=seqused)
    assert case["q"].shape[0] >= _ops.FWD_SM80_LONG_ROWS * len(lk), "long rows: the default's Q-in-registers tile"
    tile = "hstu_fwd_qreg{}_kernel<__nv_bfloat16, 64, 128, 128, 64, 4, 2, 2, 0, 1>"
    for alpha, scaled in ((0.125, True), (0.5, True), (0.3, False)):
        outs = {}
        for qscale, ilv in ((True, True), (True, False), (False, True)):
            # (fwd_sm80_cfg=8: with rab main's path, not FwdSm80QregRab; test_sm80_forward_rab_smem)
            kernel_opts(sm90=False, fwd_split_tiles=0, fwd_sm80_qscale=qscale, fwd_sm80_interleave=ilv,
                        fwd_sm80_cfg=_ops.FWD_SM80_CFG_RAB_MAIN)
            if qscale and ilv and alpha != 0.5:
                kg.check_case(case, alpha, backward=False)
            kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                outs[qscale, ilv] = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=alpha,
                                                          rab=case["rab"], **kg._varlen_kwargs(case))
                torch.cuda.synchronize()
            names = {e.name for e in prof.events() if "hstu_fwd_" in e.name}
            want = tile.format(("_ilv" if ilv else "_scaled") if qscale and scaled else "")
            assert len(names) == 1 and want in next(iter(names)), (alpha, qscale, ilv, names, want)
        assert torch.equal(outs[True, True], outs[True, False]), alpha
        assert torch.equal(outs[True, True], outs[False, True]), alpha


@pytest.mark.parametrize("mask,delta_q,seqused", [
    ("causal", False, False), ("causal", True, True), ("local_causal", False, False), ("local", True, False),
    ("target_group", False, True), ("local_target", True, False), ("none", False, False)])
def test_sm80_forward_qearly_d128(mask, delta_q, seqused, kernel_opts):
    """The bf16 D = 128 long-row default without contexts or rab, where two of candidate 3's blocks fit per SM, runs
    3's tile with Q's copy issued before the mask's setup (hstu_fwd_qreg_qearly_kernel, FwdSm80QregEarly): it meets
    the error rule against the fp32 reference (outputs poisoned) on jagged lengths across several 128-row tiles,
    causal and local windows, targets with groups, delta-q and seqused, and gives bit for bit the output of
    fwd_sm80_cfg=3 (hstu_fwd_qreg_kernel: Q's copy after the setup)."""
    if not _qreg128_two_fit():
        pytest.skip("two of candidate 3's D = 128 blocks do not fit per SM here: the default runs candidate 2")
    lk = [2400, 1700, 2290, 1833, 2024] if delta_q else [1400, 700, 1290, 833, 1024]
    case = kg.make_case(zlib.crc32(repr(("qearly128", mask, delta_q, seqused)).encode()), lk, 2, 128,
                        torch.bfloat16, mask, 0, delta_q=delta_q, seqused=seqused)
    assert case["q"].shape[0] >= _ops.FWD_SM80_LONG_ROWS * len(lk), "long rows: the default's Q-in-registers tile"
    tile = "_kernel<__nv_bfloat16, 128, 128, 64, 32, 4, 2, 2, 0, 1>"
    alpha = 1.0 / 128**0.5
    outs = {}
    for cfg, want in ((0, "hstu_fwd_qreg_qearly" + tile), (3, "hstu_fwd_qreg" + tile)):
        kernel_opts(sm90=False, fwd_split_tiles=0, fwd_sm80_cfg=cfg)
        if cfg == 0:
            kg.check_case(case, alpha, backward=False)
        kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            outs[cfg] = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=alpha, **kg._varlen_kwargs(case))
            torch.cuda.synchronize()
        names = {e.name for e in prof.events() if "hstu_fwd_" in e.name}
        assert len(names) == 1 and next(iter(names)).endswith(want + "(hstu::HstuParams)"), (cfg, names, want)
    assert torch.equal(outs[0], outs[3])


@pytest.mark.parametrize("mask,delta_q,rab_heads,seqused", [
    ("causal", False, 2, False), ("causal", True, 1, True), ("local_causal", False, 2, False),
    ("target_group", False, 1, False), ("local_target", True, 2, False), ("none", False, 1, False)])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_forward_rab_smem(D, mask, delta_q, rab_heads, seqused, kernel_opts):
    """The bf16 defaults with rab and without contexts (D = 64 / 128 at long rows, D = 128 where two of candidate 3's
    blocks fit per SM; D = 256 where the warp pairs with the rab buffer fit, 113 KB) run the kernels that copy each KV
    tile's rab tile into shared memory with its K / V (hstu_fwd_qreg_rab_kernel: FwdSm80QregRab; D = 256
    hstu_fwd_xpf_rab_kernel: FwdSm80PairsPfRab; D = 64 adds it by the tensor cores in 128 x 128 tiles, each warp
    copying its own rab rows per 64-key sub-tile, where two of those blocks fit per SM: hstu_fwd_qreg_rabw_kernel,
    FwdSm80QregRabW; else in 128 x 64 tiles: hstu_fwd_qreg_rabm_kernel, FwdSm80QregRabIlvMma, also
    kernel_options(fwd_sm80_cfg=10)): they meet the error rule against the fp32 reference (outputs poisoned) on jagged
    lengths across several query tiles (keys ending inside a 16-byte chunk), windows, targets with groups, delta-q,
    seqused, per-head and shared rab, and agree with main's rab path (kernel_options(fwd_sm80_cfg=8)): bit for bit at
    D = 256 (the same tiles and sums), at D = 64 / 128 to the fp32 sum order. D = 64: the 128 x 128 tiles
    (FwdSm80QregRabWH: the lane address parts once per block) give bit for bit the output of their per-sub-tile
    address form (fwd_sm80_cfg=9: FwdSm80QregRabW) and agree with the 128 x 64 tiles (cfg 10) to the fp32 sum order;
    the interleaved groups of the 128 x 64 tiles give bit for bit their plain body's output (fwd_sm80_interleave=False,
    which runs the 128 x 64 tiles). D = 128: the rab pairs by ldmatrix (FwdSm80QregRabL128) give bit for bit the
    output of the LDS per pair (fwd_sm80_cfg=9: FwdSm80QregRabF128). D = 128 / 256: the rab tiles inside the sequence
    copied without per-row predicates (D = 128 with S's accumulators starting as the rab) against the predicated
    copies (fwd_sm80_cfg=11, bit for bit main's rab path): D = 256 bit for bit, D = 128 to the fp32 sum order. A rab
    whose rows are not 16-byte aligned (max_seqlen_k not a multiple of 8) runs main's kernel, within the error
    rule."""
    lk = [2400, 1704, 2296, 1833, 2024] if delta_q else [1400, 700, 1290, 833, 1024]
    case = kg.make_case(zlib.crc32(repr(("rab_smem", D, mask, rab_heads, delta_q)).encode()), lk, 2, D,
                        torch.bfloat16, mask, rab_heads, delta_q=delta_q, seqused=seqused)
    assert case["q"].shape[0] >= _ops.FWD_SM80_LONG_ROWS * len(lk), "long rows: the default's Q-in-registers tile"
    assert case["max_seqlen_k"] % 8 == 0, "16-byte aligned rab rows"
    runs = D == 64 or (D == 128 and _qreg128_two_fit()) or (
        D == 256 and _pairs_fit() and torch.cuda.get_device_properties(0).shared_memory_per_block_optin >= 115712)
    tile = f"__nv_bfloat16, {D}, 128, 64, {64 if D == 64 else 32}, 4, 2, 2, 0, 1, "
    qs = "true, true" if D == 64 else "false, false"
    load_v, t64_v, copy_v = (_ops.FWD_SM80_CFG_RAB_LOAD_MAIN, _ops.FWD_SM80_CFG_RAB_TILE64,
                             _ops.FWD_SM80_CFG_RAB_COPY_MAIN)
    if D == 64:  # (cfg 11: the default)
        want = {v: f"hstu_fwd_qreg_rabm_kernel<{tile}{qs}>" for v in (0, load_v, t64_v, copy_v)}
        if _rabw_two_fit():
            w = f"hstu_fwd_qreg_rabw_kernel<__nv_bfloat16, 64, 128, 128, 64, 4, 2, 2, 0, 1, {qs}, "
            want[0] = want[copy_v] = w + "2>"
            want[load_v] = w + "0>"
    elif D == 128:  # (cfg 10: the default)
        want = {v: f"hstu_fwd_qreg_rab_kernel<{tile}{qs}, true, 1>" for v in (0, t64_v)}
        want[load_v] = f"hstu_fwd_qreg_rab_kernel<{tile}{qs}, true, 0>"
        want[copy_v] = f"hstu_fwd_qreg_rab_kernel<{tile}{qs}, false, 0>"
    else:
        want = {v: "hstu_fwd_xpf_rab_kernel<__nv_bfloat16, 256, 64, 64, 64, 4, 2, 1, 0, 2, true, 0>"
                for v in (0, load_v, t64_v)}
        want[copy_v] = want[0].replace("true, 0>", "false, 0>")
    alpha = 0.125  # (D = 64: alpha / 2 a power of two, the scaled Q registers)
    outs = {}
    variants = [(0, True), (load_v, True), (_ops.FWD_SM80_CFG_RAB_MAIN, True), (t64_v, True), (copy_v, True)]
    if D == 64:
        variants += [(v, False) for v in (0, load_v)]
    for var, ilv in variants:
        kernel_opts(sm90=False, fwd_split_tiles=0, fwd_sm80_cfg=var, fwd_sm80_interleave=ilv)
        if var == 0 and ilv:
            kg.check_case(case, alpha, backward=False)
        kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            outs[var, ilv] = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=alpha, rab=case["rab"],
                                                   **kg._varlen_kwargs(case))
            torch.cuda.synchronize()
        names = {e.name for e in prof.events() if "hstu_fwd_" in e.name}
        assert len(names) == 1, names
        if var in want and runs:
            w = want[var] if ilv else want[t64_v].replace("true, true", "true, false")
            assert w in next(iter(names)), (var, ilv, names, w)
        if var == _ops.FWD_SM80_CFG_RAB_MAIN:
            assert "_rab_kernel" not in next(iter(names)) and "_rabm_kernel" not in next(iter(names)), names
    new, load, main = outs[0, True], outs[load_v, True], outs[_ops.FWD_SM80_CFG_RAB_MAIN, True]
    copy = outs[copy_v, True]
    assert torch.equal(new, load), "the rab body's addresses (cfg 0) vs main40's forms (cfg 9)"
    if D == 128:  # (rab as S's initial accumulators: the same sums in another order)
        kg.assert_agree(("out",), (new,), (copy,), "rab as S's start vs rab added after S")
        assert torch.equal(new, outs[t64_v, True]) and torch.equal(copy, main)
    elif D == 256:
        assert torch.equal(new, copy) and torch.equal(load, main)
        assert torch.equal(new, outs[t64_v, True])
    else:
        assert torch.equal(new, copy)
        tile64 = outs[t64_v, True]
        kg.assert_agree(("out",), (new,), (tile64,), "128 x 128 tiles with the warps' rab slots vs 128 x 64 tiles")
        kg.assert_agree(("out",), (tile64,), (main,), "rab tiles in shared memory vs main's rab path")
        assert torch.equal(outs[0, False], tile64), "the interleaved groups vs the plain body (128 x 64 tiles)"
        assert torch.equal(outs[load_v, False], tile64), "the same (cfg 9 with fwd_sm80_interleave=False)"
    # rows of rab not 16-byte aligned: main's kernel
    odd = kg.make_case(zlib.crc32(repr(("rab_odd", D, mask)).encode()), [1401, 700, 1290], 2, D, torch.bfloat16,
                       mask, rab_heads)
    kernel_opts(sm90=False, fwd_split_tiles=0)
    kg.check_case(odd, alpha, backward=False)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        hstu_attn_varlen_func(odd["q"], odd["k"], odd["v"], alpha=alpha, rab=odd["rab"], **kg._varlen_kwargs(odd))
        torch.cuda.synchronize()
    names = {e.name for e in prof.events() if "hstu_fwd_" in e.name}
    assert len(names) == 1 and "_rab_kernel" not in next(iter(names)), names


@pytest.mark.parametrize("mask,rab_heads", [("causal", 2), ("local_target", 1)])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_forward_rab_evict(D, mask, rab_heads, kernel_opts):
    """kernel_options(fwd_sm80_rab_evict=True) (opt-in): the bf16 defaults with rab copy their rab tiles inside the
    sequence with an L2 evict-first policy (FwdSm80QregRabWHE, FwdSm80QregRabL128E, FwdSm80PairsPfRabFE; sm_90+
    code, where the defaults' tiles fit): they run those kernels, meet the error rule against the fp32 reference
    (outputs poisoned) and give the default's output bit for bit (a cache policy changes no value)."""
    lk = [1400, 700, 1290, 833, 1024]
    case = kg.make_case(zlib.crc32(repr(("rab_evict", D, mask, rab_heads)).encode()), lk, 2, D, torch.bfloat16, mask,
                        rab_heads)
    sm90 = torch.cuda.get_device_capability() >= (9, 0)
    runs = sm90 and ((D == 64 and _rabw_two_fit()) or (D == 128 and _qreg128_two_fit()) or (
        D == 256 and _pairs_fit() and torch.cuda.get_device_properties(0).shared_memory_per_block_optin >= 115712))
    want = {64: "hstu_fwd_qreg_rabw_kernel<__nv_bfloat16, 64, 128, 128, 64, 4, 2, 2, 0, 1, true, true, 6>",
            128: "hstu_fwd_qreg_rab_kernel<__nv_bfloat16, 128, 128, 64, 32, 4, 2, 2, 0, 1, false, false, true, 5>",
            256: "hstu_fwd_xpf_rab_kernel<__nv_bfloat16, 256, 64, 64, 64, 4, 2, 1, 0, 2, true, 4>"}[D]
    alpha = 0.125
    outs = []
    for evict in (False, True):
        kernel_opts(sm90=False, fwd_split_tiles=0, fwd_sm80_rab_evict=evict)
        if evict:
            kg.check_case(case, alpha, backward=False)
        kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            outs.append(hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=alpha, rab=case["rab"],
                                              **kg._varlen_kwargs(case)))
            torch.cuda.synchronize()
        names = {e.name for e in prof.events() if "hstu_fwd_" in e.name}
        assert len(names) == 1, names
        if evict and runs:
            assert want in next(iter(names)), (names, want)
    assert torch.equal(outs[0], outs[1]), "evict-first rab copies vs the default's"
