"""Rank bodies of the sharded tests (run by dist_helpers.run_ranks in spawned processes)."""

import torch
import torch.distributed as dist

import dynamicemb as de
from dist_helpers import global_batch, table_rows

V = 50


def make_opt(name, **kw):
    return {"sgd": de.SGD(lr=0.3, **kw), "adam": de.Adam(lr=0.05, **kw), "adagrad": de.Adagrad(lr=0.2, **kw),
            "rowwise": de.RowWiseAdagrad(lr=0.2, **kw)}[name]


def train_parity(rank, world, routing, pooling, opt_name, mixed_dims, steps=3, clip=False, weighted=False,
                 admission=0, policy="lru", empty_step=False, uint64=False):
    """A sharded module and the single-rank module fed all ranks' batches train to the same outputs and rows."""
    dims = [8, 4, 8] if mixed_dims and pooling != "none" else [8, 8, 8]
    fmap = [0, 1, 2, 0]
    F, B = len(fmap), 3
    kw = dict(max_grad_norm=0.5, max_grad_value=0.3) if clip else {}
    opts = [de.DynamicEmbTableOptions(dim=d, max_capacity=512 * world, bucket_capacity=16, score_policy=policy,
                                      admission_threshold=admission,
                                      initializer=de.DynamicEmbInitializer("uniform", seed=11 + i))
            for i, d in enumerate(dims)]
    # the reference sees the global capacity on one rank (no eviction either way)
    # uint64: ids 2**63 + 3 + k (the top bit set, just past the reserved keys)
    kd = dict(key_dtype=torch.uint64) if uint64 else {}
    ref = de.BatchedDynamicEmbeddingTables(opts, fmap, pooling=pooling, optimizer=make_opt(opt_name, **kw), **kd)
    sh = de.ShardedDynamicEmbeddingTables(opts, fmap, pooling=pooling, optimizer=make_opt(opt_name, **kw),
                                          routing=routing, key_space=V, **kd)

    def keys(x):
        return (x + (-(2**63) + 3)).view(torch.uint64) if uint64 else x

    gen = torch.Generator().manual_seed(1234)
    for step in range(steps):
        # empty_step: in step 1 rank 0 has no ids and table 1 none anywhere (its shard modules see no ids)
        empty = dict(empty_features=[1], empty_rank=0) if empty_step and step == 1 else {}
        ids, off, w, locs = global_batch(gen, F, world, B, V, weighted=weighted, **empty)
        lid, loff, lw, gpos = locs[rank]
        out_ref = ref(keys(ids), off, per_sample_weights=w)
        out = sh(keys(lid), loff, per_sample_weights=lw)
        R = torch.randn(out_ref.shape, generator=gen)
        if pooling == "none":
            want, Rl = out_ref[gpos], R[gpos]
        else:
            want, Rl = out_ref[rank * B:(rank + 1) * B], R[rank * B:(rank + 1) * B]
        torch.testing.assert_close(out, want, rtol=1e-6, atol=1e-6, msg=lambda m: f"step {step} rank {rank}: {m}")
        (out_ref * R).sum().backward()
        (out * Rl).sum().backward()
    # rows (embedding + optimizer state) of every key this rank owns equal the reference's; all keys are owned
    n_local = 0
    for t in range(len(dims)):
        m, lt = sh.local_table(t)
        mine = table_rows(m.tables[lt])
        theirs = table_rows(ref.tables[t])
        owner = sh.owner_of(torch.tensor(sorted(theirs), dtype=torch.int64).view(sh.key_dtype), t)
        owned = {k for k, o in zip(sorted(theirs), owner.tolist()) if o == rank}
        assert set(mine) == owned, f"table {t} rank {rank}: keys differ"
        for k in owned:
            torch.testing.assert_close(torch.tensor(mine[k][0]), torch.tensor(theirs[k][0]), rtol=1e-6, atol=1e-6)
        n_local += len(mine)
    total = torch.tensor([n_local])
    dist.all_reduce(total)
    assert int(total) == sum(ref.sizes()), (int(total), ref.sizes())
    # eval: missing ids read the eval initializer, nothing inserted
    sh.eval(); ref.eval()
    ids, off, w, locs = global_batch(gen, F, world, B, V + 20, weighted=weighted)
    lid, loff, lw, gpos = locs[rank]
    out_ref = ref(keys(ids), off, per_sample_weights=w)
    out = sh(keys(lid), loff, per_sample_weights=lw)
    want = out_ref[gpos] if pooling == "none" else out_ref[rank * B:(rank + 1) * B]
    torch.testing.assert_close(out, want, rtol=1e-6, atol=1e-6)


