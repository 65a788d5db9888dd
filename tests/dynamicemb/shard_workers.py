"""Rank bodies of the sharded tests (run by dist_helpers.run_ranks in spawned processes): gloo ranks on the CPU
(test_sharded_cpu.py) and nccl ranks with one GPU each (test_sharded_nccl_gpu.py) run the same bodies; tensors
live on ``rank_device()`` and the single-rank reference runs on the same device."""

import torch
import torch.distributed as dist

import dynamicemb as de
from dist_helpers import global_batch, rank_device, table_rows

V = 50


def make_opt(name, **kw):
    return {"sgd": de.SGD(lr=0.3, **kw), "adam": de.Adam(lr=0.05, **kw), "adagrad": de.Adagrad(lr=0.2, **kw),
            "rowwise": de.RowWiseAdagrad(lr=0.2, **kw)}[name]


def _tol():
    # CPU: both modules run the same torch ops (exact up to fp32 rounding of equal sums); CUDA: the reference pools
    # and sums gradients in fused kernels, in another order than the sharded module's torch ops
    return dict(rtol=1e-6, atol=1e-6) if rank_device().type == "cpu" else dict(rtol=1e-5, atol=1e-5)


# (routing, pooling, optimizer, mixed dims), extras: every routing, pooling and optimizer at least once; clipping,
# per-sample weights, admission and each score policy among them (test_sharded_cpu.py runs CASES_2 on 2 ranks and
# CASES_3 on 3; the NCCL tests run both lists on every world size)
CASES_2 = [
    (("hash", "sum", "adam", True), dict(clip=True, weighted=True)),
    (("roundrobin", "mean", "adam", True), dict(empty_step=True, steps=4)),
    (("continuous", "none", "rowwise", False), dict()),
    (("hash", "none", "adagrad", False), dict(admission=2, policy="lfu", uint64=True)),
    (("roundrobin", "sum", "adagrad", False), dict(policy="epoch_lfu")),
    (("continuous", "sum", "sgd", True), dict(admission=3, clip=True, policy="epoch_lru")),
]
CASES_3 = [
    (("hash", "sum", "rowwise", True), dict(clip=True)),
    (("roundrobin", "none", "adam", False), dict(admission=2)),
    (("continuous", "mean", "sgd", False), dict(weighted=False)),
]


def train_parity(rank, world, routing, pooling, opt_name, mixed_dims, steps=3, clip=False, weighted=False,
                 admission=0, policy="lru", empty_step=False, uint64=False):
    """A sharded module and the single-rank module fed all ranks' batches train to the same outputs and rows."""
    dev, tol = rank_device(), _tol()
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
    ref = de.BatchedDynamicEmbeddingTables(opts, fmap, pooling=pooling, optimizer=make_opt(opt_name, **kw),
                                           device=dev, **kd)
    sh = de.ShardedDynamicEmbeddingTables(opts, fmap, pooling=pooling, optimizer=make_opt(opt_name, **kw),
                                          routing=routing, key_space=V, device=dev, **kd)

    def keys(x):
        return (x + (-(2**63) + 3)).view(torch.uint64) if uint64 else x

    def on_dev(*ts):
        return [None if t is None else t.to(dev) for t in ts]

    gen = torch.Generator().manual_seed(1234)
    for step in range(steps):
        # empty_step: in step 1 rank 0 has no ids and table 1 none anywhere (its shard modules see no ids)
        empty = dict(empty_features=[1], empty_rank=0) if empty_step and step == 1 else {}
        ids, off, w, locs = global_batch(gen, F, world, B, V, weighted=weighted, **empty)
        ids, off, w = on_dev(ids, off, w)
        lid, loff, lw, gpos = on_dev(*locs[rank])
        out_ref = ref(keys(ids), off, per_sample_weights=w)
        out = sh(keys(lid), loff, per_sample_weights=lw)
        R = torch.randn(out_ref.shape, generator=gen).to(dev)
        if pooling == "none":
            want, Rl = out_ref[gpos], R[gpos]
        else:
            want, Rl = out_ref[rank * B:(rank + 1) * B], R[rank * B:(rank + 1) * B]
        torch.testing.assert_close(out, want, **tol, msg=lambda m: f"step {step} rank {rank}: {m}")
        (out_ref * R).sum().backward()
        (out * Rl).sum().backward()
    # rows (embedding + optimizer state) of every key this rank owns equal the reference's; all keys are owned
    n_local = 0
    for t in range(len(dims)):
        m, lt = sh.local_table(t)
        mine = table_rows(m.tables[lt])
        theirs = table_rows(ref.tables[t])
        owner = sh.owner_of(torch.tensor(sorted(theirs), dtype=torch.int64, device=dev).view(sh.key_dtype), t)
        owned = {k for k, o in zip(sorted(theirs), owner.tolist()) if o == rank}
        assert set(mine) == owned, f"table {t} rank {rank}: keys differ"
        k = sorted(owned)
        torch.testing.assert_close(torch.tensor([mine[x][0] for x in k]), torch.tensor([theirs[x][0] for x in k]),
                                   **tol, msg=lambda m: f"table {t} rank {rank}: {m}")
        n_local += len(mine)
    total = torch.tensor([n_local], device=dev)
    dist.all_reduce(total)
    assert int(total) == sum(ref.sizes()), (int(total), ref.sizes())
    # eval: missing ids read the eval initializer, nothing inserted
    sh.eval(); ref.eval()
    ids, off, w, locs = global_batch(gen, F, world, B, V + 20, weighted=weighted)
    ids, off, w = on_dev(ids, off, w)
    lid, loff, lw, gpos = on_dev(*locs[rank])
    out_ref = ref(keys(ids), off, per_sample_weights=w)
    out = sh(keys(lid), loff, per_sample_weights=lw)
    want = out_ref[gpos] if pooling == "none" else out_ref[rank * B:(rank + 1) * B]
    torch.testing.assert_close(out, want, **tol)


