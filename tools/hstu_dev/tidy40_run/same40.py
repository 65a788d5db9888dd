"""tidy40's check that the branch's sm80-class backward launchers run what main's ran (a refactor: one sm_90+
prologue for the rab / split / dQ-claim launchers and the default's loops, the split's key block once in the op).

  python3 -P same40.py dump OUT.pt      (PYTHONPATH: one wheel's site) each case's backward once under
                                        kernel_options(sm90=False, ...) through the private op (no forward: only the
                                        backward's own units run): the CUDA kernels it launched (torch.profiler, in
                                        order) and dq / dk / dv / drab
  python3 -P same40.py compare A.pt B.pt [C.pt]   per case: the same kernels? the gradients bit for bit, or within
                                        2x the noise of C (a second dump of A's wheel: the fp32 atomics' run to run)

Cases: bf16 (one fp16) jagged causal, H = 2, alpha D^-1/2: the default at D = 32 / 64 / 128 / 256 (with contexts at
D = 64 / 256), rab through shared memory (per-head drab) at D = 64 / 128 / 256, the split (fwd_sm80_cfg=14) and the
dQ claims (fwd_sm80_cfg=13) at D = 64 / 128 / 256 and 128 / 256, comparison cfgs that require sm_90 (2, 6, 7, 13, 15).
"""
import sys
import time

import torch

LENS = [512, 1, 200, 64, 384, 129]  # (max 512: rab's rows 16-byte aligned)
CASES = [  # label, D, dtype, contexts, rab, kernel_options
    ("d32", 32, "bf16", False, False, {}),
    ("d64", 64, "bf16", False, False, {}),
    ("d64ctx", 64, "bf16", True, False, {}),
    ("d128", 128, "bf16", False, False, {}),
    ("d128fp16", 128, "fp16", False, False, {}),
    ("d256", 256, "bf16", False, False, {}),
    ("d256ctx", 256, "bf16", True, False, {}),
    ("rab64", 64, "bf16", False, True, {}),
    ("rab128", 128, "bf16", False, True, {}),
    ("rab256", 256, "bf16", False, True, {}),
    ("split64", 64, "bf16", False, False, {"fwd_sm80_cfg": 14}),
    ("split128", 128, "bf16", False, False, {"fwd_sm80_cfg": 14}),
    ("split256", 256, "bf16", False, False, {"fwd_sm80_cfg": 14}),
    ("claim128", 128, "bf16", False, False, {"fwd_sm80_cfg": 13}),
    ("claim256", 256, "bf16", False, False, {"fwd_sm80_cfg": 13}),
    ("cfg2d64", 64, "bf16", False, False, {"bwd_sm80_cfg": 2}),
    ("cfg6d256", 256, "bf16", False, False, {"bwd_sm80_cfg": 6}),
    ("cfg7d128", 128, "bf16", False, False, {"bwd_sm80_cfg": 7}),
    ("cfg13d256", 256, "bf16", False, False, {"bwd_sm80_cfg": 13}),
    ("cfg15d64", 64, "bf16", False, False, {"bwd_sm80_cfg": 15}),
]


def run_case(label, D, dt, ctx, rab_on, opts):
    from hstu_attn._ops import _current_options, kernel_options

    dev, H = "cuda", 2
    dtype = torch.bfloat16 if dt == "bf16" else torch.float16
    gen = torch.Generator(device=dev).manual_seed(40 + D)
    total, S = sum(LENS), max(LENS)
    cu = torch.tensor([0] + LENS, device=dev).cumsum(0).to(torch.int32)
    q, k, v, dout = (torch.randn(total, H, D, generator=gen, device=dev, dtype=dtype) for _ in range(4))
    rab = torch.randn(len(LENS), H, S, S, generator=gen, device=dev, dtype=dtype) if rab_on else None
    nc = torch.tensor([min(3, n) for n in LENS], dtype=torch.int32, device=dev) if ctx else None
    with kernel_options(sm90=False, **opts):
        bits = _current_options()
    args = (dout, q, k, v, cu, cu, S, S, nc, None, 1, -1, 0, 1.0 / D**0.5, rab, float(S), None, None, rab_on, False,
            bits)
    torch.ops.hstu_attn.bwd_with_options(*args)  # (warm-up: module loads, the validation's PTX where JIT-compiled)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        grads = torch.ops.hstu_attn.bwd_with_options(*args)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return {"kernels": names, "grads": [g.float().cpu() for g in grads]}