def parity_cases(rank, world, cases):
    """``train_parity`` for each (args, kwargs) in ``cases``, in one set of ranks (spawning costs seconds)."""
    for args, kw in cases:
        try:
            train_parity(rank, world, *args, **kw)
        except Exception as e:
            raise AssertionError(f"case {args} {kw}: {e}") from e


# ---------------------------------------------------------------------- checkpoints across world sizes
ROUTINGS = ("hash", "roundrobin", "continuous")
CK_STEPS, CK_B = 3, 4
CK_FMAP = [0, 1, 1]


def _ck_opts(cap, policy="lfu", admission=0):
    return [de.DynamicEmbTableOptions(dim=d, max_capacity=cap, bucket_capacity=16, score_policy=policy,
                                      admission_threshold=admission, on_refused="zero",
                                      initializer=de.DynamicEmbInitializer("uniform", low=-0.1, high=0.1, seed=5 + i))
            for i, d in enumerate((8, 4))]


def _ck_module(kind, routing, world, cap_scale=1):
    # "evict": 2 buckets per table over all ranks for 50 ids (evictions), admission counts too;
    # "clean": room for every id (training parity with one rank across the reshard)
    if kind == "evict":
        opts = _ck_opts(32 * cap_scale * 4, policy="lfu", admission=2)
        opts = [__import__("dataclasses").replace(o, max_capacity=32 * cap_scale) for o in opts]
    else:
        opts = _ck_opts(256 * world, policy="lru")
    return opts, de.ShardedDynamicEmbeddingTables(opts, CK_FMAP, pooling="sum", optimizer=de.Adam(lr=0.05),
                                                  routing=routing, key_space=V, table_names=["a", "b"])


def _ck_train(m, rank, world, first_step, steps):
    for s in range(first_step, first_step + steps):
        gen = torch.Generator().manual_seed(777 + s)
        _, _, _, locs = global_batch(gen, len(CK_FMAP), world, CK_B, V)
        lid, loff, _, _ = locs[rank]
        out = m(lid, loff)
        (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(rank * 1000 + s))).sum().backward()


def _reference(worlds_steps):
    """The single-rank module trained on the global batches of the phases [(world, steps), ...]."""
    opts = _ck_opts(4096, policy="lru")
    ref = de.BatchedDynamicEmbeddingTables(opts, CK_FMAP, pooling="sum", optimizer=de.Adam(lr=0.05))
    s = 0
    for world, steps in worlds_steps:
        for _ in range(steps):
            gen = torch.Generator().manual_seed(777 + s)
            ids, off, _, _ = global_batch(gen, len(CK_FMAP), world, CK_B, V)
            out = ref(ids, off)
            R = torch.cat([torch.randn(CK_B, out.shape[1], generator=torch.Generator().manual_seed(r * 1000 + s))
                           for r in range(world)])
            (out * R).sum().backward()
            s += 1
    return ref


def _shard_rows(m):
    """{(table, key): (row, score)} of this rank's shards, tables and admission tables."""
    rows = {}
    for t in range(len(m.options)):
        inner, i = m.local_table(t)
        for k, v in table_rows(inner.tables[i]).items():
            rows[("t", t, k)] = v
        if inner.admission_tables[i] is not None:
            for k, v in table_rows(inner.admission_tables[i]).items():
                rows[("a", t, k)] = v
    return rows


