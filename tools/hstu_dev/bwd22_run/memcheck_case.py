"""The case of bwd21's fault for compute-sanitizer memcheck (branch bwd22): test_sm80_backward_gpu.py's
dq-workspace-layout inputs (lengths [700, 129, 64, 1, 330, 0, 257, 1100, 384]: the last sequence shorter than the
longest, so the convert's tiles past its end lie past the workspace), local_target mask, rab on 2 heads, delta-q,
seqused, plus the variant with 5 rows behind the last sequence; forward and backward under kernel_options(sm90=False,
bwd_sm80_cfg=c) for each --cfgs value and head dim, bf16, no reference (the point is the memory accesses). Run with
PYTORCH_NO_CUDA_MEMORY_CACHING=1 so that each tensor is its own allocation (a read past the workspace is caught).
Usage (from the carry tree's root): python3 -P memcheck_case.py TESTS_DIR [--dims 128 256] [--cfgs 0 3]"""
import argparse
import os
import sys
import zlib

import torch

from hstu_attn import _ops, hstu_attn_varlen_func


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tests_dir")
    ap.add_argument("--dims", type=int, nargs="+", default=[128, 256])
    ap.add_argument("--cfgs", type=int, nargs="+", default=[0, 3])
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.tests_dir))
    import hstu_kernel_checks as kg
    lens = [700, 129, 64, 1, 330, 0, 257, 1100, 384]
    dtype = torch.bfloat16
    for D in a.dims:
        case = kg.make_case(zlib.crc32(repr(("dqlayout", D, "local_target", 2, str(dtype))).encode()), lens, 2, D,
                            dtype, "local_target", 2, delta_q=True, seqused=True)
        kw = kg._varlen_kwargs(case)
        extra = [torch.cat([t, torch.randn_like(t[:5])]) for t in (case["q"], case["k"], case["v"])]
        for cfg in a.cfgs:
            for qkv in ((case["q"], case["k"], case["v"]), extra):
                with _ops.kernel_options(sm90=False, bwd_sm80_cfg=cfg):
                    leaves = [t.detach().clone().requires_grad_() for t in qkv]
                    out = hstu_attn_varlen_func(*leaves, alpha=0.5, **kw)
                    dq = torch.autograd.grad(out, leaves, torch.randn_like(out))[0]
                torch.cuda.synchronize()
                assert torch.isfinite(dq).all(), (D, cfg)
            print(f"D {D} cfg {cfg}: ok", flush=True)


if __name__ == "__main__":
    main()