def parity_cases(rank, world, cases):
    """``train_parity`` for each (args, kwargs) in ``cases``, in one set of ranks (spawning costs seconds)."""
    for args, kw in cases:
        try:
            train_parity(rank, world, *args, **kw)
        except Exception as e:
            raise AssertionError(f"case {args} {kw}: {e}") from e


# ---------------------------------------------------------------------- checkpoints across world sizes
ROUTINGS = ("hash", "roundrobin", "continuous")
CK_STEPS = 3
CK_FMAP = [0, 1, 1]
EVICT_CAP = 32  # global slots per table of the "evict" writers: one bucket of 16 per rank from 2 ranks on
CK_IDS, CK_SAMPLES, CK_WIDTH = 192, 128, 8 + 4 + 4  # ids per table, samples per step (all ranks), output width
# the routing whose training goes on after a load (world, load_from) -> routing; the others: "continuous"
CLEAN_ROUTING = {(3, 2): "hash", (2, 3): "roundrobin", (4, 2): "hash", (2, 4): "roundrobin", (1, 2): "hash"}


def ck_shape(world):
    """(ids per table, samples per rank) of the checkpoint tests' batches: CK_SAMPLES samples per step split over
    the ranks, so each of the CK_IDS ids of a table occurs ~3 (table a) and ~6 (table b) times in the 3 steps and
    most pass admission (2): ~150-190 ids per table reach EVICT_CAP slots (at most 16 per rank, 32 on one rank)
    at every world size up to 8, and the "evict" tables overflow."""
    return CK_IDS, CK_SAMPLES // world


def _ck_opts(cap, policy="lfu", admission=0):
    return [de.DynamicEmbTableOptions(dim=d, max_capacity=cap, bucket_capacity=16, score_policy=policy,
                                      admission_threshold=admission, on_refused="zero",
                                      initializer=de.DynamicEmbInitializer("uniform", low=-0.1, high=0.1, seed=5 + i))
            for i, d in enumerate((8, 4))]


def _ck_module(kind, routing, world, loading=False):
    # "evict": EVICT_CAP slots per table over all ranks (evictions), admission counts too; a loading module has
    # room for every dumped row (1024 slots: at most 16 per writer rank and table, 128 over 8 ranks); "clean": room
    # for every id (1024 slots per rank for CK_IDS ids, so no bucket overflows: training parity with one rank
    # across the reshard)
    if kind == "evict":
        opts = _ck_opts(1024 if loading else EVICT_CAP, policy="lfu", admission=2)
    else:
        opts = _ck_opts(1024 * world * (4 if loading else 1), policy="lru")
    return opts, de.ShardedDynamicEmbeddingTables(opts, CK_FMAP, pooling="sum", optimizer=de.Adam(lr=0.05),
                                                  routing=routing, key_space=CK_IDS, table_names=["a", "b"],
                                                  device=rank_device())