def ck_phase(rank, world, tmp, load_from, write):
    """Loads the dumps of world ``load_from`` (if any) and checks them, then trains and dumps (if ``write``)."""
    import os

    for routing in ROUTINGS:
        # bit-exact reloads under eviction for every routing; training on after the reshard for one routing per
        # load (2 -> 3 hash, 3 -> 2 roundrobin, 1 -> 2 continuous), which keeps the test to seconds
        check_clean = routing == {(3, 2): "hash", (2, 3): "roundrobin"}.get((world, load_from), "continuous")
        for kind in ("evict", "clean"):
            if load_from and (kind == "evict" or check_clean):
                opts, m = _ck_module(kind, routing, world, cap_scale=4)
                src = os.path.join(tmp, routing, kind, f"w{load_from}")
                m.load(src)
                # bit-exact: this rank holds exactly the dumped rows it owns now (rows, optimizer state, scores)
                union = {}
                for r in range(load_from):
                    union.update(torch.load(os.path.join(src, f"rows{r}.pt")))
                want = {k: v for k, v in union.items()
                        if int(m.owner_of(torch.tensor([k[2]]), k[1])[0]) == rank}
                got = _shard_rows(m)
                assert got == want, f"{routing}/{kind} {load_from}->{world} rank {rank}: {len(got)} vs {len(want)}"
                # a dump of another routing mode is refused on every rank, changing nothing
                other = ROUTINGS[(ROUTINGS.index(routing) + 1) % 3]
                try:
                    m.load(os.path.join(tmp, other, kind, f"w{load_from}"))
                    raise AssertionError("a checkpoint of another routing mode loaded")
                except ValueError as e:
                    assert "routing: expected" in str(e), str(e)
                assert _shard_rows(m) == want
                if kind == "clean":  # train on: still equal to one rank trained on all phases' batches
                    _ck_train(m, rank, world, CK_STEPS, CK_STEPS)
                    ref = _reference([(load_from, CK_STEPS), (world, CK_STEPS)])
                    for t in range(2):
                        inner, i = m.local_table(t)
                        mine, theirs = table_rows(inner.tables[i]), table_rows(ref.tables[t])
                        for k, (row, _) in mine.items():
                            torch.testing.assert_close(torch.tensor(row), torch.tensor(theirs[k][0]), rtol=1e-6,
                                                       atol=1e-6, msg=lambda e: f"{routing} {load_from}->{world}: {e}")
            if write:  # a fresh module, trained from scratch on this world's batches
                opts, m = _ck_module(kind, routing, world)
                _ck_train(m, rank, world, 0, CK_STEPS)
                dst = os.path.join(tmp, routing, kind, f"w{world}")
                m.dump(dst)
                torch.save(_shard_rows(m), os.path.join(dst, f"rows{rank}.pt"))
                if kind == "evict":
                    n = torch.tensor([sum(m.local_sizes())])
                    dist.all_reduce(n)
                    assert int(n) < 2 * V, "expected evictions in the 'evict' case"


# ---------------------------------------------------------------------- bad input
def bad_input(rank, world):
    opts = [de.DynamicEmbTableOptions(dim=8, max_capacity=256)]
    # a process group of another size than the job expects
    try:
        de.ShardedDynamicEmbeddingTables(opts, world_size=world + 1)
        raise AssertionError("a process group of the wrong size was accepted")
    except ValueError as e:
        assert f"expected {world + 1} ranks" in str(e), str(e)
    # configurations that differ between ranks: refused on every rank
    mine = [de.DynamicEmbTableOptions(dim=8 if rank == 0 else 16, max_capacity=256)]
    try:
        de.ShardedDynamicEmbeddingTables(mine)
        raise AssertionError("differing configurations were accepted")
    except ValueError as e:
        assert "expected the same configuration on every rank" in str(e), str(e)
    for kw, exc, text in ((dict(routing="modulo"), ValueError, "routing: expected one of"),
                          (dict(key_space=0), ValueError, "key_space: expected an int in [1, 2**63]"),
                          (dict(device="cuda"), ValueError, "device: expected cpu for a gloo process group")):
        try:
            de.ShardedDynamicEmbeddingTables(opts, **kw)
            raise AssertionError(f"{kw} accepted")
        except exc as e:
            assert text in str(e), str(e)
    m = de.ShardedDynamicEmbeddingTables(opts)
    for args, exc, text in (((torch.tensor([1, 2], dtype=torch.int32), torch.tensor([0, 2])), TypeError,
                             "ids: expected a 1-d torch.int64 tensor"),
                            ((torch.tensor([1, -2]), torch.tensor([0, 2])), ValueError, "ids: expected ids >= 0"),
                            ((torch.tensor([1, 2]), torch.tensor([0, 3])), ValueError, "offsets: expected")):
        try:
            m(*args)
            raise AssertionError(f"{args} accepted")
        except exc as e:
            assert text in str(e), str(e)
    # on_refused="error": an insert refused on one rank raises on every rank (no rank is left waiting)
    tiny = [de.DynamicEmbTableOptions(dim=4, max_capacity=16 * world, bucket_capacity=16, on_refused="error",
                                      score_policy="lfu")]
    m = de.ShardedDynamicEmbeddingTables(tiny, routing="continuous", key_space=1000 * world)
    ids = torch.arange(40) + 1000 * (world - 1) if rank == 0 else torch.tensor([1, 2, 3])  # all on the last rank
    try:
        m(ids, torch.tensor([0, ids.numel()])).sum().backward()
        raise AssertionError("refused inserts were not reported")
    except de.RefusedInsertError:
        pass


