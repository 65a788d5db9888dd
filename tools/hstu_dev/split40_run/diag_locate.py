"""Locates the intermittent fault of the sm80-class backward's split (kernel_options(fwd_sm80_cfg=14)) at D = 128:
test_sm80_backward_split_many_sequences' case (80 sequences of 0-1,000 keys + one of 4,000, H2, context_target) run
N times per mode, no allocator poisoning unless the mode says so; per run, the key blocks (b, block, head) whose
dK / dV differ bitwise from the first run, and the 64-row query tiles whose dQ differ, with each block's walk
(n_mt) and chunks (nc, from list_model.py's L); failures against the fp32 reference's error rule.
Modes: plain (forward then backward), sync (synchronize between), launch (one small kernel between), regrad (one
forward, N backwards on the same graph), poison.
Usage: diag_locate.py MODE[,MODE...] N [CFG [FORCED_TILES]]"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "split39_run")]  # list_model.py: carried beside this file, or there
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "hstu"))
import hstu_kernel_checks as kg  # noqa: E402
import list_model as lm  # noqa: E402
from hstu_attn import _ops, hstu_attn_varlen_func  # noqa: E402

D, H, BM, BN = 128, 2, 64, 128


def walks(case, lens):
    nt = case["num_targets"].tolist()
    nc = case["num_contexts"].tolist()
    S = lm.seqs(lens, nt, nc)
    n_mt = {(b, j): lm.work_tiles(S[b], j * BN, BM, BN, True)[3] for b in range(len(lens))
            for j in range(-(-lens[b] // BN))}
    ctas = torch.cuda.get_device_properties(0).multi_processor_count
    w = sum(n_mt.values()) * H
    L = max(lm.MIN_CHUNK, -(-w // ctas), -(-w // (2 * ctas)))
    return n_mt, L


def main():
    modes, n = sys.argv[1].split(","), int(sys.argv[2])
    cfg = int(sys.argv[3]) if len(sys.argv) > 3 else 14
    forced = int(sys.argv[4]) if len(sys.argv) > 4 else 0  # kernel_options(fwd_split_tiles=forced): n-tile chunks
    torch.backends.cuda.matmul.allow_tf32 = False
    case, lens = kg.many_sequences_case("split38m", D, H)
    args = kg._varlen_kwargs(case)
    dout = torch.randn_like(case["q"])
    ref, bound = kg.grad_reference(case, dout, 0.5)
    n_mt, L = walks(case, lens)
    if forced > 0:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        L = max(forced, -(-sum(n_mt.values()) * H // (2 * sms)))
    split = {k: -(-v // L) for k, v in n_mt.items() if v > L}
    print(f"(L = {L}; split blocks {len(split)}: " +
          " ".join(f"b{b}/{j}:{n_mt[(b, j)]}t/{c}c" for (b, j), c in sorted(split.items())[:12]) + ")")
    cu = [0]
    for x in lens:
        cu.append(cu[-1] + x)

    cu_t = torch.tensor(cu[1:], device="cuda")

    def blocks(t, first, tol=0.0):  # key blocks (b, j, h) / 128-row query blocks that differ from the first run
        d = ((t.float() - first.float()).abs() > tol).any(dim=2)  # (rows, H)
        rows, hs = d.nonzero(as_tuple=True)
        bs = torch.searchsorted(cu_t, rows, right=True)
        js = (rows - torch.tensor(cu, device="cuda")[bs]) // BN
        return set(zip(bs.tolist()[:4096], js.tolist()[:4096], hs.tolist()[:4096]))

    opts = dict(sm90=False, fwd_sm80_cfg=cfg)
    if forced > 0:
        opts["fwd_split_tiles"] = forced
    with _ops.kernel_options(**opts):
        for mode in modes:
            first, fails, diffs, lines = None, 0, 0, []
            out = leaves = None
            for i in range(n):
                if mode != "regrad" or out is None:
                    leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"])]
                    out = hstu_attn_varlen_func(*leaves, alpha=0.5, **args)
                if mode == "sync":
                    torch.cuda.synchronize()
                elif mode == "launch":
                    torch.empty(1, device="cuda").zero_()
                elif mode == "poison":
                    kg.poison_allocator(8 * case["q"].numel() * case["q"].element_size())
                got = torch.autograd.grad(out, leaves, dout, retain_graph=mode == "regrad")
                errs = [kg.max_err(got[j], ref[j]) / bound[j] for j in range(3)]
                bad = any(e > 1 for e in errs)
                fails += bad
                if first is None:
                    first = [t.clone() for t in got]
                    continue
                dk, dv = blocks(got[1], first[1]), blocks(got[2], first[2])
                dq = blocks(got[0], first[0], bound[0] / 2)
                if dk or dv or dq:
                    diffs += 1
                    if len(lines) < 6:
                        desc = lambda s: " ".join(  # noqa: E731
                            f"b{b}/{j}h{h}({n_mt.get((b, j), 0)}t,{split.get((b, j), 1)}c)"
                            for b, j, h in sorted(s)[:6])
                        lines.append(f"  run {i}: err/bound {errs[0]:.2f}/{errs[1]:.2f}/{errs[2]:.2f}; dK differs "
                                     f"{len(dk)} [{desc(dk)}] dV {len(dv)} dQ(by 128 rows) {len(dq)} [{desc(dq)}]")
            print(f"(mode {mode} cfg {cfg} forced {forced}: {n} runs, failed {fails}, differ from run 0: {diffs})",
                  flush=True)
            for ln in lines:
                print(ln, flush=True)


if __name__ == "__main__":
    main()
