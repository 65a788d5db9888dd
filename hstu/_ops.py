"""HSTU attention ops in three layers (flash-attention FA3 interface style).

1. torch ops ``hstu_attn::fwd`` / ``hstu_attn::bwd``: schemas and CUDA kernels come from C++ (`_C.so`);
   here: the CPU kernels (the reference) and the fake/meta implementations (torch.compile, export,
   CUDA-graph capture). Without `_C.so` (source checkout) the schemas are defined here, identically.
2. `HstuAttnFunction`, the autograd.Function around them.
3. The public functions `hstu_attn_varlen_func` and `hstu_attn_qkvpacked_func`, which validate host values
   (shapes, dtypes, devices, scalars) in Python; the values inside the int32 tensors are checked on the device by
   the CUDA op (`_checks.py`), on the host for CPU tensors.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, List, Optional, Sequence, Tuple

import torch

from . import _device_check, _load
from ._checks import channel as _channel
from ._checks import check_values_host
from ._reference import MASK_CONVENTIONS, hstu_attn_reference, hstu_attn_reference_backward

try:
    from torch._subclasses.fake_tensor import is_fake as _is_fake
except ImportError:  # pragma: no cover
    def _is_fake(t):
        return False

__all__ = ["hstu_attn_varlen_func", "hstu_attn_qkvpacked_func", "HstuAttnFunction", "CUDA_HEAD_DIMS"]

# ----------------------------------------------------------------------------------------------------
# Layer 1: op registrations
# ----------------------------------------------------------------------------------------------------

# Keep identical to the C++ STABLE_TORCH_LIBRARY definitions in hstu/csrc.
FWD_SCHEMA = (
    "fwd(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
    "int max_seqlen_k, Tensor? num_contexts, Tensor? num_targets, int target_group_size, int window_left, "
    "int window_right, float alpha, Tensor? rab, float scaling_seqlen, Tensor? seqused_q, "
    "Tensor? seqused_k) -> Tensor"
)
BWD_SCHEMA = (
    "bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
    "int max_seqlen_q, int max_seqlen_k, Tensor? num_contexts, Tensor? num_targets, int target_group_size, "
    "int window_left, int window_right, float alpha, Tensor? rab, float scaling_seqlen, Tensor? seqused_q, "
    "Tensor? seqused_k, bool has_drab, bool deterministic) -> (Tensor, Tensor, Tensor, Tensor)"
)

# Private: the same ops with the kernels' comparison switches (`kernel_options`).
FWD_OPTIONS_SCHEMA = FWD_SCHEMA.replace("fwd(", "fwd_with_options(").replace(") -> Tensor", ", int options) -> Tensor")
BWD_OPTIONS_SCHEMA = BWD_SCHEMA.replace("bwd(", "bwd_with_options(").replace(
    "bool deterministic)", "bool deterministic, int options)")

CUDA_HEAD_DIMS = (32, 64, 128, 256)
CUDA_DTYPES = (torch.float16, torch.bfloat16)
CPU_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

_LIBRARY_LOADED = _load.load_library()
_libs = []  # keep torch.library.Library objects alive


def _has_op(name: str) -> bool:
    return hasattr(torch.ops.hstu_attn, name)


def _has_kernel(name: str, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"hstu_attn::{name}", key)


_SCHEMAS = {"fwd": FWD_SCHEMA, "bwd": BWD_SCHEMA, "fwd_with_options": FWD_OPTIONS_SCHEMA,
            "bwd_with_options": BWD_OPTIONS_SCHEMA}
if not all(_has_op(n) for n in _SCHEMAS):
    _def_lib = torch.library.Library("hstu_attn", "FRAGMENT")
    _libs.append(_def_lib)
    for _n, _schema in _SCHEMAS.items():
        if not _has_op(_n):
            _def_lib.define(_schema)


def _ref_kwargs(
    cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets, target_group_size,
    window_left, window_right, alpha, scaling_seqlen, seqused_q, seqused_k,
):
    return dict(
        cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
        max_seqlen_k=max_seqlen_k, num_contexts=num_contexts, num_targets=num_targets,
        target_group_size=target_group_size, window_size=(window_left, window_right), alpha=alpha,
        scaling_seqlen=scaling_seqlen, seqused_q=seqused_q, seqused_k=seqused_k,
    )


def _fwd_cpu(
    q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
    target_group_size, window_left, window_right, alpha, rab, scaling_seqlen, seqused_q, seqused_k,
    mask_convention="nvidia",
):
    kw = _ref_kwargs(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
                     target_group_size, window_left, window_right, alpha, scaling_seqlen, seqused_q, seqused_k)
    with torch.no_grad():
        return hstu_attn_reference(q, k, v, rab=rab, upcast=True, mask_convention=mask_convention,
                                   **kw).contiguous()


def _bwd_cpu(
    dout, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
    target_group_size, window_left, window_right, alpha, rab, scaling_seqlen, seqused_q, seqused_k,
    has_drab, deterministic, mask_convention="nvidia",
):
    kw = _ref_kwargs(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
                     target_group_size, window_left, window_right, alpha, scaling_seqlen, seqused_q, seqused_k)
    kw.pop("alpha")
    dq, dk, dv, drab = hstu_attn_reference_backward(dout, q, k, v, rab, has_drab and rab is not None,
                                                    alpha=alpha, mask_convention=mask_convention, **kw)
    if drab is None:
        drab = q.new_empty((0,))
    return dq.contiguous(), dk.contiguous(), dv.contiguous(), drab.contiguous()


def _fwd_fake(
    q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
    target_group_size, window_left, window_right, alpha, rab, scaling_seqlen, seqused_q, seqused_k,
):
    # out: (total_q, H, D), contiguous, q's dtype and device.
    return q.new_empty(q.shape)


def _bwd_fake(
    dout, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
    target_group_size, window_left, window_right, alpha, rab, scaling_seqlen, seqused_q, seqused_k,
    has_drab, deterministic,
):
    # dq/dk/dv: contiguous, shapes and dtypes of q/k/v. drab: rab's shape and dtype when has_drab,
    # else a (0,)-shaped tensor of q's dtype.
    drab = rab.new_empty(rab.shape) if (has_drab and rab is not None) else q.new_empty((0,))
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), drab


def _ignore_options(fn):
    def wrapped(*args):  # the fake has no kernel choice and no values: `options` (last) changes nothing
        return fn(*args[:-1])

    return wrapped


def _options_cpu(fn):
    def wrapped(*args):  # the CPU path has no kernel choice, but honours the semantic flags (FLAG_BITS) of `options`
        options = int(args[-1])
        if options & ~_KNOWN_OPTIONS:
            _err("options", f"bits of {_KNOWN_OPTIONS}", options)
        return fn(*args[:-1], mask_convention="meta_gr" if options & FLAG_BITS["mask_gr"] else "nvidia")

    return wrapped


for _name, _cpu, _fake in (("fwd", _fwd_cpu, _fwd_fake), ("bwd", _bwd_cpu, _bwd_fake),
                           ("fwd_with_options", _options_cpu(_fwd_cpu), _ignore_options(_fwd_fake)),
                           ("bwd_with_options", _options_cpu(_bwd_cpu), _ignore_options(_bwd_fake))):
    if not _has_kernel(_name, "CPU"):
        torch.library.register_kernel(f"hstu_attn::{_name}", "cpu", _cpu)
    if not _has_kernel(_name, "Meta"):
        torch.library.register_fake(f"hstu_attn::{_name}", _fake)

_FWD = torch.ops.hstu_attn.fwd.default
_BWD = torch.ops.hstu_attn.bwd.default
_FWD_OPTIONS = torch.ops.hstu_attn.fwd_with_options.default
_BWD_OPTIONS = torch.ops.hstu_attn.bwd_with_options.default


# Comparison switches of the CUDA kernels, packed as hstu/csrc/ops/hstu_plan.h HstuOptionBits (0: the product's
# choice). Tests and benchmarks reach them through `kernel_options`; no environment variable chooses a kernel.
OPTION_BITS = {
    "sm90": 1 << 0,            # cleared: the sm80-class kernels even where the Hopper ones apply
    "fwd_work_list": 1 << 1,   # cleared: Hopper forward (bf16 / fp16; FP8 with fp8_sched) in grid order, jagged too
    "fwd_persist": 1 << 2,     # cleared: Hopper forward (bf16 / fp16; FP8 with fp8_sched) D <= 128, CTA per query tile
    "bwd_work_list": 1 << 3,   # cleared: Hopper backward D = 256 in grid order for jagged batches too
    "dq_self_zero": 1 << 4,    # cleared: Hopper backward D = 64 / 128 with a zeroed dq workspace
    "dq_conv_behind": 1 << 5,  # cleared: Hopper backward D = 128 causal / local with a separate dq conversion
    "bwd_sm80_pair": 1 << 6,   # SET: sm80-class backward D = 256 by warp pairs instead of two column chunks (opt-in)
    "bwd_sm80_pair_2stage": 1 << 7,  # cleared: the warp-pair kernel with one Q / dO stage (the sm80 layout)
    "fp8_kernel": 1 << 10,     # cleared: FP8 forward calls dequantize + bf16/fp16 kernels where the FP8 one applies
    "fwd_trace": 1 << 19,      # SET: the paged Hopper forward's CTAs stamp their phases into a buffer (diagnostics)
    "fp8_bwd": 1 << 20,        # SET: FP8 backward calls must take the Hopper FP8 backward (NotImplementedError if not)
    "pdl": 1 << 21,            # SET: the paged Hopper forward and the cache append as programmatic dependent launches
    "fp8_sched": 1 << 22,      # SET: the Hopper FP8 forward with the work list / persistent CTAs (opt-in; else grid)
    "fp8_early_pack": 1 << 23,  # cleared: the Hopper FP8 forward converts P after the P V wait (bitwise the same)
    "fp8_bn192": 1 << 24,      # SET: the Hopper FP8 forward at D = 128 with 192-key tiles where they apply (at any
                               # length; the default takes them from 4,096 keys per sequence on average)
}
# bit 56 (above the semantic flags): kernel_options(fp8_bwd=False), FP8 backward calls dequantize and run the
# bf16/fp16 backward even where the Hopper FP8 backward applies (read by hstu/_fp8.py; hstu_ops.cc accepts it)
FP8_BWD_DEQUANT_BIT = 1 << 56
# bit 61 (hstu_plan.h kOptNoFwdSm80Qscale): kernel_options(fwd_sm80_qscale=False), the sm80-class forward's bf16 D = 64
# long-row default without its Q fragments scaled by alpha / 2 (the FMUL per score; for comparisons)
FWD_SM80_NO_QSCALE_BIT = 1 << 61
# bit 62 (hstu_plan.h kOptFwdSm80SplitMain): kernel_options(fwd_sm80_split_main=True), the sm80-class forward's split
# as it was (the least chunk rounded up, the list walked twice, Q loaded behind the mask's setup; for comparisons)
FWD_SM80_SPLIT_MAIN_BIT = 1 << 62
# bit 57 (hstu_plan.h kOptNoBwdSm80Split): kernel_options(bwd_sm80_split=False), the sm80-class backward never splits
# long key-block walks (by default its rule, hstu_bwd_sm80_walk_split.h bwd_split_default; for comparisons)
BWD_SM80_NO_SPLIT_BIT = 1 << 57
# bit 58 (hstu_plan.h kOptNoFwdSm80Ilv): kernel_options(fwd_sm80_interleave=False), the sm80-class forward's bf16 D = 64
# long-row default without its unmasked sub-tiles' work interleaved in 16-key groups (for comparisons)
FWD_SM80_NO_ILV_BIT = 1 << 58
# bits 46-47 (hstu_plan.h kOptFwdSm80Bm64Shift): kernel_options(fwd_sm80_bm64=n), the sm80-class forward's split at
# D = 64 / 128 in 64-row query tiles: 0 the rule (hstu_plan.h fwd_sm80_bm64_rule), 1 4 warps x 16 rows, 2 2 warps x
# 32 rows (D = 64; at D = 128 as 1), 3 never (the 128-row tiles; for comparisons)
FWD_SM80_BM64_SHIFT = 46
FWD_SM80_BM64S = (0, 1, 2, 3)
# bit 45 (hstu_plan.h kOptFwdSm80SplitPlain): kernel_options(fwd_sm80_split_plain=True), the sm80-class forward's
# split synchronized as main had it: its list and split kernels as plain launches (the default on sm_90+:
# programmatic dependent launches), a chunk's count behind full fences, the list kernel with its 64-bit work counter
# and divisions (for comparisons)
FWD_SM80_SPLIT_PLAIN_BIT = 1 << 45
# bit 40 (hstu_plan.h kOptFwdSm80RabEvict): kernel_options(fwd_sm80_rab_evict=True), the sm80-class forward's bf16 rab
# defaults with evict-first L2 policies on their rab copies (opt-in while it is measured)
FWD_SM80_RAB_EVICT_BIT = 1 << 40
BWD_GRID_SHIFT = 8  # bits 8-9: the Hopper D = 256 backward's grid order (0 auto, 1, 2)
# bits 11-18: the Hopper forward work list's split of long KV ranges (hstu_plan.h kOptFwdSplitShift): 0 the planner's
# rule, 255 no splits, 254 the one-wave rule, n in 1-253 chunks of at most n KV tiles
FWD_SPLIT_SHIFT = 11
# bits 25-28: the sm80-class backward's comparison cfgs (hstu_bwd_sm80_kernel.cuh): 0 the default, 1 (D = 64 / 128,
# sm_90+) the two-barrier kernels, 2 (bf16, D = 64) the one-barrier loop with the Q / dO copies together, 4 / 5 the
# default's one / two Q / dO stage kernels (bf16), BWD_SM80_CFG_OLD the layouts that were the default before; 3 the
# default kernels in the other grid order; 6 (bf16, D = 256, sm_90+) the default's one-barrier loop without the lean
# Q / dO copies; 7 (bf16, sm_90+, heads first) the other order of the grid's last sequences (the default: key blocks
# first at D = 64 / 256); 9 (bf16, sm_90+) the default's loop with dK / dV stored in fragment order; 10 (bf16, D = 64 /
# 128, sm_90+) the default's loop without P / dS by stmatrix and the Q / dO copies from pointers (main's loop before
# them), 11 without the pointer copies, 12 without stmatrix; 13 (bf16, D = 64, sm_90+) the default's loop without its
# running pointers for the Q / dO copies and dQ's block and its lane offsets formed once per key block, 14 without the
# lane offsets once; 15 (bf16, D = 64, sm_90+) the three-stage loop instead of the default's 128-query tiles
BWD_SM80_CFG_SHIFT = 25
BWD_SM80_CFG_OLD = 8
BWD_SM80_CFG_LAST = 15  # kBwdSm80LastCfg
BWD_SM80_CFGS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
# bits 29-31 and bit 41 (hstu_plan.h kOptFwdSm80CfgHi: the value's bit 3): the sm80-class forward's comparison cfg:
# 0 the default, issue 39's candidates (bf16; FWD_SM80_CFGS), FWD_SM80_CFG_OLD, FWD_SM80_CFG_SPLIT,
# FWD_SM80_CFG_RAB_MAIN, FWD_SM80_CFG_RAB_LOAD_MAIN, FWD_SM80_CFG_RAB_TILE64, FWD_SM80_CFG_RAB_COPY_MAIN,
# FWD_SM80_CFG_DRAB_LSU, FWD_SM80_CFG_DQ_CLAIM, FWD_SM80_CFG_DRAB_MAIN
FWD_SM80_CFG_SHIFT = 29
FWD_SM80_CFG_HI_BIT = 1 << 41
FWD_SM80_CFGS = (1, 2, 3, 4, 5)
FWD_SM80_CFG_OLD = 6  # the default tiles whatever the shape (kFwdSm80CfgOld)
FWD_SM80_CFG_SPLIT = 7  # the bf16 default tile with the split of long KV ranges (kFwdSm80CfgSplit)
FWD_SM80_CFG_RAB_MAIN = 8  # the bf16 defaults with rab as main had them (kFwdSm80CfgRabMain)
FWD_SM80_CFG_RAB_LOAD_MAIN = 9  # the bf16 D = 64 / 128 defaults with rab as main40 had them (kFwdSm80CfgRabLoadMain)
FWD_SM80_CFG_RAB_TILE64 = 10  # the bf16 D = 64 default with rab in 64-key tiles, the block's rab tile per KV tile
FWD_SM80_CFG_RAB_COPY_MAIN = 11  # the bf16 D = 128 / 256 defaults with rab copying every rab tile with predicates
FWD_SM80_CFG_DRAB_LSU = 12  # the rab loops' drab zeros by 16-byte stores, not bulk copies (kFwdSm80CfgDrabLsu)
FWD_SM80_CFG_DRAB_MAIN = 15  # the sm80-class backward's drab zeroed by the op as main had it (kFwdSm80CfgDrabMain)
FWD_SM80_CFG_DQ_CLAIM = 13  # the sm80-class backward's dQ workspace unzeroed, its blocks claimed (kFwdSm80CfgDqClaim)
FWD_SM80_CFG_BWD_SPLIT = 14  # the sm80-class backward's split of long key-block walks (kFwdSm80CfgBwdSplit)
FWD_SM80_LONG_ROWS = 512  # bf16 mean query rows per sequence from which the default runs candidate 2 (D64: 3; D128: 3
# where two of its blocks fit per SM; D256: 3 at every row count where its 105 KB per block fit, not sm86 / sm89)
# Semantic flags in the same int64, from bit 32 (hstu_plan.h HstuFlagBits): what the call computes, so the CPU path
# honours them too. Set from the public functions' arguments, never by kernel_options.
FLAG_BITS = {
    "mask_gr": 1 << 32,  # mask_convention="meta_gr" (HstuParams::mask_gr)
}
# bits 48-49 (above the flags; hstu_plan.h kOptFp8FwdDiagShift): the Hopper FP8 forward's timing-only variants
# (private, WRONG outputs; kFp8FwdDiag* in hstu/csrc/sm90/hstu_fwd_fp8_sm90_kernel.cuh)
FP8_FWD_DIAG_SHIFT = 48
# bits 50-51 (hstu_plan.h kOptFp8SiluShift): the Hopper FP8 forward's SiLU form on unmasked tiles: 0 the default,
# 1 the tanh form, 2 half of the scores in half2 arithmetic (the default at D <= 128)
FP8_SILU_SHIFT = 50
# bits 52-55 (hstu_plan.h kOptFp8FwdVarShift): the Hopper FP8 forward's variants (Fp8FwdVar in
# hstu/csrc/sm90/hstu_fwd_fp8_sm90_kernel.cuh; private): 0 the default, then the values it knows
FP8_FWD_VAR_SHIFT = 52
FP8_FWD_VARS = (0, 1, 2, 3, 4, 15)
_KNOWN_OPTIONS = (sum(OPTION_BITS.values()) | (3 << BWD_GRID_SHIFT) | (255 << FWD_SPLIT_SHIFT)
                  | (15 << BWD_SM80_CFG_SHIFT) | (7 << FWD_SM80_CFG_SHIFT) | FWD_SM80_CFG_HI_BIT
                  | sum(FLAG_BITS.values())
                  | (3 << FP8_FWD_DIAG_SHIFT) | (3 << FP8_SILU_SHIFT)
                  | (15 << FP8_FWD_VAR_SHIFT) | FWD_SM80_NO_QSCALE_BIT | FWD_SM80_SPLIT_MAIN_BIT | FWD_SM80_NO_ILV_BIT
                  | (3 << FWD_SM80_BM64_SHIFT) | FWD_SM80_SPLIT_PLAIN_BIT | BWD_SM80_NO_SPLIT_BIT
                  | FWD_SM80_RAB_EVICT_BIT)
_options_state = threading.local()


def _current_options() -> int:
    return getattr(_options_state, "bits", 0)


@contextlib.contextmanager
def kernel_options(*, sm90: bool = True, fwd_work_list: bool = True, fwd_persist: bool = True,
                   bwd_work_list: bool = True, dq_self_zero: bool = True, dq_conv_behind: bool = True,
                   bwd_grid: int = 0, bwd_sm80_pair: bool = False, bwd_sm80_pair_2stage: bool = True,
                   fp8_kernel: bool = True, fwd_split_tiles: Optional[int] = None,
                   bwd_sm80_cfg: int = 0, pdl: bool = False, fp8_sched: bool = False,
                   fp8_early_pack: bool = True, fp8_bn192: bool = False,
                   fwd_sm80_cfg: int = 0, fwd_trace: bool = False, fp8_bwd: Optional[bool] = None,
                   fp8_fwd_diag: int = 0, fp8_silu: int = 0, fp8_fwd_var: int = 0,
                   fwd_sm80_qscale: bool = True, fwd_sm80_split_main: bool = False,
                   fwd_sm80_interleave: bool = True, fwd_sm80_bm64: int = 0,
                   fwd_sm80_split_plain: bool = False, bwd_sm80_split: bool = True,
                   fwd_sm80_rab_evict: bool = False) -> Iterator[None]:
    """Runs the calls made inside (in this thread) with other CUDA kernel choices, for comparisons.

    Every switch defaults to the library's own choice; ``sm90=False`` runs the portable sm80-class kernels on a
    Hopper GPU, the others select the Hopper kernels' variants (see OPTION_BITS). ``bwd_grid``: the D = 256 Hopper
    backward's grid order, 0 automatic, 1 (key block, head, batch), 2 (head, key block, batch).
    ``bwd_sm80_pair=True``: the sm80-class D = 256 backward by warp pairs splitting D (instead of the default, FA2's
    warp layout); ``bwd_sm80_pair_2stage=False``: the warp-pair kernel single-buffered, as it runs on an A100.
    ``fp8_kernel=False``: FP8 forward calls dequantize q/k/v and run the bf16/fp16 kernels even
    where the Hopper FP8 (e4m3 wgmma) kernel applies (see hstu/_fp8.py). ``fp8_sched=True``: that kernel with the
    bf16 forward's schedules (the jagged work list, persistent CTAs at D <= 128; ``fwd_work_list`` / ``fwd_persist``
    switch them) instead of the grid order, its default (the schedules lost to it on the H200); ``fp8_early_pack=
    False``: that kernel converts P to e4m3 after the P V wgmma's wait, the order before issue 36's fp8fast, with
    the tanh SiLU (bitwise the output of ``fp8_silu=1``; for comparisons); ``fp8_bn192=True``: that kernel at
    D = 128 with KV tiles of 192 keys (FA3's FP8 forward runs 224) where they apply: grid order, descale modes
    other than "block", at any length (the default takes them for batches of at least 4,096 keys per sequence on
    average; the sum over keys runs in another order, so the output differs in the last bits). ``fp8_bwd``: the
    backward of FP8 calls. None (the default): on Hopper, where it applies (D = 64, 128 or 256, no rab,
    ``deterministic=False``, ``sm90=True``, a build with its unit), the FP8 backward
    (`hstu_attn._fp8_bwd.fp8_bwd_prepass`, then the e4m3 kernel: on an H200 1.16x / 1.58x the dequantized path at
    B16 S16K / S4K D128), elsewhere dequantize q/k/v and run the bf16/fp16 backward; True: the FP8 backward or
    NotImplementedError saying why not; False: always the dequantized path (for comparisons; docs/hstu_attn.md,
    "The Hopper FP8 backward").
    ``fp8_fwd_diag`` (private, timing-only: WRONG outputs; tools/hstu_dev/fp8_fwd_split.py; built only with
    ``--define hstu_dev=1``, a product build refuses it): the Hopper FP8 forward in grid order with costs of P
    removed on unmasked tiles, 1 its MUFU (tanh), 2 its e4m3 conversions, 3 both.
    ``fp8_silu`` (for comparisons): the SiLU form of the Hopper FP8 forward's unmasked tiles. 0 the default: at
    D <= 128 half of each thread's scores (3 / 8 on 192-key tiles) by a degree-5 polynomial in half2 arithmetic
    (no MUFU op; fp16, P is rounded to e4m3 anyway), the others by tanh.approx, so that the FMA and MUFU pipes
    share the SiLU; at D = 256 tanh.approx for all (the MUFU is not its bound). 1 tanh.approx for all, 2 the
    half2 mix (the default at D <= 128); a value other than the head dim's default runs the grid order.
    ``fp8_fwd_var`` (private): 1 (for comparisons; bitwise the default's output) the Hopper FP8 forward's default
    kernel (D = 128: the 192-key tiles; D = 256: the 64-key grid kernel) with its KV loop as it was (the
    unmasked-tile test from the mask fields per tile, the pipeline stages by divisions); 2 (for comparisons;
    bitwise the default's output) the default's grid kernels with P's register copy where it was, between the P V
    wait and the next turn (the default: after the turn's S issue); 3 (the same) D = 128's 192-key tiles with
    their unmasked-tile test from each tile's bounds (their default: the test by the loop index), elsewhere the
    default; 4 (the same) the default kernels behind the former Vt pre-pass (256 threads per 64 columns, each V load
    waited for before the next; the default: 128 threads, all loads first); 15
    (timing-only: WRONG output rows) that default kernel writing clock stamps of its first CTA's loop over that
    CTA's output rows (tools/hstu_dev/fp8_fwd_split.py --trace; dev builds only, like ``fp8_fwd_diag``); elsewhere
    the default runs.
    ``fwd_sm80_qscale=False`` (for comparisons): the sm80-class forward's bf16 D = 64 long-row default without its Q
    fragments scaled by alpha / 2 where that is a power of two (the same output; one FMUL per score more); with
    contexts the context kernel whose tiles without context rows take neither the scaling nor the interleaved groups
    (as ``fwd_sm80_interleave=False`` there).
    ``fwd_sm80_split_main=True`` (for comparisons): the sm80-class forward's split as it was: its least chunk
    rounded up, its list kernel walking the sequences a second time to place the work items (instead of the first
    walk's tiles kept in shared memory), its kernel loading Q behind the mask's setup.
    ``fwd_sm80_interleave=False`` (for comparisons): the sm80-class forward's bf16 D = 64 long-row default (Q scaled)
    without its unmasked sub-tiles' work interleaved in 16-key groups (the same output bit for bit); with contexts
    the context kernel whose tiles without context rows run the plain Q-in-registers body, unscaled (the default
    with contexts before; the default runs them with Q scaled and the interleaved groups).
    ``fwd_sm80_bm64`` (private, for comparisons): the sm80-class forward's split (bf16, D = 64 / 128) in 64 x 64
    tiles instead of 128-row ones (fewer KV steps on batches of short sequences): 1 of 4 warps x 16 rows, 2 of 2
    warps x 32 rows (at D = 64; at D = 128 as 1), 3 never (the 128-row tiles); 0 (the default) the rule (2 at
    D = 64, 1 at D = 128 where the split's mean work per block slot is small: hstu_plan.h fwd_sm80_bm64_rule).
    ``fwd_sm80_split_plain=True`` (for comparisons): the sm80-class forward's split synchronized as main has it: its
    list kernel and split kernel as plain launches (the default on sm_90+ launches both as programmatic dependent
    launches, each waiting in-kernel for the kernel before it), a chunk's count behind two full fences and its
    first partial's base loaded there (the default: an acquire-release count, the base loaded in the prologue), and
    the list kernel as it was (a 64-bit shared work counter, 64-bit divisions, one atomic per chunk placed); the
    same output bit for bit.
    ``fwd_sm80_rab_evict=True`` (opt-in while it is measured): the sm80-class forward's bf16 defaults with rab (D = 64
    / 128 / 256, sm_90+ code) copy the rab tiles inside the sequence with an L2 evict-first policy (rab is read once,
    K / V by every query tile of their sequence); the same output bit for bit.
    ``fwd_split_tiles``:
    how the Hopper forward's work list splits a query tile's long KV range into chunks summed afterwards (few
    queries over long keys, e.g. a cached inference step): None the planner's rule (120 % of the average work per
    SM, chunks of at least 4 KV tiles), 0 no split, ``"wave"`` the smallest cap whose list fits the SMs at once
    (every chunk running together; batches of at most 1024 query tiles, else the rule), n in 1..253 chunks of at
    most n KV tiles. The sm80-class forward's split (``fwd_sm80_cfg=7``) reads it too: None its rule (chunks of the
    mean work per block slot of the real KV walks, counted on the device, at least 4 KV tiles; none where the query
    tiles fill about four waves or more), 0 no split, n chunks of at most n KV tiles ("wave": the rule).
    ``bwd_sm80_cfg``: the sm80-class backward's kernel at D = 64 / 128 / 256, for comparisons. 0 (the default):
    FlashAttention-2's warp layout with P and dS through shared memory (hstu/csrc/sm80/hstu_bwd_sm80_pds_kernel.cuh), 8
    warps, two Q / dO stages where they fit (Hopper), else one (A100), else the old layouts (sm86 / sm89); bf16 and
    fp16; at D = 64 with D = 128's 64 x 128 tile, on sm_90+ only; at D = 64 / 128 on sm_90+ for calls without contexts
    with three Q / dO stages and one block barrier per tile pair (at D = 64 the next tile's Q and dO copies issued
    apart); at D = 256 on sm_90+ for calls without contexts with one block barrier per tile pair and two Q / dO stages
    whose copies complete on an mbarrier per stage, two P / dS buffers (224 KB); where these run heads first at D = 64 /
    256, the grid's last sequences (about one wave of CTAs) take their key blocks first; these loops store dK / dV
    through shared memory (whole rows). 1: those calls with the two-barrier kernels instead. 2 (bf16, D = 64, sm_90+, no
    contexts): the one-barrier loop with the copies together. 3 (no contexts; D = 64 / 128 / 256 on sm_90+, elsewhere D
    = 256 with two stages): the default kernels in the other grid order (the default: heads first for sequences of at
    most 2,048 keys, at D = 256 where its kernels fit; else batch first). 4 / 5 (bf16): the default's one / two stage
    kernel where it fits (two barriers). 6 (bf16, D = 256, sm_90+, no contexts): the default's one-barrier loop without
    the lean Q / dO copies and full-tile intervals (D = 128's, which the default takes there too). 7 (bf16, sm_90+, no
    contexts, where the default runs heads first): the default's loop with the grid's last sequences in the other order
    (D = 64 / 256 heads first, D = 128 key blocks first). 8 (``BWD_SM80_CFG_OLD``): the layouts that were the default
    before (``BwdSm80Config``'s tiles; D = 256 two column chunks). 9 (bf16, sm_90+, no contexts): the default's loop
    with dK / dV stored in fragment order (4 bytes a thread and store) instead of through shared memory (whole rows, 16
    bytes a thread). The one-barrier loops at D = 64 / 128 store P and dS by stmatrix and copy the next Q / dO tile
    from pointers formed once per key block; 10 (bf16, D = 64 / 128, sm_90+, no contexts): the loop without both
    (4-byte P / dS stores, the copies' pointers formed per tile), 11 without the pointer copies, 12 without stmatrix.
    At D = 64 the loop keeps running pointers for the Q / dO copies and dQ's block and forms the phases' lane offsets
    once per key block (cfgs 10 / 11 / 12 there without them too); 13 (bf16, D = 64, sm_90+, no contexts): the
    loop without both (the loop before them); 14: without the lane offsets once. At D = 128 the loop runs dQ first
    on warps 4-7 and forms the phases' lane offsets once per key block; 14 (bf16, D = 128, sm_90+, no contexts): the
    loop before (the fixed phase order, the offsets per tile; cfgs 10 / 11 / 12 there are variants of it), 13: that
    loop with the lane offsets once. With contexts the D = 64 default
    skips the masked second half of the last context tile before the context gap; 13 (bf16, D = 64, sm_90+, with
    contexts): that loop walking the tile in full (the same gradients bit for bit). At D = 256 the one-barrier loop
    splits S and dP over the head dim across warp pairs (partial sums exchanged through shared memory); 13 (bf16,
    D = 256, sm_90+, no contexts): the loop without the split (the loop before it; not bitwise the default's). At
    D = 64 on sm_90+ (no contexts) the default itself takes 128-query tiles against the 128-key block (phase 1 on
    two 64-row halves, dQ in 32 x 32 warp tiles: fewer ldmatrix and block barriers per query row) on two Q / dO
    stages completing on mbarriers (224
    KB), bf16 and fp16, either grid order; 15 (bf16, D = 64, sm_90+, no contexts): the three-stage loop instead (the
    default before; cfgs 2, 7, 9-14 at D = 64 are variants of it). Where a cfg does not
    apply (fp16, other head dims, a GPU without its shared memory) the default runs. Measured on an H200:
    docs/hstu_kernel_notes.md.
    ``fwd_sm80_cfg``: the sm80-class forward's tiles (issue 39's candidates, bf16; fp16, D = 32 and a head dim
    without the candidate run the default, 0): 1 FA2's warp layout (4 warps x 32 rows; 128 x 64 tiles, D = 64
    128 x 128) with K / V double-buffered at D = 64 / 128, at D = 256 warp pairs (two warps share 32 rows: each
    computes S for half of the keys and O for half of D, P handed over through shared memory; 64 x 64 tiles, 105
    KB per block: where it fits, not sm86 / sm89); 2 FA2's tiles with one K / V stage (D = 256: 64 x 64, 4 warps);
    3 (D = 64) 1's tile with the warps' Q fragments in registers (loaded once per block), (D = 128) 1's tile in
    32-key sub-tiles with Q in registers (98 KB per block), (D = 256) 1 with the longest-first grid's chunks of at most
    32 sequences where a sequence has at most 4 query tiles (the bf16 defaults at D = 64 / 128; D = 128 where two
    blocks fit per SM, the default there with Q's copy issued before the mask's setup, ``hstu_fwd_qreg_qearly_kernel``,
    the same output; 3 itself without that, for comparisons); 1 at D = 256 is the default's pairs without their fragments loaded two MMA steps ahead
    (for comparisons);
    4 the default's tile (D = 256: 1's) where a warp skips the cut sub-tiles whose keys none of its rows sees and
    takes the unmasked path on its own fully visible ones, in query tiles with context rows only: what the default
    runs for calls with contexts where it would run 2 (D = 128 where two of 3's blocks do not fit per SM) / 1 (D =
    256); 5 (D = 64 / 128) 3's tile where the query tiles with context rows run 4's warp skip (Q from shared memory)
    and the others 3's body, one KV tile per step: the default for calls with contexts at D = 64 and at D = 128
    where two of its blocks fit per SM (else 4) runs 5's tile with query tile 0's KV tiles that only its context rows
    see two per step (at D = 64 the other tiles in the default's Q-scaled interleaved body where alpha / 2 is a power
    of two); at D = 256 the default for calls with contexts is 4 with the tiles without context rows in the
    default's body (fragments two MMA steps ahead; 4 itself: the plain pairs' body there); 5 at D = 256: 3 with Q's
    copy issued before the mask's setup, at every row count
    (``FwdSm80QregCtx``; ``FwdSm80Candidate`` in
    hstu/csrc/sm80/hstu_fwd_sm80_kernel.cuh; other tile shapes and loads measured slower or no faster and were
    removed).
    Those kernels (over 128 registers per thread) walk their query tiles longest first over chunks of sequences
    (the grid order; same outputs). 0 (the default) runs for bf16 at D = 256 5 with its ldmatrix addresses formed
    as a base plus immediates and its fragments loaded two MMA steps ahead (the same output as 3 and 5) at every row
    count where it fits (on an H200: 1.13x candidate 2 at B16 S4K, 1.21x FA2; 1.23x the old tiles at B256 S256),
    else candidate 2 (D = 64: 3, 1.06-1.08x 1 at S8K; D = 128: 3 where two of its blocks fit per SM, 1.025-1.035x 2
    at S16K / S4K) for bf16 calls whose mean
    query rows per sequence (``q.shape[0] / batch``) reach ``FWD_SM80_LONG_ROWS`` = 512 (on an H200: 1.13x the old tiles
    at B256 S512 D128, 1.19x at B128 S1K, 1.31x at S4K, 1.26x at S16K, 1.10x at D = 256 S4K, 1.34x at D = 64 S8K), else
    the old tiles; 6 (``FWD_SM80_CFG_OLD``) the old tiles whatever the shape, for comparisons; 7
    (``FWD_SM80_CFG_SPLIT``) the bf16 long-row tile (D = 256 1, 128 2, 64 1) with the split of long KV ranges
    (hstu/csrc/sm80/hstu_fwd_sm80_split.h): where the query tiles fill less than about four waves, each long KV walk in
    chunks (``fwd_split_tiles``: at most n KV tiles; 0 never), one block each from a work list built on the device
    (heaviest chunk first), their fp32 partials summed in chunk order (deterministic). The default takes the split too
    (bf16). 8 (``FWD_SM80_CFG_RAB_MAIN``; private, the same outputs): the forward's and backward's defaults with rab
    as main had them (each rab element loaded from global memory after the S MMAs, the backward's per-head drab
    stored per element) instead of the rab tiles copied into shared memory (the forward's with K / V, the backward's
    into each tile's P buffer, its drab in 16-byte row chunks). 9 (``FWD_SM80_CFG_RAB_LOAD_MAIN``; private, the same
    outputs): the forward's D = 64 / 128 defaults with rab forming their addresses as main40 had them (D = 64 the
    lane parts of the fragment and rab addresses per sub-tile, D = 128 an LDS per rab pair) instead of once per block
    (D = 64) and by ldmatrix (D = 128).
    10 (``FWD_SM80_CFG_RAB_TILE64``; private, the same outputs to the fp32 sum order): the forward's D = 64 default
    with rab in 128 x 64 tiles, the block's rab tile copied per KV tile, instead of 128 x 128 tiles with each warp
    copying its own rab rows per 64-key sub-tile (where two of those blocks fit per SM: the H100 / H200 class).
    11 (``FWD_SM80_CFG_RAB_COPY_MAIN``; private, the same outputs): the forward's D = 128 / 256 defaults with rab
    copying every rab tile with per-row predicates instead of those inside the sequence without.
    15 (``FWD_SM80_CFG_DRAB_MAIN``; private, the same outputs): the forward's default; the sm80-class backward's
    per-head drab zeroed by the op before the kernel (as main had it) instead of written whole by the rab loops (zeros
    where their walk stores no gradient) or zeroed by the launcher before the other kernels. 12
    (``FWD_SM80_CFG_DRAB_LSU``; private, the same outputs): the forward's default; the rab loops store those zeros
    by 16-byte stores from each lane instead of bulk copies of a zeroed shared row (the TMA unit).
    13 (``FWD_SM80_CFG_DQ_CLAIM``; private; dQ in another fp32 sum order): the forward's default; the sm80-class
    backward's fp32 dQ workspace not zeroed by the op: bf16 D = 128 / 256 calls without rab or contexts whose grid
    runs heads first (at most 2,048 keys) on an sm_90-class GPU run the default's loop with each warp's block of a
    dQ tile claimed (the first writer stores it, later ones add; blocks nobody wrote read as zeros), elsewhere the
    launcher zeroes it. The default itself claims (those calls, where the split does not run: the fill is 10 % of a
    B256 S256 D256 backward, 4 % at B128 S1K D128); 15 runs it with the fill.
    14 (``FWD_SM80_CFG_BWD_SPLIT``; bf16, D = 64 / 128 / 256 on sm_90-class devices, no rab): the forward's
    default; the sm80-class backward's split wherever it applies: a work list built on the device, each key block's
    walk over the query tiles cut into chunks of at most L tiles (L: a CTA slot's mean share of the call's walks, at
    least 4; ``fwd_split_tiles=n`` forces n) whose fp32 dK / dV partials the last chunk sums in chunk order (same
    outputs up to the fp32 sum order of dK / dV). By default the split runs where its rule says so (few key blocks x
    heads for the SMs and a long longest sequence: jagged batches of a few long sequences; hstu_bwd_sm80_walk_split.h
    bwd_split_default); ``bwd_sm80_split=False``: never.
    ``pdl=True``: the paged Hopper forward (``hstu_attn_paged_func``, the cached inference step) and the cache's
    append kernel are launched as programmatic dependent launches, their CTAs starting under the previous kernel and
    waiting for it in-kernel (same results bit for bit; docs/hstu_inference.md); so is the device validation of a
    paged call or step plan. The serving step (`cached_hstu_attention`) does this by default on Hopper
    (``KVCacheManager(pdl=True)``); elsewhere it is opt-in. A call records its options in the forward, so its
    backward runs under the same ones.
    ``fwd_trace=True`` (diagnostics): the paged Hopper forward's work-list CTAs write ``%globaltimer`` at their
    phases into a device buffer that ``paged_fwd_trace()`` returns (hstu/_paged.py; the same output, a little
    slower).

    Example:
        >>> with hstu_attn._ops.kernel_options(sm90=False):
        ...     out = hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, 128, 128)  # doctest: +SKIP
    """
    if bwd_grid not in (0, 1, 2):
        _err("bwd_grid", "0, 1 or 2", bwd_grid)
    if fwd_split_tiles not in (None, "wave") and (isinstance(fwd_split_tiles, bool) or not isinstance(
            fwd_split_tiles, int) or not 0 <= fwd_split_tiles <= 253):
        _err("fwd_split_tiles", "None, 'wave' or an int in [0, 253]", fwd_split_tiles)
    split = {None: 0, 0: 255, "wave": 254}.get(fwd_split_tiles, fwd_split_tiles)
    if isinstance(bwd_sm80_cfg, bool) or not isinstance(bwd_sm80_cfg, int) or bwd_sm80_cfg not in BWD_SM80_CFGS:
        _err("bwd_sm80_cfg", f"one of {BWD_SM80_CFGS}", bwd_sm80_cfg)
    fwd_cfgs = (0,) + FWD_SM80_CFGS + (FWD_SM80_CFG_OLD, FWD_SM80_CFG_SPLIT, FWD_SM80_CFG_RAB_MAIN,
                                      FWD_SM80_CFG_RAB_LOAD_MAIN, FWD_SM80_CFG_RAB_TILE64, FWD_SM80_CFG_RAB_COPY_MAIN,
                                      FWD_SM80_CFG_DRAB_LSU, FWD_SM80_CFG_DQ_CLAIM, FWD_SM80_CFG_BWD_SPLIT,
                                      FWD_SM80_CFG_DRAB_MAIN)
    if isinstance(fwd_sm80_cfg, bool) or not isinstance(fwd_sm80_cfg, int) or fwd_sm80_cfg not in fwd_cfgs:
        _err("fwd_sm80_cfg", f"one of {fwd_cfgs}", fwd_sm80_cfg)
    if isinstance(fp8_fwd_diag, bool) or fp8_fwd_diag not in (0, 1, 2, 3):
        _err("fp8_fwd_diag", "0, 1, 2 or 3", fp8_fwd_diag)
    if isinstance(fp8_silu, bool) or fp8_silu not in (0, 1, 2):
        _err("fp8_silu", "0, 1 or 2", fp8_silu)
    if not any(fp8_bwd is v for v in (None, True, False)):
        _err("fp8_bwd", "None, True or False", fp8_bwd)
    if isinstance(fp8_fwd_var, bool) or fp8_fwd_var not in FP8_FWD_VARS:
        _err("fp8_fwd_var", f"one of {FP8_FWD_VARS}", fp8_fwd_var)
    bits = ((bwd_grid << BWD_GRID_SHIFT) | (split << FWD_SPLIT_SHIFT) | (bwd_sm80_cfg << BWD_SM80_CFG_SHIFT)
            | ((fwd_sm80_cfg & 7) << FWD_SM80_CFG_SHIFT) | (FWD_SM80_CFG_HI_BIT if fwd_sm80_cfg & 8 else 0)
            | (fp8_fwd_diag << FP8_FWD_DIAG_SHIFT)
            | (fp8_silu << FP8_SILU_SHIFT) | (fp8_fwd_var << FP8_FWD_VAR_SHIFT))
    # (the sm80-class forward's private switches: strict booleans, each setting its bit away from its default)
    for name, value, default, bit in (("fwd_sm80_qscale", fwd_sm80_qscale, True, FWD_SM80_NO_QSCALE_BIT),
                                      ("fwd_sm80_split_main", fwd_sm80_split_main, False, FWD_SM80_SPLIT_MAIN_BIT),
                                      ("fwd_sm80_interleave", fwd_sm80_interleave, True, FWD_SM80_NO_ILV_BIT),
                                      ("fwd_sm80_split_plain", fwd_sm80_split_plain, False,
                                       FWD_SM80_SPLIT_PLAIN_BIT),
                                      ("bwd_sm80_split", bwd_sm80_split, True, BWD_SM80_NO_SPLIT_BIT),
                                      ("fwd_sm80_rab_evict", fwd_sm80_rab_evict, False, FWD_SM80_RAB_EVICT_BIT)):
        if value is not True and value is not False:
            _err(name, "True or False", value)
        if value is not default:
            bits |= bit
    if isinstance(fwd_sm80_bm64, bool) or fwd_sm80_bm64 not in FWD_SM80_BM64S:
        _err("fwd_sm80_bm64", f"one of {FWD_SM80_BM64S}", fwd_sm80_bm64)
    bits |= fwd_sm80_bm64 << FWD_SM80_BM64_SHIFT
    for name, on in (("sm90", sm90), ("fwd_work_list", fwd_work_list), ("fwd_persist", fwd_persist),
                     ("bwd_work_list", bwd_work_list), ("dq_self_zero", dq_self_zero),
                     ("dq_conv_behind", dq_conv_behind), ("bwd_sm80_pair", not bwd_sm80_pair),
                     ("bwd_sm80_pair_2stage", bwd_sm80_pair_2stage), ("fp8_kernel", fp8_kernel),
                     ("pdl", not pdl), ("fp8_sched", not fp8_sched), ("fp8_early_pack", fp8_early_pack),
                     ("fp8_bn192", not fp8_bn192), ("fwd_trace", not fwd_trace), ("fp8_bwd", fp8_bwd is not True)):
        if not on:  # (bwd_sm80_pair's, pdl's, fp8_sched's, fp8_bn192's, fp8_bwd's bits are set when on: opt-in)
            bits |= OPTION_BITS[name]
    if fp8_bwd is False:
        bits |= FP8_BWD_DEQUANT_BIT
    old = _current_options()
    _options_state.bits = bits
    try:
        yield
    finally:
        _options_state.bits = old


@contextlib.contextmanager
def _more_option_bits(bits: int) -> Iterator[None]:
    """The calls made inside (in this thread) run with `bits` set besides the current `kernel_options` (a library
    default switched on by its caller, e.g. the serving step's programmatic launches, `KVCacheManager(pdl=)`)."""
    old = _current_options()
    _options_state.bits = old | bits
    try:
        yield
    finally:
        _options_state.bits = old


# ----------------------------------------------------------------------------------------------------
# Layer 2: autograd
# ----------------------------------------------------------------------------------------------------


class HstuAttnFunction(torch.autograd.Function):
    """autograd.Function over ``hstu_attn::fwd`` / ``hstu_attn::bwd``; inputs already validated.

    Called as ``apply(slots, params, *tensors)``: ``tensors`` are the distinct tensors among
    (q, k, v, rab, cu_seqlens_q, cu_seqlens_k, num_contexts, num_targets, seqused_q, seqused_k) and
    ``slots`` maps each of those ten to its index in ``tensors`` (-1 for None). Passing each tensor once
    keeps torch.compile able to trace the common self-attention call (the same cu_seqlens for q and
    k, or q = k = v); gradients of a tensor used in several slots are summed.
    ``params`` = (max_seqlen_q, max_seqlen_k, target_group_size, window_left, window_right, alpha,
    scaling_seqlen, has_drab, deterministic, options) (options: `kernel_options` bits and FLAG_BITS, 0 for the
    product's kernels and the NVIDIA mask).
    """

    @staticmethod
    def forward(ctx, slots, params, *tensors):
        q, k, v, rab, cu_q, cu_k, nc, nt, su_q, su_k = [None if i < 0 else tensors[i] for i in slots]
        max_q, max_k, group, wl, wr, alpha, scaling, has_drab, deterministic, options = params
        args = (q, k, v, cu_q, cu_k, max_q, max_k, nc, nt, group, wl, wr, alpha, rab, scaling, su_q, su_k)
        out = _FWD_OPTIONS(*args, options) if options else _FWD(*args)
        ctx.save_for_backward(*tensors)
        ctx.slots, ctx.params = slots, params
        return out

    @staticmethod
    def backward(ctx, dout):
        compiling = torch.compiler.is_compiling()
        if not compiling:
            _channel.raise_pending()  # an error recorded by an earlier call (e.g. this forward)
        tensors = ctx.saved_tensors
        slots = ctx.slots
        q, k, v, rab, cu_q, cu_k, nc, nt, su_q, su_k = [None if i < 0 else tensors[i] for i in slots]
        max_q, max_k, group, wl, wr, alpha, scaling, has_drab, deterministic, options = ctx.params
        has_drab = bool(has_drab and rab is not None)
        if not dout.is_contiguous():
            dout = dout.contiguous()
        args = (dout, q, k, v, cu_q, cu_k, max_q, max_k, nc, nt, group, wl, wr, alpha, rab, scaling, su_q, su_k,
                has_drab, deterministic)
        dq, dk, dv, drab = _BWD_OPTIONS(*args, options) if options else _BWD(*args)
        grads = [None] * len(tensors)
        for slot, g in zip(slots[:4], (dq, dk, dv, drab if has_drab else None)):
            if slot >= 0 and g is not None:
                grads[slot] = g if grads[slot] is None else grads[slot] + g
        if not compiling and _channel.strict:
            _channel.after_call(q.device)
        return (None, None) + tuple(grads)


def _apply(q, k, v, rab, cu_q, cu_k, nc, nt, su_q, su_k, params):
    if not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad or (
            rab is not None and rab.requires_grad))):
        # Nothing to differentiate: the op itself, without the autograd.Function's bookkeeping.
        max_q, max_k, group, wl, wr, alpha, scaling, _, _, options = params
        args = (q, k, v, cu_q, cu_k, max_q, max_k, nc, nt, group, wl, wr, alpha, rab, scaling, su_q, su_k)
        return _FWD_OPTIONS(*args, options) if options else _FWD(*args)
    slots, uniq = distinct_tensors((q, k, v, rab, cu_q, cu_k, nc, nt, su_q, su_k))
    return HstuAttnFunction.apply(slots, params, *uniq)


