"""fp8f23 run 2 (issue 36, lab): the D = 128 relay CTA pairs (kernel_options(fp8_fwd_var=4, fp8_bn192=True)) under
the watchdog wheel (branch fp8f23-diag: fp8f22-diag's pair kernels with both fixes, the first-use peer-empty wait and
the unpaired CTAs' K in two 96-row halves): a wait not completed within 2^31 SM cycles writes a record into its CTA's
output rows and gives up. Runs the lab test's case (causal, tensor descale, lengths 700, 0, 450, 77, 1030, 1300, 193,
H2), then B4 S4K H4; prints the records (wait ids: tools/hstu_dev/fp8f22_run/pair_diag.py)."""
import time

import torch

from hstu_attn import _ops
from hstu_attn._fp8 import DESCALE_MODES, quantize_fp8


def run(lens, H, D, var):
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32, device="cuda")
    n = int(cu[-1])
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(n, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    (q8, qs), (k8, ks), (v8, vs) = (quantize_fp8(x, cu, "tensor") for x in (q, k, v))
    mx = max(lens)
    with _ops.kernel_options(fp8_fwd_var=var, fp8_bn192=True):
        o = _ops._current_options()
    t = time.time()
    out = torch.ops.hstu_attn.fp8_fwd(q8, k8, v8, qs, ks, vs, DESCALE_MODES.index("tensor"), 0, cu, cu, mx, mx,
                                      None, None, 1, -1, 0, D ** -0.5, None, float(mx), None, None, o)
    torch.cuda.synchronize()
    dt = time.time() - t
    w = out.contiguous().view(torch.int32).reshape(n, H, -1)[:, :, :15].cpu()
    hits = ((w[:, :, 0] >> 16) & 0xFFFF) == 0xDEAD
    recs = w[hits].tolist()
    print(f"\nvar {var} lens {lens[:7]} H{H} D{D}: {dt:.2f} s, {len(recs)} records", flush=True)
    if recs:
        print("| id | block x,y,z | tid | slot | parity | mbar word (hi lo) | n_slots | slot0 | peer_slot0 | n_tiles | "
              "paired |\n|---|---|---|---|---|---|---|---|---|---|---|")
        for r in sorted(recs, key=lambda r: (r[3], r[2], r[1], r[13]))[:30]:
            print(f"| {r[0] & 0xFFFF} | {r[1]},{r[2]},{r[3]} | {r[13]} | {r[4]} | {r[5]} | "
                  f"{r[7] & 0xFFFFFFFF:08x} {r[6] & 0xFFFFFFFF:08x} | {r[8]} | {r[9]} | {r[10]} | {r[11]} | {r[12]} |",
                  flush=True)
    return len(recs)


print(torch.cuda.get_device_name())
run([700, 0, 450, 77, 1030, 1300, 193], 2, 128, 4)
run([4096] * 4, 4, 128, 4)
