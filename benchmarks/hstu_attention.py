"""HSTU attention benchmark: TFLOP/s of the hstu_attn CUDA kernels, forward and backward.

Named sweeps (shared defaults: H=4, bf16, causal):
    dense    B in {16, 128} x S in {1K, 4K, 16K} x D in {128, 256}, all sequences of length S
    jagged   B=32 Zipf(1.2) lengths (P(L) ~ L^-1.2 on [1, 4096], seed 0), D=256, 3 context tokens, and two dense batches
             with the same total tokens (B=32 equal lengths; as few sequences of about the max length as hold them):
             ratios printed; the same for Zipf(1.0) lengths (longer sequences) as a second point
    masks    B=16, S=4096, D=128 over the mask kinds (none, causal, local, contexts, targets, groups, ...)
    portable issue 39's five shapes (B16 S4K D128, B16 S16K D128, B128 S1K D128, B16 S4K D256, B16 S8K D64) and
             its table's three D = 256 rows (B256 S256, B128 S1K, B16 S8K); only with --sweep portable (with
             --kernels portable --peer fa2 / nvidia-ampere: its table)
--case NAME (repeatable): only the cases of these names (e.g. "B16 S16K D128"), to split a sweep over runs.

--fp8: instead of the sweeps, the FP8 (e4m3) forward against the bf16 forward on the same shapes (issue 36): B16 S16K
D128 / D256 and S4K D64 / D128, causal; inputs quantized with descale_mode "tensor" (and "block" for one row), the
FP8 op timed as called (descale check, Vt pre-pass, kernel: the default on Hopper; --kernel-option fp8_kernel=0 times
the dequantize path), beside the bf16 op on the bf16 inputs, the FP8 op with kernel_options(fp8_early_pack=False)
(P converted to e4m3 after the P V wait, the order before issue 36's fp8fast) and with kernel_options(fp8_bn192=True)
(192-key tiles at D = 128), alternating.
--fp8 --method fa3,do_bench,sustained,ramp: instead, the default FP8 op at B16 S16K D128 / D256 (causal H4, per-tensor)
timed by published methods in turn, in one process (issue 36: the goals against FlashAttention-3's published FP8
figures): fa3 = FA3's FP8 benchmark (hopper/benchmark_flash_attention_fp8.py: sleep 1 s, torch.utils.benchmark
timeit(30): 2 warm-up calls, then 30 calls in one wall-clock block, the mean), do_bench = FA3's benchmark_attn.py
(sleep 1 s, triton's do_bench(warmup=5, rep=30) recipe), sustained = windows back to back at the power cap (as
tools/hstu_dev/fp8_fwd_split.py --sustain), ramp = per 0.25 s bucket from rest into the cap; NVML's SM clock and
power over each timed block; per case and method min / median / max TFLOP/s (--method-rounds, --kernel-split).
--fp8-sched: the FP8 forward as scheduled by default (grid order) against kernel_options(fp8_sched=True) (the bf16
forward's work list and persistent CTAs) and the bf16 forward: targets (B32 1K history + 2K targets, B8 4K + 256;
group 1), jagged Zipf(1.2) B32 max 4K (D128 / D256) and dense B16 S16K D128, causal, per-tensor descale (--quick: the
first three).

FLOPs, FlashAttention convention (the one behind every published attention/HSTU TFLOP/s number, NVIDIA's
HSTU figures included): forward = sum over sequences of 4*H*D*L^2 (two GEMMs of 2*H*D*L^2 each), halved when
the mask is causal-like (window right == 0); backward = 2.5 x forward. Issue 3 writes the forward as
"sum 2*H*D*L^2"; read literally that counts one GEMM and halves every number, and the published 571 TFLOP/s
(H100) would then be 1142 real TFLOP/s, above the H100's dense bf16 peak, so the floors only make sense in the
FA convention. `--convention issue` prints the literal reading (exactly half) for comparison. Times: CUDA events after warm-up, L2 flushed
before every timed run, median of --reps (>= 20) runs (ops under 5 ms: the best of --blocks such medians); the ops
are called directly (no Python checks).
The "ref" columns time the dense PyTorch reference (hstu_attn_reference, same dtype); "skip" where it
would not fit in memory or would take too long.

--peer times a peer implementation beside ours on the same inputs, their runs alternating (ours, peer, ours, ...;
the medians of each), and prints the ratios: `fbgemm` = FBGEMM's HSTU attention (NVIDIA's CUTLASS Hopper kernels,
the source of issue 6's published numbers; Python module `hstu` of the fbgemm_gpu_hstu package, built from FBGEMM's
fbgemm_gpu/experimental/hstu), called through its raw sm90 ops as ours are. Before timing, each case checks that the
peer computes the same function: the largest |ours - peer| of out, dq, dk and dv relative to the largest |ours|
is printed ("diff"); a cell the peer's build does not cover prints "n/a". `nvidia-ampere` = NVIDIA's Ampere HSTU
kernels (recsys-examples corelib/hstu/csrc/hstu_attn, the FA2-derived mma.sync kernels; extension module
`hstu_attn_2_cuda`, built by tools/peer/build_nvidia_ampere_hstu.sh), called through its raw varlen ops. `fa2` =
FlashAttention-2 as torch ships it (the flash SDPA backend's ops; the varlen ops for jagged batches and windows): the
same instruction family on the same GPU, but softmax attention, not HSTU, so no diff column; where the case's mask
has contexts or targets, which FA2 has no mask for, FA2 runs the mask's window alone (noted per case). Its FLOPs are
counted as ours (same formula, same causal halving).

Usage:
    python benchmarks/hstu_attention.py [--quick] [--results benchmarks/RESULTS.md] [--plot out.png]
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import torch

import hstu_attn
from hstu_attn import hstu_attn_reference

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import (command, git_commit, kernel_breakdown, once_ms, parser, publish, pyplot,  # noqa: E402
                        save_figure, shape_name)

T_START = time.perf_counter()
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# Skip the reference when a sequence's (H, L, L) score tensors, summed over the batch, exceed this.
REF_MAX_SCORE_ELEMENTS = 2**31
# FLOPs per (query, key, head-dim element) in the forward: 4 = two GEMMs (FA convention), 2 = issue's literal text.
CONVENTIONS = {"fa": 4.0, "issue": 2.0}
FLOPS_PER_SCORE = CONVENTIONS["fa"]
# Issue 3's floor for the sm80-class kernel (FA convention): (fwd, bwd) TFLOP/s at D=128, B=16, S=16K, causal.
FLOOR_CASE = ("dense", "B16 S16K D128")
FLOOR_TFLOPS = (300.0, 200.0)
# Issue 6: the jagged case's TFLOP/s should reach 85% of dense at the same total tokens (ratios printed).
ZIPF_EXPONENT = 1.2  # issue 6: "jagged Zipf(1.2) lengths, max 4096"


def jagged_case_name(exponent: float) -> str:
    return f"zipf{exponent:g} B32 max4K D256 ctx3"


JAGGED_CASE = jagged_case_name(ZIPF_EXPONENT)
JAGGED_TARGET = 0.85
# Issue 39's table (the sm80-class kernels against FlashAttention-2 and NVIDIA's Ampere HSTU on the same GPU): its
# five shapes, then the three rows RESULTS.md's table added later (D = 256 at B256 S256, B128 S1K, B16 S8K); (B, S, D),
# H = 4, causal.
PORTABLE_SHAPES = [(16, 4096, 128), (16, 16384, 128), (128, 1024, 128), (16, 4096, 256), (16, 8192, 64),
                   (256, 256, 256), (128, 1024, 256), (16, 8192, 256)]
# Sweeps that run only when named with --sweep (the default run keeps its sweeps and time).
OPT_IN_SWEEPS = ("portable",)


@dataclass
class Case:
    sweep: str
    name: str
    lengths: List[int]
    H: int
    D: int
    window: Tuple[int, int] = (-1, 0)
    contexts: int = 0
    targets: int = 0
    group: int = 1

    def fwd_flops(self) -> float:
        f = sum(FLOPS_PER_SCORE * self.H * self.D * L * L for L in self.lengths)
        return f / 2 if self.window[1] == 0 else f


@dataclass
class Result:
    case: Case
    fwd_ms: float
    bwd_ms: float
    ref_fwd_ms: Optional[float] = None
    ref_bwd_ms: Optional[float] = None
    peer_fwd_ms: Optional[float] = None
    peer_bwd_ms: Optional[float] = None
    peer_diff: Optional[float] = None
    notes: List[str] = field(default_factory=list)


def zipf_lengths(batch: int, max_len: int, seed: int = 0, exponent: float = ZIPF_EXPONENT) -> List[int]:
    """batch lengths drawn from P(L) ~ L^-exponent on [1, max_len]."""
    gen = torch.Generator().manual_seed(seed)
    weights = torch.arange(1, max_len + 1, dtype=torch.float64).pow(-exponent)
    return (torch.multinomial(weights, batch, replacement=True, generator=gen) + 1).tolist()


def build_cases(quick: bool, smoke: bool) -> List[Case]:
    if smoke:  # tiny shapes: checks the script itself (CPU ok)
        return [Case("dense", "B2 S64 D32", [64, 64], 2, 32), Case("jagged", "zipf B4", zipf_lengths(4, 64), 2, 32,
                     contexts=3), Case("masks", "context+target", [64, 64], 2, 32, contexts=3, targets=5, group=2)]
    cases = []
    dense_b = [16] if quick else [16, 128]
    dense_s = [1024, 16384] if quick else [1024, 4096, 16384]
    dense_d = [128] if quick else [128, 256]
    for B in dense_b:
        for S in dense_s:
            for D in dense_d:
                cases.append(Case("dense", f"B{B} S{S // 1024}K D{D}", [S] * B, 4, D))
    # Issue 6's jagged row is Zipf(1.2); Zipf(1.0) (longer sequences, more tokens) is kept as a second point.
    for exponent in (ZIPF_EXPONENT, 1.0):
        jag = zipf_lengths(32, 4096, exponent=exponent)
        tag = jagged_case_name(exponent)
        cases.append(Case("jagged", tag, jag, 4, 256, contexts=3))
        # The comparison: dense at the same total tokens (32 equal lengths, rounded to a whole length so the batch
        # is dense), and, stricter, as few sequences of about the jagged case's max length as hold those tokens.
        tokens = sum(jag)
        s_eq = round(tokens / 32)
        cases.append(Case("jagged", f"dense B32 S{s_eq} D256 ctx3 (same tokens as {tag.split()[0]})", [s_eq] * 32,
                          4, 256, contexts=3))
        b_long = max(1, round(tokens / max(jag)))
        s_long = round(tokens / b_long)
        cases.append(Case("jagged", f"dense B{b_long} S{s_long} D256 ctx3 (same tokens as {tag.split()[0]})",
                          [s_long] * b_long, 4, 256, contexts=3))
    if not quick:
        # A training-size jagged batch (512 sequences, ~100K tokens): many waves, where the Hopper work lists keep
        # the grids' order less their empty tiles (not a "zipf..." name: no same-tokens comparison rows).
        cases.append(Case("jagged", "B512 zipf1.2 max4K D256 ctx3", zipf_lengths(512, 4096, seed=3), 4, 256,
                          contexts=3))
    masks = [
        ("none", dict(window=(-1, -1))),
        ("causal", dict()),
        ("local(256,0)", dict(window=(256, 0))),
        ("local(128,128)", dict(window=(128, 128))),
        ("context 64", dict(contexts=64)),
        ("targets 256", dict(targets=256)),
        ("targets 256 group 16", dict(targets=256, group=16)),
        ("ctx 64 + targets 256 g16", dict(contexts=64, targets=256, group=16)),
        ("local(256,0) + ctx + targets", dict(window=(256, 0), contexts=64, targets=256, group=16)),
    ]
    if quick:
        masks = [masks[0], masks[1], masks[7]]
    for name, kw in masks:
        cases.append(Case("masks", name, [4096] * 16, 4, 128, **kw))
    for B, S, D in PORTABLE_SHAPES:
        cases.append(Case("portable", shape_name(B, S, D), [S] * B, 4, D))
    return cases


class Timer:
    """Median wall time of fn() in ms: CUDA events on GPU (L2 flushed before each run), perf_counter on CPU.

    Warm-up: each fn runs `warmup` times, and on a GPU until it has kept the GPU busy for `warmup_ms` as well (at
    most 10000 calls): five calls of a 50 us kernel leave a GPU that idled through --cooldown at its low clock, and
    the first timed runs then read several times slower (measured on an H100: the first case of a sweep at 0.30 ms
    instead of 0.055 ms).
    """

    def __init__(self, device: torch.device, warmup: int, reps: int, warmup_ms: float = 0.0, blocks: int = 1,
                 block_ms: float = 5.0):
        self.device, self.warmup, self.reps = device, warmup, reps
        self.warmup_ms = warmup_ms if device.type == "cuda" else 0.0
        self.blocks, self.block_ms = max(1, blocks), block_ms
        self.flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=device) if device.type == "cuda" else None

    def _warm(self, fn) -> int:
        """runs fn `warmup` times, then on until `warmup_ms` of wall time have passed (synchronizing every 8 calls,
        so that wall time follows GPU time); returns the number of calls"""
        t0, n = time.perf_counter(), 0
        while n < self.warmup or ((time.perf_counter() - t0) * 1e3 < self.warmup_ms and n < 10000):
            fn()
            n += 1
            if self.warmup_ms > 0 and self.device.type == "cuda" and n % 8 == 0:
                torch.cuda.synchronize(self.device)
        return n

    def __call__(self, fn) -> float:
        return self.interleaved(fn)[0]

    def interleaved(self, *fns) -> List[float]:
        """median ms of each fn, their runs alternating (a b a b ...) so that all see the same clocks and power.

        With `blocks` > 1, a measurement whose medians are all below `block_ms` is repeated up to `blocks` times
        and each fn keeps its smallest median: in H100 sweeps a whole row (ours and the peer's alike, alternated)
        now and then ran about 2x slow for a second or two, which one block of 20 short runs cannot outvote."""
        for fn in fns:
            self._warm(fn)
        best = None
        for _ in range(self.blocks):
            times = [[] for _ in fns]
            for _ in range(self.reps):
                for fn, ts in zip(fns, times):
                    ts.append(self._once(fn))
            medians = [statistics.median(ts) for ts in times]
            best = medians if best is None else [min(a, b) for a, b in zip(best, medians)]
            if max(medians) >= self.block_ms:
                break
        return best

    def _once(self, fn) -> float:
        if self.flush is not None:
            self.flush.zero_()
        return once_ms(fn, self.device)


class FbgemmPeer:
    """FBGEMM's HSTU attention through its raw sm90 ops (torch.ops.fbgemm.hstu_varlen_{fwd,bwd}_90)."""

    name = "fbgemm_gpu_hstu"
    same_function = True  # HSTU attention: its outputs are compared with ours ("diff")

    def __init__(self, device: torch.device):
        if device.type != "cuda" or torch.cuda.get_device_capability(device) != (9, 0):
            raise SystemExit("--peer fbgemm: the peer's Hopper ops need a compute capability 9.0 GPU")
        try:
            import hstu  # noqa: F401  (FBGEMM's package: loading it registers the ops)
        except ImportError as e:
            raise SystemExit(f"--peer fbgemm: the peer is not importable ({e}); install fbgemm_gpu_hstu (FBGEMM's "
                             "fbgemm_gpu/experimental/hstu) or put its built package on PYTHONPATH") from e
        self.module = hstu
        if not hasattr(torch.ops.fbgemm, "hstu_varlen_fwd_90"):  # e.g. this repository's hstu/ source folder
            raise SystemExit(f"--peer fbgemm: module hstu from {os.path.dirname(hstu.__file__)} registered no "
                             "fbgemm.hstu_varlen_fwd_90 op (run with python -P from the repository root so that its "
                             "hstu/ source folder does not shadow the peer)")
        self.fwd_op = torch.ops.fbgemm.hstu_varlen_fwd_90
        self.bwd_op = torch.ops.fbgemm.hstu_varlen_bwd_90

    def version(self) -> str:
        try:
            from importlib.metadata import version

            return f"{self.name} {version(self.name)}"
        except Exception:  # built in place, not installed: name where it was loaded from
            return f"module hstu from {os.path.dirname(self.module.__file__)}"

    def calls(self, q, k, v, dout, cu, max_len: int, nc, nt, case: Case, alpha: float, scaling: int):
        out_dtype = 0 if q.dtype == torch.bfloat16 else 1
        wl, wr = case.window
        mask = (nc, nt, case.group, wl, wr, alpha)

        def fwd():
            return self.fwd_op(q, k, v, cu, cu, None, None, max_len, max_len, scaling, *mask,
                               output_dtype=out_dtype)[0]

        def bwd():
            return self.bwd_op(dout, None, q, None, k, None, v, cu, cu, None, None, max_len, max_len, scaling,
                               None, None, None, *mask, output_dtype=out_dtype)[:3]

        return fwd, bwd


def fa2_mask(case: Case) -> Tuple[bool, int, int, Optional[str]]:
    """FlashAttention-2's nearest mask to the case's: (is_causal, window left, window right, note). FA2 has causal
    and local windows only; contexts and targets run as their window alone (the note says so)."""
    wl, wr = case.window
    causal = wl < 0 and wr == 0
    note = None
    if case.contexts or case.targets:
        note = "fa2: " + ("causal" if causal else f"window {case.window}") + " in place of the contexts / targets mask"
    if causal or (wl < 0 and wr < 0):
        return causal, -1, -1, note
    return False, wl, wr, note


class Fa2Peer:
    """FlashAttention-2 as torch ships it: the flash SDPA backend's ops for dense batches without a window, the varlen
    flash ops (same kernels) for jagged batches and local windows. Softmax attention, not HSTU: no diff."""

    name = "FlashAttention-2 (torch SDPA flash)"
    same_function = False

    def __init__(self, device: torch.device):
        if device.type != "cuda" or torch.cuda.get_device_capability(device) < (8, 0):
            raise SystemExit("--peer fa2: torch's flash attention needs a CUDA GPU of compute capability 8.0 or later")
        self.device = device

    def version(self) -> str:
        return f"torch {torch.__version__}"

    def case_note(self, case: Case) -> Optional[str]:
        return fa2_mask(case)[3]

    def calls(self, q, k, v, dout, cu, max_len: int, nc, nt, case: Case, alpha: float, scaling: int):
        causal, wl, wr, _ = fa2_mask(case)
        B, H, D = len(case.lengths), case.H, case.D
        aten = torch.ops.aten
        if len(set(case.lengths)) == 1 and wl < 0 and wr < 0:
            S = case.lengths[0]
            q4, k4, v4, do4 = (t.view(B, S, H, D).transpose(1, 2) for t in (q, k, v, dout))
            saved = aten._scaled_dot_product_flash_attention(q4, k4, v4, 0.0, causal, False, scale=alpha)

            def fwd():
                return aten._scaled_dot_product_flash_attention(q4, k4, v4, 0.0, causal, False, scale=alpha)[0]

            def bwd():
                out, lse, cq, ck, mq, mk, rng, unused = saved[:8]
                return aten._scaled_dot_product_flash_attention_backward(do4, q4, k4, v4, out, lse, cq, ck, mq, mk, 0.0,
                                                                         causal, rng, unused, scale=alpha)

            return fwd, bwd
        window = dict(window_size_left=wl, window_size_right=wr) if (wl >= 0 or wr >= 0) else {}
        saved = aten._flash_attention_forward(q, k, v, cu, cu, max_len, max_len, 0.0, causal, False, scale=alpha,
                                              **window)

        def vfwd():
            return aten._flash_attention_forward(q, k, v, cu, cu, max_len, max_len, 0.0, causal, False, scale=alpha,
                                                 **window)[0]

        def vbwd():
            out, lse, rng, unused = saved[:4]
            return aten._flash_attention_backward(dout, q, k, v, out, lse, cu, cu, max_len, max_len, 0.0, causal, rng,
                                                  unused, scale=alpha, **window)

        return vfwd, vbwd


def pybind_type_name(t: str) -> str:
    """a pybind11 parameter type in the spelling of pybind11 2.x: 3.x writes int and float parameters as
    typing.SupportsInt / typing.SupportsFloat and std::optional<T> as "T | None" (torch 2.11 ships pybind11 3.0)"""
    t = {"typing.SupportsInt": "int", "typing.SupportsFloat": "float"}.get(t, t)
    if t.endswith(" | None"):
        return f"typing.Optional[{t[:-len(' | None')]}]"
    return t


def pybind_types(fn) -> Optional[List[str]]:
    """the parameter types of a pybind11 function, from its signature line ("name(arg0: T, arg1: U) -> V"), spelled
    as pybind11 2.x does (pybind_type_name); None if the docstring has none"""
    doc = (getattr(fn, "__doc__", None) or "").strip().splitlines()
    m = re.match(r"\w+\((.*)\)\s*->", doc[0]) if doc else None
    if m is None:
        return None
    params, depth, cur = [], 0, ""
    for ch in m.group(1) + ",":
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            if cur.strip():
                params.append(pybind_type_name(cur.split(":", 1)[1].strip()))
            cur = ""
        else:
            cur += ch
    return params


def hstu_peer_args(types: List[str], lead: list, masks: tuple, scaling: int, max_len: int) -> list:
    """the arguments of a call of NVIDIA's varlen_fwd / varlen_bwd from their parameter types: `lead` (tensors and
    max lengths), scaling_seqlen where the version has it (an int right after them), then contexts, targets, group
    size, window, alpha, rab (`masks`), then its later parameters off (bool False, optional None: delta-q, drab,
    arbitrary masks, KV cache, deterministic)."""
    args = list(lead)
    if types[len(args)] == "int":
        args.append(scaling)
    elif scaling != max_len:
        raise RuntimeError("this peer version divides by max_seqlen_q only")
    args += list(masks)
    if len(types) < len(args) or types[len(args) - 2] != "float":
        raise RuntimeError(f"peer parameters {types}: alpha (float) not where expected")
    for t in types[len(args):]:
        if t == "bool":
            args.append(False)
        elif t.startswith(("Optional[", "typing.Optional[")):
            args.append(None)
        else:
            raise RuntimeError(f"peer parameter of type {t}: unknown, no default")
    return args


class NvidiaAmperePeer:
    """NVIDIA's Ampere HSTU kernels (recsys-examples corelib/hstu/csrc/hstu_attn) through the raw ops of their
    extension module `hstu_attn_2_cuda` (its Python package is also named hstu_attn, so the module is loaded
    directly; tools/peer/build_nvidia_ampere_hstu.sh builds it). The ops' parameters changed between versions
    (scaling_seqlen, delta-q, arbitrary masks, KV cache): the call is built from the signature the module reports."""

    name = "nvidia_ampere_hstu"
    same_function = True

    def __init__(self, device: torch.device):
        if device.type != "cuda" or torch.cuda.get_device_capability(device) < (8, 0):
            raise SystemExit("--peer nvidia-ampere: the peer's kernels need a CUDA GPU of compute capability 8.0 or "
                             "later")
        try:
            import hstu_attn_2_cuda  # noqa: F401
        except ImportError as e:
            raise SystemExit(f"--peer nvidia-ampere: the peer is not importable ({e}); build it with "
                             "tools/peer/build_nvidia_ampere_hstu.sh CHECKOUT OUT_DIR and put OUT_DIR on "
                             "PYTHONPATH") from e
        self.module = hstu_attn_2_cuda
        self.fwd_types = pybind_types(self.module.varlen_fwd)
        self.bwd_types = pybind_types(self.module.varlen_bwd)
        if self.fwd_types is None or self.bwd_types is None:
            raise SystemExit("--peer nvidia-ampere: varlen_fwd / varlen_bwd: expected pybind11 signatures in their "
                             "docstrings, got none")

    def version(self) -> str:
        return f"module hstu_attn_2_cuda from {os.path.dirname(self.module.__file__)}"

    def calls(self, q, k, v, dout, cu, max_len: int, nc, nt, case: Case, alpha: float, scaling: int):
        masks = (nc, nt, case.group, case.window[0], case.window[1], alpha, None)
        fa = hstu_peer_args(self.fwd_types, [q, k, v, cu, cu, max_len, max_len], masks, scaling, max_len)
        ba = hstu_peer_args(self.bwd_types, [dout, q, k, v, None, None, None, cu, cu, max_len, max_len], masks,
                            scaling, max_len)
        return (lambda: self.module.varlen_fwd(*fa)[0]), (lambda: self.module.varlen_bwd(*ba)[:3])


PEERS = {"fbgemm": FbgemmPeer, "fa2": Fa2Peer, "nvidia-ampere": NvidiaAmperePeer}


def max_rel_diff(ours, theirs) -> float:
    """largest |ours - theirs| over the largest |ours|, across the pairs of tensors"""
    num = max((a.float() - b.float()).abs().max().item() for a, b in zip(ours, theirs))
    den = max(a.float().abs().max().item() for a in ours)
    return num / max(den, 1e-30)


def timed_calls(q, k, v, dout, args):
    """The forward and backward ops the benchmark times, under the calling thread's kernel_options: the public ops
    take none, so --kernels portable / --kernel-option go through the private *_with_options ops."""
    opts = hstu_attn._ops._current_options()
    if opts:
        return (lambda: torch.ops.hstu_attn.fwd_with_options(q, k, v, *args, opts),
                lambda: torch.ops.hstu_attn.bwd_with_options(dout, q, k, v, *args, False, False, opts))
    return (lambda: torch.ops.hstu_attn.fwd(q, k, v, *args),
            lambda: torch.ops.hstu_attn.bwd(dout, q, k, v, *args, False, False))


def run_case(case: Case, dtype: torch.dtype, device: torch.device, timer: Timer, ref_timer: Timer,
             with_ref: bool, peer=None, cooldown: float = 0.0) -> Result:
    B, H, D = len(case.lengths), case.H, case.D
    total, max_len = sum(case.lengths), max(case.lengths)
    cu = torch.tensor([0] + case.lengths, device=device).cumsum(0).to(torch.int32)
    q, k, v, dout = (torch.randn(total, H, D, device=device, dtype=dtype) for _ in range(4))
    nc = torch.tensor([min(case.contexts, L) for L in case.lengths], dtype=torch.int32, device=device) \
        if case.contexts else None
    nt = torch.tensor([min(case.targets, L - min(case.contexts, L)) for L in case.lengths], dtype=torch.int32,
                      device=device) if case.targets else None
    scaling = float(max_len)
    args = (cu, cu, max_len, max_len, nc, nt, case.group, case.window[0], case.window[1], 1.0 / D**0.5, None,
            scaling, None, None)
    # One validated call first: the benchmark must not time invalid inputs.
    hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, max_len, max_len, nc, nt, case.group, case.window,
                                    1.0 / D**0.5)
    fwd, bwd = timed_calls(q, k, v, dout, args)
    peer_note = None
    notes = []
    if peer is not None:
        try:
            pfwd, pbwd = peer.calls(q, k, v, dout, cu, max_len, nc, nt, case, 1.0 / D**0.5, max_len)
            if getattr(peer, "same_function", True):
                diff = max_rel_diff([fwd()] + list(bwd()[:3]), [pfwd()] + list(pbwd()))
            else:  # another function (softmax attention): run once, nothing to compare
                diff = None
                pfwd(), pbwd()
                notes += [n for n in [peer.case_note(case)] if n]
        except RuntimeError as e:  # a head dim / mask / dtype the peer's build does not hold
            peer_note = f"peer: {str(e).splitlines()[0][:80]}"

    def rest():  # the backward is timed from a rested GPU too, as every case is (--cooldown)
        if cooldown > 0:
            if device.type == "cuda":
                torch.cuda.synchronize()
            time.sleep(cooldown)

    if peer is None or peer_note is not None:
        fwd_ms = timer(fwd)
        rest()
        res = Result(case, fwd_ms, timer(bwd), notes=[peer_note] if peer_note else [])
    else:
        fwd_ms, pfwd_ms = timer.interleaved(fwd, pfwd)
        rest()
        bwd_ms, pbwd_ms = timer.interleaved(bwd, pbwd)
        res = Result(case, fwd_ms, bwd_ms, peer_fwd_ms=pfwd_ms, peer_bwd_ms=pbwd_ms, peer_diff=diff, notes=notes)
    score_elems = sum(H * L * L for L in case.lengths)
    if with_ref and score_elems <= REF_MAX_SCORE_ELEMENTS:
        ref_kw = dict(num_contexts=nc, num_targets=nt, target_group_size=case.group, window_size=case.window,
                      alpha=1.0 / D**0.5, scaling_seqlen=scaling, upcast=False)
        try:
            with torch.no_grad():
                res.ref_fwd_ms = ref_timer(lambda: hstu_attn_reference(q, k, v, cu, cu, max_len, max_len, **ref_kw))
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            out = hstu_attn_reference(*leaves, cu, cu, max_len, max_len, **ref_kw)
            res.ref_bwd_ms = ref_timer(lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True))
            del out
        except torch.OutOfMemoryError:
            res.notes.append("ref OOM")
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return res