def distinct_tensors(tensors) -> Tuple[Tuple[int, ...], List[torch.Tensor]]:
    """(slots, uniq): the distinct tensors of `tensors` (None skipped) and each entry's index in them (-1 for None).
    An autograd.Function under torch.compile takes no tensor twice (Dynamo refuses a duplicate input), and
    self-attention passes the same cu_seqlens (or q = k = v) in two slots."""
    uniq: List[torch.Tensor] = []
    slots = []
    for t in tensors:
        if t is None:
            slots.append(-1)
            continue
        for n, u in enumerate(uniq):  # identity by `is` (torch.compile traces it; id() it cannot)
            if u is t:
                slots.append(n)
                break
        else:
            slots.append(len(uniq))
            uniq.append(t)
    return tuple(slots), uniq


# ----------------------------------------------------------------------------------------------------
# Layer 3: validation and the public API
# ----------------------------------------------------------------------------------------------------


def _err(arg: str, expected: str, got, exc=ValueError):
    raise exc(f"hstu_attn: {arg}: expected {expected}, got {got}")


def _shape(t: torch.Tensor) -> str:
    return str(tuple(t.shape))


def _skip_value_checks(*tensors: Optional[torch.Tensor]) -> bool:
    """True while values cannot (or must not) be read on the host: torch.compile tracing,
    CUDA-graph capture, fake/meta tensors."""
    if torch.compiler.is_compiling():
        return True
    for t in tensors:
        if t is None:
            continue
        if t.is_meta or _is_fake(t):
            return True
        if t.is_cuda and torch.cuda.is_current_stream_capturing():
            return True
    return False


