"""The portable (sm80-class) kernels' masks, rab and comparison values against plain causal: bf16 H4 forward and
backward ms at B16 S4K of the raw ops (hstu_attn::fwd_with_options / bwd_with_options, kernel_options(sm90=False,
fwd_sm80_cfg=c, bwd_sm80_cfg=c)), every case of one head dim and direction timed together (CUDA graphs of n calls,
interleaved per round, median of --reps rounds; fwd17_jag.py's timing). ctx35_run/ctx35_bench.py and
rab35_run/rab35_bench.py are this module with their own line tags (--tag).

A case: NAME[@buf][:cfg][~var][!]
  causal | ctxN (N contexts per sequence; ctx0 = a num_contexts of zeros: the context kernel, no extra tiles) |
  tgtN (N targets, group 1) | ctxNtgtM | rab (rab of shape (B, H, S, S), q's dtype) | rab1 (shape (B, 1, S, S)) |
  rabd / rab1d (backward with has_drab); a NAME ending in noilv / noqs / ev: kernel_options(fwd_sm80_interleave=False
  / fwd_sm80_qscale=False / fwd_sm80_rab_evict=True) (e.g. causalnoqs, rabev)
  @buf: the input set (q, k, v, dout) the case runs on (0 default): cases on different sets tell the inputs'
  placement apart from the kernel; :cfg the fwd_sm80_cfg / bwd_sm80_cfg (default 0); ~var the fp8_fwd_var, except
  ~10 (branch rab35's value for main's rab path in the forward, since tidy36 fwd_sm80_cfg=8, which ~10 maps to);
  ! fwd_sm80_interleave=False (as noilv).

Usage: sm80_case_bench.py LABEL [--tag T] [--reps 5] [--dims 64 128 256] [--dirs fwd bwd] [--cases causal ctx64 ...]
       sm80_case_bench.py LABEL --ncu [--dims ...] [--dirs ...] [--cases ...]   (one call per case, no graphs)"""
import argparse
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "fwd17_run")]  # fwd17_jag.py: carried beside this file, or in the tree
import hstu_attn  # noqa: E402
from hstu_attn import _ops  # noqa: E402
from fwd17_jag import timed  # noqa: E402

H = 4
FWD = torch.ops.hstu_attn.fwd_with_options
BWD = torch.ops.hstu_attn.bwd_with_options


