"""Repeats test_sm80_backward_split_many_sequences' case (80 sequences of 0-1,000 keys + one of 4,000, H2,
context_target, tests/hstu/test_sm80_backward_split_gpu.py) N times under kernel_options(sm90=False,
fwd_sm80_cfg=CFG) (the split: 8 on split39's wheel, 14 on main's) and counts the runs whose dq / dk / dv break the
test's error rule against the fp32 reference (the allocator poisoned before each backward), and whether dK / dV are
the same bits in every run. The session-35 merged tree failed that test once (dq 5.0e-2) with zipfb38's one-pass
list kernel; a CPU model (list_model.py) finds both list kernels' lists equal.
Usage: diag_many.py LABEL CFG [N] [D ...]   (run from a tree with tests/hstu/hstu_kernel_checks.py)"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.getcwd(), "tests", "hstu"))
import hstu_kernel_checks as kg  # noqa: E402
from hstu_attn import _ops, hstu_attn_varlen_func  # noqa: E402


def main():
    label, cfg = sys.argv[1], int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    dims = [int(x) for x in sys.argv[4:]] or [128]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for D in dims:
        case, _ = kg.many_sequences_case("split38m", D)
        args = kg._varlen_kwargs(case)
        dout = torch.randn_like(case["q"])
        ref, bound = kg.grad_reference(case, dout, 0.5)
        fails, worst, first, same = [0, 0, 0], [0.0, 0.0, 0.0], None, True
        with _ops.kernel_options(sm90=False, fwd_sm80_cfg=cfg):
            for _ in range(n):
                leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"])]
                out = hstu_attn_varlen_func(*leaves, alpha=0.5, **args)
                kg.poison_allocator(8 * case["q"].numel() * case["q"].element_size())
                got = torch.autograd.grad(out, leaves, dout)
                for i in range(3):
                    e = kg.max_err(got[i], ref[i])
                    worst[i] = max(worst[i], e / bound[i])
                    fails[i] += e > bound[i]
                if first is None:
                    first = got
                else:
                    same = same and all(torch.equal(a, b) for a, b in zip(got[1:], first[1:]))
        print(f"(diag {label} D{D} fwd_sm80_cfg={cfg}: {n} runs; failed dq/dk/dv {fails[0]}/{fails[1]}/{fails[2]}; "
              f"worst err / bound {worst[0]:.2f}/{worst[1]:.2f}/{worst[2]:.2f}; dK / dV bitwise across runs: {same})",
              flush=True)


if __name__ == "__main__":
    main()