def dump(path):
    t0 = time.time()
    out = {}
    for case in CASES:
        try:
            out[case[0]] = run_case(*case)
        except Exception as e:  # (recorded: a refused or failing case is a result too)
            out[case[0]] = {"error": f"{type(e).__name__}: {str(e)[:160]}"}
    torch.save(out, path)
    print(f"dumped {len(out)} cases in {time.time() - t0:.1f} s ({torch.cuda.get_device_name(0)})")


def short(n):
    return n.split("(")[0].split("<")[0].split(" ")[-1][:40]


def compare(pa, pb, pc=None):
    a, b = torch.load(pa), torch.load(pb)
    c = torch.load(pc) if pc else None
    same_k = same_bits = 0
    flags = []  # (the digest's line: label:K (same kernels) B (bitwise) or N (within main/main's noise))
    for label, _, _, _, _, _ in CASES:
        x, y = a.get(label, {"error": "missing"}), b.get(label, {"error": "missing"})
        if "error" in x or "error" in y:
            print(f"{label:10s} ERR main: {x.get('error', 'ok')} | branch: {y.get('error', 'ok')}")
            flags.append(f"{label}:ERR")
            continue
        kern = x["kernels"] == y["kernels"]
        same_k += kern
        diffs = [(g1 - g2).abs().max().item() if g1.numel() else 0.0 for g1, g2 in zip(x["grads"], y["grads"])]
        noise = ""
        nd = None
        if c is not None and "grads" in c.get(label, {}):
            nd = [(g1 - g2).abs().max().item() if g1.numel() else 0.0 for g1, g2 in zip(x["grads"], c[label]["grads"])]
            noise = " | main/main " + " ".join(f"{d:.1e}" for d in nd)
        bits = all(d == 0.0 for d in diffs)
        same_bits += bits
        in_noise = nd is not None and all(d <= 2 * n for d, n in zip(diffs, nd))
        # (R: agreeing to the fp32 reduction order, the tests' assert_agree: max|d| <= 1e-2 max|main| + 1e-6)
        agree = all(d <= 1e-2 * (g.abs().max().item() if g.numel() else 0.0) + 1e-6 for d, g in zip(diffs, x["grads"]))
        flags.append(f"{label}:{'K' if kern else 'k'}{'B' if bits else 'N' if in_noise else 'R' if agree else 'x'}")
        ks = ",".join(sorted({short(n) for n in y["kernels"] if "hstu" in n}))
        print(f"{label:10s} {'BITS' if bits else 'diff'} kernels {'same' if kern else 'DIFF'} ({len(y['kernels'])}: "
              f"{ks}) | dq dk dv drab max|d| " + " ".join(f"{d:.1e}" for d in diffs) + noise)
        if not kern:
            print(f"  main:   {[short(n) for n in x['kernels']]}\n  branch: {[short(n) for n in y['kernels']]}")
    print("FLAGS " + " ".join(flags))
    print(f"SAME KERNELS {same_k}/{len(CASES)}, bitwise {same_bits}/{len(CASES)} (K same kernels, B bitwise, N "
          "within 2x main/main's max |d|, R within 1e-2 max|main|, x none)")


if __name__ == "__main__":
    if sys.argv[1] == "dump":
        dump(sys.argv[2])
    else:
        compare(*sys.argv[2:5])