def tflops(flops: float, ms: Optional[float]) -> str:
    return "skip" if ms is None else f"{flops / (ms * 1e-3) / 1e12:.1f}"


def ms_str(ms: Optional[float]) -> str:
    return "skip" if ms is None else f"{ms:.3f}"


def ratio_str(ours_ms: float, peer_ms: Optional[float]) -> str:
    """speed of ours over the peer's (> 1: ours is faster)"""
    return "n/a" if peer_ms is None else f"{peer_ms / ours_ms:.2f}x"


def markdown_table(results: List[Result], peer_name: Optional[str] = None, diff: bool = True) -> str:
    """the results table; with peer_name the peer's columns and ratios, and its "diff" column unless diff=False (a
    peer that computes another function)"""
    head = ("| sweep | case | B | H | D | max L | fwd ms | fwd TFLOP/s | bwd ms | bwd TFLOP/s | ref fwd ms | "
            "ref fwd TFLOP/s | ref bwd ms | ref bwd TFLOP/s |")
    rule = "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    if peer_name:
        head += f" {peer_name} fwd ms | fwd TFLOP/s | bwd ms | bwd TFLOP/s | fwd ours/peer | bwd ours/peer |"
        rule += "---:|---:|---:|---:|---:|---:|"
        if diff:
            head += " diff |"
            rule += "---:|"
    lines = [head, rule]
    for r in results:
        c = r.case
        f = c.fwd_flops()
        line = (
            f"| {c.sweep} | {c.name} | {len(c.lengths)} | {c.H} | {c.D} | {max(c.lengths)} | {r.fwd_ms:.3f} | "
            f"{tflops(f, r.fwd_ms)} | {r.bwd_ms:.3f} | {tflops(2.5 * f, r.bwd_ms)} | {ms_str(r.ref_fwd_ms)} | "
            f"{tflops(f, r.ref_fwd_ms)} | {ms_str(r.ref_bwd_ms)} | {tflops(2.5 * f, r.ref_bwd_ms)} |"
        )
        if peer_name:
            na = r.peer_fwd_ms is None
            line += (
                f" {'n/a' if na else ms_str(r.peer_fwd_ms)} | {'n/a' if na else tflops(f, r.peer_fwd_ms)} |"
                f" {'n/a' if na else ms_str(r.peer_bwd_ms)} | {'n/a' if na else tflops(2.5 * f, r.peer_bwd_ms)} |"
                f" {ratio_str(r.fwd_ms, r.peer_fwd_ms)} | {ratio_str(r.bwd_ms, r.peer_bwd_ms)} |"
            )
            if diff:
                line += f" {'n/a' if r.peer_diff is None else f'{r.peer_diff:.1e}'} |"
        lines.append(line)
    notes = [f"- {r.case.sweep} {r.case.name}: {n}" for r in results for n in r.notes]
    return "\n".join(lines + ([""] + notes if notes else []))


