"""Issue 39: the portable (sm80-class, mma.sync) HSTU kernels' candidate tile configurations, timed side by side.

For each shape (bf16, causal, H4; FA FLOP convention: forward 4*H*D*L^2 per sequence halved for causal, backward
2.5x that) the portable forward once and the portable backward under each variant: the old default layouts
(`bwd_sm80_cfg=8`, the first row, which the others are compared with), the default (since issue 39 FA2's warp layout,
hstu_bwd_sm80_pds_kernel.cuh, with two Q / dO stages where they fit, else one), the `kernel_options(bwd_sm80_cfg=n)`
comparisons (4 / 5: the default's one / two stage kernels; 1 at D = 64 / 128 the two-barrier kernel instead of the
default's one-barrier loop on sm_90+, 2 at D = 64 that loop with the Q / dO copies together) and, at D = 256, the
warp-pair kernel (bwd_sm80_pair), plus FlashAttention-2 (torch's flash SDPA backend) and, where its
module `hstu_attn_2_cuda` imports, NVIDIA's Ampere HSTU kernels. Variants of one shape alternate their timed runs (the
medians of each). Prints one markdown table; "vs old" / "vs FA2" / "vs NV" > 1: the variant is faster.

With --fwd the forward instead: the default and the `kernel_options(fwd_sm80_cfg=n)` candidates (FwdSm80Candidate in
hstu/csrc/sm80/hstu_fwd_sm80_kernel.cuh; those a head dim lacks left out), alternated, beside the peers' forwards.

Usage:
    python benchmarks/hstu_sm80_candidates.py [--shapes "B16 S4K D128" ...] [--reps 15] [--no-peers]
        [--variants old default cfg5 ...]   # only the variants whose names start so (the old default always)
    python benchmarks/hstu_sm80_candidates.py --fwd [--variants fcfg2 ...]   # the forward candidates
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

import torch

import hstu_attn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hstu_attention as ha  # noqa: E402
from bench_util import command, git_commit  # noqa: E402

SHAPES = ["B16 S4K D128", "B16 S4K D256", "B16 S8K D64", "B128 S1K D128"]
# name -> kernel_options switches (sm90=False added: the portable kernels on any GPU)
VARIANTS = {
    128: [("old default", dict(bwd_sm80_cfg=8)), ("default", {}), ("cfg4 FA2 layout 64x128 1st", dict(bwd_sm80_cfg=4)),
          ("cfg5 FA2 layout 64x128 2st", dict(bwd_sm80_cfg=5)), ("cfg1 two barriers 2st", dict(bwd_sm80_cfg=1))],
    256: [("old default", dict(bwd_sm80_cfg=8)), ("default", {}), ("pair 32x64 8w 2st", dict(bwd_sm80_pair=True)),
          ("pair 32x64 8w 1st", dict(bwd_sm80_pair=True, bwd_sm80_pair_2stage=False)),
          ("cfg4 FA2 layout 64x64 1st", dict(bwd_sm80_cfg=4)), ("cfg5 FA2 layout 64x64 2st", dict(bwd_sm80_cfg=5))],
    # (D = 64: the default is FA2's layout on sm_90+, the old layout elsewhere)
    64: [("old default", dict(bwd_sm80_cfg=8)), ("default", {}), ("cfg4 FA2 layout 64x128 1st", dict(bwd_sm80_cfg=4)),
         ("cfg5 FA2 layout 64x128 2st", dict(bwd_sm80_cfg=5)), ("cfg1 two barriers 2st", dict(bwd_sm80_cfg=1)),
         ("cfg2 one barrier joined copies", dict(bwd_sm80_cfg=2))],
}

# The forward's: name, kernel_options switches, head dims that have the candidate (the others run the default).
FWD_VARIANTS = [("default", {}, (32, 64, 128, 256)),
                ("fcfg1 4w x 32 rows 2st", dict(fwd_sm80_cfg=1), (64, 128)),
                ("fcfg2 FA2 tiles 1st", dict(fwd_sm80_cfg=2), (64, 128, 256)),
                ("fcfg3 Q in regs", dict(fwd_sm80_cfg=3), (64,)),
                ("fcfg4 FA2 tiles 1st skip", dict(fwd_sm80_cfg=4), (64, 128, 256)),
                ("fcfg5 Q in regs skip", dict(fwd_sm80_cfg=5), (64, 128)),
                ("old tiles", dict(fwd_sm80_cfg=6), (64, 128, 256))]


def parse_shape(text: str) -> ha.Case:
    """'B16 S4K D128' -> a causal Case of B sequences of S tokens, H4"""
    try:
        b, s, d = text.split()
        B, D = int(b[1:]), int(d[1:])
        S = int(float(s[1:-1]) * 1024) if s.upper().endswith("K") else int(s[1:])
    except ValueError:
        raise SystemExit(f"--shapes: expected 'B<batch> S<len>[K] D<head dim>', got {text!r}") from None
    return ha.Case("portable", text, [S] * B, 4, D)


def variants(D: int, only: Optional[List[str]] = None):
    """(name, switches) of head dim D's variants, the first the one the others are compared with; only: the names
    starting with one of these (and the first)"""
    found = VARIANTS.get(D, [("default", {})])
    return [v for i, v in enumerate(found) if i == 0 or not only or any(v[0].startswith(o) for o in only)]


def fwd_variants(D: int, only: Optional[List[str]] = None):
    """(name, switches) of head dim D's forward variants, the default first; only: as in variants"""
    return [(n, sw) for i, (n, sw, dims) in enumerate(FWD_VARIANTS)
            if D in dims and (i == 0 or not only or any(n.startswith(o) for o in only))]


