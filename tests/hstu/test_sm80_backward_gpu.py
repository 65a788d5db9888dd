"""The sm80-class backward's one-barrier loop and comparison cfgs (kernel_options(sm90=False, bwd_sm80_cfg=n);
hstu/csrc/sm80/hstu_bwd_sm80_pds_kernel.cuh). At D = 128 on sm_90+ the default for calls without contexts has one block
barrier per tile pair (three Q / dO stages, two P / dS buffers: hstu_bwd_pds_kernel<T, D, 3, 8>; so has cfg 15 at D =
64, with the next tile's Q and dO copies issued apart); cfg 1 runs the two-barrier kernels instead (two stages), cfg 2
(bf16, D = 64) the one-barrier loop with the copies together, cfg 3 the default kernels in the other grid order (the
default: heads first up to 2,048 keys, else batch first; heads first at D = 64 / 256 with the grid's last sequences key
blocks first), cfg 7 (bf16, heads first) the other choice of the last sequences' order, cfg 9 (bf16) the one-barrier
loops with dK / dV stored in fragment order (the default: through shared memory, kPdsSmemEpilogue), cfg 10 (bf16, D = 64
/ 128) the one-barrier loop with 4-byte P / dS stores and the Q / dO copies' pointers formed per tile (the default: P /
dS by stmatrix, kPdsStsmPdS, and the copies from pointers formed once per key block, kPdsPtrCopies), cfg 11 without the
pointer copies, cfg 12 without stmatrix (at D = 64 each without the running pointers too; at D = 128 each the loop
before the default's, below), cfg 13 (bf16, D = 64) without the default's running pointers for the Q / dO copies and
dQ's block (kPdsRunPtrs) and its phases' lane offsets formed once per key block (kPdsLaneOnce), cfg 14 without the lane
offsets once. At D = 128 the default's loop is the dQ-first body (warps 4-7 run dQ before dK / dV) with the lane
offsets once; cfg 14 (bf16) runs the loop before it (the fixed-order body without them), cfg 13 that loop with them.
At D = 64 on sm_90+ the default itself (bf16 and fp16, without contexts) takes 128-query tiles on two Q / dO stages
completing on mbarriers (kPdsTile128); cfg 15 (bf16) runs the three-stage loop instead, of which cfgs 2, 7, 9-14 at
D = 64 are variants. At D = 256 on sm_90+ the default has one block barrier per tile pair with two Q / dO stages whose
copies complete on mbarriers (kPdsMbarCopies,
with the lean copies: kPdsLeanCopies) and S / dP split over the head dim across warp pairs (kPdsKSplitS: the same sums
in another order); cfg 1 runs the two-barrier kernel there, cfg 6 (bf16) the loop without the lean copies and the
split, cfg 13 (bf16) the loop without the split. Each meets the error rule of test_kernels_gpu.py against the fp32
reference (fresh random inputs, gradients poisoned), all give the same dK, dV and drab bit for bit (at D = 256 cfgs
1 / 6 / 13 the two-barrier kernel's bits, agreeing with the default's to the fp32 reduction order), and the kernel
that runs is the cfg's (other head dims and GPUs without the shared memory run the two-barrier default; calls
with contexts the default's loop as its context kernel, cfg 5 the two-stage context kernel).
Also the default's kernels for calls with and without contexts (the context kernels skip the context gap), drab
with long contexts, a local window, targets and rab, the key-block limit and the dQ workspace layouts. Every call
here runs with kernel_options(bwd_sm80_split=False): these are the loops' own tests, and the split of long walks
(by default on jagged batches of few long sequences; its kernels and rule: test_sm80_backward_split_gpu.py) would
replace the default's kernel and its sums' order."""

import os
import random
import sys
import zlib

import pytest
import torch

from hstu_attn import hstu_attn_varlen_func

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hstu_kernel_checks as kg  # noqa: E402
from hstu_kernel_checks import _no_tf32, kernel_opts  # noqa: E402, F401  (the fixtures)

pytestmark = pytest.mark.gpu

LOOP_CFGS = (1, 2, 3, 7, 9, 10, 11, 12, 13, 14, 15)
TAIL_CFG = 7  # (kBwdSm80TailCfg: the heads-first kernels with the other choice of kPdsTailBlocksFirst, 256)
EPI_CFG = 9  # (kBwdSm80SmemEpiCfg: the default's loop without kPdsSmemEpilogue, 512: dK / dV in fragment order)
_STSM = 1024  # kPdsStsmPdS (P / dS by stmatrix)
_PTR = 2048  # kPdsPtrCopies (the Q / dO copies from pointers formed once per key block)
# (kBwdSm80StsmCfg / PtrCfg / PtrOnlyCfg: the default's loop at D = 64 / 128 without both flags / kPdsPtrCopies /
# kPdsStsmPdS)
STSM_CFG, PTR_CFG, PTR_ONLY_CFG = 10, 11, 12
_WITHOUT = {STSM_CFG: _STSM | _PTR, PTR_CFG: _PTR, PTR_ONLY_CFG: _STSM}
# (kBwdSm80RunPtrCfg / LaneOnceCfg: the default's loop at D = 64 without kPdsRunPtrs (4096) | kPdsLaneOnce (8192) /
# without kPdsLaneOnce; at D = 64 cfgs 10 / 11 / 12 are without both too: the running pointers need kPdsPtrCopies)
RUN_CFG, LANE_CFG = 13, 14
_RUN_LANE = 4096 | 8192
_WITHOUT_D64 = {STSM_CFG: _RUN_LANE, PTR_CFG: _RUN_LANE, PTR_ONLY_CFG: _RUN_LANE, RUN_CFG: _RUN_LANE, LANE_CFG: 8192}
# (kBwdPdsD64Tile128, D = 64's default on sm_90+: the loop-free body with kPdsMbarCopies | kPdsTile128 (16384) |
# kPdsSmemEpilogue | kPdsStsmPdS | kPdsPtrCopies | kPdsLaneOnce, two stages: 128-query tiles; kBwdSm80ThreeStageCfg:
# the three-stage loop instead, the names of the D = 64 default before, whose variants cfgs 2, 7, 9-14 are there)
THREE_CFG = 15
_TILE_BODY = 10 | 64 | 16384 | 512 | 1024 | 2048 | 8192
_THREE_STAGE_CFGS = (2, 7, 9, 10, 11, 12, 13, 14, THREE_CFG)  # (bf16, D = 64)
MBAR_CFGS = (6,)  # (D = 256)
# (D = 256's default on sm_90+ has kPdsKSplitS (32768): S / dP over half of D a warp, the partial sums exchanged
# between warp pairs; kBwdSm80RunPtrCfg at D = 256, bf16: the loop without it. The cfgs whose sums at D = 256 are the
# two-barrier kernel's, not the default's: 1, 6 and 13)
UNSPLIT_CFG, _KSPLIT = 13, 32768
_UNSPLIT_D256 = (1, 6, UNSPLIT_CFG)
# The loop-free default bodies (hstu_bwd_sm80_pds_kernel.cuh kPdsLoopFree 7, kPdsLoopFreeDqFirst 10; the one-barrier
# loops' flags: kPdsSmemEpilogue 512, at D = 64 kPdsSplitCopies 16), and kPdsHeadsFirst (32: the grid order heads first)
_EPI = 512  # kPdsSmemEpilogue
_DEFAULT_BODY = {64: 10, 128: 10}
# (| kPdsStsmPdS | kPdsPtrCopies; at D = 64 | kPdsRunPtrs | kPdsLaneOnce, at D = 128 | kPdsLaneOnce)
_DEFAULT_FLAGS = {64: 16 | _EPI | 1024 | 2048 | _RUN_LANE, 128: _EPI | 1024 | 2048 | 8192}
# kBwdPdsD128Main: D = 128's loop before the default's (the fixed-order body 7 without kPdsLaneOnce), the base of
# cfgs 10-14 at D = 128 (bf16): 14 itself, 13 with kPdsLaneOnce, 10 / 11 / 12 without stmatrix and / or the pointer
# copies; the rab loop's body too
_D128_MAIN = 7 | _EPI | 1024 | 2048
_D128_MAIN_CFGS = (STSM_CFG, PTR_CFG, PTR_ONLY_CFG, RUN_CFG, LANE_CFG)
_HEADS_FIRST = 32
_MBAR, _LEAN = 64, 128  # kPdsMbarCopies, kPdsLeanCopies
_TAIL = 256  # kPdsTailBlocksFirst
_TAIL_DEFAULT = {64: _TAIL, 128: 0, 256: _TAIL}  # kBwdPdsTailFirst


