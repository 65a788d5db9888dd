"""fp8d256's A/B at D = 256 in one process: the bf16 Hopper backward, the dequantized path (main's FP8 backward at
D = 256), the FP8 kernel path's default (kQSplit) and its lab kernel (the op's diag kFp8BwdD256Sync = 512), B16
S16K / S4K H4 causal, block descale; benchmarks/hstu_fp8_bwd.py's inputs and timing (interleaved_ms: L2 flushed,
random order, median). Usage: python d256_ab.py [--reps N] [--cases 16x16384,16x4096]"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # (the carry: hstu_fp8_bwd.py, bench_util.py beside this file)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "benchmarks"))
import hstu_fp8_bwd as hb  # noqa: E402

import hstu_attn  # noqa: E402
from hstu_attn import _fp8_bwd  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cases", default="16x16384,16x4096")
    a = ap.parse_args()
    dev = torch.device("cuda")
    print(f"## d256_ab: {torch.cuda.get_device_name(dev)}; ms median of {a.reps}, random order, L2 flushed")
    print("| case | bf16 bwd | dequant | fp8 default | fp8 sync (diag 512) | TFLOP/s default / sync | "
          "max rel diff default vs sync dq/dk/dv |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for c in a.cases.split(","):
        B, S = (int(x) for x in c.split("x"))
        D, H = 256, 4
        cu, (q, k, v), dout, (q8, k8, v8), (qs, ks, vs), lens, m = hb.make_inputs(B, S, D, "block", dev, H)
        opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]
        args = (q8, k8, v8, qs, ks, vs, m, 0, *lens, None, float(S), None, None)
        bf16 = lambda: torch.ops.hstu_attn.bwd(dout, q, k, v, *lens, None, float(S), None, None, False, False)  # noqa
        deq = lambda: torch.ops.hstu_attn.fp8_bwd(dout, *args, False, hstu_attn._ops.FP8_BWD_DEQUANT_BIT)  # noqa
        dflt = lambda: _fp8_bwd.fp8_bwd_cuda(dout, args, False, opts)  # noqa: E731
        sync = lambda: _fp8_bwd.fp8_bwd_cuda(dout, args, False, opts, diag=512)  # noqa: E731
        flush = torch.empty(64 << 20, dtype=torch.int32, device=dev)
        t = hb.interleaved_ms([bf16, deq, dflt, sync], a.reps, 2, dev, flush)
        fl = hb.bwd_flops(B, S, D, H)
        g1, g2 = dflt(), sync()
        diff = "/".join(f"{(x.float() - y.float()).abs().max().item() / max(y.float().abs().max().item(), 1e-30):.1e}"
                        for x, y in zip(g1, g2))
        print(f"| B{B} S{S} D{D} | {t[0]:.3f} | {t[1]:.3f} | {t[2]:.3f} | {t[3]:.3f} | "
              f"{fl / t[2] / 1e9:.1f} / {fl / t[3] / 1e9:.1f} | {diff} |", flush=True)
        del q, k, v, dout, q8, k8, v8
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
