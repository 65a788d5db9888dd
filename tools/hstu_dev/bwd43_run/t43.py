"""bwd43's timer (issue 39): the portable backward's D = 64 loop (kPdsPipeS) against main's loop and FA2, one process.

  python3 -P t43.py time --bench R/benchmarks --variants main c6 --shapes B16:S8192:D64 B16:S4096:D64:C512 [--reps 7]
      the backward of each variant under kernel_options(sm90=False): main = the branch's default (D = 64: the
      128-query tiles with the second half's S MMAs in the first half's SiLU block), c6 = bwd_sm80_cfg=6 (main's loop
      before: the tiles without kPdsPipeS); then FA2 (torch SDPA flash), interleaved, L2 flushed, median of reps

Shapes: dense, causal, H = 4, bf16, alpha D^-1/2, scaling max_len (issue 39's table); a fourth field C<n> gives each
sequence n context rows (the context kernel; FA2 then runs the plain causal call of the same shape).
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "runlib")]
import bwdtime  # noqa: E402

VARIANTS = {"main": {}, "c6": {"bwd_sm80_cfg": 6}}


class Lab43(bwdtime.Lab):
    def calls(self, s, ours, variants, check_peer):
        """bwdtime's calls; with a C<n> field the ops get num_contexts n (FA2: the plain call)"""
        parts = s.split(":")
        if len(parts) == 3:
            return super().calls(s, ours, variants, check_peer)
        ha, dev = self.ha, self.dev
        base, nctx = ":".join(parts[:3]), int(parts[3][1:])
        (B, S, D), case, cu, (q, k, v, dout), args = bwdtime.dense_case(ha, base, dev)
        nc = torch.full((B,), min(nctx, S), dtype=torch.int32, device=dev)
        args = args[:4] + (nc,) + args[5:]
        pairs, labels = [], []
        for x in ours:
            with self.kernel_options(sm90=False, **variants[x]):
                pairs.append(ha.timed_calls(q, k, v, dout, args))
            labels.append(x)
        if self.fa2 is not None:
            pairs.append(self.fa2.calls(q, k, v, dout, cu, S, None, None, case, 1.0 / D**0.5, S))
            labels.append("fa2")
        return pairs, labels


def main():
    ap = argparse.ArgumentParser()
    bwdtime.add_args(ap, ["time", "ncu"], ["main", "c6"], ["B16:S8192:D64"])
    a = ap.parse_args()
    bt = Lab43(a)
    ours = [x for x in a.variants if x in VARIANTS]
    for s in a.shapes:
        pairs, labels = bt.calls(s, ours, VARIANTS, check_peer=True)
        fns = [p[1] for p in pairs]
        if a.mode == "time":
            bt.time_line(s, labels, fns, len(ours))
        else:
            bwdtime.run_once(fns)
        if a.mode != "ncu" and s in a.prof_shapes:
            for label, fn in zip(labels, fns):
                bwdtime.prof_kernels(label, s, fn)
        del fns, pairs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
