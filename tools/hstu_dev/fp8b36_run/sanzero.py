"""fp8b36 (issue 36): the FP8 backward's op on jagged batches whose pairs the kernel's self-zeroing dq workspace
zeroes (40 sequences of up to 700 rows, H 2: 16 pairs a group), the default and main_path, for compute-sanitizer
memcheck (`--kernel-name kns=fp8_`); prints "sanzero ok" when the default's gradients match main_path's (dk / dv
bit-equal, dq without NaN). Usage (GPU, sm_90): python sanzero.py TREE (the carry's tree: tests/hstu/fp8_checks.py)
"""

import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "tests", "hstu"))
from fp8_checks import lengths_args, make_case, quantized  # noqa: E402

import hstu_attn  # noqa: E402
from hstu_attn import _fp8_bwd as fb  # noqa: E402


def main():
    rng = random.Random(5)
    lens = [rng.choice([0, 1, 127, 128, 129, 300, 640, 700]) for _ in range(40)]
    ok = True
    for mask in ("causal", "context_target_group"):
        c = make_case(81, lens, 2, 128, mask, device="cuda")
        (q8, k8, v8), scales = quantized(c, "block")
        dout = (torch.randn(q8.shape, device="cuda") * 1e-2).to(torch.bfloat16)
        ln = lengths_args(c)
        args = (q8, k8, v8, *scales, 3, 0, ln["cu_seqlens_q"], ln["cu_seqlens_k"], ln["max_seqlen_q"],
                ln["max_seqlen_k"], ln["num_contexts"], ln["num_targets"], ln["target_group_size"],
                *ln["window_size"], 128 ** -0.5, None, float(ln["max_seqlen_q"]), None, None)
        opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]
        base = fb.fp8_bwd_cuda(dout, args, False, opts | fb.FP8_BWD_VARIANT_BITS["main_path"])
        var = fb.fp8_bwd_cuda(dout, args, False, opts)
        torch.cuda.synchronize()
        same = (torch.equal(var[1], base[1]) and torch.equal(var[2], base[2]) and not torch.isnan(var[0]).any()
                and bool((var[0].float() - base[0].float()).abs().max() <= 0.05 * base[0].float().abs().max()))
        print(f"{mask}: default vs main_path {'same' if same else 'DIFFERENT'}", flush=True)
        ok &= same
    print("sanzero ok" if ok else "sanzero FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