def fmt(ms: Optional[float], flops: float) -> str:
    return "n/a" if ms is None else f"{ms:.3f} ({flops / (ms * 1e-3) / 1e12:.0f})"


def ratio(ms: Optional[float], other: Optional[float]) -> str:
    return "n/a" if ms is None or other is None else f"{other / ms:.2f}x"


def _inputs(case: ha.Case, device):
    """(q, k, v, dout, cu, L, the op's positional args, forward FLOPs) of a dense causal bf16 case, seeded"""
    B, H, D = len(case.lengths), case.H, case.D
    total, L = sum(case.lengths), case.lengths[0]
    torch.manual_seed(0)
    cu = torch.tensor([0] + case.lengths, device=device).cumsum(0).to(torch.int32)
    q, k, v, dout = (torch.randn(total, H, D, device=device, dtype=torch.bfloat16) for _ in range(4))
    args = (cu, cu, L, L, None, None, 1, -1, 0, 1.0 / D**0.5, None, float(L), None, None)
    return q, k, v, dout, cu, L, args, 4.0 * H * D * L * L * B / 2


def _peer_times(peers: list, case: ha.Case, inp, timer: ha.Timer, backward: bool) -> dict:
    """{peer label: (forward ms, backward ms or None)} of the peers that run the case"""
    q, k, v, dout, cu, L = inp[:6]
    out = {}
    for peer in peers:
        try:
            pf, pb = peer.calls(q, k, v, dout, cu, L, None, None, case, 1.0 / case.D**0.5, L)
            out[peer.label] = (timer(pf), timer(pb) if backward else None)
        except RuntimeError as e:  # a head dim the peer's build lacks
            print(f"- {case.name}: {peer.label}: {str(e).splitlines()[0][:100]}")
    return out


def run_shape(case: ha.Case, device, timer: ha.Timer, peers: list, only: Optional[List[str]] = None) -> List[str]:
    """one table row per variant (peers: rows of their own)"""
    inp = _inputs(case, device)
    q, k, v, dout, args, fwd_flops = *inp[:4], inp[6], inp[7]
    bwd_flops = 2.5 * fwd_flops
    calls = []
    for name, switches in variants(case.D, only):
        with hstu_attn._ops.kernel_options(sm90=False, **switches):
            calls.append((name, *ha.timed_calls(q, k, v, dout, args)))
    fwd_ms = timer(calls[0][1])
    bwd_ms = timer.interleaved(*[c[2] for c in calls])
    peer_ms = _peer_times(peers, case, inp, timer, backward=True)
    fa2 = peer_ms.get("FA2", (None, None))[1]
    nv = peer_ms.get("NV Ampere", (None, None))[1]
    rows = []
    for (name, _, _), ms in zip(calls, bwd_ms):
        fms = fwd_ms if name == calls[0][0] else None
        rows.append(f"| {case.name} | {name} | {fmt(fms, fwd_flops) if fms else '='} | {fmt(ms, bwd_flops)} | "
                    f"{ratio(ms, bwd_ms[0])} | {ratio(ms, fa2)} | {ratio(ms, nv)} |")
    for label, (pf, pb) in peer_ms.items():
        rows.append(f"| {case.name} | {label} | {fmt(pf, fwd_flops)} | {fmt(pb, bwd_flops)} | "
                    f"{ratio(pb, bwd_ms[0])} | | |")
    return rows