def _check_tensor(t, arg: str, ref: torch.Tensor, ref_arg: str):
    if not isinstance(t, torch.Tensor):
        _err(arg, "a torch.Tensor", type(t).__name__, TypeError)
    if t.device != ref.device:
        _err(arg, f"a tensor on {ref.device} (the device of {ref_arg})", t.device)


def _check_batch_vector(t, arg: str, batch: int, q: torch.Tensor):
    if t is None:
        return None
    _check_tensor(t, arg, q, "q")
    if t.dtype != torch.int32:
        _err(arg, "dtype torch.int32", t.dtype, TypeError)
    if tuple(t.shape) != (batch,):
        _err(arg, f"shape ({batch},) (batch size from cu_seqlens_q)", _shape(t))
    return t.contiguous()


_T = torch.Tensor
_INT32 = torch.int32


def _int_vec_ok(t, batch: int, dev) -> bool:
    return t is None or (isinstance(t, _T) and t.dtype is _INT32 and t.device == dev and t.shape == (batch,)
                         and t.is_contiguous())


def _validate_fast(q, k, v, cu_q, cu_k, max_q, max_k, nc, nt, group, window, alpha, rab, has_drab, scaling, su_q,
                   su_k):
    """The common call's checks, cheap (each tensor property read once, no message built): the normalized
    arguments as `_validate` returns them, or None when anything is unusual (then `_validate` decides and words
    the error). Accepts only what `_validate` accepts."""
    if type(window) is not tuple or len(window) != 2:
        return None
    wl, wr = window
    if not (type(max_q) is int and type(max_k) is int and type(group) is int and type(wl) is int
            and type(wr) is int and 0 <= max_q <= max_k and group >= 1 and wl >= -1 and wr >= -1):
        return None
    if (type(alpha) is not float and type(alpha) is not int) or (
            type(scaling) is not float and type(scaling) is not int) or not (scaling == -1 or scaling > 0):
        return None
    if (has_drab and rab is None) or ((nc is not None or nt is not None) and wr != 0):
        return None
    if not (isinstance(q, _T) and isinstance(k, _T) and isinstance(v, _T) and isinstance(cu_q, _T)
            and isinstance(cu_k, _T)):
        return None
    qs, ks, vs = q.shape, k.shape, v.shape
    if len(qs) != 3 or len(ks) != 3 or len(vs) != 3:
        return None
    heads, dim = qs[1], qs[2]
    if ks[1] != heads or ks[2] != dim or vs[1] != heads or vs[2] != dim or ks[0] != vs[0]:
        return None
    dt = q.dtype
    if k.dtype is not dt or v.dtype is not dt:
        return None
    dev = q.device
    if k.device != dev or v.device != dev:
        return None
    if dev.type == "cuda":
        if dt not in CUDA_DTYPES or dim not in CUDA_HEAD_DIMS or not _LIBRARY_LOADED:
            return None
        if dev.index not in _device_check._checked:
            return None  # the first call on a device: `_validate` checks this build runs there
    elif dev.type not in ("cpu", "meta") or dt not in CPU_DTYPES:
        return None
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        return None
    cs = cu_q.shape
    if len(cs) != 1 or cs[0] < 1 or cu_q.dtype is not _INT32 or cu_q.device != dev or not cu_q.is_contiguous():
        return None
    batch = cs[0] - 1
    if cu_k is not cu_q and not _int_vec_ok(cu_k, batch + 1, dev):
        return None
    if not (_int_vec_ok(nc, batch, dev) and _int_vec_ok(nt, batch, dev) and _int_vec_ok(su_q, batch, dev)
            and _int_vec_ok(su_k, batch, dev)):
        return None
    if rab is not None:
        if not isinstance(rab, _T) or rab.dtype is not dt or rab.device != dev:
            return None
        rs = rab.shape
        if len(rs) != 4 or rs[0] != batch or (rs[1] != 1 and rs[1] != heads) or rs[2] != max_k or rs[3] != max_k:
            return None
        if not rab.is_contiguous():
            rab = rab.contiguous()
    return window, cu_q, cu_k, nc, nt, rab, su_q, su_k