def _ck_batch(world, step):
    """The global batch of a step (fixed by the step) and the upstream gradient of each rank's bags."""
    nv, b = ck_shape(world)
    _, _, _, locs = global_batch(torch.Generator().manual_seed(777 + step), len(CK_FMAP), world, b, nv)
    R = [torch.randn(b, CK_WIDTH, generator=torch.Generator().manual_seed(r * 1000 + step)) for r in range(world)]
    return locs, R


def _ck_train(m, rank, world, first_step, steps):
    dev = rank_device()
    for s in range(first_step, first_step + steps):
        locs, R = _ck_batch(world, s)
        lid, loff, _, _ = locs[rank]
        out = m(lid.to(dev), loff.to(dev))
        (out * R[rank].to(dev)).sum().backward()


def _reference(worlds_steps):
    """The single-rank module trained on the global batches of the phases [(world, steps), ...]."""
    dev = rank_device()
    opts = _ck_opts(4096, policy="lru")
    ref = de.BatchedDynamicEmbeddingTables(opts, CK_FMAP, pooling="sum", optimizer=de.Adam(lr=0.05), device=dev)
    s = 0
    for world, steps in worlds_steps:
        nv, b = ck_shape(world)
        for _ in range(steps):
            ids, off, _, _ = global_batch(torch.Generator().manual_seed(777 + s), len(CK_FMAP), world, b, nv)
            _, R = _ck_batch(world, s)
            out = ref(ids.to(dev), off.to(dev))
            (out * torch.cat(R).to(dev)).sum().backward()
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


def _owned(m, rows, rank):
    """The entries of ``rows`` ({(kind, table, key): ...}) whose key this rank owns under m's routing."""
    out = {}
    for t in range(len(m.options)):
        ks = [k for k in rows if k[1] == t]
        if ks:
            owner = m.owner_of(torch.tensor([k[2] for k in ks], dtype=torch.int64, device=m.device), t).tolist()
            out.update({k: rows[k] for k, o in zip(ks, owner) if o == rank})
    return out


def ck_phase(rank, world, tmp, load_from, write):
    """Loads the dumps of world ``load_from`` (if any) and checks them, then trains and dumps (if ``write``)."""
    import os

    dev = rank_device()
    for routing in ROUTINGS:
        # bit-exact reloads under eviction for every routing; training on after the reshard for one routing per
        # load (CLEAN_ROUTING), which keeps the test to seconds
        check_clean = routing == CLEAN_ROUTING.get((world, load_from), "continuous")
        for kind in ("evict", "clean"):
            if load_from and (kind == "evict" or check_clean):
                opts, m = _ck_module(kind, routing, world, loading=True)
                src = os.path.join(tmp, routing, kind, f"w{load_from}")
                m.load(src)
                # bit-exact: this rank holds exactly the dumped rows it owns now (rows, optimizer state, scores)
                union = {}
                for r in range(load_from):
                    union.update(torch.load(os.path.join(src, f"rows{r}.pt")))
                want = _owned(m, union, rank)
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
                        k = sorted(mine)
                        torch.testing.assert_close(
                            torch.tensor([mine[x][0] for x in k]), torch.tensor([theirs[x][0] for x in k]), **_tol(),
                            msg=lambda e: f"{routing} {load_from}->{world}: {e}")
            if write:  # a fresh module, trained from scratch on this world's batches
                opts, m = _ck_module(kind, routing, world)
                _ck_train(m, rank, world, 0, CK_STEPS)
                dst = os.path.join(tmp, routing, kind, f"w{world}")
                m.dump(dst)
                torch.save(_shard_rows(m), os.path.join(dst, f"rows{rank}.pt"))
                if kind == "evict":
                    # more ids than slots reached the tables: some rank's table of 2 features is full
                    inner, i = m.local_table(1)
                    cap = inner.tables[i].capacity()
                    full = torch.tensor([int(m.local_sizes()[1] == cap)], device=dev)
                    dist.all_reduce(full)
                    assert int(full) > 0, "expected evictions in the 'evict' case (a full table on some rank)"


