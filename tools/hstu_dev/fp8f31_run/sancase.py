"""fp8f31 (issue 36): small jagged Hopper FP8 forward calls for compute-sanitizer: the default kernels and
kernel_options(fp8_fwd_var=VAR) (default 1; D128: the 192-key tiles, D256: the 64-key grid kernel; CONFIGS adds
e.g. 128:128, D128's 128-key tiles), causal, a local window and contexts + target groups, H 2, lengths ending inside
tiles, an empty sequence; the two outputs bit-equal.
Usage (GPU, sm_90): compute-sanitizer --tool memcheck --kernel-name kns=hstu_fwd_fp8_sm90_kernel python sancase.py
    [VAR [CONFIGS]]   (CONFIGS: D:BN,... of 128:192, 128:128, 256:64, 64:128; default 128:192,256:64)"""

import sys

import torch

import hstu_attn  # noqa: F401  (loads the ops)
from hstu_attn import _fp8


def main():
    if not torch.cuda.is_available():
        print("sancase: needs a GPU")
        return 0
    dev = torch.device("cuda")
    torch.manual_seed(0)
    lens = [700, 0, 1100, 129, 257, 390]
    B, H = len(lens), 2
    cu = torch.tensor([0] + lens, device=dev, dtype=torch.int32).cumsum(0).to(torch.int32)
    T, S = int(cu[-1]), max(lens)
    ctx = torch.tensor([3, 0, 5, 1, 0, 2], device=dev, dtype=torch.int32)
    tgt = torch.tensor([4, 0, 7, 2, 3, 0], device=dev, dtype=torch.int32)
    bits, shift = hstu_attn._ops.OPTION_BITS, hstu_attn._ops.FP8_FWD_VAR_SHIFT
    var = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    configs = [tuple(int(x) for x in c.split(":")) for c in (sys.argv[2] if len(sys.argv) > 2 else
                                                            "128:192,256:64").split(",")]
    bad = 0
    for D, bn in configs:
        q, k, v = (torch.randn(T, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
        for mode in ("tensor", "block"):
            (q8, qs), (k8, ks), (v8, vs) = (_fp8.quantize_fp8(x, cu, mode) for x in (q, k, v))
            m = _fp8.DESCALE_MODES.index(mode)
            wide = bits["fp8_bn192"] if bn == 192 else 0
            if bn == 192 and mode == "block":
                continue  # (192-key tiles never run block mode)
            for name, nc, nt, g, wl, wr in (("causal", None, None, 1, -1, 0), ("local", None, None, 1, 90, 0),
                                            ("context_target_group", ctx, tgt, 2, -1, 0)):
                def call(o):
                    return torch.ops.hstu_attn.fp8_fwd(q8, k8, v8, qs, ks, vs, m, 0, cu, cu, S, S, nc, nt, g, wl, wr,
                                                       D ** -0.5, None, float(S), None, None, o | wide)
                base, other = call(0), call(var << shift)
                torch.cuda.synchronize()
                same = torch.equal(base, other) and bool(torch.isfinite(base).all())
                print(f"D{D} BN{bn} {mode} {name}: var {var} bit-equal to the default, finite: {same}")
                bad += not same
    print("sancase", "ok" if bad == 0 else f"FAILED ({bad})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