def loop_cfgs(D):
    """the comparison cfgs of the loop tests at head dim D"""
    return LOOP_CFGS + (MBAR_CFGS if D == 256 else ())


def mbar_fits():
    """whether this GPU runs D = 256's one-barrier loop (compute capability 9.0+, 224 KB + 16 B per block)"""
    smem = (2 * 64 * 256 + 2 * 2 * 64 * 256 + 4 * 64 * 64) * 2 + 16  # K, V, two Q / dO stages, two P / dS, mbarriers
    return (torch.cuda.get_device_capability(0)[0] >= 9
            and smem <= torch.cuda.get_device_properties(0).shared_memory_per_block_optin)


def one_bar_fits():
    """whether this GPU runs the one-barrier loop (compute capability 9.0+, 224 KB of shared memory per block)"""
    smem = (2 * 128 * 128 + 3 * 2 * 64 * 128 + 4 * 64 * 128) * 2  # D = 128: K, V, three Q / dO stages, two P / dS
    return (torch.cuda.get_device_capability(0)[0] >= 9
            and smem <= torch.cuda.get_device_properties(0).shared_memory_per_block_optin)


def default_claims(case, dtype=torch.bfloat16):
    """Whether the default backward (bwd_sm80_cfg / fwd_sm80_cfg 0, no split) of case's call without rab (as
    _bwd_kernels makes it) claims its dQ blocks on this GPU (hstu_ops.cc): bf16 at D = 128 / 256 heads first (at most
    2,048 keys) without contexts, where D = 128's one-barrier loop / D = 256's mbarrier loop fits."""
    D = case["q"].shape[-1]
    fits = mbar_fits() if D == 256 else one_bar_fits()
    return (dtype == torch.bfloat16 and D in (128, 256) and case["num_contexts"] is None
            and case["max_seqlen_k"] <= 2048 and fits)


def loop_kernel(D, cfg, dtype=torch.bfloat16, max_seqlen_k=200, claims=False):
    """The end of the name of the kernel cfg 0 / 1 / 2 / 3 / 6 / 7 runs at head dim D for dtype without contexts on this
    GPU, or None where that is not the one-barrier loop, its two-barrier comparison or a grid order's kernel (other
    head dims, below sm_90). The default's grid order: heads first up to 2,048 keys (the body kernel with
    kPdsHeadsFirst, at D = 64 / 256 | kPdsTailBlocksFirst), else batch first; cfg 3 the other one; cfg 7 (bf16) the
    heads-first kernel with the other choice of kPdsTailBlocksFirst (batch first: the default's). D = 256: the
    default the two-stage body kernel with kPdsMbarCopies | kPdsLeanCopies, cfg 1 the two-stage two-barrier kernel,
    cfg 6 (bf16) kPdsMbarCopies alone; the default with kPdsKSplitS (cfg 6 and cfg 13 (bf16) without). The
    one-barrier loops with kPdsSmemEpilogue, cfg 9 (bf16) the default's body kernel without it; cfg 10 / 11 / 12
    (bf16, D = 64 / 128) the default's loop as a body kernel without kPdsStsmPdS | kPdsPtrCopies / kPdsPtrCopies /
    kPdsStsmPdS. At D = 64 the default (and cfg 3, and every cfg but 1
    for fp16) is the two-stage body kernel with kPdsTile128; cfg 15 (bf16) the three-stage loop, the default before,
    and cfgs 2, 7, 9-14 (bf16) its variants as above. ``claims``: the call takes the default's dQ claims
    (default_claims): D = 128 / 256's heads-first default body with kPdsDqClaim."""
    t = "__nv_bfloat16" if dtype == torch.bfloat16 else "__half"
    bf16 = dtype == torch.bfloat16
    no_epi = cfg == EPI_CFG and bf16
    tail = _TAIL_DEFAULT.get(D, 0) ^ (_TAIL if cfg == TAIL_CFG and bf16 else 0)
    if D == 256 and mbar_fits():  # (224 KB, Hopper)
        first = (max_seqlen_k <= 2048) != (cfg == 3)
        if cfg == 1:
            if first:
                return f"hstu_bwd_pds_body_kernel<{t}, 256, 2, 8, {10 | _HEADS_FIRST}>(hstu::HstuParams, int)"
            return f"hstu_bwd_pds_kernel<{t}, 256, 2, 8>(hstu::HstuParams)"
        lean = 0 if cfg == 6 and bf16 else _LEAN
        body = 10 | _MBAR | lean | (_HEADS_FIRST | (0 if cfg == 6 and bf16 else tail) if first else 0)
        body |= (0 if no_epi else _EPI) | (0 if cfg in (6, UNSPLIT_CFG) and bf16 else _KSPLIT)
        body |= kg.PDS_DQ_CLAIM if claims and cfg == 0 and bf16 and first else 0
        return f"hstu_bwd_pds_body_kernel<{t}, 256, 2, 8, {body}>(hstu::HstuParams, int)"
    if D not in _DEFAULT_BODY or not one_bar_fits():
        return None
    if cfg == 1:
        return f"hstu_bwd_pds_kernel<{t}, {D}, 2, 8>(hstu::HstuParams)"
    # (cfg 7 batch first: not supported there, the default runs)
    three = bf16 and cfg in _THREE_STAGE_CFGS and not (cfg == TAIL_CFG and max_seqlen_k > 2048)
    if D == 64 and mbar_fits() and not three:  # (224 KB + 16 B, as D = 256's)
        body = _TILE_BODY | (_HEADS_FIRST | _TAIL if (max_seqlen_k <= 2048) != (cfg == 3) else 0)
        return f"hstu_bwd_pds_body_kernel<{t}, 64, 2, 8, {body}>(hstu::HstuParams, int)"
    if D == 64 and cfg == THREE_CFG and bf16:  # (the three-stage loop: the names of the default before)
        cfg = 0
    if cfg == 2 and dtype == torch.bfloat16 and D == 64:
        return f"hstu_bwd_pds_body_kernel<{t}, {D}, 3, 8, {_DEFAULT_BODY[D] | _EPI}>(hstu::HstuParams, int)"
    without = (_WITHOUT.get(cfg, 0) | (_WITHOUT_D64.get(cfg, 0) if D == 64 else 0)) if bf16 else 0
    loop = _DEFAULT_BODY[D] | _DEFAULT_FLAGS[D]
    if D == 128 and bf16 and cfg in _D128_MAIN_CFGS:
        loop = _D128_MAIN | (8192 if cfg == RUN_CFG else 0)
    if (max_seqlen_k <= 2048) != (cfg == 3):
        body = (loop | _HEADS_FIRST | tail) & ~(_EPI if no_epi else 0) & ~without
        body |= kg.PDS_DQ_CLAIM if claims and cfg == 0 and bf16 and D == 128 else 0
        return f"hstu_bwd_pds_body_kernel<{t}, {D}, 3, 8, {body}>(hstu::HstuParams, int)"
    if no_epi or without or loop != _DEFAULT_BODY[D] | _DEFAULT_FLAGS[D]:
        body = loop & ~(_EPI if no_epi else 0) & ~without
        return f"hstu_bwd_pds_body_kernel<{t}, {D}, 3, 8, {body}>(hstu::HstuParams, int)"
    return f"hstu_bwd_pds_kernel<{t}, {D}, 3, 8>(hstu::HstuParams)"


