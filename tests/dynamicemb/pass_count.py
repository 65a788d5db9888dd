"""Counts the aten ops of one ShardedDynamicEmbeddingTables training step (forward + backward) on the CPU and sorts
them by size: a "full pass over the ids" touches a tensor of >= n rows (the n ids of this rank), a "pass over the
uniques" one of >= n_u rows (n_u unique (owner, table, id) of the sender, or the n_r ids an owner received), the
rest is small bookkeeping (per table, peer or bag counts). Views and allocations without a fill are free. Ops run
inside the shard modules (the owner's find_or_insert, gather and fused update) are counted apart ("inner").

A pass count is a property of the code, not of the device: it says how often the step walks its large arrays,
which on a GPU (bandwidth-bound torch ops, one launch each) is most of the sender's "local" time.

    python tests/dynamicemb/pass_count.py [--tables 10] [--ids 4000] [--pooling none,sum] [--world 1]

prints one markdown table per case (phases as the module's phase marks name them). The test
test_sharded_passes_cpu.py bounds the counts.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: ops that allocate without writing (or only view): no pass over memory
_FREE = {"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "lift_fresh", "detach",
         "alias", "_local_scalar_dense", "item", "is_nonzero", "sym_size", "sym_numel", "sym_stride"}


#: ops whose first argument is read only where their other arguments point
_SPARSE_READ = {"index", "index_select", "gather", "searchsorted", "take", "embedding"}


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _tensors(y)


class OpCounter(TorchDispatchMode):
    """Records (op, largest leading dim of its tensors, bytes of its outputs, inner) for every aten/c10d op."""

    def __init__(self):
        super().__init__()
        self.ops = []
        self.inner = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        schema = func._schema
        is_view = any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
        if not is_view and name not in _FREE:
            # gathers and searches read as much of their source as they write (and log n of a sorted sequence)
            src = args[1:] if name in _SPARSE_READ else args
            ts = list(_tensors(src)) + list(_tensors(kwargs)) + list(_tensors(out))
            rows = max((t.shape[0] if t.dim() else 1 for t in ts), default=0)
            flat = max((t.numel() for t in ts if t.dim() == 1 and t.is_floating_point()), default=0)
            outs = [t for t in _tensors(out)]
            if not outs:  # in-place / out= ops write their first tensor argument
                outs = [t for t in _tensors(args)][:1]
            nbytes = sum(t.numel() * t.element_size() for t in outs)
            self.ops.append((f"{func.namespace}::{name}", rows, flat, nbytes, self.inner > 0))
        return out


class _PhaseLog(list):
    """The module's phase_log: remembers at which op each phase mark came (no timing)."""

    def __init__(self, counter):
        super().__init__()
        self.counter = counter

    def append(self, item):
        super().append((item[0], len(self.counter.ops)))


def _wrap_inner(module, counter):
    """Counts the shard modules' own ops (forward and backward) as inner; returns an undo function."""
    undo = []
    for m in module._shard_list:
        for attr in ("forward", "_backward_impl"):
            orig = getattr(m, attr)

            def wrapped(*a, _orig=orig, **k):
                counter.inner += 1
                try:
                    return _orig(*a, **k)
                finally:
                    counter.inner -= 1

            setattr(m, attr, wrapped)
            undo.append((m, attr))

    def restore():
        for m, attr in undo:
            delattr(m, attr)
    return restore


def count_step(module, ids, offsets, grad_seed=0):
    """Runs one training step (forward, backward with a random output gradient) under the counter.
    Returns (ops, phase marks [(phase, op index)])."""
    counter = OpCounter()
    restore = _wrap_inner(module, counter)
    module.phase_log = _PhaseLog(counter)
    try:
        with counter:
            out = module(ids, offsets, validate=False)
        g = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_seed))
        with counter:
            out.backward(g)
    finally:
        marks = list(module.phase_log)
        module.phase_log = None
        restore()
    return counter.ops, marks


