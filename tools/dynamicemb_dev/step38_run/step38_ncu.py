"""step38 (issue 35): one steady SGD step at NVIDIA's config (benchmarks/embedding.py's batch: 10 tables x 104,857
ids, power law 1.05 over 1,677,721 ids, D128 fp32, pooling none) per variant between cudaProfilerStart / Stop, for
ncu's source counters of the dedup's kernels (run1.sh filters them by name). Variants: "f<N>" = op
_lookup_lab_find_later(N) (0: the find inside the number pass, main's default; 1: the find as its own kernel over
the numbered uniques), "d<N>" = op _lookup_lab_dedup(N). One warm-up step under each variant before its profiled one.
"""

from __future__ import annotations

import argparse
import os
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", default="benchmarks")
    p.add_argument("--variants", default="f0,f1")
    p.add_argument("--opt", default="sgd")
    a = p.parse_args()
    import torch

    sys.path.insert(0, os.path.abspath(a.bench))
    from embedding import make_batch  # noqa: E402

    from dynamicemb._batched import BatchedDynamicEmbeddingTables  # noqa: E402
    from dynamicemb._optimizers import SGD, Adam  # noqa: E402
    from dynamicemb._options import DynamicEmbTableOptions  # noqa: E402

    dev = torch.device("cuda")
    T, D, B = 10, 128, 104_857
    gen = torch.Generator().manual_seed(0)
    batches = [make_batch(T, B, 1, 1_677_721, 1.05, gen) for _ in range(2)]
    batches = [(i.to(dev), o.to(dev)) for i, o in batches]
    cudart = torch.cuda.cudart()
    opt = SGD(lr=0.01) if a.opt == "sgd" else Adam(lr=1e-3)
    tables = [DynamicEmbTableOptions(dim=D, max_capacity=1 << 20, on_refused="zero")] * T
    m = BatchedDynamicEmbeddingTables(tables, pooling="none", optimizer=opt, device=dev)
    g = None
    for k in range(5):
        ids, off = batches[k % 2]
        out = m(ids, off, validate=None)
        if g is None:
            g = torch.ones_like(out)
        out.backward(g)
    torch.cuda.synchronize()
    ops = torch.ops.dynamicemb
    old_f, old_d = ops._lookup_lab_find_later(-1), ops._lookup_lab_dedup(-1)
    for k, v in enumerate(a.variants.split(",")):
        ops._lookup_lab_find_later(old_f)
        ops._lookup_lab_dedup(old_d)
        if v[0] == "f":
            ops._lookup_lab_find_later(int(v[1:]))
        elif v[0] == "d":
            ops._lookup_lab_dedup(int(v[1:]))
        for j in (1, 0):  # a warm-up step under the variant, then the profiled one
            ids, off = batches[(k + j) % 2]
            if j == 0:
                cudart.cudaProfilerStart()
            out = m(ids, off, validate=None)
            out.backward(g)
            torch.cuda.synchronize()
            if j == 0:
                cudart.cudaProfilerStop()
        print(f"# profiled one {a.opt} step, variant {v}", file=sys.stderr)
    ops._lookup_lab_find_later(old_f)
    ops._lookup_lab_dedup(old_d)


if __name__ == "__main__":
    main()
