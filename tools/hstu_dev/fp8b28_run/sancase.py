"""fp8b28 (issue 36): a small jagged FP8 backward call for compute-sanitizer: the default kernel, then the 2-CTA
cluster variant kFp8BwdPairDq (diag 1073741824: dev builds, `--define hstu_dev=1`; run 3's lab wheel of 4c3611c had
it in its product list), causal and a local window, H 2, lengths with odd key-block counts (a pair's odd block past
its sequence), an empty sequence and one of one block; dk / dv bit-equal to the default's, dq within one bf16
rounding.
Usage (GPU, sm_90): compute-sanitizer --tool memcheck --kernel-name kns=hstu_bwd_fp8_sm90_kernel python sancase.py
[DIAG...] (fp8b29: dq within the bound of bf16 accumulation, the default since session 26)"""

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
    H, D = 2, 128
    cu = torch.tensor([0] + lens, device=dev, dtype=torch.int32).cumsum(0).to(torch.int32)
    T, S = int(cu[-1]), max(lens)
    q, k, v = (torch.randn(T, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    dout = (torch.randn(T, H, D, device=dev) * 1e-2).to(torch.bfloat16)
    (q8, qs), (k8, ks), (v8, vs) = (_fp8.quantize_fp8(x, cu, "block") for x in (q, k, v))
    m = _fp8.DESCALE_MODES.index("block")
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]
    diags = [int(x) for x in sys.argv[1:]] or [1073741824]  # (fp8b29: kFp8BwdDqBf16 134217728)
    bad = 0
    for wl, wr in ((-1, 0), (300, 0)):
        def call(diag):
            return torch.ops.hstu_attn.fp8_bwd_sm90(dout, q8, k8, v8, qs, ks, vs, m, 0, cu, cu, S, S, None, None, 1,
                                                    wl, wr, D ** -0.5, None, float(S), None, None, opts, diag)
        base = call(0)
        for d in diags:
            var = call(d)
            torch.cuda.synchronize()
            a, b = base[0].float(), var[0].float()
            ok_kv = torch.equal(var[1], base[1]) and torch.equal(var[2], base[2])
            extra = 2 ** -8 * ((S + 127) // 128) ** 0.5  # (since session 26 dQ adds in bf16: order / dtype)
            nq = int(((a - b).abs() > 2 ** -7 * a.abs() + extra * a.abs().max().item()).sum())
            print(f"window ({wl}, {wr}) diag {d}: dk / dv bit-equal {ok_kv}, dq elements beyond one bf16 rounding {nq}")
            bad += (not ok_kv) + (nq > 0)
    print("sancase", "ok" if bad == 0 else f"FAILED ({bad})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