def floor_line(results: List[Result]) -> str:
    """The issue's floor check, when the floor case ran (always judged in the FA convention)."""
    for r in results:
        if (r.case.sweep, r.case.name) == FLOOR_CASE:
            f = sum(CONVENTIONS["fa"] * r.case.H * r.case.D * L * L for L in r.case.lengths) / 2
            fwd, bwd = f / (r.fwd_ms * 1e-3) / 1e12, 2.5 * f / (r.bwd_ms * 1e-3) / 1e12
            ok = fwd >= FLOOR_TFLOPS[0] and bwd >= FLOOR_TFLOPS[1]
            return (f"\nfloor ({FLOOR_CASE[1]}, causal, FA convention): fwd {fwd:.1f} (>= {FLOOR_TFLOPS[0]:g}), "
                    f"bwd {bwd:.1f} (>= {FLOOR_TFLOPS[1]:g}): {'met' if ok else 'NOT met'}\n")
    return ""


def jagged_ratio_lines(results: List[Result]) -> str:
    """Issue 6's jagged target: each jagged case's TFLOP/s over its dense same-tokens rows' (forward, backward)."""
    lines = []
    for jag in results:
        if jag.case.sweep != "jagged" or not jag.case.name.startswith("zipf"):
            continue
        f = jag.case.fwd_flops()
        for r in results:
            if r.case.sweep != "jagged" or not r.case.name.endswith(f"(same tokens as {jag.case.name.split()[0]})"):
                continue
            fd = r.case.fwd_flops()
            rf = (f / jag.fwd_ms) / (fd / r.fwd_ms)
            rb = (f / jag.bwd_ms) / (fd / r.bwd_ms)
            lines.append(f"jagged ({jag.case.name}, {sum(jag.case.lengths)} tokens) vs {r.case.name} "
                         f"({sum(r.case.lengths)} tokens): fwd {100 * rf:.0f}%, bwd {100 * rb:.0f}% of the dense "
                         f"TFLOP/s (target {100 * JAGGED_TARGET:.0f}%{', issue 6 row' if jag.case.name == JAGGED_CASE else ''})")
    return "\n" + "\n".join(lines) + "\n" if lines else ""