def _bwd_kernels(case):
    """names of the sm80-class backward main kernels one backward of case runs"""
    leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"])]
    out = hstu_attn_varlen_func(*leaves, **kg._varlen_kwargs(case))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.autograd.grad(out, leaves, torch.randn_like(out))
        torch.cuda.synchronize()
    return {e.name for e in prof.events() if "hstu_bwd_kernel<" in e.name or "hstu_bwd_pds" in e.name}


def _grads(case, dout, **kw):
    """dq, dk, dv (and drab) of one backward of case at alpha 0.5, the allocator poisoned before the backward"""
    rab = case["rab"]
    leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"], rab) if t is not None]
    out = hstu_attn_varlen_func(*leaves[:3], alpha=0.5, rab=None if rab is None else leaves[3],
                                has_drab=rab is not None, **kw, **kg._varlen_kwargs(case))
    kg.poison_allocator(8 * case["q"].numel() * case["q"].element_size())
    return torch.autograd.grad(out, leaves, dout)


@pytest.mark.parametrize("mask,delta_q,rab_heads,deterministic,seqused", [
    ("causal", False, 0, False, False), ("target", False, 0, False, True), ("context_target_group", True, 1, False,
                                                                             False),
    ("local_context_target", False, 2, True, False), ("none", True, 2, False, True)])
@pytest.mark.parametrize("lens", ["jagged", "dense"])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_one_barrier(D, lens, mask, delta_q, rab_heads, deterministic, seqused, kernel_opts):
    """The default (the one-barrier loop on sm_90+; D = 256: two stages on mbarriers), cfg 1 (two barriers), cfg 2 (D =
    64: the copies together), cfg 3 (the other grid order), cfg 7 (the other choice of the last sequences' order; in
    these small grids every sequence is one of them; test_sm80_backward_tail_blocks_first has more), at D = 64 cfg 15
    (the three-stage loop; the default there: 128-query tiles) and at D = 256 cfg 6 (without the lean copies) meet the
    error rule against the fp32 reference (jagged lengths of 0-700 rows at the 64 / 128 tile edges, so one- and two-tile
    walks and key blocks past a sequence's end; dense ones across several query tiles; masks cutting tiles, contexts and
    targets with groups, delta-q, seqused, rab / drab, the deterministic dq kernel), and give the same dK, dV and drab
    bit for bit (the same sums in the same order: only the barriers, buffers, copies and the order of the CTAs differ),
    dQ too when deterministic (its own kernel), else up to the atomics' order (outputs poisoned before each run)."""
    lk = [300, 0, 1, 129, 128, 77, 64, 33, 700] if lens == "jagged" else [384] * 3
    case = kg.make_case(zlib.crc32(repr(("bwd2", D, lens, mask, rab_heads)).encode()), lk, 2, D, torch.bfloat16,
                        mask, rab_heads, delta_q=delta_q, seqused=seqused)
    q, k, v, rab = case["q"], case["k"], case["v"], case["rab"]
    dout = torch.randn_like(q)
    grads = {}
    for cfg in (0,) + loop_cfgs(D):
        kernel_opts(sm90=False, bwd_sm80_split=False, bwd_sm80_cfg=cfg)
        kg.check_case(case, 0.5, deterministic=deterministic)
        grads[cfg] = _grads(case, dout, deterministic=deterministic)
        assert not any(torch.isnan(g).any() for g in grads[cfg]), cfg
    for cfg in loop_cfgs(D):
        for i, (name, g, w) in enumerate(zip(("dq", "dk", "dv", "drab"), grads[cfg], grads[0])):
            if (i == 0 and not deterministic) or (D == 256 and cfg in _UNSPLIT_D256):  # (other sums)
                kg.assert_agree((name,), [g], [w], f"bwd_sm80_cfg={cfg} vs the default")
            else:
                assert torch.equal(g, w), (cfg, name)


@pytest.mark.parametrize("mask,rab_heads,delta_q", [("causal", 0, False), ("local_target", 1, True)])
def test_sm80_backward_mbar_batch_first(mask, rab_heads, delta_q, kernel_opts):
    """D = 256's default (one barrier, two stages on mbarriers, the lean copies, S / dP split over D), cfg 13 (without
    the split) and cfg 6 (without it and the lean copies) over more than 2,048 keys (the grid order batch first
    there): the error rule against the fp32 reference, the kernel each runs, and cfgs 13 and 6 the same dK, dV and
    drab bit for bit as the two-barrier kernel (cfg 1; test_sm80_backward_one_barrier runs them heads first), the
    default agreeing with it to the fp32 reduction order."""
    case = kg.make_case(zlib.crc32(repr(("mbar_bf", mask, rab_heads)).encode()), [2200, 300, 129, 0, 64], 2, 256,
                        torch.bfloat16, mask, rab_heads, delta_q=delta_q)
    q, k, v, rab = case["q"], case["k"], case["v"], case["rab"]
    dout = torch.randn_like(q)
    grads = {}
    for cfg in (1, 0, UNSPLIT_CFG) + MBAR_CFGS:
        kernel_opts(sm90=False, bwd_sm80_split=False, bwd_sm80_cfg=cfg)
        if cfg != 1:
            kg.check_case(case, 0.5)
        grads[cfg] = _grads(case, dout)
        names = _bwd_kernels(case)
        want = loop_kernel(256, cfg, max_seqlen_k=case["max_seqlen_k"], claims=default_claims(case))
        assert want is None or (len(names) == 1 and next(iter(names)).endswith(want)), (cfg, names, want)
    for cfg in (0, UNSPLIT_CFG) + MBAR_CFGS:
        for i, (name, g, w) in enumerate(zip(("dq", "dk", "dv", "drab"), grads[cfg], grads[1])):
            if i == 0 or cfg == 0:  # (the default's split S / dP: other sums)
                kg.assert_agree((name,), [g], [w], f"bwd_sm80_cfg={cfg} vs cfg 1")
            else:
                assert torch.equal(g, w), (cfg, name)


def _default_and_cfg_agree(case, dout, D, cfg, kernel_opts, label=None, bitwise=True):
    """The default (cfg 0) and `cfg` (one or a tuple) each meet the error rule against the fp32 reference and run
    their loop kernel; dK, dV and drab are the same bits in all (bitwise=False: agree to the fp32 reduction order),
    dQ agrees up to the atomics' order."""
    cfgs = cfg if isinstance(cfg, tuple) else (cfg,)
    grads = {}
    for c in (0,) + cfgs:
        kernel_opts(sm90=False, bwd_sm80_split=False, bwd_sm80_cfg=c)
        kg.check_case(case, 0.5)
        grads[c] = _grads(case, dout)
        assert not any(torch.isnan(g).any() for g in grads[c]), c
        names = _bwd_kernels(case)
        want = loop_kernel(D, c, max_seqlen_k=case["max_seqlen_k"], claims=default_claims(case))
        assert want is None or (len(names) == 1 and next(iter(names)).endswith(want)), (c, names, want)
    for c in cfgs:
        for i, (name, g, w) in enumerate(zip(("dq", "dk", "dv", "drab"), grads[c], grads[0])):
            if i == 0 or not bitwise:
                kg.assert_agree((name,), [g], [w], f"bwd_sm80_cfg={c} vs the default")
            else:
                assert torch.equal(g, w), (label, c, name)


