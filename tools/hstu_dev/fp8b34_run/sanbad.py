"""fp8b34 (issue 36; fp8b33's sanbad.py plus a bad descale factor): the FP8 backward's one op on bad int32 vectors
and a NaN q_descale, for compute-sanitizer: a small jagged call (H 2, D 128, sequences 300 / 0 / 129 / 700 rows,
seqused) with good vectors, then offsets and seqused far outside the rows (the cases of test_fp8_bwd.py's
BAD_VECTORS plus seqused on a jagged batch), the branch's path (the pre-pass first, reading them raw, the descale
check in its first block) and main_path (main 39ee30ed's path); each bad call's DeviceInputError is read back
(check_errors). Prints one line per call and "sanbad ok" when every bad call was recorded and the good calls agree.
Usage (GPU, sm_90): compute-sanitizer --tool memcheck --kernel-name kns=fp8_ python sanbad.py
"""

import sys

import torch

import hstu_attn
from hstu_attn import _fp8, _fp8_bwd


def main():
    if not torch.cuda.is_available():
        print("sanbad: needs a GPU")
        return 0
    dev = torch.device("cuda")
    torch.manual_seed(0)
    lens = [300, 0, 129, 700]
    H, D = 2, 128
    i32 = lambda v: torch.tensor(v, device=dev, dtype=torch.int32)  # noqa: E731
    cu = i32([0] + lens).cumsum(0).to(torch.int32)
    T, S = int(cu[-1]), max(lens)
    q, k, v = (torch.randn(T, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    dout = (torch.randn(T, H, D, device=dev) * 1e-2).to(torch.bfloat16)
    (q8, qs), (k8, ks), (v8, vs) = (_fp8.quantize_fp8(x, cu, "tensor") for x in (q, k, v))
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]
    big = 1 << 30
    cases = {
        "good": {},
        "good seqused": dict(seqused_q=i32([250, 0, 100, 600]), seqused_k=i32([300, 0, 129, 700])),
        "cu_q last far beyond": dict(cu_q=i32([0, 300, 300, 429, big])),
        "cu_q first far negative": dict(cu_q=i32([-big, 300, 300, 429, T])),
        "cu_k last far beyond": dict(cu_k=i32([0, 300, 300, 429, big])),
        "cu_k middle far negative": dict(cu_k=i32([0, 300, -big, 429, T])),
        "cu_q decreasing": dict(cu_q=i32([0, 900, 300, 429, T])),
        "seqused_q far beyond": dict(seqused_q=i32([300, 0, big, 700])),
        "seqused_k negative": dict(seqused_k=i32([300, -big, 129, 700])),
        "q_descale nan": dict(qs=torch.full_like(qs, float("nan"))),
    }
    bad, first = 0, None
    hstu_attn.check_errors()
    for variant in ("default", "main_path"):
        bits = opts | _fp8_bwd.FP8_BWD_VARIANT_BITS.get(variant, 0)
        for name, c in cases.items():
            out = torch.ops.hstu_attn.fp8_bwd(dout, q8, k8, v8, c.get("qs", qs), ks, vs, 0, 0, c.get("cu_q", cu),
                                              c.get("cu_k", cu), S, S, None, None, 1, -1, 0, D ** -0.5, None, float(S),
                                              c.get("seqused_q"), c.get("seqused_k"), False, bits)
            torch.cuda.synchronize()
            try:
                hstu_attn.check_errors()
                err = None
            except hstu_attn.DeviceInputError as e:
                err = e.arg
            ok = (err is None) == name.startswith("good")
            if name == "good" and variant == "main_path":
                ok = ok and torch.equal(out[1], first[1]) and torch.equal(out[2], first[2])
            if name == "good" and variant == "default":
                first = out
            zero = all(bool((torch.isnan(g.float()) | (g == 0)).all()) for g in out)
            ok = ok and (err is None or zero)
            print(f"{variant} {name}: recorded {err}, gradients zero / NaN {zero}, ok {ok}", flush=True)
            bad += not ok
    print("sanbad", "ok" if bad == 0 else f"FAILED ({bad})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
