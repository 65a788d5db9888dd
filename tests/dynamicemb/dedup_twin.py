"""A CPU twin of op ``lookup_dedup`` (the CUDA dedup kernel), so the sharded module's CUDA step (kernel dedup,
sort of the uniques' codes, embedding_bag pooling and gradient sums) runs in CI on gloo ranks. The twin keeps the
op's contract and none of its incidental order: uniques in a random order, the slots past the unique count
filled with garbage keys and tables (the kernel leaves them unwritten), int32 outputs."""

import torch

_LIB = None


def dedup_cpu(ids, offsets, feature_table, batch, set_, skip=None):
    """(inverse, bag, ukeys, utables, count) as lookup_dedup returns them, for CPU tensors."""
    n = ids.numel()
    k = ids.view(torch.int64)
    nb = offsets.numel() - 1
    bag = torch.searchsorted(offsets[1:], torch.arange(n), right=True).clamp(max=nb - 1)
    feat = torch.div(bag, batch, rounding_mode="floor").clamp(max=feature_table.numel() - 1)
    pairs = torch.stack([feature_table.long()[feat], k], 1)
    uniq, inv = torch.unique(pairs, dim=0, return_inverse=True)
    nu = uniq.shape[0]
    g = torch.Generator().manual_seed(n * 7 + nu)
    slot = torch.randperm(nu, generator=g)  # unique j (sorted) sits in slot[j]
    ukeys = torch.randint(-2**62, 2**62, (n,), generator=g)
    utables = torch.randint(-5, 1000, (n,), generator=g, dtype=torch.int32)
    ukeys[slot] = uniq[:, 1]
    utables[slot] = uniq[:, 0].int()
    return slot[inv].int(), bag.int(), ukeys, utables, torch.tensor([nu], dtype=torch.int32)


def install():
    """Registers the twin as the op's CPU kernel in this process and makes every ShardedDynamicEmbeddingTables
    built afterwards take its CUDA step (``_kernel_dedup``). For spawned ranks only: it changes the process."""
    global _LIB
    from dynamicemb import _sharded

    if _LIB is None:
        _LIB = torch.library.Library("dynamicemb", "IMPL")
        _LIB.impl("lookup_dedup", dedup_cpu, "CPU")
    cls = _sharded.ShardedDynamicEmbeddingTables
    if getattr(cls.__init__, "_twin", False):
        return
    orig = cls.__init__

    def init(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        self._kernel_dedup = True

    init._twin = True
    cls.__init__ = init


def parity_with_twin(rank, world, cases):
    """shard_workers.parity_cases with the CUDA step on the CPU (a spawned rank's body)."""
    import shard_workers as sw

    install()
    sw.parity_cases(rank, world, cases)


def qcomms_with_twin(rank, world):
    """shard_workers.qcomms_parity with the CUDA step on the CPU (the row ops on half-precision rows and sums)."""
    import shard_workers as sw

    install()
    sw.qcomms_parity(rank, world)


def psw_grad_parity(rank, world, twin):
    """Sum pooling with per-sample weights that need a gradient (``twin``: the CUDA step's unfused path, else the
    CPU step): outputs, the weights' gradients and the rows after training equal the single-rank module's fed all
    ranks' batches."""
    import dynamicemb as de
    from dist_helpers import global_batch, table_rows

    if twin:
        install()
    V, F, B = 300, 3, 4
    opts = [de.DynamicEmbTableOptions(dim=d, max_capacity=512 * world, bucket_capacity=16,
                                      initializer=de.DynamicEmbInitializer("uniform", seed=3 + i))
            for i, d in enumerate([8, 4])]
    ref = de.BatchedDynamicEmbeddingTables(opts, [0, 1, 0], pooling="sum", optimizer=de.SGD(lr=0.1))
    sh = de.ShardedDynamicEmbeddingTables(opts, [0, 1, 0], pooling="sum", optimizer=de.SGD(lr=0.1), key_space=V)
    gen = torch.Generator().manual_seed(77)
    for step in range(3):
        ids, off, w, locs = global_batch(gen, F, world, B, V, weighted=True)
        lid, loff, lw, gpos = locs[rank]
        w = w.clone().requires_grad_()
        lw = w.detach()[gpos].clone().requires_grad_()
        a = ref(ids, off, per_sample_weights=w)
        b = sh(lid, loff, per_sample_weights=lw)
        torch.testing.assert_close(b, a[rank * B:(rank + 1) * B], rtol=1e-6, atol=1e-6)
        R = torch.randn(a.shape, generator=gen)
        (a * R).sum().backward()
        (b * R[rank * B:(rank + 1) * B]).sum().backward()
        torch.testing.assert_close(lw.grad, w.grad[gpos], rtol=1e-6, atol=1e-6)
    for t in range(2):
        m, lt = sh.local_table(t)
        mine, theirs = table_rows(m.tables[lt]), table_rows(ref.tables[t])
        for k, v in mine.items():
            torch.testing.assert_close(torch.tensor(v[0]), torch.tensor(theirs[k][0]), rtol=1e-6, atol=1e-6)