@pytest.mark.parametrize("mask,rab_heads,delta_q", [("causal", 0, False), ("local_target", 1, True)])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_tail_blocks_first(D, mask, rab_heads, delta_q, kernel_opts):
    """The default's heads-first loop (at D = 64 / 256 the grid's last sequences key blocks first) and cfg 7 (bf16:
    the other choice) over more sequences than the tail (40 jagged ones of 0-700 keys, H = 2: the first ones heads
    first, the last 6-11 key blocks first) meet the error rule against the fp32 reference and give the same dK, dV
    and drab bit for bit (the same CTAs in another order), dQ up to the atomics' order; the kernel that runs is the
    cfg's."""
    rng = random.Random(zlib.crc32(repr(("tail", D, mask)).encode()))
    lk = [0, 64, 128, 700] + [rng.randint(0, 700) for _ in range(36)]
    case = kg.make_case(zlib.crc32(repr(("tail", D, mask, rab_heads)).encode()), lk, 2, D, torch.bfloat16, mask,
                        rab_heads, delta_q=delta_q)
    _default_and_cfg_agree(case, torch.randn_like(case["q"]), D, TAIL_CFG, kernel_opts)


@pytest.mark.parametrize("mask,rab_heads,delta_q", [("causal", 0, False), ("local_target", 2, True)])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_smem_epilogue(D, mask, rab_heads, delta_q, kernel_opts):
    """The default's loop (dK / dV through shared memory, 16-byte row stores) and cfg 9 (bf16: the same loop with dK /
    dV stored in fragment order) in both grid orders (jagged sequences of 0-700 keys heads first; with one of 2,200
    keys batch first), key blocks cut by a sequence's end at every row count class (1, 63, 64, 65, 127, 128, 129
    keys): the error rule against the fp32 reference (gradients poisoned), the cfg's kernel, and the same dK, dV and
    drab bit for bit (the same sums, another store path), dQ up to the atomics' order."""
    rng = random.Random(zlib.crc32(repr(("epi", D, mask)).encode()))
    for lk in ([0, 1, 63, 64, 65, 127, 128, 129, 700] + [rng.randint(0, 700) for _ in range(11)],
               [2200, 1, 65, 129, 0, 300]):
        case = kg.make_case(zlib.crc32(repr(("epi", D, mask, rab_heads, len(lk))).encode()), lk, 2, D,
                            torch.bfloat16, mask, rab_heads, delta_q=delta_q)
        _default_and_cfg_agree(case, torch.randn_like(case["q"]), D, EPI_CFG, kernel_opts, label=len(lk))


@pytest.mark.parametrize("mask,rab_heads,delta_q", [("causal", 0, False), ("local_target", 2, True),
                                                   ("target_group", 1, False), ("none", 0, True)])
@pytest.mark.parametrize("D", [64, 128])
def test_sm80_backward_stsm_pds(D, mask, rab_heads, delta_q, kernel_opts):
    """The default's loop (P and dS stored by stmatrix, the Q / dO copies from pointers formed once per key block),
    cfg 10 (bf16: without both), cfg 11 (without the pointer copies) and cfg 12 (without stmatrix) in both grid orders
    (jagged sequences of 0-700 keys heads first, partial and fully masked tiles at every row count class; with one
    of 2,200 keys batch first): the error rule against the fp32 reference (gradients poisoned), the cfg's kernel,
    and the same dK, dV and drab bit for bit (the same P / dS bytes in the same places), dQ up to the atomics'
    order."""
    rng = random.Random(zlib.crc32(repr(("stsm", D, mask)).encode()))
    for lk in ([0, 1, 63, 64, 65, 127, 128, 129, 700] + [rng.randint(0, 700) for _ in range(11)],
               [2200, 1, 65, 129, 0, 300]):
        case = kg.make_case(zlib.crc32(repr(("stsm", D, mask, rab_heads, len(lk))).encode()), lk, 2, D,
                            torch.bfloat16, mask, rab_heads, delta_q=delta_q)
        _default_and_cfg_agree(case, torch.randn_like(case["q"]), D, (STSM_CFG, PTR_CFG, PTR_ONLY_CFG), kernel_opts,
                               label=len(lk))


@pytest.mark.parametrize("mask,rab_heads,delta_q", [("causal", 0, False), ("local_target", 2, True),
                                                   ("target_group", 1, False), ("none", 0, True)])
def test_sm80_backward_ksplit(mask, rab_heads, delta_q, kernel_opts):
    """D = 256: the default's mbarrier loop (S and dP over half of the head dim a warp, the pair's partial sums
    exchanged through the P / dS buffer under pair barriers) and cfg 13 (bf16: the loop without the split) in both
    grid orders (jagged sequences of 0-700 keys heads first, partial and fully masked tiles at every row count class;
    one of 2,200 keys batch first, where the SiLU pass follows the dP exchange): the error rule against the fp32
    reference (gradients poisoned), the cfg's kernel, and dQ, dK, dV and drab agreeing to the fp32 reduction order."""
    rng = random.Random(zlib.crc32(repr(("ksplit", mask)).encode()))
    for lk in ([0, 1, 63, 64, 65, 127, 128, 129, 700] + [rng.randint(0, 700) for _ in range(11)],
               [2200, 1, 65, 129, 0, 300]):
        case = kg.make_case(zlib.crc32(repr(("ksplit", mask, rab_heads, len(lk))).encode()), lk, 2, 256,
                            torch.bfloat16, mask, rab_heads, delta_q=delta_q)
        _default_and_cfg_agree(case, torch.randn_like(case["q"]), 256, UNSPLIT_CFG, kernel_opts, label=len(lk),
                               bitwise=False)


@pytest.mark.parametrize("tag,cfgs", [("runptr", (RUN_CFG, LANE_CFG)), ("stages3", (THREE_CFG,))])
@pytest.mark.parametrize("mask,rab_heads,delta_q", [("causal", 0, False), ("local_target", 2, True),
                                                   ("target_group", 1, False), ("none", 0, True)])
def test_sm80_backward_d64_loop_cfgs(tag, cfgs, mask, rab_heads, delta_q, kernel_opts):
    """D = 64: the default's 128-query tiles (phase 1 on two 64-row halves, dQ in 32 x 32 warp tiles into the same
    fragment-ordered blocks, the second half's dQ skipped past the sequence) against cfg 15 (bf16: the three-stage
    loop with running pointers for the Q / dO copies and dQ's block, the phases' lane offsets formed once per key
    block), cfg 13 (that loop without both) and cfg 14 (the running pointers alone), in both grid orders (jagged
    sequences of 0-700 keys heads first, partial and fully masked tiles at every row count class; one of 2,200 keys
    batch first): the error rule against the fp32 reference (gradients poisoned), the cfg's kernel,
    the same dK, dV and drab bit for bit, dQ up to the atomics' order."""
    rng = random.Random(zlib.crc32(repr((tag, mask)).encode()))
    for lk in ([0, 1, 63, 64, 65, 127, 128, 129, 700] + [rng.randint(0, 700) for _ in range(11)],
               [2200, 1, 65, 129, 0, 300]):
        case = kg.make_case(zlib.crc32(repr((tag, mask, rab_heads, len(lk))).encode()), lk, 2, 64,
                            torch.bfloat16, mask, rab_heads, delta_q=delta_q)
        _default_and_cfg_agree(case, torch.randn_like(case["q"]), 64, cfgs, kernel_opts, label=len(lk))


@pytest.mark.parametrize("mask,rab_heads,delta_q", [("causal", 0, False), ("local_target", 2, True),
                                                   ("target_group", 1, False), ("none", 0, True)])
def test_sm80_backward_d128_loop_cfgs(mask, rab_heads, delta_q, kernel_opts):
    """D = 128: the default's three-stage loop (the dQ-first body: warps 4-7 run dQ before dK / dV; the phases' lane
    offsets formed once per key block) against cfg 14 (bf16: the loop before it, the fixed-order body without the
    lane offsets once) and cfg 13 (that loop with them), in both grid orders (jagged sequences of 0-700 keys heads
    first, partial and fully masked tiles at every row count class; one of 2,200 keys batch first): the error rule
    against the fp32 reference (gradients poisoned), the cfg's kernel, the same dK, dV and drab bit for bit (the
    same sums in the same order, the phases in another order), dQ up to the atomics' order."""
    rng = random.Random(zlib.crc32(repr(("d128loop", mask)).encode()))
    for lk in ([0, 1, 63, 64, 65, 127, 128, 129, 700] + [rng.randint(0, 700) for _ in range(11)],
               [2200, 1, 65, 129, 0, 300]):
        case = kg.make_case(zlib.crc32(repr(("d128loop", mask, rab_heads, len(lk))).encode()), lk, 2, 128,
                            torch.bfloat16, mask, rab_heads, delta_q=delta_q)
        _default_and_cfg_agree(case, torch.randn_like(case["q"]), 128, (LANE_CFG, RUN_CFG), kernel_opts,
                               label=len(lk))