# ---------------------------------------------------------------------- TorchRec DistributedModelParallel
def dmp_model(rank, world, tmp):
    """A plain TorchRec model (a dynamic EBC, a static EBC, a dynamic EC) sharded by DistributedModelParallel with
    our planner and sharders: dynamic tables row-wise by key, the static one by TorchRec; the dynamic outputs
    and rows equal one rank's dynamicemb collections fed all ranks' batches."""
    from torch import nn
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, EmbeddingCollection, EmbeddingConfig
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.planner import ParameterConstraints, Topology
    from torchrec.distributed.types import ShardingEnv
    from torchrec.modules.embedding_configs import PoolingType
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
    from fbgemm_gpu.split_embedding_configs import EmbOptimType

    torch.manual_seed(0)  # the static table's initial rows: the same on every rank
    bag_cfgs = [EmbeddingBagConfig(name="user", embedding_dim=8, num_embeddings=1000, feature_names=["u", "u2"],
                                   pooling=PoolingType.SUM)]
    static_cfgs = [EmbeddingBagConfig(name="item", embedding_dim=4, num_embeddings=60, feature_names=["i"])]
    seq_cfgs = [EmbeddingConfig(name="hist", embedding_dim=4, num_embeddings=1000, feature_names=["h"])]

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.dyn = EmbeddingBagCollection(bag_cfgs, device=torch.device("cpu"))
            self.static = EmbeddingBagCollection(static_cfgs, device=torch.device("cpu"))
            self.seq = EmbeddingCollection(seq_cfgs, device=torch.device("cpu"))
            self.dense = nn.Linear(4, 1)

        def forward(self, kd, ks, kq):
            # the dense layer reads the static table only, so the dynamic rows' gradients are the test's own
            a, b, c = self.dyn(kd), self.static(ks), self.seq(kq)
            return self.dense(b.values()).squeeze(1), a, c

    opts = {"user": de.DynamicEmbTableOptions(score_policy="lfu",
                                              initializer=de.DynamicEmbInitializer("uniform", low=-0.1, high=0.1)),
            "hist": de.DynamicEmbTableOptions(initializer=de.DynamicEmbInitializer("normal", std=0.05, seed=3))}
    constraints = {n: de.DynamicEmbParameterConstraints(use_dynamicemb=True, options=o) for n, o in opts.items()}
    constraints["item"] = ParameterConstraints(sharding_types=["table_wise"])  # TorchRec's own sharding
    optimizer = de.Adam(lr=0.05)
    fused = {"optimizer": EmbOptimType.EXACT_SGD if hasattr(EmbOptimType, "EXACT_SGD") else EmbOptimType.SGD,
             "learning_rate": 0.1}
    sharders = [de.DynamicEmbeddingBagCollectionSharder(constraints, optimizer=optimizer, fused_params=fused),
                de.DynamicEmbeddingCollectionSharder(constraints, optimizer=optimizer, fused_params=fused)]
    planner = de.DynamicEmbeddingShardingPlanner(Topology(world_size=world, compute_device="cpu"),
                                                 constraints=constraints, optimizer=optimizer)
    model = Model()
    plan = planner.collective_plan(model, sharders, dist.GroupMember.WORLD)
    ps = {n: p for mp in plan.plan.values() for n, p in mp.items()}
    assert ps["user"].sharding_type == "row_wise" and ps["user"].compute_kernel == "customized_kernel", ps["user"]
    assert ps["hist"].compute_kernel == "customized_kernel", ps["hist"]
    assert ps["item"].sharding_type == "table_wise" and ps["item"].compute_kernel == "fused", ps["item"]
    # the planner charges our memory: the enumerator's storage of the dynamic table is shard_storage_bytes
    space = {(so.name, so.compute_kernel): so for so in planner._enumerator.last_stored_search_space or []}
    if ("user", "customized_kernel") in space:
        want = de.shard_storage_bytes(opts["user"].completed(dim=8, num_embeddings=1000), world, optimizer)
        assert space[("user", "customized_kernel")].shards[0].storage.ddr == want
    dmp = DistributedModelParallel(model, env=ShardingEnv.from_process_group(dist.GroupMember.WORLD),
                                   device=torch.device("cpu"), plan=plan, sharders=sharders)
    ref_bag = de.DynamicEmbeddingBagCollection(bag_cfgs, opts["user"], optimizer=de.Adam(lr=0.05))
    ref_seq = de.DynamicEmbeddingCollection(seq_cfgs, opts["hist"], optimizer=de.Adam(lr=0.05))
    B = 3
    for step in range(3):
        gen = torch.Generator().manual_seed(50 + step)
        glob, loc = {}, {}
        for f in ("u", "u2", "i", "h"):
            L = torch.randint(0, 4, (world * B,), generator=gen)
            v = torch.randint(0, 60 if f == "i" else 1000, (int(L.sum()),), generator=gen)
            glob[f] = (v, L)
            off = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(L, 0)])
            loc[f] = (v[off[rank * B]:off[(rank + 1) * B]], L[rank * B:(rank + 1) * B])

        def kjt(fs, src):
            return KeyedJaggedTensor.from_lengths_sync(keys=list(fs), values=torch.cat([src[f][0] for f in fs]),
                                                       lengths=torch.cat([src[f][1] for f in fs]))

        logit, a, c = dmp(kjt(("u", "u2"), loc), kjt(("i",), loc), kjt(("h",), loc))
        ra, rc = ref_bag(kjt(("u", "u2"), glob)), ref_seq(kjt(("h",), glob))
        torch.testing.assert_close(a.values(), ra.values()[rank * B:(rank + 1) * B], rtol=1e-6, atol=1e-6)
        off_h = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(glob["h"][1], 0)])
        lo, hi = int(off_h[rank * B]), int(off_h[(rank + 1) * B])
        torch.testing.assert_close(c["h"].values(), rc["h"].values()[lo:hi], rtol=1e-6, atol=1e-6)
        Ra = torch.randn(ra.values().shape, generator=gen)
        Rc = torch.randn(rc["h"].values().shape, generator=gen)
        (ra.values() * Ra).sum().backward()
        (rc["h"].values() * Rc).sum().backward()
        loss = logit.square().mean() + (a.values() * Ra[rank * B:(rank + 1) * B]).sum() + (
            c["h"].values() * Rc[lo:hi]).sum()
        loss.backward()
        assert torch.isfinite(loss)
    # the static table is TorchRec's (sharded by its own sharder) and trains too
    from torchrec.distributed.embeddingbag import ShardedEmbeddingBagCollection

    static = dmp.module.static if hasattr(dmp.module, "static") else dmp.module.module.static
    assert isinstance(static, ShardedEmbeddingBagCollection), type(static)
    # dynamic rows on their owners equal the reference's
    dyn = dmp.module.dyn if hasattr(dmp.module, "dyn") else dmp.module.module.dyn
    sh = dyn.collection.tables
    inner, i = sh.local_table(0)
    mine, theirs = table_rows(inner.tables[i]), table_rows(ref_bag.tables.tables[0])
    assert mine and all(int(sh.owner_of(torch.tensor([k]))[0]) == rank for k in mine)
    for k, (row, _) in mine.items():
        torch.testing.assert_close(torch.tensor(row), torch.tensor(theirs[k][0]), rtol=1e-6, atol=1e-6)
    # the DMP-sharded tables dump per rank and load into a standalone sharded collection (rows bit-exact)
    import os

    dyn.dump(os.path.join(tmp, "dmp_dyn"))
    again = de.ShardedDynamicEmbeddingBagCollection(bag_cfgs, opts["user"], optimizer=de.Adam(lr=0.05))
    again.tables.load(os.path.join(tmp, "dmp_dyn"))
    inner2, i2 = again.tables.local_table(0)
    assert table_rows(inner2.tables[i2]) == mine


# ---------------------------------------------------------------------- suites: several checks per spawn
def suite(rank, world, cases, tmp, loads, write, bad=False):
    """Parity ``cases``, then the checkpoints of the worlds in ``loads`` (1 -> W etc.), then (``write``) this
    world's dumps for a later suite; ``bad``: the bad-input checks. One spawn (seconds of start-up) for all."""
    parity_cases(rank, world, cases)
    if bad:
        bad_input(rank, world)
    for src in loads:
        ck_phase(rank, world, tmp, src, False)
    if write:
        ck_phase(rank, world, tmp, 0, True)