# ---------------------------------------------------------------------- storage modes
def storage_parity(rank, world, tmp=None):
    """Hybrid and caching shards (a global HBM budget of 1/4 of the rows, split over the ranks) train as the
    single-rank all-HBM module fed all ranks' batches."""
    import dataclasses

    dev, tol, D, B = rank_device(), _tol(), 16, 64
    base = de.DynamicEmbTableOptions(dim=D, max_capacity=4096, bucket_capacity=16,
                                     initializer=de.DynamicEmbInitializer("uniform", seed=1))
    row_bytes = D * 4 * 3  # fp32 [embedding | Adam m | Adam v]
    for storage in ("hybrid", "caching"):
        opts = [dataclasses.replace(base, storage=storage, hbm_budget_bytes=1024 * row_bytes)] * 2
        ref = de.BatchedDynamicEmbeddingTables([base] * 2, pooling="sum", optimizer=de.Adam(lr=0.05), device=dev)
        sh = de.ShardedDynamicEmbeddingTables(opts, pooling="sum", optimizer=de.Adam(lr=0.05), device=dev)
        hbm_rows = sh.shards[f"dim{D}"]._hbm_rows
        assert hbm_rows == [1024 // world] * 2, (storage, hbm_rows)  # each rank's share of the global budget
        gen = torch.Generator().manual_seed(3)
        for step in range(4):
            ids, off, _, locs = global_batch(gen, 2, world, B, 3000)
            lid, loff = locs[rank][0].to(dev), locs[rank][1].to(dev)
            a, b = ref(ids.to(dev), off.to(dev)), sh(lid, loff)
            mine = slice(rank * B, (rank + 1) * B)
            torch.testing.assert_close(b, a[mine], **tol, msg=lambda m: f"{storage} step {step}: {m}")
            R = torch.randn(a.shape, generator=gen).to(dev)
            (a * R).sum().backward()
            (b * R[mine]).sum().backward()
    if tmp is not None:
        storage_modes_bitwise(rank, world, tmp)


def storage_modes_bitwise(rank, world, tmp):
    """The sharded path in every storage mode equals the sharded all-HBM module bit for bit (same ranks, same ids):
    hybrid, caching over the host store, the uva store and (with rocksdict) a disk store, whose directory every
    rank shares (each rank opens <dir>/rank<r>-of-<W>); rows evicted to the store read back the same."""
    import dataclasses
    import os

    from dynamicemb._uva_store import UvaStoreSpec

    try:
        import rocksdict  # noqa: F401
        have_rocks = True
    except ImportError:
        have_rocks = False
    dev, D, B = rank_device(), 8, 48
    base = de.DynamicEmbTableOptions(dim=D, max_capacity=2048, bucket_capacity=16,
                                     initializer=de.DynamicEmbInitializer("uniform", seed=5))
    budget = 256 * D * 4 * 3 * world  # 256 rows of [embedding | Adam m | Adam v] per rank: the batches evict
    stores = [("caching", None), ("caching", UvaStoreSpec()), ("hybrid", None)]
    if have_rocks:
        stores.append(("caching", os.path.join(tmp, f"disk_w{world}")))

    def run(opts):
        m = de.ShardedDynamicEmbeddingTables(opts, pooling="sum", optimizer=de.Adam(lr=0.05), device=dev)
        gen, outs = torch.Generator().manual_seed(9), []
        for _ in range(5):
            _, _, _, locs = global_batch(gen, 2, world, B, 1500)
            out = m(locs[rank][0].to(dev), locs[rank][1].to(dev))
            (out * torch.randn(out.shape, generator=gen).to(dev)).sum().backward()
            outs.append(out.detach().cpu())
        probe = torch.arange(0, 1500, 7, dtype=torch.int64)
        m.eval()
        outs.append(m(probe.to(dev), torch.tensor([0, probe.numel() // 2, probe.numel()]).to(dev)).detach().cpu())
        return m, outs

    _, ref = run([base] * 2)
    for storage, store in stores:
        if isinstance(store, str):  # a store's parent directory must exist (DiskStore); W > 1 puts rank folders in it
            os.makedirs(store, exist_ok=True)
        paths = [os.path.join(store, f"t{t}") for t in range(2)] if isinstance(store, str) else [store] * 2
        m, got = run([dataclasses.replace(base, storage=storage, hbm_budget_bytes=budget, backing_store=p)
                      for p in paths])
        for step, (x, y) in enumerate(zip(ref, got)):
            assert torch.equal(x, y), (storage, store, step, (x - y).abs().max().item())
        if isinstance(store, str):
            want = os.path.join(paths[0], f"rank{rank}-of-{world}") if world > 1 else paths[0]
            got_path = m.shards[f"dim{D}"].tables[0].store.path
            assert os.path.abspath(got_path) == os.path.abspath(want), (got_path, want)


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
    # a sharder's qcomms reaches the sharded tables it builds (rows / gradients on the wire in bf16)
    q = de.QCommsConfig(torch.bfloat16, torch.bfloat16)
    qs = de.DynamicEmbeddingBagCollectionSharder(constraints, optimizer=de.Adam(lr=0.05), qcomms=q)
    sharded = qs.shard(Model().dyn, plan.plan["dyn"], ShardingEnv.from_process_group(dist.GroupMember.WORLD),
                       torch.device("cpu"), "dyn")
    assert sharded.collection.tables.qcomms == q and sharded.collection.tables._row_dtype == torch.bfloat16


# ---------------------------------------------------------------------- suites: several checks per spawn
def suite(rank, world, cases, tmp, loads, write, bad=False, storage=False):
    """Parity ``cases``, then the checkpoints of the worlds in ``loads`` (1 -> W etc.), then (``write``) this
    world's dumps for a later suite; ``bad``: the bad-input checks; ``storage``: the hybrid/caching shards. One
    spawn (seconds of start-up) for all."""
    parity_cases(rank, world, cases)
    if storage:
        storage_parity(rank, world, tmp)
    if bad:
        bad_input(rank, world)
    for src in loads:
        ck_phase(rank, world, tmp, src, False)
    if write:
        ck_phase(rank, world, tmp, 0, True)


# ---------------------------------------------------------------------- rows / gradients on the wire in bf16 / fp16
QCOMMS_CASES = [("sum", torch.bfloat16), ("none", torch.float16), ("mean", torch.bfloat16)]


def _unit_roundoff(dtype):
    return {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}[dtype]


def qcomms_parity(rank, world, cases=QCOMMS_CASES):
    """``QCommsConfig`` against the exact single-rank module fed all ranks' batches, one direction rounded at a
    time (the loss is linear in the outputs, so forward rounding leaves the gradients, and so the rows, exact):
    forward: rows equal the reference's and each output is the pooling of the rounded rows (step 0; none: bit for
    bit the rounded row), within u * the pooled |rows| later; backward (SGD): every row within lr * u * (sum of
    |gradient| of its ids) per step of the reference's. Some output or row differs on some rank (the rounding
    ran); "both" rounds the two directions (the shard modules then write and take the wire's dtype themselves):
    outputs at step 0 and rows as above. u: the wire dtype's unit roundoff (bf16 2**-8, fp16 2**-11)."""
    dev, D, F, B, lr = rank_device(), 8, 2, 3, 0.3
    tol = _tol()["atol"]
    for pooling, wire in cases:
        u = _unit_roundoff(wire)
        for side in ("forward", "backward", "both"):
            fwd, bwd = side in ("forward", "both"), side in ("backward", "both")
            opts = [de.DynamicEmbTableOptions(dim=D, max_capacity=512 * world, bucket_capacity=16,
                                              initializer=de.DynamicEmbInitializer("uniform", low=-1.0, high=1.0,
                                                                                   seed=31 + i))
                    for i in range(F)]
            q = de.QCommsConfig(wire if fwd else None, wire if bwd else None)
            ref = de.BatchedDynamicEmbeddingTables(opts, [0, 1], pooling=pooling, optimizer=de.SGD(lr=lr), device=dev)
            sh = de.ShardedDynamicEmbeddingTables(opts, [0, 1], pooling=pooling, optimizer=de.SGD(lr=lr),
                                                  device=dev, qcomms=q)
            gen = torch.Generator().manual_seed(900 + world)
            bound = {}  # (table, key) -> (D,) accumulated bound of |row - reference row|
            rounded = False
            for step in range(3):
                ids, off, _, locs = global_batch(gen, F, world, B, V)
                lid, loff, _, gpos = locs[rank]
                out_ref = ref(ids.to(dev), off.to(dev))
                out = sh(lid.to(dev), loff.to(dev))
                want = out_ref[gpos.to(dev)] if pooling == "none" else out_ref[rank * B:(rank + 1) * B]
                feat = torch.searchsorted(off[1:], torch.arange(ids.numel()), right=True) // (world * B)
                if fwd:
                    # step 0: fresh rows, the same bits in both modules: the output is the pooling of the rounded
                    # rows; later steps (rows equal up to fp32 sums in another order): within u * pooled |rows|
                    rows = {f: table_rows(ref.tables[f]) for f in range(F)}  # this step's rows (not yet updated)
                    if pooling == "none":
                        exp, absp = want.to(wire).float(), want.abs()
                    else:
                        exp, absp = torch.zeros(B, F * D), torch.zeros(B, F * D)
                        for f in range(F):
                            for b in range(B):
                                i = f * B + b
                                ks = lid[int(loff[i]):int(loff[i + 1])].tolist()
                                for k in ks:
                                    r = torch.tensor(rows[f][k][0][:D])
                                    exp[b, f * D:(f + 1) * D] += r.to(wire).float()
                                    absp[b, f * D:(f + 1) * D] += r.abs()
                                if pooling == "mean" and ks:
                                    exp[b, f * D:(f + 1) * D] /= len(ks)
                                    absp[b, f * D:(f + 1) * D] /= len(ks)
                        exp, absp = exp.to(dev), absp.to(dev)
                    if step == 0:
                        torch.testing.assert_close(out, exp, rtol=0, atol=0 if pooling == "none" else tol)
                    elif not bwd:  # (both: the rows moved within the backward's bound too; checked at the end)
                        err = (out - want).abs()
                        assert bool((err <= u * absp * (1 + 1e-3) + tol).all()), (step, rank, float(err.max()))
                    rounded |= not torch.equal(out, want)
                else:
                    if step == 0:
                        torch.testing.assert_close(out, want, rtol=tol, atol=tol)
                R = torch.randn(out_ref.shape, generator=gen)
                Rl = R[gpos] if pooling == "none" else R[rank * B:(rank + 1) * B]
                # |gradient| of every global id, accumulated per (table, key) into the backward's bound
                if pooling == "none":
                    g = R.abs()
                else:
                    bag = torch.searchsorted(off[1:], torch.arange(ids.numel()), right=True) % (world * B)
                    lens = (off[1:] - off[:-1]).view(F, world * B).float()
                    g = torch.stack([R[bag[i], int(feat[i]) * D:(int(feat[i]) + 1) * D].abs() /
                                     (lens[feat[i], bag[i]] if pooling == "mean" else 1.0)
                                     for i in range(ids.numel())]) if ids.numel() else torch.zeros(0, D)
                for i in range(ids.numel()):
                    key = (int(feat[i]), int(ids[i]))
                    bound[key] = bound.get(key, torch.zeros(D)) + lr * u * g[i]
                (out_ref * R.to(dev)).sum().backward()
                (out * Rl.to(dev)).sum().backward()
            for f in range(F):
                m, lt = sh.local_table(f)
                mine, theirs = table_rows(m.tables[lt]), table_rows(ref.tables[f])
                assert set(mine) <= set(theirs)
                for k, (row, _) in mine.items():
                    diff = (torch.tensor(row) - torch.tensor(theirs[k][0])).abs()
                    if not bwd:
                        assert float(diff.max()) <= tol, (f, k, diff)
                    else:
                        assert bool((diff <= bound[(f, k)] * (1 + 1e-3) + tol).all()), (f, k, diff, bound[(f, k)])
                        rounded |= float(diff.max()) > 0
            flag = torch.tensor([int(rounded)], device=dev)
            dist.all_reduce(flag)
            assert int(flag) > 0, f"{pooling} {wire} {side}: nothing was rounded"