@pytest.mark.parametrize("D", [32, 64, 128, 256])
def test_sm80_backward_one_barrier_runs_its_kernel(D, kernel_opts):
    """At D = 64 / 128 on sm_90+ the default runs the one-barrier loop (both dtypes; at 200 keys heads first), cfg 1 the
    two-barrier kernel, cfg 2 (bf16, D = 64) the loop with the copies together, cfg 3 the other grid order (D = 256
    too), cfg 6 (bf16, D = 256) the mbarrier loop without the lean copies, cfg 7 (bf16) the heads-first loop with the
    other choice of the tail's order, cfg 10 / 11 / 12 (bf16, D = 64 / 128) the loop without P / dS by stmatrix and
    the Q / dO copies from pointers / without the copies / without stmatrix; calls with contexts run a context
    kernel (one that skips the context gap: the default's loop as hstu_bwd_pds_body_ctx_kernel, or the two-stage
    hstu_bwd_pds_ctx_kernel for a cfg without a context form) whatever the cfg; other head dims (and GPUs below
    sm_90) run the same kernel for every cfg."""
    for dtype in (torch.bfloat16, torch.float16):
        case = kg.make_case(17, [200, 64], 2, D, dtype, "causal", 0)
        ctx_case = kg.make_case(23, [300, 64], 2, D, dtype, "context_target", 0)
        kernel_opts(sm90=False, bwd_sm80_split=False)
        default, default_ctx = _bwd_kernels(case), _bwd_kernels(ctx_case)
        assert len(default) == 1, default
        for cfg in (0,) + loop_cfgs(D):
            kernel_opts(sm90=False, bwd_sm80_split=False, bwd_sm80_cfg=cfg)
            names = _bwd_kernels(case)
            want = loop_kernel(D, cfg, dtype, claims=default_claims(case, dtype))
            if want is None:
                assert names == default, (dtype, cfg, names, default)
            else:
                assert len(names) == 1 and next(iter(names)).endswith(want), (dtype, cfg, names, want)
            ctx = _bwd_kernels(ctx_case)
            if any("ctx_kernel<" in n for n in default_ctx):
                assert len(ctx) == 1 and "ctx_kernel<" in next(iter(ctx)), (dtype, cfg, ctx, default_ctx)
            else:  # (D = 32, GPUs without FA2's layout: one kernel for every call)
                assert ctx == default_ctx, (dtype, cfg, ctx, default_ctx)


@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_context_kernel(D, kernel_opts):
    """Calls with contexts, the sm80-class default backward at D = 64 / 128 / 256 (FA2's warp layout): on sm_90+
    (where the one-barrier / mbarrier loops fit) the default's loop as hstu_bwd_pds_body_ctx_kernel (it skips the
    query tiles of the context gap by the walk's tile index: D = 64 the 128-query tiles' two stages, D = 128 three
    stages, D = 256 two), heads first at 300 keys and batch first at 2,100; bwd_sm80_cfg=5 (bf16) the two-stage
    context kernel hstu_bwd_pds_ctx_kernel (the default before, for comparisons), whose template arguments are the
    two-stage kernel's (cfg 5 without contexts); elsewhere that two-stage context kernel is the default."""
    stages = {64: 2, 128: 3, 256: 2}[D]
    for dtype in (torch.bfloat16, torch.float16):
        t = "__nv_bfloat16" if dtype == torch.bfloat16 else "__half"
        for lens in ([300, 64], [2100, 64]):
            case = kg.make_case(23, lens, 2, D, dtype, "context_target", 0)
            kernel_opts(sm90=False, bwd_sm80_split=False)
            (plain,) = _bwd_kernels(dict(case, num_contexts=None))
            (ctx,) = _bwd_kernels(case)
            if one_bar_fits():
                assert ctx.startswith(f"void hstu::hstu_bwd_pds_body_ctx_kernel<{t}, {D}, {stages}, 8, ") or \
                    f"hstu_bwd_pds_body_ctx_kernel<{t}, {D}, {stages}, 8, " in ctx, (lens, ctx, plain)
            else:
                assert "hstu_bwd_pds_ctx_kernel<" in ctx, (lens, ctx, plain)
            if dtype == torch.bfloat16:
                kernel_opts(sm90=False, bwd_sm80_split=False, bwd_sm80_cfg=5)
                (two,) = _bwd_kernels(dict(case, num_contexts=None))
                (ctx5,) = _bwd_kernels(case)
                assert "hstu_bwd_pds_ctx_kernel<" in ctx5, (lens, ctx5)
                assert ctx5.split("<", 1)[1] == two.split("<", 1)[1], (ctx5, two)


@pytest.mark.parametrize("mask,rab_heads", [("context", 0), ("context_target_group", 2),
                                            ("local_context_target", 1)])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_context_loops(D, mask, rab_heads, kernel_opts):
    """The default's sm_90+ loops with contexts (hstu_bwd_pds_body_ctx_kernel: the context gap skipped by the walk's
    tile index), heads first (jagged lengths up to 1,100 keys) and batch first (2,200 keys), contexts of 0-200 rows on
    both sides of the 64 / 128-row tile edges, targets with groups, a local window, rab / drab: the error rule against
    the fp32 reference (gradients poisoned), and dQ, dK, dV, drab agreeing with bwd_sm80_cfg=5's (the two-stage
    context kernel, the default before) to the fp32 reduction order. D = 64: dK / dV bitwise bwd_sm80_cfg=13's (the
    128-query context loop with its last context tile in full: the default skips that tile's second half where it
    sees none of the key block, which only added zeros; dQ and shared rab's drab are sums by atomics, in any order).
    D = 256 (the split S / dP loop's context twin, by the tile's own index): agreeing with bwd_sm80_cfg=13's (the loop
    without the split) too."""
    for lens, want in (([700, 129, 64, 1, 330, 257, 1100], [200, 65, 63, 1, 64, 0, 130]),
                       ([2200, 65, 300], [64, 1, 200])):
        case = kg.make_case(zlib.crc32(repr(("ctx_loops", mask, D, rab_heads, len(lens))).encode()), lens, 2, D,
                            torch.bfloat16, mask, rab_heads)
        nt = case["num_targets"].tolist() if case["num_targets"] is not None else [0] * len(lens)
        nc = [max(0, min(c, lk - t)) for c, lk, t in zip(want, lens, nt)]
        case["num_contexts"] = torch.tensor(nc, dtype=torch.int32, device="cuda")
        kernel_opts(sm90=False, bwd_sm80_split=False)
        kg.check_case(case, 0.5)
        dout = torch.randn_like(case["q"])
        got = _grads(case, dout)
        kernel_opts(sm90=False, bwd_sm80_split=False, bwd_sm80_cfg=5)
        ref = _grads(case, dout)
        kg.assert_agree(("dq", "dk", "dv", "drab"), got, ref, f"{lens[0]} keys: the default vs cfg 5")
        if D == 64:
            kernel_opts(sm90=False, bwd_sm80_split=False, bwd_sm80_cfg=13)
            full = _grads(case, dout)
            for name, a, b in zip(("dk", "dv"), got[1:3], full[1:3]):
                assert torch.equal(a, b), (lens[0], name, kg.max_err(a, b))
            kg.assert_agree(("dq", "drab"), (got[0],) + tuple(got[3:]), (full[0],) + tuple(full[3:]),
                            f"{lens[0]} keys: the default vs cfg 13")
        if D == 256:
            kernel_opts(sm90=False, bwd_sm80_split=False, bwd_sm80_cfg=13)
            unsplit = _grads(case, dout)
            kg.assert_agree(("dq", "dk", "dv", "drab"), got, unsplit, f"{lens[0]} keys: the default vs cfg 13")