def summarize(ops, marks, n, n_u, dim):
    """{phase: dict(ops, id_passes, uniq_passes, small, inner, comm, mb)}: each op to the phase its next mark
    closes. A 1-d float tensor of >= 0.9 n_u * dim elements is rows flattened (rows = numel / dim)."""
    bounds = [(i, name) for name, i in marks]
    res = defaultdict(lambda: dict(ops=0, id_passes=0, uniq_passes=0, small=0, inner=0, comm=0, mb=0.0))
    id_cut = (n + n_u) / 2 if n_u < n else n  # rows above the middle of n_u and n: a pass over the ids
    u_cut = 0.9 * n_u
    for k, (name, rows, flat, nbytes, inner) in enumerate(ops):
        if flat >= 0.9 * n_u * dim:
            rows = max(rows if rows != flat else 0, flat // dim)
        phase = next((p for i, p in bounds if i > k), "after")
        if phase in ("start", "bwd start"):
            phase = "bags (before the start mark)"
        r = res[phase]
        r["ops"] += 1
        r["mb"] += nbytes / 1e6
        if inner:
            r["inner"] += 1
        elif name.startswith("c10d::"):
            r["comm"] += 1
        elif rows >= id_cut:
            r["id_passes"] += 1
        elif rows >= u_cut:
            r["uniq_passes"] += 1
        else:
            r["small"] += 1
    return dict(res)


def table(summary, title):
    lines = [f"#### {title}", "", "| phase | ops | passes over ids (n) | passes over uniques (n_u / n_r) | small ops "
             "| collectives | inner (shard module) ops | MB written |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    tot = defaultdict(float)
    for phase, r in summary.items():
        lines.append(f"| {phase} | {r['ops']} | {r['id_passes']} | {r['uniq_passes']} | {r['small']} | {r['comm']} "
                     f"| {r['inner']} | {r['mb']:.2f} |")
        for k, v in r.items():
            tot[k] += v
    lines.append(f"| **step** | {int(tot['ops'])} | {int(tot['id_passes'])} | {int(tot['uniq_passes'])} | "
                 f"{int(tot['small'])} | {int(tot['comm'])} | {int(tot['inner'])} | {tot['mb']:.2f} |")
    return "\n".join(lines)


def power_law_batch(T, n_per_table, space, seed):
    """T features of n_per_table bags of one id each, ids ~ k^-1.05 over [0, space) scrambled (as the benchmark's
    nvidia preset, smaller)."""
    g = torch.Generator().manual_seed(seed)
    ranks = torch.arange(1, space + 1, dtype=torch.float64)
    p = ranks.pow(-1.05)
    ids = torch.multinomial(p, T * n_per_table, replacement=True, generator=g)
    ids = (ids * 0x9E3779B1 + 12345) % (1 << 40)  # hot ids are not small integers
    offsets = torch.arange(T * n_per_table + 1, dtype=torch.int64)
    return ids, offsets


def make_module(T, pooling, optimizer="sgd", dim=16, capacity=1 << 14, routing="hash"):
    import dynamicemb as de

    opt = de.SGD(lr=0.01) if optimizer == "sgd" else de.Adam(lr=1e-3)
    tables = [de.DynamicEmbTableOptions(dim=dim, max_capacity=capacity, on_refused="zero") for _ in range(T)]
    return de.ShardedDynamicEmbeddingTables(tables, pooling=pooling, optimizer=opt, routing=routing)


def measure(T, n_per_table, pooling, seed=0, optimizer="sgd", routing="hash", dim=16):
    """Counts of this rank's second step (the first warms the tables up) of T tables; returns (summary, n, n_u)."""
    import torch.distributed as dist

    m = make_module(T, pooling, optimizer, dim=dim, routing=routing)
    rank = dist.get_rank()
    ids, off = power_law_batch(T, n_per_table, 4 * n_per_table, seed + 100 * rank)
    out = m(ids, off, validate=False)
    out.backward(torch.ones_like(out))
    ops, marks = count_step(m, ids, off)
    n = ids.numel()
    tbl = torch.repeat_interleave(torch.arange(T), n_per_table)
    n_u = torch.unique(tbl * (1 << 41) + ids).numel()
    return summarize(ops, marks, n, n_u, m.max_dim), n, n_u


def totals(summary, exclude_inner=True):
    """(passes over ids, passes over uniques, ops) of the step (collectives and, by default, inner ops excluded)."""
    return (sum(r["id_passes"] for r in summary.values()), sum(r["uniq_passes"] for r in summary.values()),
            sum(r["ops"] - r["comm"] - (r["inner"] if exclude_inner else 0) for r in summary.values()))


def _rank_cases(rank, world, cases, result_file):
    res = []
    for T, n_per_table, pooling, optimizer in cases:
        s, n, n_u = measure(T, n_per_table, pooling, optimizer=optimizer)
        res.append(((T, n_per_table, pooling, optimizer), s, n, n_u))
    if rank == 0:
        torch.save(res, result_file)


def run_cases(cases, world=1):
    """measure() of each (T, n_per_table, pooling, optimizer) case on ``world`` gloo ranks (rank 0's counts)."""
    import tempfile

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dist_helpers import run_ranks

    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "res.pt")
        run_ranks(_rank_cases, world, cases, f, timeout=300)
        return torch.load(f)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tables", default="10")
    p.add_argument("--ids", type=int, default=4000, help="ids per table and rank (bags of one id)")
    p.add_argument("--pooling", default="none,sum")
    p.add_argument("--optimizer", default="sgd")
    p.add_argument("--world", type=int, default=1)
    a = p.parse_args(argv)
    cases = [(int(T), a.ids, pl, a.optimizer) for T in a.tables.split(",") for pl in a.pooling.split(",")]
    for (T, npt, pl, opt), s, n, n_u in run_cases(cases, a.world):
        print(table(s, f"world {a.world}, {T} tables, pooling {pl}, {opt}: n={n} ids, n_u={n_u} uniques (rank 0)"))
        print()


if __name__ == "__main__":
    main()
