"""fp8b21's ncu driver (issue 36; S:NAME arguments since fp8b22): one FP8 backward path call
(kernel_options(fp8_bwd=True)) per argument at B16 H4 D128 causal, block descale, the benchmark's inputs, nothing
timed (for `ncu -k regex:hstu_bwd_fp8_sm90_kernel`).
Usage: python3 -P ncu_case.py S[:NAME]... (NAME: a FP8_BWD_VARIANT_BITS variant whose option bits are added)."""
import sys

import torch

import hstu_attn
from hstu_attn import _fp8, _fp8_bwd

dev = torch.device("cuda")
B, H, D = 16, 4, 128
for arg in sys.argv[1:]:
    S, _, name = arg.partition(":")
    S = int(S)
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"] | (_fp8_bwd.FP8_BWD_VARIANT_BITS[name] if name else 0)
    g = torch.Generator(device=dev).manual_seed(S)
    cu = torch.arange(B + 1, device=dev, dtype=torch.int32) * S
    q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=torch.bfloat16, generator=g) for _ in range(3))
    dout = (torch.randn(B * S, H, D, device=dev, generator=g) * 1e-2).to(torch.bfloat16)
    (q8, qs), (k8, ks), (v8, vs) = (_fp8.quantize_fp8(x, cu, "block") for x in (q, k, v))
    del q, k, v
    m = _fp8.DESCALE_MODES.index("block")
    lens = (cu, cu, S, S, None, None, 1, -1, 0, D ** -0.5)
    out = torch.ops.hstu_attn.fp8_bwd(dout, q8, k8, v8, qs, ks, vs, m, 0, *lens, None, float(S), None, None, False,
                                      opts)
    torch.cuda.synchronize()
    print(f"ncu_case S{S} {name or 'default'} done ({torch.cuda.get_device_name()})", flush=True)
    del out, dout, q8, k8, v8
    torch.cuda.empty_cache()