@pytest.mark.parametrize("rab_heads,deterministic", [(2, False), (1, False), (1, True)])
@pytest.mark.parametrize("mask", ["local_context_target", "gr_local_context_target", "context_target_group"])
@pytest.mark.parametrize("D", [128, 256])
def test_sm80_backward_long_contexts_drab(D, mask, rab_heads, deterministic, kernel_opts):
    """The sm80-class default backward with contexts longer than a query tile, rab and drab (per-head rab, shared
    rab by atomics and by the deterministic per-head slices), targets and a local window (the GR convention too):
    every gradient meets the error rule against the fp32 reference, and drab's zeros are +0. A masked element's dS
    is 0 * dP, -0 where dP < 0; the kernel stores +0, the value drab starts with, so that drab's bits do not
    depend on which fully masked query tiles it walks (hstu_bwd_pds_ctx_kernel skips the context gap's)."""
    conv = "meta_gr" if mask.startswith("gr_") else "nvidia"
    if conv == "meta_gr":
        case = kg._gr_case(mask, D, False, rab_heads)
    else:
        lens = [700, 129, 64, 1, 330, 257, 1100]
        case = kg.make_case(zlib.crc32(repr(("ctx_drab80", mask, D, rab_heads)).encode()), lens, 2, D,
                            torch.bfloat16, mask, rab_heads)
        nt = case["num_targets"].tolist()
        want = [200, 65, 63, 1, 64, 0, 130]
        nc = [max(0, min(c, lk - t)) for c, lk, t in zip(want, lens, nt)]
        case["num_contexts"] = torch.tensor(nc, dtype=torch.int32, device="cuda")
    kernel_opts(sm90=False, bwd_sm80_split=False)
    kg.check_case(case, 0.5, deterministic=deterministic, mask_convention=conv)
    leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"], case["rab"])]
    out = hstu_attn_varlen_func(*leaves[:3], alpha=0.5, rab=leaves[3], has_drab=True, deterministic=deterministic,
                                mask_convention=conv, **kg._varlen_kwargs(case))
    kg.poison_allocator(8 * case["q"].numel() * case["q"].element_size())
    (drab,) = torch.autograd.grad(out, leaves[3:], torch.randn_like(out))
    zeros = drab == 0
    assert zeros.any() and not torch.isnan(drab).any()
    neg = torch.signbit(drab[zeros]).sum().item()
    assert neg == 0, f"{neg} of drab's {zeros.sum().item()} zeros are -0"


@pytest.mark.parametrize("D", [32, 128, 256])
def test_sm80_backward_refuses_too_many_key_blocks(D, kernel_opts):
    """The portable backward of FA2's layout puts a sequence's key blocks in gridDim.y (at most 65535, blocks of 64
    keys at least: hstu_launch.h kBwdSm80MaxSeqlenK): the op refuses a larger max_seqlen_k before any launch with
    the argument, the bound and the value (one rule at every head dim), and takes the bound itself."""
    limit = 65535 * 64
    lens = [5, 3]
    case = kg.make_case(zlib.crc32(repr(("keyblocks", D)).encode()), lens, 2, D, torch.bfloat16, "causal", 0)
    kernel_opts(sm90=False, bwd_sm80_split=False)
    for max_k, ok in ((limit, True), (limit + 1, False)):
        kw = kg._varlen_kwargs(case)
        kw["max_seqlen_k"] = max_k
        leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"])]
        out = hstu_attn_varlen_func(*leaves, **kw)
        if ok:
            grads = torch.autograd.grad(out, leaves, torch.randn_like(out))
            assert all(torch.isfinite(g).all() for g in grads)
        else:
            with pytest.raises(RuntimeError, match=rf"max_seqlen_k: expected at most {limit} .*got {max_k}"):
                torch.autograd.grad(out, leaves, torch.randn_like(out))


@pytest.mark.parametrize("mask,rab_heads,delta_q,seqused", [("causal", 0, False, False), ("local_target", 2, True,
                                                            True), ("context_target", 1, False, True)])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_dq_workspace_layouts(D, mask, rab_heads, delta_q, seqused, kernel_opts):
    """At D = 64 / 128 / 256 the sm80-class backward's fp32 dQ workspace has room for both layouts (per head, each
    sequence padded by a 64-row tile): the 8-warp kernels of FA2's layout add dQ in their fragment order with
    red.global.add.v4.f32 on Hopper (the default, with and without contexts) and flag it; the others (the old
    layouts, kernel_options(bwd_sm80_cfg=8)) add row-major; hstu_dq_tile_convert_kernel reads the flagged layout (by
    whole 16-byte lane slots, stored through shared memory as 16-byte pieces of rows; only the tiles that hold rows
    of their sequence: the last sequence is shorter than the longest, so its tiles past its end would read past the
    workspace); at these lengths the default runs heads first, cfg 3 batch first. All meet the error rule against
    the fp32 reference (jagged sequences of 0-1,100 rows, queries fewer than keys, rows past seqused, bf16 and
    fp16), and the dq rows outside every sequence (past
    cu_seqlens_q[-1]) are zeros (dq is uninitialized: poisoned)."""
    lens = [700, 129, 64, 1, 330, 0, 257, 1100, 384]
    for dtype in (torch.bfloat16, torch.float16):
        case = kg.make_case(zlib.crc32(repr(("dqlayout", D, mask, rab_heads, str(dtype))).encode()), lens, 2, D,
                            dtype, mask, rab_heads, delta_q=delta_q, seqused=seqused)
        for cfg in (0, 3, 8):
            kernel_opts(sm90=False, bwd_sm80_split=False, bwd_sm80_cfg=cfg)
            kg.check_case(case, 0.5)
        # 5 rows behind the last sequence: their dq is zeros in both layouts
        kw = kg._varlen_kwargs(case)
        extra = [torch.cat([t, torch.randn_like(t[:5])]) for t in (case["q"], case["k"], case["v"])]
        for cfg in (0, 3, 8):
            kernel_opts(sm90=False, bwd_sm80_split=False, bwd_sm80_cfg=cfg)
            leaves = [t.detach().clone().requires_grad_() for t in extra]
            out = hstu_attn_varlen_func(*leaves, alpha=0.5, **kw)
            kg.poison_allocator(8 * extra[0].numel() * extra[0].element_size())
            dq = torch.autograd.grad(out, leaves, torch.randn_like(out))[0]
            assert torch.isfinite(dq).all() and not dq[-5:].any(), (dtype, cfg)


_RAB_SMEM = 65536  # kPdsRabSmem (rab through each tile's P buffer, drab from its dS tile)
_DRAB_BULK = 524288  # kPdsDrabBulk (the rab loops' drab zeros by bulk copies; fwd_sm80_cfg=12 without)
_D256_BODY = 10 | _MBAR | _LEAN | _EPI | _KSPLIT  # (kBwdPdsD256OneBar)


def rab_kernel(D, max_seqlen_k, bulk=True):
    """The end of the name of the kernel the default runs with rab through shared memory (bf16, no contexts, rab and
    a per-head drab 16-byte aligned) at head dim D on this GPU, or None where the sm_90+ loops do not run: the
    default's loop (D = 64 the 128-query tiles, D = 128 the three-stage loop before the default's: kBwdPdsD128Main,
    D = 256 the mbarrier loop) as a body
    kernel with kPdsRabSmem, and kPdsDrabBulk where bulk (a per-head drab that the loop writes whole; not with
    kernel_options(fwd_sm80_cfg=12) / 15), heads first up to 2,048 keys (at D = 64 / 256 with the tail's order)."""
    if not (mbar_fits() and one_bar_fits()):
        return None
    first = max_seqlen_k <= 2048
    stages, body = {64: (2, _TILE_BODY), 128: (3, _D128_MAIN), 256: (2, _D256_BODY)}[D]
    body |= _RAB_SMEM | (_DRAB_BULK if bulk else 0) | ((_HEADS_FIRST | _TAIL_DEFAULT[D]) if first else 0)
    return f"hstu_bwd_pds_body_kernel<__nv_bfloat16, {D}, {stages}, 8, {body}>(hstu::HstuParams, int)"