def kernel_description(device: torch.device, portable: bool = False) -> str:
    """Which kernel family runs: the Hopper kernels on sm90 unless --kernels portable."""
    if device.type != "cuda":
        return "CPU reference path"
    names = hstu_attn.compiled_kernels().get("instances", [])
    if torch.cuda.get_device_capability(device) == (9, 0) and any("_sm90_" in n for n in names) and not portable:
        return ("Hopper sm90a kernels where eligible (forward and backward D 64/128/256, rab included; the "
                "deterministic backward is sm80-class), sm80-class otherwise")
    return "sm80-class (mma.sync) forward and backward" + (" (--kernels portable)" if portable else "")


def parse_kernel_options(p, items: List[str]) -> dict:
    """--kernel-option NAME=INT items -> kernel_options keywords (names checked against its parameters)"""
    import inspect

    known = [n for n in inspect.signature(hstu_attn._ops.kernel_options).parameters]
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in known or not value.lstrip("-").isdigit():
            p.error(f"--kernel-option: expected NAME=INT with NAME one of {known}, got {item!r}")
        out[name] = int(value)
    return out


def header(device: torch.device, dtype_name: str, reps: int, cooldown: float, peer=None, warmup: int = 5,
           warmup_ms: float = 0.0, blocks: int = 1, block_ms: float = 5.0, portable: bool = False,
           switches: Optional[dict] = None) -> str:
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    cmd = command()
    blocks_text = (f"; a measurement under {block_ms:g} ms is repeated up to {blocks} times and keeps its smallest "
                   "median (--blocks)" if blocks > 1 else "")
    return "\n".join([
        f"## hstu_attention: {gpu}, {dtype_name}, {datetime.date.today().isoformat()}",
        "",
        f"- device: {gpu}; torch {torch.__version__}; hstu_attn {hstu_attn.__version__}; commit {git_commit()}",
        f"- dtype: {dtype_name} inputs, fp32 accumulation; alpha = 1/sqrt(D); scaling_seqlen = max L",
        f"- kernels: {kernel_description(device, portable)}"
        + (f"; kernel_options({', '.join(f'{k}={v}' for k, v in sorted(switches.items()))})" if switches else ""),
        "- units: ms (median of "
        f"{reps} runs after >= {warmup} warm-up calls{f' and >= {warmup_ms:g} ms' if warmup_ms > 0 else ''}, CUDA "
        f"events, L2 flushed{blocks_text}); TFLOP/s with fwd = sum {FLOPS_PER_SCORE:g}*H*D*L^2 (halved for causal-like "
        f"masks), bwd = 2.5 x fwd; ref = dense PyTorch reference in the same dtype",
        f"- cases run one after another with {cooldown:g} s of idle GPU before each and between a case's forward "
        "and backward timings (--cooldown), so that neither inherits the power-limit clock drop of the long timing "
        "before it",
        f"- command: `{cmd}`",
    ] + ([peer_line(peer)] if peer else []))


