"""The portable (sm80-class) forward against NVIDIA's Ampere HSTU kernels (the peer: hstu_attn_2_cuda, built by
tools/peer/build_nvidia_ampere_hstu.sh, on PYTHONPATH) and FA2 (torch's flash SDPA), issue 39, branches fwd21 /
fwd22: bf16 H4 causal forward ms of kernel_options(sm90=False, fwd_sm80_cfg=c) on issue 39's shapes, B256 S256 D256,
and the Zipf batch with its dense same-token twin (3 contexts; benchmarks/hstu_attention.py's jagged row) at D = 64 /
256. --prof: the Zipf / dense pair's kernels one by one (torch.profiler: the validation, the split's list, the
forward kernel; us per call, mean of 10 calls), and the Zipf batch's lengths.
Timing as fwd17_jag.py (tools/hstu_dev/fwd17_run): CUDA graphs of n calls, variants interleaved per round, median of
--reps rounds. The peer is called through its raw varlen_fwd the way benchmarks/hstu_attention.py's adapter builds
the call (imported from the tree in the working directory). Prints markdown tables and `fwd21 LABEL | case | variant
| ms` lines. --ncu: each variant once, no warm-up, no timing (for `ncu -k regex:"hstu_fwd_kernel|flash_fwd_kernel"`).

Usage: fwd21_bench.py LABEL [--reps 5] [--cfgs 0 3] [--b256-cfgs 0 3] [--d128-cfgs 0 5] [--peer] [--fa2]
       [--cases s8k b256 s4k256 s4k128 s16k128 b128 zipf] [--ncu] [--prof]"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fwd17_run"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fwd17_jag import H, fa2, ours, time_row, zipf_lengths  # noqa: E402


def peer_fwd(lens, D, seed=2):
    """the peer's forward on ours(lens, D)'s inputs (the same seed), causal, alpha D^-1/2, scaling max_len"""
    sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
    import hstu_attention as ha  # noqa: E402
    import hstu_attn_2_cuda as m  # noqa: E402
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(sum(lens), H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    cu = torch.tensor([0] + lens, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
    S = max(lens)
    args = ha.hstu_peer_args(ha.pybind_types(m.varlen_fwd), [q, k, v, cu, cu, S, S],
                             (None, None, 1, -1, 0, D ** -0.5, None), S, S)
    return lambda: m.varlen_fwd(*args)[0]


def prof_pair(jag, tok, dims, n=10):
    """the kernels of the Zipf / dense pair (3 contexts, the default): us per call of each kernel, mean of n calls"""
    print(f"zipf lengths (sorted): {sorted(jag, reverse=True)}")
    print("| case | kernel | us per call |")
    print("|---|---|---:|")
    for D in dims:
        for name, lens in ((f"zipf D{D} ctx3", jag), (f"dense B2 S{tok // 2} D{D} ctx3", [tok // 2] * 2)):
            fn = ours(lens, D, "0", 3)
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(n):
                    fn()
                torch.cuda.synchronize()
            tot = {}
            for e in prof.events():
                if e.device_type == torch.autograd.DeviceType.CUDA:
                    k = e.name.split("(")[0].split("<")[0][-40:]
                    tot[k] = tot.get(k, 0.0) + e.device_time / n
            for k, us in sorted(tot.items(), key=lambda x: -x[1]):
                print(f"| {name} | {k} | {us:.2f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cfgs", nargs="*", default=["0"], help="fwd_sm80_cfg values (c or c:split) on s8k")
    ap.add_argument("--b256-cfgs", nargs="*", default=["0"], help="fwd_sm80_cfg values on b256 and s4k256")
    ap.add_argument("--d128-cfgs", nargs="*", default=["0"], help="fwd_sm80_cfg values on s4k128, s16k128, b128")
    ap.add_argument("--peer", action="store_true")
    ap.add_argument("--fa2", action="store_true")
    ap.add_argument("--cases", nargs="*", default=["s8k", "b256", "zipf"])
    ap.add_argument("--zipf-dims", nargs="*", type=int, default=[64, 256])
    ap.add_argument("--ncu", action="store_true", help="each variant once, for ncu")
    ap.add_argument("--prof", action="store_true", help="the Zipf / dense pair's kernels (torch.profiler)")
    a = ap.parse_args()
    print(f"## {a.label}: {torch.cuda.get_device_name()}, bf16 H4 causal, forward ms (TFLOP/s, FA convention "
          f"per sequence), CUDA graphs, median of {a.reps} interleaved rounds")
    jag = zipf_lengths(32, 4096)
    tok = sum(jag)
    if a.prof:
        prof_pair(jag, tok, a.zipf_dims)
        return
    by_key = {"s8k": [("B16 S8K D64", [8192] * 16, 64, 0, a.cfgs, True)],
              "b256": [("B256 S256 D256", [256] * 256, 256, 0, a.b256_cfgs, True)],
              "s4k256": [("B16 S4K D256", [4096] * 16, 256, 0, a.b256_cfgs, True)],
              "s4k128": [("B16 S4K D128", [4096] * 16, 128, 0, a.d128_cfgs, True)],
              "s16k128": [("B16 S16K D128", [16384] * 16, 128, 0, a.d128_cfgs, True)],
              "b128": [("B128 S1K D128", [1024] * 128, 128, 0, a.d128_cfgs, True)],
              "zipf": [c for D in a.zipf_dims for c in ((f"zipf D{D} ctx3", jag, D, 3, ["0"], False),
                                                       (f"dense B2 S{tok // 2} D{D} ctx3", [tok // 2] * 2, D, 3,
                                                        ["0"], False))]}
    cases = [c for k in a.cases for c in by_key[k]]  # (in the order given)
    cols = sorted({f"cfg {c}" for *_, cf, _ in cases for c in cf}) + ["peer", "FA2"]
    if not a.ncu:
        print("| case | tokens | " + " | ".join(cols) + " |")
        print("|---|---:|" + "---:|" * len(cols))
    res = {}
    for name, lens, D, ctx, cfgs, others in cases:
        run = {f"cfg {c}": ours(lens, D, c, ctx) for c in cfgs}
        if others and a.peer:
            run["peer"] = peer_fwd(lens, D)
        if others and a.fa2:
            run["FA2"] = fa2(len(lens), lens[0], D)
        if a.ncu:
            for k, fn in run.items():
                fn()
                torch.cuda.synchronize()
                print(f"ncu: {name} {k}", flush=True)
            continue
        if "peer" in run:  # the same function: the largest |ours - peer| over the largest |ours|
            o, pr = run["cfg 0"]().float(), run["peer"]().float()
            rel = (o - pr).abs().max().item() / o.abs().max().item()
            print(f"(peer vs ours, {name}: max |diff| / max |ours| = {rel:.2e})")
        res[name] = time_row(f"fwd {a.label}", name, lens, D, run, a.reps, cols)
        del run
        torch.cuda.empty_cache()
    for D in a.zipf_dims:
        z, d = res.get(f"zipf D{D} ctx3"), res.get(f"dense B2 S{tok // 2} D{D} ctx3")
        if z and d:
            print(f"| Zipf / dense TFLOP/s D{D} | {100 * (z[0] / z[1]['cfg 0']) / (d[0] / d[1]['cfg 0']):.0f} % |")
    for name, (fl, ms) in res.items():
        for c in [c for c in ms if c.startswith("cfg")]:
            print(f"| {name} {c} vs peer / FA2 | " + " | ".join(
                f"{ms[o] / ms[c]:.3f}x" if o in ms else "" for o in ("peer", "FA2")) + " |")


if __name__ == "__main__":
    main()