def _rab_grads_and_kernels(case, dout, rab, deterministic=False):
    """dq, dk, dv, drab of one backward of case with this rab (has_drab; the allocator poisoned before the backward)
    and the names of the sm80-class backward main kernels it ran"""
    leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"])]
    rab_leaf = rab.detach().requires_grad_()  # (not a clone: the same storage offset)
    out = hstu_attn_varlen_func(*leaves, alpha=0.5, rab=rab_leaf, has_drab=True, deterministic=deterministic,
                                **kg._varlen_kwargs(case))
    kg.poison_allocator(8 * case["q"].numel() * case["q"].element_size())
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        grads = torch.autograd.grad(out, leaves + [rab_leaf], dout)
        torch.cuda.synchronize()
    names = {e.name for e in prof.events() if "hstu_bwd_kernel<" in e.name or "hstu_bwd_pds" in e.name}
    return grads, names


def _rab_smem_vs_main(case, D, deterministic, kernel_opts, want_smem=True):
    """The default with rab (through shared memory where want_smem, else main's path: the fallback) meets the error
    rule against the fp32 reference and runs its kernel; kernel_options(fwd_sm80_cfg=8) runs main's rab path (the
    default's loop without kPdsRabSmem); dK, dV and drab bit for bit the same, dQ too where deterministic, else up to
    the atomics' order."""
    dout = torch.randn_like(case["q"])
    got = {}
    for var in (0, 8):
        kernel_opts(sm90=False, bwd_sm80_split=False, fwd_sm80_cfg=var)
        if var == 0:
            kg.check_case(case, 0.5, deterministic=deterministic)
        got[var], names = _rab_grads_and_kernels(case, dout, case["rab"], deterministic)
        assert not any(torch.isnan(g).any() for g in got[var]), var
        per_head = case["rab"].shape[1] > 1  # (a per-head drab: the rab loop with its zeros by bulk copies)
        want = rab_kernel(D, case["max_seqlen_k"], bulk=per_head) if var == 0 and want_smem else None
        if want is None and (var == 8 or not want_smem):
            want = loop_kernel(D, 0, max_seqlen_k=case["max_seqlen_k"])
        assert want is None or (len(names) == 1 and next(iter(names)).endswith(want)), (var, names, want)
    for i, (name, g, w) in enumerate(zip(("dq", "dk", "dv", "drab"), got[0], got[8])):
        if i == 0 and not deterministic:
            kg.assert_agree((name,), [g], [w], "rab through shared memory vs main's path")
        else:
            assert torch.equal(g, w), name


@pytest.mark.parametrize("mask,rab_heads,delta_q,deterministic", [
    ("causal", 2, False, False), ("local_target", 2, True, False), ("target_group", 1, False, False),
    ("none", 1, True, True)])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_rab_smem(D, mask, rab_heads, delta_q, deterministic, kernel_opts):
    """The default loops with rab through shared memory (kPdsRabSmem: each warp's rab copied into the tile's P
    buffer, a per-head drab stored from the dS tile in 16-byte chunks; a shared rab's drab by the fp32 atomics, or
    per-head slices when deterministic), heads first (jagged sequences of 0-704 keys: odd lengths, key blocks and
    16-byte chunks cut by a sequence's end, partial and fully masked tiles) and, for the first case, batch first (one
    of 2,208 keys): the error rule against the fp32 reference (gradients poisoned), the rab kernel, and main's rab
    path's gradients (kernel_options(fwd_sm80_cfg=8)) bit for bit."""
    rng = random.Random(zlib.crc32(repr(("rab_smem", D, mask)).encode()))
    lens = [[0, 1, 63, 64, 65, 127, 128, 129, 704] + [rng.randint(0, 700) for _ in range(5)]]
    if mask == "causal":
        lens.append([2208, 1, 65, 129, 0, 300])
    for lk in lens:
        case = kg.make_case(zlib.crc32(repr(("rab_smem", D, mask, rab_heads, len(lk))).encode()), lk, 2, D,
                            torch.bfloat16, mask, rab_heads, delta_q=delta_q)
        assert case["max_seqlen_k"] % 8 == 0  # (rab's rows 16-byte aligned)
        _rab_smem_vs_main(case, D, deterministic, kernel_opts)


@pytest.mark.parametrize("how", ["rows", "pointer"])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_rab_smem_unaligned(D, how, kernel_opts):
    """rab whose 16-byte chunks are not aligned (rows of 701 keys; or a view 2 bytes into its storage) runs main's
    rab path (the default's loop without kPdsRabSmem), meeting the error rule, with fwd_sm80_cfg=8's gradients."""
    lk = [701, 64, 129, 0, 33] if how == "rows" else [704, 64, 129, 0, 33]
    case = kg.make_case(zlib.crc32(repr(("rab_unaligned", D, how)).encode()), lk, 2, D, torch.bfloat16, "causal", 2)
    if how == "pointer":
        r = case["rab"]
        case["rab"] = torch.empty(r.numel() + 1, device=r.device, dtype=r.dtype)[1:].view(r.shape).copy_(r)
        assert case["rab"].data_ptr() % 16 != 0 and case["rab"].is_contiguous()
    _rab_smem_vs_main(case, D, False, kernel_opts, want_smem=False)


DRAB_MAIN = 15  # kernel_options(fwd_sm80_cfg=15): drab zeroed by the op (kFwdSm80CfgDrabMain), as main had it
DRAB_LSU = 12  # kernel_options(fwd_sm80_cfg=12): the rab loops' zeros by 16-byte stores (kFwdSm80CfgDrabLsu)