def peer_line(peer) -> str:
    """the header's line on the peer: what it is, how it is timed, what diff means (or why there is none)"""
    text = (f"- peer: {peer.name} ({peer.version()}), timed on the same inputs, its runs alternating with ours (same "
            "warm-up, reps, L2 flush); ours/peer = peer ms / our ms (> 1: ours is faster)")
    if getattr(peer, "same_function", True):
        return text + "; diff = max |ours - peer| / max |ours| over out, dq, dk, dv"
    return (text + "; the peer computes softmax attention, not HSTU: no diff column (same shapes, FLOPs counted by "
            "the same formula; where a mask has contexts or targets the peer runs its window alone, noted per case)")


def plot(results: List[Result], path: str) -> None:
    plt = pyplot(path)
    if plt is None:
        return
    labels = [f"{r.case.sweep}: {r.case.name}" for r in results]
    fwd = [r.case.fwd_flops() / (r.fwd_ms * 1e-3) / 1e12 for r in results]
    bwd = [2.5 * r.case.fwd_flops() / (r.bwd_ms * 1e-3) / 1e12 for r in results]
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(results) + 1.5))
    ys = range(len(results))
    ax.barh([y - 0.2 for y in ys], fwd, height=0.4, label="forward")
    ax.barh([y + 0.2 for y in ys], bwd, height=0.4, label="backward")
    ax.set_yticks(list(ys))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("TFLOP/s")
    ax.set_title("hstu_attn")
    ax.legend()
    save_figure(fig, path)