def run_shape_fwd(case: ha.Case, device, timer: ha.Timer, peers: list, only: Optional[List[str]] = None) -> List[str]:
    """one table row per forward variant, then the peers' forwards"""
    inp = _inputs(case, device)
    q, k, v, dout, args, flops = *inp[:4], inp[6], inp[7]
    calls = []
    for name, switches in fwd_variants(case.D, only):
        with hstu_attn._ops.kernel_options(sm90=False, **switches):
            calls.append((name, ha.timed_calls(q, k, v, dout, args)[0]))
    ms = timer.interleaved(*[c[1] for c in calls])
    peer_ms = {label: t[0] for label, t in _peer_times(peers, case, inp, timer, backward=False).items()}
    fa2, nv = peer_ms.get("FA2"), peer_ms.get("NV Ampere")
    rows = [f"| {case.name} | {name} | {fmt(t, flops)} | {ratio(t, ms[0])} | {ratio(t, fa2)} | {ratio(t, nv)} |"
            for (name, _), t in zip(calls, ms)]
    rows += [f"| {case.name} | {label} | {fmt(t, flops)} | {ratio(t, ms[0])} | | |" for label, t in peer_ms.items()]
    return rows


def make_peers(device) -> list:
    peers = []
    for label, cls in (("FA2", ha.Fa2Peer), ("NV Ampere", ha.NvidiaAmperePeer)):
        try:
            peer = cls(device)
        except SystemExit as e:
            print(f"- peer {label} skipped: {str(e)[:120]}")
            continue
        peer.label = label
        peers.append(peer)
    return peers


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=SHAPES)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--no-peers", action="store_true")
    p.add_argument("--variants", nargs="+", help="only the variants whose names start so (and the first, the old "
                   "default), e.g. default cfg4")
    p.add_argument("--quick", action="store_true", help="the first shape only, 5 repetitions")
    p.add_argument("--fwd", action="store_true", help="the forward's candidates (fwd_sm80_cfg) instead of the "
                   "backward's")
    p.add_argument("--results", help="append the markdown table to this file")
    args = p.parse_args(argv)
    if args.quick:
        args.shapes, args.reps = args.shapes[:1], min(args.reps, 5)
    cases = [parse_shape(s) for s in args.shapes]
    if not torch.cuda.is_available():
        print("needs a CUDA GPU (the portable kernels): nothing timed")
        return 0
    device = torch.device("cuda")
    timer = ha.Timer(device, args.warmup, args.reps, warmup_ms=200.0)
    peers = [] if args.no_peers else make_peers(device)
    lines = [f"## Portable {'forward' if args.fwd else 'backward'} candidates: {torch.cuda.get_device_name(device)}, "
             f"bf16, causal, H4, ms (TFLOP/s, FA convention)\n",
             f"commit {git_commit()}, torch {torch.__version__}, `{command(argv)}`\n"]
    lines += (["| shape | variant | fwd | vs default | vs FA2 | vs NV |", "|---|---|---:|---:|---:|---:|"] if args.fwd
              else ["| shape | variant | fwd | bwd | bwd vs old | bwd vs FA2 | bwd vs NV |",
                    "|---|---|---:|---:|---:|---:|---:|"])
    print("\n".join(lines), flush=True)
    for case in cases:
        for row in (run_shape_fwd if args.fwd else run_shape)(case, device, timer, peers, args.variants):
            print(row, flush=True)
            lines.append(row)
        torch.cuda.empty_cache()
    if args.results:
        with open(args.results, "a") as f:
            f.write("\n" + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