def _grads_drab_poisoned(case, dout, rab, deterministic=False):
    """dq, dk, dv, drab of one backward of case with this rab and has_drab, every large block the op allocates
    starting out NaN in q's dtype (the allocator's cache emptied, then one NaN block larger than all of them), and
    the names of the sm80-class backward main kernels it ran"""
    leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"])]
    rab_leaf = rab.detach().requires_grad_()
    out = hstu_attn_varlen_func(*leaves, alpha=0.5, rab=rab_leaf, has_drab=True, deterministic=deterministic,
                                **kg._varlen_kwargs(case))
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    q = case["q"]
    nbytes = 2 * rab.numel() * 4 + 16 * q.numel() * 4 + (4 << 20)
    torch.full((nbytes // q.element_size(),), float("nan"), dtype=q.dtype, device="cuda")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        grads = torch.autograd.grad(out, leaves + [rab_leaf], dout)
        torch.cuda.synchronize()
    names = {e.name for e in prof.events() if "hstu_bwd_kernel<" in e.name or "hstu_bwd_pds" in e.name}
    return grads, names


def _drab_vs_main(case, D, kernel_opts, want=None, deterministic=False, check=True, want_lsu=None, **opts):
    """The default's drab (the op's allocation uninitialized: written whole by the rab loops, or zeroed by the
    launcher before another kernel) meets the error rule against the fp32 reference where check, and equals
    kernel_options(fwd_sm80_cfg=15)'s (drab zeroed by the op, main's path) bit for bit, as dK and dV (dQ too where
    deterministic, else to the atomics' order), both backwards starting on NaN memory; want: the end of the name of
    the kernel the default runs (None: not checked). want_lsu: the one fwd_sm80_cfg=15 runs (the rab loop without
    its zeros), and kernel_options(fwd_sm80_cfg=12) (the same loop, its zeros by 16-byte stores) runs it too, with
    the same gradients."""
    dout = torch.randn_like(case["q"])
    got = {}
    for var in (0, DRAB_MAIN) + ((DRAB_LSU,) if want_lsu else ()):
        kernel_opts(sm90=False, bwd_sm80_split=False, fwd_sm80_cfg=var, **opts)
        if var == 0 and check:
            kg.check_case(case, 0.5, deterministic=deterministic)
        got[var], names = _grads_drab_poisoned(case, dout, case["rab"], deterministic)
        for name, g in zip(("dq", "dk", "dv", "drab"), got[var]):
            assert not torch.isnan(g).any(), (var, name)
        w = want if var == 0 or not want_lsu else want_lsu
        assert w is None or (len(names) == 1 and next(iter(names)).endswith(w)), (var, names, w)
    for var in (0, DRAB_LSU) if want_lsu else (0,):
        for i, (name, g, w) in enumerate(zip(("dq", "dk", "dv", "drab"), got[var], got[DRAB_MAIN])):
            if i == 0 and not deterministic:
                kg.assert_agree((name,), [g], [w], "drab written whole vs zeroed by the op")
            else:
                assert torch.equal(g, w), (var, name)


@pytest.mark.parametrize("mask,delta_q,seqused,deterministic", [
    ("causal", False, False, False), ("local_target", True, False, False), ("target_group", False, True, False),
    ("local", True, False, True), ("none", False, False, False)])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_drab_written_whole(D, mask, delta_q, seqused, deterministic, kernel_opts):
    """The rab loops (kPdsRabSmem) write every element of a per-head drab: each key block's CTA its walk's dS in
    whole 16-byte chunks (+0 past the sequence's keys), and the CTA of the paired block (gridDim.y - 1 - n) zeros in
    the block's other rows (above a causal diagonal, outside a local window, other target groups, past the sequence's
    queries and keys, padding up to max_seqlen_k; a key block past the sequence's keys or seqused: all its rows), in
    slices per tile of its own walk or at once (bulk copies of a zeroed shared row; fwd_sm80_cfg=12 16-byte stores).
    Jagged sequences of 0-704 keys (empty, one key, tile edges; rows of max_seqlen_k = 704) heads first; for causal
    also one of 2,208 keys batch first. Against the fp32 reference and fwd_sm80_cfg=15 (drab zeroed by the op) bit
    for bit, the default and fwd_sm80_cfg=12, from NaN memory."""
    rng = random.Random(zlib.crc32(repr(("drab_whole", D, mask)).encode()))
    lens = [[0, 1, 7, 63, 64, 65, 127, 128, 129, 704] + [rng.randint(0, 700) for _ in range(3)]]
    if mask == "causal" and D == 128:
        lens.append([2208, 1, 65, 0, 300])
    for lk in lens:
        case = kg.make_case(zlib.crc32(repr(("drab_whole", D, mask, len(lk))).encode()), lk, 2, D, torch.bfloat16,
                            mask, 2, delta_q=delta_q, seqused=seqused)
        assert case["max_seqlen_k"] % 8 == 0
        _drab_vs_main(case, D, kernel_opts, want=rab_kernel(D, case["max_seqlen_k"]), deterministic=deterministic,
                      want_lsu=rab_kernel(D, case["max_seqlen_k"], bulk=False))


@pytest.mark.parametrize("how", ["fp16", "contexts", "unaligned", "shared", "shared_deterministic", "d32", "cfg1"])
def test_sm80_backward_drab_zeroed_by_launcher(how, kernel_opts):
    """Where another kernel than the rab loops runs (fp16, contexts, rows of 701 keys, D = 32's old layouts,
    bwd_sm80_cfg=1's two-barrier kernel) the launcher zeroes the uninitialized drab first (a memset); a shared
    rab's drab comes whole from its fp32 sums (atomics, or per-head slices when deterministic). Each against the fp32
    reference and fwd_sm80_cfg=15 (drab zeroed by the op) bit for bit, from NaN memory."""
    D, dtype, mask, rab_heads, lk, opts = 128, torch.bfloat16, "causal", 2, [0, 1, 65, 129, 300, 704], {}
    if how == "fp16":
        dtype = torch.float16
    elif how == "contexts":
        mask = "context_target"
    elif how == "unaligned":
        D, lk = 64, [701, 64, 129, 0, 33]
    elif how.startswith("shared"):
        D, rab_heads = 256, 1
    elif how == "d32":
        D = 32
    elif how == "cfg1":
        opts = dict(bwd_sm80_cfg=1)
    case = kg.make_case(zlib.crc32(repr(("drab_launcher", how)).encode()), lk, 2, D, dtype, mask, rab_heads,
                        delta_q=how == "contexts")
    _drab_vs_main(case, D, kernel_opts, deterministic=how == "shared_deterministic", **opts)


DQ_CLAIM_CFG = 13  # kernel_options(fwd_sm80_cfg=13) (_ops.FWD_SM80_CFG_DQ_CLAIM, kFwdSm80CfgDqClaim)


@pytest.mark.parametrize("mask,rab_heads,delta_q,seqused,lens", [
    ("causal", 0, False, False, "jagged"), ("causal", 0, False, False, "long"), ("none", 0, True, True, "jagged"),
    ("local_target", 0, True, False, "jagged"), ("target_group", 0, False, True, "long"),
    ("causal", 1, False, False, "jagged"), ("context_target", 0, False, False, "jagged")])
@pytest.mark.parametrize("dt,D", [("bf16", 128), ("bf16", 256), ("fp16", 128), ("bf16", 64)])
def test_sm80_backward_dq_claims(dt, D, mask, rab_heads, delta_q, seqused, lens, kernel_opts):
    """kernel_options(fwd_sm80_cfg=13): the dQ workspace unzeroed (allocator poisoned with NaN), each warp's block of a
    dQ tile claimed (the first writer stores it, later ones add, blocks nobody wrote read as zeros) where those loops
    apply (bf16, D = 128 / 256, heads first: at most 2,048 keys, no rab or contexts, sm_90+; jagged 0-700 keys),
    elsewhere (2,200 keys: batch first; fp16, D = 64, rab, contexts) the launcher's zeroed workspace and the
    default's kernel: the error rule against the fp32 reference, the kernel that runs, dK / dV / drab bit for bit
    the default's, dQ agreeing up to the fp32 sum order."""
    dtype = torch.bfloat16 if dt == "bf16" else torch.float16
    lk = [300, 0, 1, 129, 128, 77, 64, 33, 700, 191] if lens == "jagged" else [2200, 300, 129, 0, 64]
    case = kg.make_case(zlib.crc32(repr(("dqclaim", D, mask, rab_heads, lens)).encode()), lk, 2, D, dtype, mask,
                        rab_heads, delta_q=delta_q, seqused=seqused)
    dout = torch.randn_like(case["q"])
    grads = {}
    for cfg in (0, DQ_CLAIM_CFG):
        kernel_opts(sm90=False, bwd_sm80_split=False, fwd_sm80_cfg=cfg)
        kg.check_case(case, 0.5)
        grads[cfg] = _grads(case, dout)
        assert not any(torch.isnan(x).any() for x in grads[cfg]), cfg
        names = _bwd_kernels(case)
        # (cfg 13 claims exactly where the default does with the split off: both run the default's kernel, with
        # kPdsDqClaim where default_claims says so)
        want = loop_kernel(D, 0, dtype, max_seqlen_k=case["max_seqlen_k"], claims=default_claims(case, dtype))
        if want is not None and "context" not in mask and rab_heads == 0:
            assert len(names) == 1 and next(iter(names)).endswith(want), (cfg, names, want)
    for i, (name, x, w) in enumerate(zip(("dq", "dk", "dv", "drab"), grads[DQ_CLAIM_CFG], grads[0])):
        if i == 0:
            kg.assert_agree((name,), [x], [w], "fwd_sm80_cfg=13 vs the default")
        else:
            assert torch.equal(x, w), name