def main(argv=None) -> int:
    p = parser(__doc__, quick="a few cases of each sweep")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--reps", type=int, default=20, help="timed runs per measurement (median; >= 20 for results)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up calls per measurement (at least)")
    p.add_argument("--warmup-ms", type=float, default=200.0,
                   help="GPU: also warm up until this much time has passed (a short kernel's few warm-up calls do "
                        "not lift an idle GPU's clock)")
    p.add_argument("--blocks", type=int, default=3,
                   help="repeat a measurement whose medians are under 5 ms up to this many times (blocks of --reps "
                        "runs) and keep each op's smallest median: in H100 sweeps whole short rows, ours and the "
                        "peer's alike, now and then ran ~2x slow (1: one block)")
    p.add_argument("--sweep", action="append", choices=["dense", "jagged", "masks", "portable"],
                   help="only these sweeps (portable: issue 39's shapes, run only when named)")
    p.add_argument("--case", action="append", metavar="NAME",
                   help="only the cases of this name within the sweeps run (e.g. \"B16 S16K D128\"); repeatable")
    p.add_argument("--no-ref", action="store_true", help="do not time the PyTorch reference")
    p.add_argument("--results", help="append the markdown table to this file (e.g. benchmarks/RESULTS.md)")
    p.add_argument("--plot", help="write a PNG plot here (needs matplotlib)")
    p.add_argument("--smoke", action="store_true", help="tiny shapes, runs on CPU too: checks the script only")
    p.add_argument("--cooldown", type=float, default=2.0,
                   help="seconds of idle GPU before each case and between its forward and backward timings (0: "
                        "none). A long case drives the board to its power limit and lowers the clock for the next "
                        "seconds; without a pause the next case is timed at that lower clock (measured on the H200: "
                        "B128 S1K bwd 276-281 TFLOP/s right after S16K vs 292-301 rested; on an H100: B16 S16K D128 "
                        "bwd 472-487 right after its forward's timing vs 518-535 after 2 s)")
    p.add_argument("--peer", choices=sorted(PEERS),
                   help="time this peer implementation beside ours on the same inputs and print the ratios "
                        "(fbgemm: FBGEMM's HSTU attention, module `hstu`, sm90 only; fa2: torch's flash SDPA "
                        "backend, softmax attention; nvidia-ampere: NVIDIA's Ampere HSTU kernels, module "
                        "`hstu_attn_2_cuda` from tools/peer/build_nvidia_ampere_hstu.sh)")
    p.add_argument("--kernels", choices=["default", "portable"], default="default",
                   help="portable: the sm80-class (mma.sync) kernels even on a Hopper GPU (A100 / Ada-class code, "
                        "timed on the GPU at hand)")
    p.add_argument("--kernel-option", action="append", default=[], metavar="NAME=INT",
                   help="one more hstu_attn._ops.kernel_options switch, for before / after comparisons (e.g. "
                        "bwd_sm80_pair=0: the sm80-class D = 256 backward's column chunks); repeatable")
    p.add_argument("--fp8", action="store_true",
                   help="time the FP8 (e4m3) forward against the bf16 forward and against its P conversion after "
                        "the P V wait (kernel_options(fp8_early_pack=False)) instead of the sweeps (issue 36)")
    p.add_argument("--fp8-sched", action="store_true",
                   help="time the FP8 forward's default (grid order) against its opt-in schedules (work list, "
                        "persistent CTAs: kernel_options(fp8_sched=True)) and the bf16 forward, on the targets, "
                        "jagged Zipf and dense shapes (issue 36)")
    p.add_argument("--method", default="interleaved",
                   help="--fp8: interleaved (the table of variants, this script's timer) or a comma list of fa3 "
                        "(FA3's FP8 benchmark: sleep 1 s, 2 warm-up calls, 30 calls in one timed block), do_bench "
                        "(FA3's benchmark_attn.py: triton do_bench(5, 30) recipe) and sustained (windows back to "
                        "back, the power-capped clock): the default FP8 kernel at B16 S16K D128 / D256 timed by each "
                        "method in turn, with the SM clock (issue 36)")
    p.add_argument("--method-rounds", type=int, default=3, help="--method: rounds of the methods in turn")
    p.add_argument("--method-rest", type=float, default=1.0,
                   help="--method: seconds of sleep before fa3 / do_bench (FA3's scripts: 1)")
    p.add_argument("--method-dims", default="128,256", help="--method: the head dims of B16 S16K, in this order")
    p.add_argument("--sustain-s", type=float, default=1.5, help="--method sustained: seconds per window")
    p.add_argument("--kernel-split", action="store_true",
                   help="--method: first the op's kernels' device times (Vt pre-pass, checks, the FP8 kernel) of one "
                        "call under torch.profiler")
    p.add_argument("--ramp-s", type=float, default=3.0, help="--method ramp: seconds of calls after the rest")
    p.add_argument("--ramp-bucket", type=float, default=0.25, help="--method ramp: seconds per bucket")
    p.add_argument("--sustain-windows", type=int, default=2, help="--method sustained: windows per round")
    p.add_argument("--convention", choices=sorted(CONVENTIONS), default="fa",
                   help="FLOP count: fa = 4*H*D*L^2 per forward (default, as published numbers), issue = 2*H*D*L^2")
    args = p.parse_args(argv)
    if args.blocks < 1:
        p.error(f"--blocks: expected at least 1, got {args.blocks}")
    switches = parse_kernel_options(p, args.kernel_option)
    global FLOPS_PER_SCORE
    FLOPS_PER_SCORE = CONVENTIONS[args.convention]

    if torch.cuda.is_available():
        device = torch.device("cuda")
    elif args.smoke:
        device = torch.device("cpu")
    else:
        print("hstu_attention benchmark: no CUDA device (use --smoke to check the script on CPU)")
        return 1
    if device.type == "cuda" and not hstu_attn.library_loaded():
        print("hstu_attention benchmark: the hstu_attn op library is not loaded (source checkout without a build)")
        return 1
    dtype = DTYPES[args.dtype]
    if device.type == "cpu" and dtype == torch.float16:
        dtype = torch.bfloat16
    torch.manual_seed(0)
    timer = Timer(device, args.warmup, args.reps, args.warmup_ms, blocks=args.blocks)
    ref_timer = Timer(device, 1, max(3, args.reps // 4)) if args.smoke else timer
    peer = PEERS[args.peer](device) if args.peer else None
    results = []
    portable = args.kernels == "portable"
    if portable:
        switches = dict(switches, sm90=False)
    options = hstu_attn._ops.kernel_options(**switches) if switches else contextlib.nullcontext()
    methods = [m for m in args.method.split(",") if m != "interleaved"]
    if any(m not in FP8_METHODS for m in methods) or (methods and not args.fp8):
        p.error(f"--method: expected interleaved or a comma list of {', '.join(FP8_METHODS)} (with --fp8), got "
                f"{args.method!r}")
    if methods and not all(d in ("128", "256") for d in args.method_dims.split(",")):
        p.error(f"--method-dims: expected a comma list of 128 and 256, got {args.method_dims!r}")
    if args.method_rounds < 1 or args.sustain_windows < 1:
        p.error("--method-rounds and --sustain-windows: expected at least 1")
    if args.fp8 or args.fp8_sched:  # (the FP8 kernel is the default; --kernel-option fp8_kernel=0: dequantize path)
        with options:
            text = run_fp8_sched(args, device, timer) if args.fp8_sched else \
                run_fp8_methods(args, device, methods) if methods else run_fp8(args, device, timer)
        print()
        publish(text, args.results)
        return 0
    with options:
        run_all(args, device, dtype, timer, ref_timer, peer, results)
    text = (header(device, args.dtype, args.reps, args.cooldown if device.type == "cuda" else 0.0, peer, args.warmup,
                   timer.warmup_ms, timer.blocks, timer.block_ms, portable, switches) + "\n\n"
            + markdown_table(results, peer.name if peer else None, getattr(peer, "same_function", True))
            + "\n" + floor_line(results)
            + jagged_ratio_lines(results))
    print()
    publish(text, args.results)
    if args.plot:
        plot(results, args.plot)
    return 0


# --fp8: (B, S, D, descale mode) rows, causal, H = 4.
FP8_CASES = [(16, 16384, 128, "tensor"), (16, 16384, 256, "tensor"), (16, 4096, 64, "tensor"),
             (16, 4096, 128, "tensor"), (16, 16384, 128, "block")]


def fp8_rows(args, device: torch.device, cases, run_case) -> List[str]:
    """run_case(*case) for each case (a table row, printed as it comes), the GPU rested --cooldown seconds between
    cases and its cached memory released after each."""
    rows = []
    for case in cases:
        if device.type == "cuda" and rows and args.cooldown > 0:
            torch.cuda.synchronize()
            time.sleep(args.cooldown)
        rows.append(run_case(*case))
        print(rows[-1], flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def fp8_report(device: torch.device, title: str, notes: List[str], columns: List[str], rows: List[str]) -> str:
    """The markdown section of an FP8 mode: heading, device line, notes, command, table."""
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    align = ["---" if c in ("case", "descale", "FP8 path", "method") else "---:" for c in columns]
    return "\n".join([
        f"## hstu_attention {title}: {gpu}, {datetime.date.today().isoformat()}",
        "",
        f"- device: {gpu}; torch {torch.__version__}; hstu_attn {hstu_attn.__version__}; commit {git_commit()}",
        *notes,
        f"- command: `{command()}`",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "|".join(align) + "|",
    ] + rows)


def run_fp8(args, device: torch.device, timer: Timer) -> str:
    """--fp8: the FP8 forward (hstu_attn::fp8_fwd) vs the bf16 forward (hstu_attn::fwd), markdown table."""
    from hstu_attn._fp8 import DESCALE_MODES, _fp8_kernel_applies, quantize_fp8

    def run_case(B, S, D, mode):
        cu = torch.arange(B + 1, device=device, dtype=torch.int32) * S
        q, k, v = (torch.randn(B * S, 4, D, device=device, dtype=torch.bfloat16) for _ in range(3))
        (q8, qs), (k8, ks), (v8, vs) = (quantize_fp8(x, cu, mode) for x in (q, k, v))
        alpha, opts = 1.0 / D**0.5, hstu_attn._ops._current_options()
        late_opts = opts | hstu_attn._ops.OPTION_BITS["fp8_early_pack"]
        tanh_opts = opts | 1 << hstu_attn._ops.FP8_SILU_SHIFT  # (the tanh SiLU, the late order's form)
        wide_opts = opts | hstu_attn._ops.OPTION_BITS["fp8_bn192"]
        lens = (cu, cu, S, S, None, None, 1, -1, 0, alpha)

        def fp8(o):
            return lambda: torch.ops.hstu_attn.fp8_fwd(q8, k8, v8, qs, ks, vs, DESCALE_MODES.index(mode), 0, *lens,
                                                       None, float(S), None, None, o)

        bf16 = lambda: torch.ops.hstu_attn.fwd(q, k, v, *lens, None, float(S), None, None)  # noqa: E731
        kernel = device.type == "cuda" and _fp8_kernel_applies(q8, None, opts)
        f8_ms, late_ms, wide_ms, b_ms = timer.interleaved(fp8(opts), fp8(late_opts), fp8(wide_opts), bf16)
        out, ref = fp8(opts)().float(), bf16().float()
        same = torch.equal(fp8(tanh_opts)(), fp8(late_opts)())
        scale = max(ref.abs().max().item(), 1e-30)
        diff, wide_diff = ((x - ref).abs().max().item() / scale for x in (out, fp8(wide_opts)().float()))
        flops = 4 * 4 * D * S * S * B / 2
        name = shape_name(B, S, D)
        return (f"| {name} causal | {mode} | {'FP8 kernel' if kernel else 'dequantize+bf16'} "
                f"| {b_ms:.3f} | {tflops(flops, b_ms)} | {f8_ms:.3f} | {tflops(flops, f8_ms)} | "
                f"{b_ms / f8_ms:.2f}x | {late_ms:.3f} | {late_ms / f8_ms:.3f}x | {same} | {wide_ms:.3f} | "
                f"{tflops(flops, wide_ms)} | {f8_ms / wide_ms:.3f}x | {diff:.1e} | {wide_diff:.1e} |")

    cases = [(2, 256, 64, "tensor")] if args.smoke else FP8_CASES[:2] if args.quick else FP8_CASES
    rows = fp8_rows(args, device, cases, run_case)
    return fp8_report(device, "--fp8", [
        "- dtypes: FP8 = float8_e4m3fn q/k/v with float32 descale factors (quantize_fp8 of the bf16 inputs), output "
        "bf16, P rounded to e4m3; bf16 = the bf16 forward on the bf16 inputs; fp32 accumulation in both; H = 4, alpha "
        "= 1/sqrt(D), causal",
        f"- units: ms (median of {args.reps} runs, the four ops alternating, CUDA events, L2 flushed); TFLOP/s = "
        "4*H*D*L^2/2 per sequence over the time (the FP8 time includes the descale check and the Vt pre-pass); "
        "late = kernel_options(fp8_early_pack=False), P converted after the P V wait (the order before fp8fast, "
        "with the tanh SiLU); late / FP8 = its time over the default's; same = late bitwise equal to the tanh SiLU "
        "in the default order (kernel_options(fp8_silu=1); the default at D <= 128 mixes in a half2 SiLU); bn192 = "
        "kernel_options(fp8_bn192=True), 192-key tiles (D = 128 and not block mode; else the default kernel), "
        "bn192 gain = FP8 ms / bn192 ms; diff = max |fp8 - bf16| / max |bf16| (bn192 diff: the same for its output)"],
        ["case", "descale", "FP8 path", "bf16 fwd ms", "bf16 TFLOP/s", "FP8 fwd ms", "FP8 TFLOP/s", "speedup",
         "late ms", "late / FP8", "same", "bn192 ms", "bn192 TFLOP/s", "bn192 gain", "diff", "bn192 diff"],
        rows)


# --fp8 --method: the FP8 forward's default kernel timed by published benchmark methods, in one process (issue 36).
FP8_METHOD_CASES = [(16, 16384, 128), (16, 16384, 256)]
FP8_METHODS = ("fa3", "do_bench", "sustained", "ramp")


class NvmlSampler:
    """The SM clock (MHz), board power (W) and GPU temperature (C) read through NVML (ctypes on the driver's
    libnvidia-ml.so.1; no Python package needed) by a thread every `period_s` while a block runs; without NVML (CPU
    runs) every reading is None. Power: the instant reading (field NVML_FI_DEV_POWER_INSTANT) where the driver has
    it (`instant`), else nvmlDeviceGetPowerUsage, which on an H200 is a 1 s average (it read ~150-200 W over a
    0.13 s block of the FP8 forward after 1 s of rest)."""

    def __init__(self, device: torch.device, period_s: float = 0.004):
        self.lib, self.handle, self.period_s, self.instant = None, None, period_s, False
        if device.type != "cuda":
            return
        try:
            import ctypes
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            handle = ctypes.c_void_p()
            props = torch.cuda.get_device_properties(device)
            bus = getattr(props, "pci_bus_id", None)
            ok = bus is not None and lib.nvmlDeviceGetHandleByPciBusId_v2(
                f"{getattr(props, 'pci_domain_id', 0):08x}:{bus:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
                .encode(), ctypes.byref(handle)) == 0
            if not ok and lib.nvmlDeviceGetHandleByIndex_v2(device.index or 0, ctypes.byref(handle)) != 0:
                return
            self.lib, self.handle, self.ctypes = lib, handle, ctypes

            class Field(ctypes.Structure):  # (nvmlFieldValue_t: the value union read as its 8 bytes)
                _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                            ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int),
                            ("nvmlReturn", ctypes.c_int), ("value", ctypes.c_ulonglong)]

            self.field = Field(fieldId=186)  # (NVML_FI_DEV_POWER_INSTANT, mW)
            self.instant = self._instant_mw() is not None
        except (OSError, AttributeError):
            self.lib = None

    def _instant_mw(self) -> Optional[int]:
        f = self.field
        f.nvmlReturn = -1
        if self.lib.nvmlDeviceGetFieldValues(self.handle, 1, self.ctypes.byref(f)) != 0 or f.nvmlReturn != 0:
            return None
        return f.value & 0xFFFFFFFF if f.valueType in (1, 5) else f.value

    def read(self) -> Tuple[float, Optional[int], Optional[float], Optional[int]]:
        """(perf_counter, SM MHz, W, C) now"""
        if self.lib is None:
            return time.perf_counter(), None, None, None
        c = self.ctypes
        mhz, mw, temp = c.c_uint(), c.c_uint(), c.c_uint()
        self.lib.nvmlDeviceGetClockInfo(self.handle, 1, c.byref(mhz))  # (NVML_CLOCK_SM)
        inst = self._instant_mw() if self.instant else None
        if inst is None:
            self.lib.nvmlDeviceGetPowerUsage(self.handle, c.byref(mw))
        self.lib.nvmlDeviceGetTemperature(self.handle, 0, c.byref(temp))  # (NVML_TEMPERATURE_GPU)
        return time.perf_counter(), mhz.value, (mw.value if inst is None else inst) / 1e3, temp.value

    @contextlib.contextmanager
    def sampling(self):
        """yields a list that holds, after the block, the readings taken while it ran (>= 1 on a GPU)"""
        import threading

        readings, stop = [], threading.Event()

        def loop():
            while True:
                readings.append(self.read())
                if stop.wait(self.period_s):
                    break

        thread = threading.Thread(target=loop, daemon=True) if self.lib is not None else None
        if thread:
            thread.start()
        try:
            yield readings
        finally:
            if thread:
                stop.set()
                thread.join()


def fa3_timeit_ms(fn, repeats: int = 30, rest_s: float = 1.0) -> Tuple[float, int]:
    """FlashAttention-3's FP8 forward benchmark (hopper/benchmark_flash_attention_fp8.py, the script behind the FA3
    paper's FP8 figure): time.sleep(1) "to avoid residual power throttling from the previous benchmark", then
    flash_attn.utils.benchmark_forward(repeats=30) = torch.utils.benchmark.Timer.timeit(30): max(30 // 100, 2) = 2
    warm-up calls, then the 30 calls back to back between two (synchronize, perf_counter) stamps, no L2 flush; the
    mean. Returns (ms per call, calls timed, perf_counter at the start of the timed calls)."""
    import torch.utils.benchmark as tb

    time.sleep(rest_s)
    warm, calls, t_from = max(repeats // 100, 2), [0], [0.0]

    def counted():  # (FA3's stmt calls a wrapper too: its autocast one; this one notes the first timed call's start)
        calls[0] += 1
        if calls[0] == warm + 1:
            t_from[0] = time.perf_counter()
        fn()

    m = tb.Timer(stmt="fn()", globals={"fn": counted}, num_threads=torch.get_num_threads()).timeit(repeats)
    return m.mean * 1e3, repeats, t_from[0]


def do_bench_ms(fn, flush: Optional[torch.Tensor], warmup_ms: float = 5.0, rep_ms: float = 30.0,
                rest_s: float = 1.0) -> Tuple[float, int]:
    """FlashAttention-3's current benchmark (hopper/benchmark_attn.py): time.sleep(1), then triton.testing.do_bench(
    warmup=5, rep=30) (times in ms), whose recipe this follows without needing triton: one call, an estimate from 5
    calls (each after an L2 flush, 256 MB), max(1, 5 / estimate) warm-up calls, max(1, 30 / estimate) timed calls
    each after an L2 flush between its own CUDA events; the mean. Returns (ms per call, calls timed, perf_counter at
    the first timed call)."""
    time.sleep(rest_s)
    cuda = flush is not None

    def clear():
        if cuda:
            flush.zero_()

    def stamp():
        if cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def ms(a, b):
        return a.elapsed_time(b) if cuda else (b - a) * 1e3

    def sync():
        if cuda:
            torch.cuda.synchronize()

    fn()
    sync()
    a = stamp()
    for _ in range(5):
        clear()
        fn()
    b = stamp()
    sync()
    est = max(ms(a, b) / 5, 1e-6)
    for _ in range(max(1, int(warmup_ms / est))):
        fn()
    pairs, t0 = [], time.perf_counter()
    for _ in range(max(1, int(rep_ms / est))):
        clear()
        a = stamp()
        fn()
        pairs.append((a, stamp()))
    sync()
    return statistics.mean(ms(a, b) for a, b in pairs), len(pairs), t0


def sustained_ms(fn, seconds: float, est_ms: float) -> Tuple[float, int]:
    """One window of tools/hstu_dev/fp8_fwd_split.py's sustained timing: fn back to back for `seconds`, the first
    third untimed (the clock settles under the power cap), the last two thirds between two CUDA events, about 20 ms of
    calls queued per synchronize. Returns (ms per call, calls timed, perf_counter at the start of the timed part)."""
    cuda = torch.cuda.is_available() and est_ms > 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds / 3:
        fn()
        if cuda:
            torch.cuda.synchronize()
    per_sync, calls = max(2, int(20 / max(est_ms, 1e-3)) + 1), 0
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    t1 = time.perf_counter()
    while time.perf_counter() - t1 < 2 * seconds / 3 or calls == 0:
        for _ in range(per_sync):
            fn()
        calls += per_sync
        if cuda:
            torch.cuda.synchronize()
    if cuda:
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls, calls, t1
    return (time.perf_counter() - t1) * 1e3 / calls, calls, t1


def ramp_series(fn, seconds: float, rest_s: float, bucket_s: float, readings_of) -> List[tuple]:
    """The clock's ramp from rest into the power cap: sleep rest_s, then fn back to back for `seconds` with a CUDA
    event after every call (about 20 ms of calls queued per synchronize, so that wall time follows GPU time), the
    calls grouped by their end into buckets of bucket_s seconds from the first call's start. readings_of(t0, t1):
    the (SM MHz, W) means of the NVML readings between two perf_counter stamps (None where there are none). Returns
    per bucket (start s, calls, ms per call, SM MHz, W)."""
    time.sleep(rest_s)
    cuda = torch.cuda.is_available()
    evs, walls = [], []
    if cuda:
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        start.record()
    t0 = time.perf_counter()
    per_sync = 2
    while time.perf_counter() - t0 < seconds:
        for _ in range(per_sync):
            fn()
            if cuda:
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                evs.append(ev)
            else:
                walls.append(time.perf_counter())
        if cuda:
            torch.cuda.synchronize()
            if len(evs) == per_sync:  # (the first calls' time sets the batch: ~20 ms)
                per_sync = max(2, int(20 / max(start.elapsed_time(evs[-1]) / per_sync, 1e-3)))
    ends = [start.elapsed_time(e) / 1e3 for e in evs] if cuda else [w - t0 for w in walls]
    out, prev, b = [], 0.0, 0
    while prev < ends[-1] if ends else False:
        lo, hi = b * bucket_s, (b + 1) * bucket_s
        inside = [e for e in ends if lo < e <= hi]
        if inside:
            t_first = max([e for e in ends if e <= lo], default=0.0)
            ms = (inside[-1] - t_first) * 1e3 / len(inside)
            mhz, watt = readings_of(t0 + lo, t0 + hi)
            out.append((lo, len(inside), ms, mhz, watt))
            prev = inside[-1]
        b += 1
    return out


def run_fp8_methods(args, device: torch.device, methods: List[str]) -> str:
    """--fp8 --method M,...: the FP8 forward (the default kernel, the op as called) at B16 S16K D128 / D256, causal,
    H4, per-tensor descale, timed by each method in turn for --method-rounds rounds (fa3 / do_bench rest 1 s first, as
    FA3's scripts do; sustained = --sustain-windows windows of --sustain-s back to back), the SM clock, power and
    temperature read through NVML during each timed block; a row per measurement, then min / median / max TFLOP/s
    per case and method."""
    from hstu_attn._fp8 import DESCALE_MODES, quantize_fp8

    sampler = NvmlSampler(device)
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=device) if device.type == "cuda" else None
    dims = [int(d) for d in args.method_dims.split(",")]
    cases = [(2, 256, 64)] if args.smoke else [c for d in dims for c in FP8_METHOD_CASES if c[2] == d]
    rows, summary, ramp_rows, split_rows = [], [], [], []

    def readings_of(readings):
        def between(t0, t1):
            xs = [x for x in readings if t0 <= x[0] <= t1 and x[1] is not None]
            return (statistics.mean(x[1] for x in xs), statistics.mean(x[2] for x in xs)) if xs else (None, None)
        return between

    for B, S, D in cases:
        cu = torch.arange(B + 1, device=device, dtype=torch.int32) * S
        q8s = [quantize_fp8(torch.randn(B * S, 4, D, device=device, dtype=torch.bfloat16), cu, "tensor")
               for _ in range(3)]
        (q8, qs), (k8, ks), (v8, vs) = q8s
        lens = (cu, cu, S, S, None, None, 1, -1, 0, 1.0 / D**0.5)
        opts = hstu_attn._ops._current_options()
        fn = lambda: torch.ops.hstu_attn.fp8_fwd(q8, k8, v8, qs, ks, vs, DESCALE_MODES.index("tensor"), 0,  # noqa
                                                 *lens, None, float(S), None, None, opts)
        flops = 4 * 4 * D * S * S * B / 2
        name = shape_name(B, S, D)
        fn()
        est = once_ms(fn, device)
        print(f"({name}: inputs and first calls ready {time.perf_counter() - T_START:.1f} s after the script's start)",
              flush=True)
        if args.kernel_split and device.type == "cuda":  # (the op's kernels under torch.profiler, one call)
            parts = kernel_breakdown(fn)
            total = sum(ms for ms, _ in parts.values())
            for kname, (ms, n) in parts.items():
                split_rows.append(f"| {name} | k: {kname[:90]} | {n} | {ms:.4f} | {ms / total:.4f} | "
                                  f"{flops / ms / 1e9:.1f} |")
                print(split_rows[-1], flush=True)
        got = {m: [] for m in methods if m != "ramp"}
        if "ramp" in methods:
            got.update({"ramp, first bucket": [], "ramp, last bucket": []})
        for r in range(args.method_rounds):
            for m in methods:
                if m == "ramp":
                    temp0 = sampler.read()[3]
                    with sampler.sampling() as readings:
                        series = ramp_series(fn, args.ramp_s, args.method_rest, args.ramp_bucket,
                                             readings_of(readings))
                    for lo, n, ms, mhz, watt in series:
                        ramp_rows.append(f"| {name} | {r + 1} | {lo:.2f} | {n} | {ms:.3f} | {flops / ms / 1e9:.1f} | "
                                         f"{f'{mhz:.0f}' if mhz else '-'} | {f'{watt:.0f}' if watt else '-'} | "
                                         f"{temp0 if lo == 0 and temp0 is not None else ''} |")
                        print(ramp_rows[-1], flush=True)
                    for key, (_, _, ms, mhz, _) in (("ramp, first bucket", series[0]), ("ramp, last bucket",
                                                                                          series[-1])):
                        got[key].append((flops / ms / 1e9, mhz))
                    continue
                for w in range(args.sustain_windows if m == "sustained" else 1):
                    temp0 = sampler.read()[3]
                    with sampler.sampling() as readings:
                        if m == "fa3":
                            ms, calls, t_from = fa3_timeit_ms(fn, rest_s=args.method_rest)
                        elif m == "do_bench":
                            ms, calls, t_from = do_bench_ms(fn, flush, rest_s=args.method_rest)
                        else:
                            ms, calls, t_from = sustained_ms(fn, args.sustain_s, est)
                    # (the readings over the timed calls; the last one before them where the block is that short)
                    tail = [x for x in readings if x[0] >= t_from and x[1] is not None] or \
                        [x for x in readings if x[0] < t_from and x[1] is not None][-1:]
                    mhz = statistics.mean(x[1] for x in tail) if tail else None
                    watt = statistics.mean(x[2] for x in tail) if tail else None
                    tf = flops / ms / 1e9
                    got[m].append((tf, mhz))
                    label = m if m != "sustained" else f"sustained {w + 1}/{args.sustain_windows}"
                    rows.append(f"| {name} | {r + 1} | {label} | {ms:.3f} | {tf:.1f} | {calls} | "
                                f"{f'{mhz:.0f}' if mhz else '-'} | {f'{watt:.0f}' if watt else '-'} | "
                                f"{temp0 if temp0 is not None else '-'} |")
                    print(rows[-1], flush=True)
        for m in got:
            tfs = [t for t, _ in got[m]]
            clocks = [c for _, c in got[m] if c]
            summary.append(f"| {name} | {m} | {len(tfs)} | {min(tfs):.1f} | {statistics.median(tfs):.1f} | "
                           f"{max(tfs):.1f} | {f'{statistics.median(clocks):.0f}' if clocks else '-'} |")
        del q8, k8, v8, q8s
        if device.type == "cuda":
            torch.cuda.empty_cache()
    text = fp8_report(device, "--fp8 --method", [
        "- the FP8 forward (float8_e4m3fn q/k/v, per-tensor descale, the op as called: descale check, Vt pre-pass, the "
        "default kernel), causal, H = 4, alpha = 1/sqrt(D); TFLOP/s = 4*H*D*L^2/2 per sequence over the time",
        f"- methods, in turn per round ({args.method_rounds} rounds): fa3 = FA3's FP8 benchmark (sleep "
        f"{args.method_rest:g} s, torch.utils.benchmark timeit(30): 2 warm-up calls, 30 calls in one wall-clock "
        "block, mean); do_bench = FA3's benchmark_attn.py (sleep, triton do_bench(warmup=5, rep=30) recipe: per-call "
        f"CUDA events after an L2 flush, mean); sustained = {args.sustain_windows} window(s) of {args.sustain_s:g} s "
        "back to back (first third untimed, the rest between two CUDA events: the power-capped clock)",
        f"- SM MHz / W: NVML readings every 4 ms over the timed calls (mean; W: "
        f"{'instant power' if sampler.instant else 'nvmlDeviceGetPowerUsage, a 1 s average'}); C: GPU temperature "
        "before the block"
        + (f"; ramp = sleep {args.method_rest:g} s, then {args.ramp_s:g} s of calls back to back, an event after "
           f"each: per {args.ramp_bucket:g} s bucket (from the first call's start) the calls ending in it, ms per "
           "call, the NVML means (own table below; the summary's first / last bucket rows)" if "ramp" in methods
           else "")],
        ["case", "round", "method", "ms", "TFLOP/s", "calls", "SM MHz", "W", "C"], rows)
    if split_rows:
        text += "\n\n" + "\n".join(["| case | kernel (--kernel-split: one call under torch.profiler) | calls | ms | "
                                     "share of the kernels' ms | TFLOP/s if alone |",
                                     "|---|---|---:|---:|---:|---:|"] + split_rows)
    if ramp_rows:
        text += "\n\n" + "\n".join(["| case | round | from s | calls | ms | TFLOP/s | SM MHz | W | C |",
                                     "|---|---:|---:|---:|---:|---:|---:|---:|---:|"] + ramp_rows)
    return text + "\n\n" + "\n".join([
        "| case | method | n | min TFLOP/s | median TFLOP/s | max TFLOP/s | median SM MHz |",
        "|---|---|---:|---:|---:|---:|---:|"] + summary)


# --fp8-sched: (name, lengths, D, targets per sequence), causal, H = 4, group 1, per-tensor descale.
FP8_SCHED_CASES = [("targets B32 1K+2K", [3072] * 32, 128, 2048), ("targets B8 4K+256", [4352] * 8, 128, 256),
                   ("zipf1.2 B32 max4K", zipf_lengths(32, 4096), 128, 0),
                   ("zipf1.2 B32 max4K", zipf_lengths(32, 4096), 256, 0), ("dense B16 S16K", [16384] * 16, 128, 0)]


def run_fp8_sched(args, device: torch.device, timer: Timer) -> str:
    """--fp8-sched: the FP8 forward as scheduled by default (grid order) against fp8_sched=True and bf16."""
    from hstu_attn._fp8 import _fp8_kernel_applies, quantize_fp8

    default = hstu_attn._ops._current_options()
    sched_opts = default | hstu_attn._ops.OPTION_BITS["fp8_sched"]

    def run_case(name, lens, D, targets):
        L = max(lens)
        cu = torch.tensor([0] + lens, device=device).cumsum(0).to(torch.int32)
        q, k, v = (torch.randn(sum(lens), 4, D, device=device, dtype=torch.bfloat16) for _ in range(3))
        (q8, qs), (k8, ks), (v8, vs) = (quantize_fp8(x, cu, "tensor") for x in (q, k, v))
        nt = torch.tensor([min(targets, n) for n in lens], dtype=torch.int32, device=device) if targets else None
        lens_args = (cu, cu, L, L, None, nt, 1, -1, 0, D ** -0.5)

        def fp8(opts):
            return lambda: torch.ops.hstu_attn.fp8_fwd(q8, k8, v8, qs, ks, vs, 0, 0, *lens_args, None, float(L), None,
                                                       None, opts)

        bf16 = lambda: torch.ops.hstu_attn.fwd(q, k, v, *lens_args, None, float(L), None, None)  # noqa: E731
        grid_ms, sched_ms, b_ms = timer.interleaved(fp8(default), fp8(sched_opts), bf16)
        same = torch.equal(fp8(default)(), fp8(sched_opts)())
        kernel = device.type == "cuda" and _fp8_kernel_applies(q8, None, default)
        return (f"| {name} D{D} | {'FP8 kernel' if kernel else 'dequantize+bf16'} | {b_ms:.3f} | {grid_ms:.3f} "
                f"| {sched_ms:.3f} | {sched_ms / grid_ms:.2f}x | {b_ms / grid_ms:.2f}x | {same} |")

    cases = [("smoke B3", [100, 7, 300], 64, 20)] if args.smoke else FP8_SCHED_CASES[:3] if args.quick \
        else FP8_SCHED_CASES
    rows = fp8_rows(args, device, cases, run_case)
    return fp8_report(device, "--fp8-sched", [
        "- dtypes: FP8 = float8_e4m3fn q/k/v, per-tensor descale (quantize_fp8 of the bf16 inputs), output bf16; bf16 "
        "= the bf16 forward on the bf16 inputs; H = 4, causal, alpha = 1/sqrt(D), targets in groups of 1",
        f"- units: ms (median of {args.reps} runs, the three alternating, CUDA events, L2 flushed); FP8 default = the "
        "grid order; FP8 sched = kernel_options(fp8_sched=True), the work list or persistent CTAs where they apply "
        "(sched / default > 1: the schedules lose); same = the two FP8 outputs bitwise equal"],
        ["case", "FP8 path", "bf16 ms", "FP8 default (grid) ms", "FP8 sched ms", "sched / default",
         "bf16 / FP8 default", "same"], rows)


def wanted(case: Case, sweeps: Optional[List[str]]) -> bool:
    """--sweep: the named sweeps only; without it every sweep but the opt-in ones"""
    return case.sweep in sweeps if sweeps else case.sweep not in OPT_IN_SWEEPS


def run_all(args, device, dtype, timer, ref_timer, peer, results) -> None:
    for case in build_cases(args.quick, args.smoke):
        if not wanted(case, args.sweep) or (args.case and case.name not in args.case):
            continue
        if device.type == "cuda" and results and args.cooldown > 0:
            torch.cuda.synchronize()
            time.sleep(args.cooldown)
        res = run_case(case, dtype, device, timer, ref_timer, with_ref=not args.no_ref, peer=peer,
                       cooldown=args.cooldown if device.type == "cuda" else 0.0)
        results.append(res)
        line = f"{case.sweep:7s} {case.name:34s} fwd {res.fwd_ms:9.3f} ms  bwd {res.bwd_ms:9.3f} ms"
        if peer is not None:
            line += (f"   peer fwd {ms_str(res.peer_fwd_ms)} bwd {ms_str(res.peer_bwd_ms)}"
                     f"  ours/peer {ratio_str(res.fwd_ms, res.peer_fwd_ms)} {ratio_str(res.bwd_ms, res.peer_bwd_ms)}")
        print(line, flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