class Inputs:
    """q, k, v, dout of one placement (allocated once, in the order the cases first name them); rab tensors on demand"""

    def __init__(self, B, S, D, seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        self.B, self.S, self.D = B, S, D
        self.q, self.k, self.v, self.do = (torch.randn(B * S, H, D, device="cuda", dtype=torch.bfloat16,
                                                       generator=g) for _ in range(4))
        self.cu = torch.arange(0, B * S + 1, S, device="cuda", dtype=torch.int32)
        self.rabs = {}

    def rab(self, heads):
        if heads not in self.rabs:
            self.rabs[heads] = torch.randn(self.B, heads, self.S, self.S, device="cuda", dtype=torch.bfloat16)
        return self.rabs[heads]


def call_of(inp, direction, case):
    """the forward or backward of one case on inputs inp"""
    m = re.fullmatch(r"([a-z0-9]+)(?:@(\d+))?(?::(\d+))?(?:~(\d+))?(!)?", case)
    name, cfg, var = m.group(1), int(m.group(3) or 0), int(m.group(4) or 0)
    extra = {"fwd_sm80_interleave": False} if m.group(5) else {}
    for flag, kw, value in (("noilv", "fwd_sm80_interleave", False), ("noqs", "fwd_sm80_qscale", False),
                            ("ev", "fwd_sm80_rab_evict", True)):
        if name.endswith(flag):
            name, extra[kw] = name[: -len(flag)], value
    if var == 10:  # (rab35's fp8_fwd_var=10: main's rab path, now kernel_options(fwd_sm80_cfg=8))
        cfg, var = (_ops.FWD_SM80_CFG_RAB_MAIN if direction == "fwd" else cfg), 0
    with _ops.kernel_options(sm90=False, fwd_sm80_cfg=cfg if direction == "fwd" else 0,
                             bwd_sm80_cfg=cfg if direction == "bwd" else 0, fp8_fwd_var=var, **extra):
        opts = _ops._current_options()
    B, S, D = inp.B, inp.S, inp.D
    nc = nt = rab = None
    drab = False
    mc = re.match(r"ctx(\d+)", name)
    if mc:
        nc = torch.full((B,), int(mc.group(1)), device="cuda", dtype=torch.int32)
    mt = re.search(r"tgt(\d+)", name)
    if mt:
        nt = torch.full((B,), int(mt.group(1)), device="cuda", dtype=torch.int32)
    if name.startswith("rab"):
        rab = inp.rab(1 if name.startswith("rab1") else H)
        drab = name.endswith("d")
    args = (inp.cu, inp.cu, S, S, nc, nt, 1, -1, 0, D ** -0.5, rab, float(S), None, None)
    if direction == "fwd":
        return lambda: FWD(inp.q, inp.k, inp.v, *args, opts)
    return lambda: BWD(inp.do, inp.q, inp.k, inp.v, *args, drab, False, opts)


def buf_of(case):
    m = re.search(r"@(\d+)", case)
    return int(m.group(1)) if m else 0


def main(tag="sm80"):
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--tag", default=tag, help="the first word of the per-case lines (default: %(default)s)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dims", nargs="*", type=int, default=[64, 128, 256])
    ap.add_argument("--dirs", nargs="*", default=["fwd", "bwd"])
    ap.add_argument("--cases", nargs="*", default=["causal", "ctx64", "tgt256", "rab", "rab1"])
    ap.add_argument("--bwd-cases", nargs="*", default=None, help="the backward's cases (default: --cases)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--ncu", action="store_true")
    a = ap.parse_args()
    B, S = a.batch, a.seqlen
    if not a.ncu:
        print(f"\n## {a.label}: {torch.cuda.get_device_name()}, bf16 B{B} S{S} H4, ms (ratio to the same buffer's "
              f"causal), CUDA graphs, median of {a.reps} interleaved rounds; sm90=False")
    for D in a.dims:
        for direction in a.dirs:
            cases = a.bwd_cases if direction == "bwd" and a.bwd_cases else a.cases
            bufs = {}
            for c in cases:  # the inputs allocated in the order the cases name them
                b = buf_of(c)
                if b not in bufs:
                    bufs[b] = Inputs(B, S, D, seed=11 + b)
            run = {c: call_of(bufs[buf_of(c)], direction, c) for c in cases}
            if a.ncu:
                for c in cases:
                    torch.cuda.nvtx.range_push(f"{direction} D{D} {c}")
                    run[c]()
                    torch.cuda.nvtx.range_pop()
                torch.cuda.synchronize()
                continue
            for c in cases:  # warm-up, and the rab tensors allocated before the graphs
                run[c]()
            torch.cuda.synchronize()
            n = 10 if direction == "fwd" else 4
            ms = timed(run, a.reps, n)
            base = {b: ms.get("causal" + (f"@{b}" if b else "")) for b in bufs}
            addr = " ".join(f"q@{b}={bufs[b].q.data_ptr() % (1 << 30):#x}" for b in bufs)
            print(f"| {direction} D{D} | " + " | ".join(
                f"{c} {ms[c]:.4f}" + (f" ({ms[c] / base[buf_of(c)]:.3f}x)" if base[buf_of(c)] else "")
                for c in cases) + f" | {addr} |", flush=True)
            for c in cases:
                print(f"{a.tag} {a.label} | {direction} D{D} | {c} | {ms[c]:.5f}", flush=True)
            del run, bufs
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