def _validate(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
              target_group_size, window_size, alpha, rab, has_drab, scaling_seqlen, seqused_q, seqused_k,
              fp8_out_dtype=None):
    """Shape/dtype/device checks (no device reads). Returns normalized (window, tensors...).

    fp8_out_dtype: for FP8 q/k/v (hstu/_fp8.py), the output dtype (bf16/fp16), which rab must have; the FP8 dtype
    itself is checked there."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            _err(name, "a torch.Tensor", type(t).__name__, TypeError)
        if t.dim() != 3:
            _err(name, "a 3-d tensor (total_tokens, num_heads, head_dim)", f"shape {_shape(t)}")
    if fp8_out_dtype is not None:
        pass  # FP8 q/k/v: hstu/_fp8.py checked the dtypes
    elif q.dtype == torch.float8_e4m3fn:
        _err("q_descale", "q_descale, k_descale and v_descale with float8_e4m3fn q, k, v", "None", TypeError)
    elif q.is_cuda and q.dtype not in CUDA_DTYPES:
        _err("q", "dtype torch.float16 or torch.bfloat16 on CUDA", q.dtype, TypeError)
    elif q.device.type in ("cpu", "meta") and q.dtype not in CPU_DTYPES:
        _err("q", f"a floating dtype in {CPU_DTYPES}", q.dtype, TypeError)
    if q.is_cuda:
        if q.shape[2] not in CUDA_HEAD_DIMS:
            _err("q", f"head_dim (q.shape[2]) in {CUDA_HEAD_DIMS} on CUDA", q.shape[2])
        if not _LIBRARY_LOADED:
            raise RuntimeError(
                f"hstu_attn: q: CUDA tensors need the compiled op library {_load.library_path()}, which is "
                "missing (source checkout without a build); build the wheel or use CPU tensors"
            )
        _device_check.check_cuda_device(q.device)
    elif q.device.type in ("cpu", "meta"):
        pass
    else:
        _err("q", "a CUDA or CPU tensor", q.device)
    for name, t in (("k", k), ("v", v)):
        if t.device != q.device:
            _err(name, f"a tensor on {q.device} (the device of q)", t.device)
        if t.dtype != q.dtype:
            _err(name, f"dtype {q.dtype} (the dtype of q)", t.dtype, TypeError)
    for name, t in (("k", k), ("v", v)):
        if t.shape[1] != q.shape[1]:
            _err(name, f"num_heads (dim 1) equal to q's {q.shape[1]}", f"shape {_shape(t)}")
        if t.shape[2] != q.shape[2]:
            _err(name, f"head_dim (dim 2) equal to q's {q.shape[2]}", f"shape {_shape(t)}")
    if k.shape[0] != v.shape[0]:
        _err("v", f"total_k (dim 0) equal to k's {k.shape[0]}", v.shape[0])
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1:
            _err(name, "a contiguous last dimension (stride(-1) == 1)", f"strides {tuple(t.stride())}")

    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _check_tensor(t, name, q, "q")
        if t.dtype != torch.int32:
            _err(name, "dtype torch.int32", t.dtype, TypeError)
        if t.dim() != 1 or t.shape[0] < 1:
            _err(name, "a 1-d tensor of length batch_size + 1", f"shape {_shape(t)}")
    if cu_seqlens_k.shape[0] != cu_seqlens_q.shape[0]:
        _err("cu_seqlens_k", f"length {cu_seqlens_q.shape[0]} (that of cu_seqlens_q, batch_size + 1)",
             cu_seqlens_k.shape[0])
    batch = cu_seqlens_q.shape[0] - 1

    for name, val in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if not isinstance(val, (int, torch.SymInt)) or isinstance(val, bool):
            _err(name, "an int", type(val).__name__, TypeError)
        if val < 0:
            _err(name, "a non-negative int", val)
    if max_seqlen_q > max_seqlen_k:
        _err("max_seqlen_q", f"<= max_seqlen_k ({max_seqlen_k}); queries align to the last keys", max_seqlen_q)

    if not isinstance(window_size, (tuple, list)) or len(window_size) != 2:
        _err("window_size", "a (left, right) pair of ints", window_size, TypeError)
    wl, wr = window_size
    if not all(isinstance(w, int) and not isinstance(w, bool) for w in (wl, wr)):
        _err("window_size", "a (left, right) pair of ints", window_size, TypeError)
    if wl < -1 or wr < -1:
        _err("window_size", "entries >= -1 (-1 means unlimited)", window_size)
    if not isinstance(target_group_size, int) or isinstance(target_group_size, bool):
        _err("target_group_size", "an int", type(target_group_size).__name__, TypeError)
    if target_group_size < 1:
        _err("target_group_size", "an int >= 1", target_group_size)
    if num_contexts is not None and wr != 0:
        _err("num_contexts", "window_size (-1, 0) (causal) or (left, 0) (causal local) with contexts",
             f"window_size {tuple(window_size)}")
    if num_targets is not None and wr != 0:
        _err("num_targets", "window_size (-1, 0) (causal) or (left, 0) (causal local) with targets",
             f"window_size {tuple(window_size)}")
    num_contexts = _check_batch_vector(num_contexts, "num_contexts", batch, q)
    num_targets = _check_batch_vector(num_targets, "num_targets", batch, q)
    seqused_q = _check_batch_vector(seqused_q, "seqused_q", batch, q)
    seqused_k = _check_batch_vector(seqused_k, "seqused_k", batch, q)

    if not isinstance(alpha, (int, float, torch.SymFloat, torch.SymInt)) or isinstance(alpha, bool):
        _err("alpha", "a float", type(alpha).__name__, TypeError)
    if rab is not None:
        _check_tensor(rab, "rab", q, "q")
        rab_dtype = q.dtype if fp8_out_dtype is None else fp8_out_dtype
        if rab.dtype != rab_dtype:
            _err("rab", f"dtype {rab_dtype} (the dtype of {'q' if fp8_out_dtype is None else 'out'})", rab.dtype,
                 TypeError)
        if rab.dim() != 4 or rab.shape[0] != batch or rab.shape[1] not in (1, q.shape[1]) or tuple(
            rab.shape[2:]
        ) != (max_seqlen_k, max_seqlen_k):
            _err("rab", f"shape ({batch}, 1 or {q.shape[1]}, {max_seqlen_k}, {max_seqlen_k}) "
                 "(batch, 1 or num_heads, max_seqlen_k, max_seqlen_k)", _shape(rab))
        rab = rab.contiguous()
    if has_drab and rab is None:
        _err("has_drab", "rab to be given when has_drab=True", "rab=None")
    if not isinstance(scaling_seqlen, (int, float, torch.SymInt, torch.SymFloat)) or isinstance(
        scaling_seqlen, bool
    ):
        _err("scaling_seqlen", "a number", type(scaling_seqlen).__name__, TypeError)
    if scaling_seqlen != -1 and not scaling_seqlen > 0:
        _err("scaling_seqlen", "-1 (use max_seqlen_q) or a positive number", scaling_seqlen)
    return (int(wl), int(wr)), cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous(), num_contexts, \
        num_targets, rab, seqused_q, seqused_k


def hstu_attn_varlen_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    num_contexts: Optional[torch.Tensor] = None,
    num_targets: Optional[torch.Tensor] = None,
    target_group_size: int = 1,
    window_size: Tuple[int, int] = (-1, -1),
    alpha: float = 1.0,
    rab: Optional[torch.Tensor] = None,
    has_drab: bool = False,
    scaling_seqlen: float = -1,
    seqused_q: Optional[torch.Tensor] = None,
    seqused_k: Optional[torch.Tensor] = None,
    *,
    deterministic: bool = False,
    check_values: Optional[bool] = None,
    mask_convention: str = "nvidia",
    q_descale: Optional[torch.Tensor] = None,
    k_descale: Optional[torch.Tensor] = None,
    v_descale: Optional[torch.Tensor] = None,
    descale_mode: str = "tensor",
    out_dtype: Optional[torch.dtype] = None,
    fp8_quant_mode: Optional[str] = None,
) -> torch.Tensor:
    """HSTU attention over a jagged (variable-length) batch.

    For each sequence b, head h, query row r and key j::

        S = alpha * (q[r] . k[j] + rab[b, h, i, j])        i = r + Lk - Lq (key position of row r)
        P = SiLU(S) where the mask allows (r, j), else 0
        out[r] = (sum_j P * v[j]) / scaling_seqlen

    fp32 accumulation; P is rounded to the input dtype before P·V. The masks (causal, local window,
    contexts, targets with groups, delta-q, and their combinations, including a local window with
    contexts/targets) are defined precisely in `hstu_attn.hstu_mask`.

    Args:
        q: (total_q, H, D) float16/bfloat16 on CUDA (float32/float64 too on CPU), last dim contiguous.
            On CUDA D is 32, 64, 128 or 256.
        k, v: (total_k, H, D), same dtype/device as q, last dim contiguous.
        cu_seqlens_q: (B + 1,) int32 offsets of the sequences in q (non-decreasing).
        cu_seqlens_k: (B + 1,) int32 offsets of the sequences in k and v.
        max_seqlen_q: int >= every query length; the default scaling_seqlen.
        max_seqlen_k: int >= every key length; the last two dims of rab. Must be >= max_seqlen_q.
        num_contexts: optional (B,) int32; the first num_contexts[b] rows see all history keys.
            Needs window_size[1] == 0 (causal (-1, 0) or causal local (left, 0)).
        num_targets: optional (B,) int32; the last num_targets[b] keys are targets, seen only by target
            rows of their own group, causally. Needs window_size[1] == 0.
        target_group_size: int >= 1, the size of a target group.
        window_size: (left, right); -1 is unlimited; (-1, -1) no mask, (-1, 0) causal, (l, r) local.
        alpha: float scale applied to (q·k + rab).
        rab: optional (B, 1 or H, max_seqlen_k, max_seqlen_k) relative attention bias, q's dtype,
            indexed by key positions (row r of sequence b reads rab[b, h, r + Lk - Lq, :Lk]).
        has_drab: compute the gradient of rab in backward (rab must be given).
        scaling_seqlen: divisor of P·V; -1 means max_seqlen_q.
        seqused_q, seqused_k: optional (B,) int32; use only the first seqused_*[b] rows of each
            sequence (other query rows get 0, other keys are ignored).
        deterministic: make the CUDA backward bit-reproducible (dq from a separate query-parallel kernel, no
            fp32 atomics; about 1.4x the time of the default backward). The CPU path always is.
        check_values: None (default) or False: on CUDA the values inside cu_seqlens_q/k, seqused_q/k,
            num_targets and num_contexts are checked on the device, without a host synchronization (see "Value
            errors" below). True: also read them on the host before the launch and raise at once (one
            synchronization per call). CPU tensors are always checked on the host (no synchronization there).
            Host checks are skipped while torch.compile traces, during CUDA-graph capture and for fake/meta
            tensors; the device check always runs.
        mask_convention: "nvidia" (default) or "meta_gr" (Meta generative-recommenders: a local window's distances
            measured with the num_contexts positions collapsed into one); see `hstu_attn.hstu_mask`. Both kernel
            families and the CPU path implement both; they differ only for a left window together with contexts.
        q_descale, k_descale, v_descale, descale_mode, out_dtype: FP8 attention (FlashAttention-3's shape):
            float8_e4m3fn q, k, v whose values are ``q8 * q_descale`` (float32 descale factors of the shape
            `descale_mode` gives: "tensor" (1,), "head" (H,), "batch_head" (B, H), "block" (H, total // 128 + B)),
            output in out_dtype (torch.bfloat16 by default, or torch.float16). No gradient reaches FP8 tensors.
        fp8_quant_mode: with float16/bfloat16 q, k, v: quantize them to FP8 on the device in this mode, run the FP8
            attention, and pass the gradients straight through to q, k, v (training). See `hstu_attn._fp8` and the
            FP8 section of docs/hstu_attn.md (what runs today: issue 36).

    Returns:
        out: (total_q, H, D) tensor of q's dtype; differentiable w.r.t. q, k, v (and rab if has_drab).

    Kernels: on compute capability 9.0 with a wheel built for sm_90a, the Hopper (wgmma/TMA) kernels run where
    they apply (D 64/128/256, with or without rab; the backward when not deterministic); otherwise, and on every
    other GPU from sm80, the portable mma.sync kernels. Jagged batches need no host synchronization: their work
    is ordered on the device. Design and measurements: docs/hstu_attn.md.
    `hstu_attn.compiled_kernels()` lists what the library holds.

    Value errors: the rules are cu_seqlens_q/k[0] >= 0, non-decreasing, last <= rows of q / k, every length <=
    max_seqlen_q / max_seqlen_k; 0 <= seqused_q/k[b] <= that length; query length <= key length (after seqused);
    0 <= num_targets[b] <= key length; 0 <= num_contexts[b] <= key length - num_targets[b]. On CUDA a violation
    does not stop the call: its kernels see every sequence empty (nothing is read or written out of bounds), its
    outputs are all NaN (out; in backward dq, dk, dv and drab), and the first violation is recorded. The record is
    raised as `hstu_attn.DeviceInputError` at the start of the next hstu_attn call (forward or backward) or by
    `hstu_attn.check_errors()` (which synchronizes first), and cleared by raising. In strict mode
    (`hstu_attn.strict_checks()`, `hstu_attn.set_strict_checks(True)`) every call synchronizes and raises its own
    error before it returns. CUDA graphs and torch.compile: the check runs inside the graph; a replay records
    its error, which the next eager call or `check_errors()` raises.

    Raises:
        TypeError / ValueError naming the argument, the expected and the actual value ("hstu_attn: arg: expected
        X, got Y"), at once for shapes, dtypes, devices and scalars, and for values on CPU or with
        check_values=True.
        DeviceInputError (a ValueError): a value error recorded on the device by an earlier call.

    Example:
        >>> import torch, hstu_attn
        >>> lengths = torch.tensor([3, 0, 5])
        >>> cu = torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
        >>> q, k, v = (torch.randn(8, 2, 32, requires_grad=True) for _ in range(3))
        >>> out = hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, 5, 5, window_size=(-1, 0), alpha=0.5)
        >>> out.shape
        torch.Size([8, 2, 32])
        >>> out.sum().backward()
    """
    compiling = torch.compiler.is_compiling()
    if not compiling:
        _channel.raise_pending()  # an error recorded on the device by an earlier call (a memory read, no sync)
    if q_descale is not None or k_descale is not None or v_descale is not None or fp8_quant_mode is not None:
        from ._fp8 import fp8_attention  # FP8 (issue 36): its own module, imported at the first FP8 call
        return fp8_attention(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
            target_group_size, window_size, alpha, rab, has_drab, scaling_seqlen, seqused_q, seqused_k,
            deterministic=deterministic, check_values=check_values, mask_convention=mask_convention,
            q_descale=q_descale, k_descale=k_descale, v_descale=v_descale, descale_mode=descale_mode,
            out_dtype=out_dtype, fp8_quant_mode=fp8_quant_mode)
    norm = _validate_fast(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts,
                          num_targets, target_group_size, window_size, alpha, rab, has_drab, scaling_seqlen,
                          seqused_q, seqused_k)
    if norm is None:
        norm = _validate(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
                         target_group_size, window_size, alpha, rab, has_drab, scaling_seqlen, seqused_q, seqused_k)
    window, cu_seqlens_q, cu_seqlens_k, num_contexts, num_targets, rab, seqused_q, seqused_k = norm
    on_cuda = q.is_cuda
    # CUDA: the op checks the values on the device; check_values=True reads them here (a sync). CPU: reading
    # them costs no sync, always. Neither while tracing or capturing, nor for fake/meta tensors.
    if (check_values or not on_cuda) and not _skip_value_checks(q, cu_seqlens_q):
        check_values_host(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
                          seqused_q, seqused_k)
    if on_cuda and not compiling:
        _channel.ensure_block()
    if mask_convention not in MASK_CONVENTIONS:
        _err("mask_convention", f"one of {list(MASK_CONVENTIONS)}", repr(mask_convention))
    scaling = float(max(max_seqlen_q, 1)) if scaling_seqlen == -1 else float(scaling_seqlen)
    # The GR flag goes with the kernel options into the private *_with_options ops (the public op schemas stay).
    options = _current_options() | (FLAG_BITS["mask_gr"] if mask_convention == "meta_gr" else 0)
    params = (max_seqlen_q, max_seqlen_k, target_group_size, window[0], window[1], float(alpha), scaling,
              bool(has_drab), bool(deterministic), options)
    out = _apply(q, k, v, rab, cu_seqlens_q, cu_seqlens_k, num_contexts, num_targets, seqused_q, seqused_k, params)
    if not compiling and on_cuda and _channel.strict:
        _channel.after_call(q.device)
    return out


def hstu_attn_qkvpacked_func(
    qkv: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    num_contexts: Optional[torch.Tensor] = None,
    num_targets: Optional[torch.Tensor] = None,
    target_group_size: int = 1,
    window_size: Tuple[int, int] = (-1, -1),
    alpha: float = 1.0,
    rab: Optional[torch.Tensor] = None,
    has_drab: bool = False,
    scaling_seqlen: float = -1,
    seqused: Optional[torch.Tensor] = None,
    *,
    deterministic: bool = False,
    check_values: Optional[bool] = None,
    mask_convention: str = "nvidia",
) -> torch.Tensor:
    """HSTU self-attention with q, k and v packed in one tensor (no copies: q, k, v are views).

    Same semantics as `hstu_attn_varlen_func` with cu_seqlens_q = cu_seqlens_k = cu_seqlens,
    max_seqlen_q = max_seqlen_k = max_seqlen and seqused_q = seqused_k = seqused.

    Args:
        qkv: (total, 3, H, D); qkv[:, 0] is q, qkv[:, 1] is k, qkv[:, 2] is v. Last dim contiguous.
        cu_seqlens: (B + 1,) int32 offsets.
        max_seqlen: int >= every sequence length.
        num_contexts, num_targets, target_group_size, window_size, alpha, rab, has_drab,
        scaling_seqlen, deterministic, check_values, mask_convention: as in `hstu_attn_varlen_func`.
        seqused: optional (B,) int32 used lengths.

    Returns:
        out: (total, H, D); the gradient flows back to qkv (and rab if has_drab).

    Example:
        >>> import torch, hstu_attn
        >>> cu = torch.tensor([0, 4, 10], dtype=torch.int32)
        >>> qkv = torch.randn(10, 3, 2, 64)
        >>> hstu_attn.hstu_attn_qkvpacked_func(qkv, cu, 6, window_size=(-1, 0)).shape
        torch.Size([10, 2, 64])
    """
    if not isinstance(qkv, torch.Tensor):
        _err("qkv", "a torch.Tensor", type(qkv).__name__, TypeError)
    if qkv.dim() != 4 or qkv.shape[1] != 3:
        _err("qkv", "a 4-d tensor (total, 3, num_heads, head_dim)", f"shape {_shape(qkv)}")
    q, k, v = qkv.unbind(1)
    return hstu_attn_varlen_func(
        q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, num_contexts, num_targets, target_group_size,
        window_size, alpha, rab, has_drab, scaling_seqlen, seqused, seqused, deterministic=deterministic,
        check_values=check_values, mask_convention=mask_convention,
    )
