"""BatchedDynamicEmbeddingTables on a CUDA device: the fused kernels (csrc/lookup) against the CPU module (the torch
reference path) for every optimizer and pooling mode and under capacity pressure (eviction, refused inserts,
growth), no host sync in a training step, and forward + backward + fused update captured in one CUDA graph and
replayed with fresh ids (vs eager)."""

import os
import sys
import warnings

import pytest
import torch

import dynamicemb

sys.path.insert(0, os.path.dirname(__file__))
from table_helpers import keys_in_bucket  # noqa: E402

from dynamicemb._batched import BatchedDynamicEmbeddingTables, RefusedInsertError  # noqa: E402
from dynamicemb._load import load_library  # noqa: E402
from dynamicemb._optimizers import SGD, Adagrad, Adam, RowWiseAdagrad  # noqa: E402
from dynamicemb._options import DynamicEmbInitializer, DynamicEmbTableOptions  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built")]

V, B = 5000, 64
OPTS = {"sgd": lambda: SGD(lr=0.1, weight_decay=0.01), "adam": lambda: Adam(lr=0.01),
        "adagrad": lambda: Adagrad(lr=0.1), "rowwise_adagrad": lambda: RowWiseAdagrad(lr=0.1, max_grad_norm=1.0)}


def make(device, opt, pooling="sum", dtype=torch.float32, dims=(16, 8), **kw):
    if pooling == "none":
        dims = (dims[0], dims[0])
    tables = [DynamicEmbTableOptions(dim=d, dtype=dtype, max_capacity=1 << 14, on_refused="zero", **kw) for d in dims]
    m = BatchedDynamicEmbeddingTables(tables, [0, 1, 1], pooling=pooling, optimizer=opt, device=device)
    if torch.device(device).type == "cuda":
        assert m.use_kernels, "the CUDA module should run the fused kernels"
    return m


# every optimizer path of the fused backward (weight decay, clipping by value and by global norm, AdamW)
KOPTS = {
    "sgd": lambda: SGD(lr=0.3),
    "sgd_wd_clip_value": lambda: SGD(lr=0.3, weight_decay=0.05, max_grad_value=0.05),
    "sgd_clip_norm": lambda: SGD(lr=0.3, max_grad_norm=0.5),
    "adagrad_wd": lambda: Adagrad(lr=0.2, weight_decay=0.01),
    "rowwise_adagrad_wd": lambda: RowWiseAdagrad(lr=0.2, eps=1e-8, weight_decay=0.01),
    "adam": lambda: Adam(lr=0.05),
    "adamw_clip_norm": lambda: Adam(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, max_grad_norm=1.0),
}


@pytest.mark.parametrize("dims", [(16, 8), (16, 16), (6, 3), (260, 12), (70, 5)],
                         ids=["vec4", "vec4_one_dim", "scalar", "vec4_wide", "scalar_wide"])
@pytest.mark.parametrize("pooling", ["sum", "mean", "none"])
@pytest.mark.parametrize("opt", list(KOPTS))
def test_kernels_match_cpu_path(opt, pooling, dims):
    """Outputs, per-sample-weight grads, updated rows and optimizer state of the fused kernels equal the CPU
    (torch reference) path to 1e-6 after several steps with repeated ids."""
    gen = torch.Generator().manual_seed(7)
    # wide rows: per-sample-weight grads and row-wise states are sums over up to 260 columns (order differs)
    tol = 1e-6 if max(dims) <= 32 else 1e-5
    cpu = make("cpu", KOPTS[opt](), pooling, dims=dims)
    gpu = make("cuda", KOPTS[opt](), pooling, dims=dims)
    for t, d in enumerate(cpu.dims):
        w0 = torch.randn(V, d, generator=gen) * 0.1
        cpu.set_rows(t, torch.arange(V), w0)
        gpu.set_rows(t, torch.arange(V, device="cuda"), w0.cuda())
    for step in range(4):
        ids, offsets, w = batch(gen, "cpu", max_len=6, weighted=pooling == "sum" and step % 2 == 0)
        ids = ids % 300  # many repeats per step: the segment reduction sums several occurrences
        wa = None if w is None else w.clone().requires_grad_(True)
        wb = None if w is None else w.cuda().requires_grad_(True)
        a = cpu(ids, offsets, per_sample_weights=wa)
        b = gpu(ids.cuda(), offsets.cuda(), per_sample_weights=wb)
        torch.testing.assert_close(b.detach().cpu(), a.detach(), atol=tol, rtol=tol)
        R = torch.randn(a.shape, generator=gen)
        (a * R).sum().backward()
        (b * R.cuda()).sum().backward()
        if w is not None:
            torch.testing.assert_close(wb.grad.cpu(), wa.grad, atol=tol, rtol=tol)
    for t in range(2):
        wa, sa, fa = rows(cpu, t, torch.arange(V))
        wb, sb, fb = rows(gpu, t, torch.arange(V))
        assert torch.equal(fa, fb)
        torch.testing.assert_close(wb, wa, atol=tol, rtol=tol)
        torch.testing.assert_close(sb, sa, atol=tol, rtol=tol)
    assert gpu.sizes() == cpu.sizes()


@pytest.mark.parametrize("aggregate", [True, False], ids=["aggregate", "no_aggregate"])
@pytest.mark.parametrize("pooling", ["sum", "mean", "none"])
@pytest.mark.parametrize("opt", ["sgd", "adam", "sgd_clip_norm"])
def test_kernels_long_bags_hot_ids(opt, pooling, aggregate):
    """Bags longer than a warp's round (up to 90 ids), empty bags, and a few very hot ids (hundreds of
    occurrences per step, within and across rounds): the streamed forward and the atomic backward (with and
    without the in-register aggregation of repeated rows) match the CPU path. Tolerance 1e-4: atomics sum a hot
    row's ~10^3 gradient contributions per step in another order than the CPU path (~1e-6 per row), and a sum
    bag adds a hot row up to ~40 times; a lost or misrouted contribution would be off by ~1e-2."""
    gen = torch.Generator().manual_seed(5)
    cpu = make("cpu", KOPTS[opt](), pooling, dims=(16, 16))
    gpu = make("cuda", KOPTS[opt](), pooling, dims=(16, 16))
    gpu.aggregate_grads = aggregate
    for t, d in enumerate(cpu.dims):
        w0 = torch.randn(V, d, generator=gen) * 0.1
        cpu.set_rows(t, torch.arange(V), w0)
        gpu.set_rows(t, torch.arange(V, device="cuda"), w0.cuda())
    F = 3
    for step in range(3):
        lengths = torch.randint(0, 91, (F * B,), generator=gen)
        lengths[::7] = 0
        offsets = torch.zeros(F * B + 1, dtype=torch.int64)
        offsets[1:] = torch.cumsum(lengths, 0)
        n = int(offsets[-1])
        ids = torch.randint(0, V, (n,), generator=gen)
        hot = torch.rand(n, generator=gen) < 0.4
        ids[hot] = torch.randint(0, 4, (int(hot.sum()),), generator=gen)
        w = torch.rand(n, generator=gen) if pooling == "sum" and step == 1 else None
        a = cpu(ids, offsets, per_sample_weights=w)
        b = gpu(ids.cuda(), offsets.cuda(), per_sample_weights=None if w is None else w.cuda())
        torch.testing.assert_close(b.detach().cpu(), a.detach(), atol=1e-4, rtol=1e-4)
        R = torch.randn(a.shape, generator=gen) * 0.1
        (a * R).sum().backward()
        (b * R.cuda()).sum().backward()
    for t in range(2):
        wa, sa, fa = rows(cpu, t, torch.arange(V))
        wb, sb, fb = rows(gpu, t, torch.arange(V))
        assert torch.equal(fa, fb)
        torch.testing.assert_close(wb, wa, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(sb, sa, atol=1e-4, rtol=1e-4)
    assert gpu.sizes() == cpu.sizes()


def test_kernels_new_ids_eval_and_uint64():
    """New ids get the (constant) initializer and are stored; eval reads the eval initializer for missing ids and
    inserts nothing; uint64 ids over the full range work; refused/missing accounting matches the CPU path."""
    init = DynamicEmbInitializer("constant", value=0.25)
    evi = DynamicEmbInitializer("constant", value=-1.0)
    mk = lambda dev: BatchedDynamicEmbeddingTables(  # noqa: E731
        [DynamicEmbTableOptions(dim=8, max_capacity=1 << 12, initializer=init, eval_initializer=evi)] * 2,
        pooling="mean", optimizer=SGD(lr=0.5), key_dtype=torch.uint64, device=dev)
    cpu, gpu = mk("cpu"), mk("cuda")
    gen = torch.Generator().manual_seed(11)
    for _ in range(3):
        ids = torch.randint(-(2**62), 2**62, (200,), generator=gen).view(torch.uint64)
        offsets = torch.sort(torch.randint(0, 201, (2 * 16 + 1,), generator=gen)).values
        offsets[0], offsets[-1] = 0, 200
        a = cpu(ids, offsets)
        b = gpu(ids.cuda(), offsets.cuda())
        torch.testing.assert_close(b.detach().cpu(), a.detach(), atol=1e-6, rtol=1e-6)
        a.sum().backward()
        b.sum().backward()
    assert gpu.sizes() == cpu.sizes()
    cpu.eval()
    gpu.eval()
    ids = torch.cat([ids[:50], torch.arange(1000, 1100, dtype=torch.int64).view(torch.uint64)])
    offsets = torch.linspace(0, ids.numel(), 2 * 10 + 1).long()
    with torch.no_grad():
        torch.testing.assert_close(gpu(ids.cuda(), offsets.cuda()).cpu(), cpu(ids, offsets), atol=1e-6, rtol=1e-6)
    assert gpu.sizes() == cpu.sizes()


# ---------------------------------------------------------------------- capacity pressure
def _pressure_schedule(policy, grow):
    """Steps of a capacity-pressure run: per step (keys of the batch, stored keys after it, refused inserts).

    The CPU twin of the table processes a batch's uniques in sorted key order, hits and inserts interleaved; the
    kernels touch every hit first, then insert the new keys concurrently, so where several new keys compete for
    fewer slots, or one victim is chosen among equal scores (ties go to the least (digest, key), but which keys
    are stored by then depends on thread order), the two legitimately store different keys. The schedule keeps every outcome independent of
    that order, so everything can be compared exactly: the new keys of a step are larger than its hits (the CPU
    touches the hits before any insert), an eviction takes a whole group of keys of one score, and a full bucket
    whose slots all carry a score >= the newcomers' refuses all of them (LRU: all touched in this step; LFU: new
    keys score 1, stored keys >= 1, and only a strictly higher score evicts, so LFU never evicts here).
    """
    if grow:  # 16 slots (one bucket) grow to 32 (two buckets) before step 1 (12 stored > 0.5 * 16)
        a0, a1 = keys_in_bucket(0, 2, 20), keys_in_bucket(1, 2, 10)
        s0 = set(a0[:6] + a1[:6])
        s1 = s0 | set(a0[6:16])
        s2 = s1 | set(a1[6:10])
        return [(a0[:6] + a1[:6], s0, 0),
                (a0[:16], s1, 0),                       # bucket 0 fills
                (a0[:20] + a1[6:10], s2, 4),            # bucket 0 full of this step's keys: a0[16:20] refused
                (a0[:20] + a1[:10], s2, 4)]
    g = {k: list(range(100 * k, 100 * k + 8)) for k in (1, 2, 3)}
    if policy == "lru":
        g0, g1, g2, g3 = g[3], g[1], g[2], list(range(400, 404))  # key order g1 < g2 < g0 < g3
        return [(g0, set(g0), 0),
                (g1, set(g0 + g1), 0),                  # fills the bucket
                (g1 + g2, set(g1 + g2), 0),             # g2 evicts g0 (the lowest scores)
                (g1 + g2 + g3, set(g1 + g2), 4),        # every slot touched in this step: g3 refused
                (g2 + g0, set(g2 + g0), 0)]             # g0 re-enters (fresh initial rows), evicting g1
    g0, g1, g2 = g[1], g[2], list(range(300, 304))
    return [(g0, set(g0), 0),
            (g0 + g1, set(g0 + g1), 0),                 # fills the bucket
            (g1 + g2, set(g0 + g1), 4),                 # full bucket: g2 refused
            (g0 + g2, set(g0 + g1), 4),
            (g0 + g1, set(g0 + g1), 0)]


def _pressure_module(device, policy, on_refused, pooling, grow):
    init = DynamicEmbInitializer("uniform", low=-0.5, high=0.5, seed=17)  # refused ids read non-constant rows
    o = DynamicEmbTableOptions(dim=8, max_capacity=32 if grow else 16, init_capacity=16, bucket_capacity=16,
                               score_policy=policy, on_refused=on_refused, initializer=init, grow_load_factor=0.5)
    m = BatchedDynamicEmbeddingTables([o], [0, 0], pooling=pooling, optimizer=Adam(lr=0.05), device=device)
    if torch.device(device).type == "cuda":
        assert m.use_kernels, "the CUDA module should run the fused kernels"
    return m


def _pressure_run(policy, on_refused, pooling, grow, devices=("cpu", "cuda")):
    gen = torch.Generator().manual_seed(13)
    mods = [_pressure_module(d, policy, on_refused, pooling, grow) for d in devices]
    schedule = _pressure_schedule(policy, grow)
    every = torch.tensor(sorted(set(k for keys, _, _ in schedule for k in keys)))
    F, nb, n = 2, 8, 240
    caught = [[] for _ in mods]
    refused_total = 0
    for step, (keys, stored, refused) in enumerate(schedule):
        keys = torch.tensor(keys)
        ids = torch.cat([keys, keys[torch.randint(0, keys.numel(), (n - keys.numel(),), generator=gen)]])
        ids = ids[torch.randperm(n, generator=gen)]  # a few hundred ids, every key of the step repeated
        cuts = torch.sort(torch.randint(0, n + 1, (F * nb - 1,), generator=gen)).values
        offsets = torch.cat([torch.tensor([0]), cuts, torch.tensor([n])])
        R = torch.randn(n if pooling == "none" else nb, 8 if pooling == "none" else 16, generator=gen)
        if refused and on_refused == "error":
            for m in mods:
                with pytest.raises(RefusedInsertError, match="refused"):
                    m(ids.to(m.device), offsets.to(m.device))
        else:
            outs = []
            for i, m in enumerate(mods):
                with warnings.catch_warnings(record=True) as rec:
                    warnings.simplefilter("always")
                    out = m(ids.to(m.device), offsets.to(m.device))
                caught[i] += [str(r.message) for r in rec if "refused" in str(r.message)]
                (out * R.to(m.device)).sum().backward()
                outs.append(out.detach().cpu())
            # refused rows: 0 ("zero") or the table's initializer at (seed, op clock, key) on both paths
            torch.testing.assert_close(outs[1], outs[0], atol=1e-6, rtol=1e-6)
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # the next step's grow decision reads this step's sizes on both modules
        refused_total += refused
        for m in mods:
            assert m.sizes() == [len(stored)], f"step {step}"
            assert m.capacities() == [32 if grow and step > 0 else 16], f"step {step}"
            assert m.refused_count.cpu().tolist() == [refused_total], f"step {step}"
        (wa, sa, fa), (wb, sb, fb) = [rows(m, 0, every) for m in mods]
        assert fa.tolist() == [k in stored for k in every.tolist()], f"step {step}"
        assert torch.equal(fb, fa), f"step {step}"
        torch.testing.assert_close(wb, wa, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(sb, sa, atol=1e-5, rtol=1e-5)
        if refused and on_refused == "error":
            return  # the error case stops at the first refusal (the tables keep that step's inserts)
    for c in caught:  # a step's refusals are reported by the next eager step
        assert bool(c) == (on_refused == "warn" and refused_total > 0)


@pytest.mark.parametrize("pooling", ["sum", "none"])
def test_refusal_mirror_follows_refused_count(pooling):
    """The pinned host mirror of the refusals (written by the forward kernel, or by a copy when no forward runs)
    equals refused_count after each training step: refusals, then a step without ids."""
    m = _pressure_module("cuda", "lru", "zero", pooling, grow=False)  # one 16-slot bucket
    gen = torch.Generator().manual_seed(3)
    for n in (200, 0, 120):
        ids = torch.randperm(1 << 20, generator=gen)[:n].cuda()
        offsets = torch.sort(torch.randint(0, n + 1, (17,), generator=gen)).values
        offsets[0], offsets[-1] = 0, n
        m(ids, offsets.cuda()).sum().backward()
        torch.cuda.synchronize()
        assert m._refused_pinned.poll() == m.refused_count.cpu().tolist(), n
    assert m.refused_count.item() > 0


@pytest.mark.parametrize("grow", [False, True], ids=["one_bucket", "grow"])
@pytest.mark.parametrize("pooling", ["sum", "none"])
@pytest.mark.parametrize("policy", ["lru", "lfu"])
@pytest.mark.parametrize("on_refused", ["zero", "warn", "error"])
def test_kernels_capacity_pressure_matches_cpu(on_refused, policy, pooling, grow):
    """A 16-slot table (one bucket; "grow": 16 slots growing to 32 on the first steps) under a few hundred ids per
    step: the fused kernels and the CPU path give the same outputs (refused ids: zeros or the initializer value),
    sizes, capacities, refused counts, stored keys with their rows and optimizer state, and both raise
    RefusedInsertError for on_refused="error"; LRU evicts a whole group and lets it re-enter with fresh initial
    rows (see _pressure_schedule for why the schedule keeps the outcome independent of in-batch order)."""
    _pressure_run(policy, on_refused, pooling, grow)


def batch(gen, device, F=3, max_len=4, weighted=False):
    lengths = torch.randint(0, max_len + 1, (F * B,), generator=gen)
    ids = torch.randint(0, V, (int(lengths.sum()),), generator=gen)
    offsets = torch.zeros(F * B + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    w = torch.rand(ids.numel(), generator=gen) if weighted else None
    mv = lambda t: None if t is None else t.to(device)  # noqa: E731
    return mv(ids), mv(offsets), mv(w)


def rows(m, t, ids):
    w, s, found = m.get_rows(t, ids.to(m.device))
    return w.cpu(), s.cpu(), found.cpu()


def train_random(m, data, seed):
    """One training step per (ids, offsets) of data with the gradient of sum(out * R), R fixed by seed and step;
    returns the outputs."""
    outs = []
    for s, (ids, offsets) in enumerate(data):
        out = m(ids, offsets)
        outs.append(out.detach().clone())
        R = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed + s)).cuda()
        (out * R).sum().backward()
    return outs


@pytest.mark.parametrize("in_forward", [True, False], ids=["csr_in_forward", "csr_in_backward"])
@pytest.mark.parametrize("pooling", ["none", "mean"])
@pytest.mark.parametrize("bags", [200, 40_000])
def test_csr_sort_variants_agree(bags, pooling, in_forward):
    """Every sort of the backward's CSR (lab op _lookup_lab_csr_sort: cub's DeviceRadixSort, cub's onesweep kernels
    dispatched by hand with 8-bit or 10-bit digits, two histograms; 1 to 3 passes over the key bits of ~600 and
    ~120K ids) gives
    bitwise equal outputs, rows and Adam state over three steps with a random gradient. Ids repeat at most a few
    dozen times per table (under backward_chunk + 1), so a cut segment has at most two pieces and the rows depend
    only on the CSR's order inside each segment, which must be the stable one (positions ascending). The CSR is
    built in the forward (its sort counters zeroed by the dedup's clear pass) or in the backward (one memset). The
    find after the CSR fork or in the dedup's insert (lab op _lookup_lab_find_later 1 / 2) gives the same results, and
    so does a sequence's sort forked after the dedup's count pass, keyed by claimer position (lab op _lookup_lab_step 1;
    cub's sort, and the hand sort with 3 / 2 passes: the keys in either of its buffers)."""
    lab, later = torch.ops.dynamicemb._lookup_lab_csr_sort, torch.ops.dynamicemb._lookup_lab_find_later
    early = torch.ops.dynamicemb._lookup_lab_step
    gen = torch.Generator().manual_seed(11)
    F, vocab = 3, 5000
    data = []
    for s in range(3):
        lengths = torch.ones(F * bags, dtype=torch.int64) if pooling == "none" else torch.randint(0, 4, (F * bags,), generator=gen)
        offsets = torch.zeros(F * bags + 1, dtype=torch.int64)
        offsets[1:] = torch.cumsum(lengths, 0)
        data.append((torch.randint(0, vocab, (int(offsets[-1]),), generator=gen).cuda(), offsets.cuda()))
    w0 = [torch.randn(vocab, 16, generator=gen) * 0.1 for _ in range(2)]
    results = {}
    old = (lab(-1), later(-1), early(-1))
    variants = [(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0), (4, 0, 0), (1, 1, 0), (1, 2, 0), (0, 0, 1), (1, 0, 1), (2, 0, 1)]
    try:
        for v in variants:
            assert lab(v[0]) in range(5) and later(v[1]) in range(3) and early(v[2]) in range(2)
            m = make("cuda", Adam(lr=0.05), pooling, dims=(16, 16))
            m.overlap_csr = in_forward
            for t in range(2):
                m.set_rows(t, torch.arange(vocab, device="cuda"), w0[t].cuda())
            outs = train_random(m, data, 100)
            results[v] = outs + [x for t in range(2) for x in rows(m, t, torch.arange(vocab))]
    finally:
        lab(old[0])
        later(old[1])
        early(old[2])
    for v in variants[1:]:
        for k, (a, b) in enumerate(zip(results[variants[0]], results[v])):
            assert torch.equal(a, b), f"variant {v}, result {k} differs from cub's sort"


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("pooling", ["none", "sum"])
def test_step_counter_in_update(pooling, opt):
    """The step counter advanced by the segmented update (the default: plain fp32 SGD's first thread; Adam's last
    block, after every block read the step for its bias corrections) and by a tensor add before the update
    (module._step_in_update = False) give the same step count after every step (also around a step without ids,
    which adds with a tensor op) and bitwise the same outputs, rows and Adam state."""
    gen = torch.Generator().manual_seed(31)
    data = [batch(gen, "cuda", max_len=6)[:2] for _ in range(3)]
    data.insert(1, (data[0][0][:0], torch.zeros_like(data[0][1])))  # a step without ids
    w0 = [torch.randn(V, 16, generator=gen) * 0.1 for _ in range(2)]
    results = {}
    for fold in (True, False):
        m = make("cuda", SGD(lr=0.3) if opt == "sgd" else Adam(lr=0.05), pooling)
        m._step_in_update = fold
        for t, d in enumerate(m.dims):
            m.set_rows(t, torch.arange(V, device="cuda"), w0[t][:, :d].contiguous().cuda())
        outs, steps = [], []
        for s, (ids, offsets) in enumerate(data):
            out = m(ids, offsets)
            outs.append(out.detach().clone())
            R = torch.randn(out.shape, generator=torch.Generator().manual_seed(40 + s)).cuda()
            (out * R).sum().backward()
            steps.append(float(m.step))
        assert steps[0] == 1.0 and steps[2] == steps[1] + 1 and steps[3] == steps[2] + 1, (fold, steps)
        results[fold] = outs + [torch.tensor(steps)] + [x for t in range(2) for x in rows(m, t, torch.arange(V))]
    for k, (a, b) in enumerate(zip(results[True], results[False])):
        assert torch.equal(a, b), f"result {k} differs between the step counter in the update and before it"


def stored(m, t):
    """Table t's stored keys in ascending order with their scores (slots depend on the insert's scheduling)."""
    tab = m.tables[t]
    keys = tab.keys.view(torch.int64)
    slots = torch.nonzero(keys != -(2**63)).view(-1)
    slots = slots[torch.argsort(keys[slots])]
    return keys[slots].cpu(), tab.scores[slots].cpu()


def trained_results(m, data, seed):
    """train_random's outputs, then each of the two tables' stored keys and scores and their rows and state, with no
    segment cut (hot ids' sums do not depend on the pieces' arrival order)."""
    m.backward_chunk = 1 << 20
    outs = train_random(m, data, seed)
    torch.cuda.synchronize()
    keys = [stored(m, t) for t in range(2)]
    return outs + [x for t in range(2) for x in keys[t]] + [x for t in range(2) for x in rows(m, t, keys[t][0])]


@pytest.mark.parametrize("pooling", ["none", "sum"])
def test_dedup_insert_variants_agree(pooling):
    """Every dedup variant (lab op _lookup_lab_dedup: the insert's probe with the CAS first or a load first; the passes
    as programmatic dependent launches, with or without the checks, the insert pass, the forward and the backward's
    update; the set at 2.5 n / 4 n slots (128 / 256); the chunk's one feature (512)) gives bitwise equal outputs,
    rows, Adam state, stored keys and scores over four steps: hot ids (~1,000 occurrences in a step; no segment cut,
    so the sums are repeatable), new ids in every step (the insert pass's misses), a random gradient."""
    lab = torch.ops.dynamicemb._lookup_lab_dedup
    gen = torch.Generator().manual_seed(12)
    F, bags, vocab = 3, 3000, 20000
    data = []
    for s in range(4):
        lengths = torch.ones(F * bags, dtype=torch.int64) if pooling == "none" else torch.randint(0, 4, (F * bags,), generator=gen)
        offsets = torch.zeros(F * bags + 1, dtype=torch.int64)
        offsets[1:] = torch.cumsum(lengths, 0)
        n = int(offsets[-1])
        u = torch.rand(n, generator=gen)
        ids = (u ** 4 * (vocab // 4)).long() + s * (vocab // 4) * (torch.rand(n, generator=gen) < 0.3).long()
        data.append((ids.cuda(), offsets.cuda()))
    results = {}
    old = lab(-1)
    variants = [0, 1, 16, 17, 48, 49, 177, 305, 561, 817, 640]
    try:
        for v in variants:
            assert lab(v) in range(1024)
            m = make("cuda", Adam(lr=0.05), pooling, dims=(16, 16))
            results[v] = trained_results(m, data, 200)
    finally:
        lab(old)
    for v in variants[1:]:
        for k, (a, b) in enumerate(zip(results[variants[0]], results[v])):
            assert torch.equal(a, b), f"insert variant {v}, result {k} differs from the plain insert"


@pytest.mark.parametrize("pooling", ["sum", "mean", "none"])
@pytest.mark.parametrize("opt", list(OPTS))
def test_gpu_matches_cpu(pooling, opt):
    gen = torch.Generator().manual_seed(0)
    cpu, gpu = make("cpu", OPTS[opt](), pooling), make("cuda", OPTS[opt](), pooling)
    for t, d in enumerate(cpu.dims):
        w0 = torch.randn(V, d, generator=gen) * 0.1
        cpu.set_rows(t, torch.arange(V), w0)
        gpu.set_rows(t, torch.arange(V, device="cuda"), w0.cuda())
    for step in range(3):
        ids, offsets, w = batch(gen, "cpu", weighted=pooling == "sum")
        a = cpu(ids, offsets, per_sample_weights=w)
        b = gpu(ids.cuda(), offsets.cuda(), per_sample_weights=None if w is None else w.cuda())
        torch.testing.assert_close(b.cpu(), a, atol=1e-5, rtol=1e-5)
        R = torch.randn(a.shape, generator=gen)
        (a * R).sum().backward()
        (b * R.cuda()).sum().backward()
    for t in range(2):
        wa, sa, _ = rows(cpu, t, torch.arange(V))
        wb, sb, _ = rows(gpu, t, torch.arange(V))
        torch.testing.assert_close(wb, wa, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(sb, sa, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpu_low_precision_tables_train(dtype):
    gen = torch.Generator().manual_seed(1)
    m = make("cuda", Adam(lr=0.01), dtype=dtype)
    ref = make("cpu", Adam(lr=0.01), dtype=dtype)
    for _ in range(3):
        ids, offsets, _ = batch(gen, "cpu")
        a = ref(ids, offsets)
        b = m(ids.cuda(), offsets.cuda())
        torch.testing.assert_close(b.cpu(), a, atol=2e-2, rtol=2e-2)
        a.sum().backward()
        b.sum().backward()
    assert m.sizes() == ref.sizes()


def test_training_step_has_no_host_sync():
    gen = torch.Generator().manual_seed(2)
    m = make("cuda", Adam(lr=0.01))
    ids, offsets, _ = batch(gen, "cuda")
    m(ids, offsets).sum().backward()  # first step allocates the pinned mirrors
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            out = m(ids, offsets, validate=False)
            out.sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_set_epoch_reaches_the_next_step():
    """The eager step reuses its table records while no table state changed: set_epoch between two steps must
    still reach the second step's inserts (the epoch is the high 32 bits of an epoch_lru score)."""
    gen = torch.Generator().manual_seed(5)
    m = make("cuda", SGD(lr=0.1), pooling="none", score_policy="epoch_lru")
    for epoch, lo in ((3, 0), (7, 1 << 40)):
        m.set_epoch(epoch)
        ids = lo + torch.randperm(1 << 20, generator=gen)[:3 * B].to("cuda")
        offsets = torch.arange(3 * B + 1, device="cuda")
        m(ids, offsets).sum().backward()
        for t, tbl in enumerate(m.tables):
            k = ids[t * B:(t + 1) * B] if t == 0 else ids[B:]
            _, found, scores = tbl.find(k, return_scores=True)
            assert bool(found.all())
            assert set((scores >> 32).tolist()) == {epoch}, (epoch, t)


@pytest.mark.parametrize("opt", ["sgd", "adam", "adagrad", "rowwise_adagrad"])
@pytest.mark.parametrize("pooling", ["sum", "mean", "none", "weighted_sum"])
def test_cuda_graph_train_step_matches_eager(opt, pooling):
    """A training step captured in one CUDA graph and replayed with fresh ids (and fresh per-sample weights for
    "weighted_sum": sum pooling with weights in a static buffer) matches eager steps: outputs, rows, state."""
    gen = torch.Generator().manual_seed(3)
    weighted = pooling == "weighted_sum"
    pooling = "sum" if weighted else pooling
    eager, graphed = make("cuda", OPTS[opt](), pooling), make("cuda", OPTS[opt](), pooling)
    F = 3
    n = F * B * 2  # fixed ids per step: every bag has 2 ids
    offsets = torch.arange(0, n + 1, 2, device="cuda")
    width = eager.dims[0] if pooling == "none" else sum(eager.feature_dims)

    def new_batch():
        ids = torch.randint(0, V, (n,), generator=gen).cuda()
        R = torch.randn(n if pooling == "none" else B, width, generator=gen).cuda()
        w = (torch.rand(n, generator=gen) + 0.5).cuda() if weighted else None
        return ids, R, w

    static_ids, static_R, static_w = new_batch()

    def step(module, ids, R, w):
        out = module(ids, offsets, per_sample_weights=w, validate=False)
        (out * R).sum().backward()
        return out

    warm = [new_batch() for _ in range(3)]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for ids, R, w in warm:
            step(graphed, ids, R, w)
    torch.cuda.current_stream().wait_stream(s)
    for ids, R, w in warm:
        step(eager, ids, R, w)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = step(graphed, static_ids, static_R, static_w)
    for it in range(4):
        ids, R, w = new_batch()
        if it == 2:
            graphed.set_learning_rate(0.05)  # a device tensor: the replay picks it up
            eager.set_learning_rate(0.05)
        static_ids.copy_(ids)
        static_R.copy_(R)
        if weighted:
            static_w.copy_(w)
        g.replay()
        ref = step(eager, ids, R, w)
        torch.testing.assert_close(static_out, ref, atol=1e-5, rtol=1e-5)
    torch.cuda.synchronize()
    assert graphed.sizes() == eager.sizes()
    probe = torch.arange(V, device="cuda")
    for t in range(2):
        wa, sa, fa = rows(eager, t, probe)
        wb, sb, fb = rows(graphed, t, probe)
        assert torch.equal(fa, fb)
        torch.testing.assert_close(wb, wa, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(sb, sa, atol=1e-5, rtol=1e-5)
    assert float(graphed.step) == float(eager.step)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("pooling", ["sum", "none"])
def test_cuda_graph_train_step_under_dedup_variants(opt, pooling):
    """The dedup's lab variants 16 + 32 (the step's passes as programmatic dependent launches, the default: captured
    as programmatic graph edges) capture and replay like eager steps, with the insert's load-first probe."""
    lab = torch.ops.dynamicemb._lookup_lab_dedup
    old = lab(48)
    try:
        test_cuda_graph_train_step_matches_eager(opt, pooling)
    finally:
        lab(old)


def test_deepcopy_trains_its_own_tables():
    """A deep copy of a trained CUDA module trains its own tables: its kernels' table metadata is rebuilt from the
    copy's tensors (a copied metadata tensor would hold the original's device addresses), and the original's rows
    stay as they were."""
    import copy

    tables = [DynamicEmbTableOptions(dim=8, max_capacity=1 << 10) for _ in range(2)]
    m = BatchedDynamicEmbeddingTables(tables, pooling="sum", optimizer=Adam(lr=0.1), device="cuda")
    gen = torch.Generator().manual_seed(11)
    ids = torch.randint(0, 500, (64,), generator=gen).cuda()
    offsets = torch.arange(0, 65, 8, dtype=torch.int64).cuda()
    m(ids, offsets).sum().backward()
    c = copy.deepcopy(m)
    before = m.get_rows(0, ids[:32])[0].clone()
    c(ids, offsets).sum().backward()
    torch.cuda.synchronize()
    assert torch.equal(m.get_rows(0, ids[:32])[0], before), "training the copy changed the original's rows"
    assert not torch.equal(c.get_rows(0, ids[:32])[0], before), "the copy's step changed none of its rows"
    assert c._meta is not None and not torch.equal(c._meta, m._meta)


@pytest.mark.parametrize("dim", [12, 6], ids=["vec4", "scalar"])
@pytest.mark.parametrize("bucket", [16, 128, 256])
@pytest.mark.parametrize("eval_init", ["constant", "uniform"])
def test_eval_sequence_probe_matches_cpu(bucket, eval_init, dim):
    """Eval of a sequence (pooling none) probes each id's table inside the gather (no dedup, no find pass): stored
    ids read their rows, missing ids their feature's table's eval initializer (tables shared by features, repeats);
    nothing is inserted; a batch that fails the device checks reads only fallback rows."""
    init = DynamicEmbInitializer("uniform", low=-0.5, high=0.5, seed=3)
    evi = (DynamicEmbInitializer("constant", value=-0.75) if eval_init == "constant"
           else DynamicEmbInitializer("uniform", low=-2.0, high=2.0, seed=29))
    mk = lambda dev: BatchedDynamicEmbeddingTables(  # noqa: E731
        [DynamicEmbTableOptions(dim=dim, max_capacity=1 << 12, bucket_capacity=bucket, initializer=init,
                                eval_initializer=evi)] * 2, [0, 1, 1], pooling="none", optimizer=SGD(lr=0.5),
        device=dev)
    cpu, gpu = mk("cpu"), mk("cuda")
    gen = torch.Generator().manual_seed(23)
    for _ in range(3):  # stores about half of the ids eval reads below
        ids, offsets, _ = batch(gen, "cpu", max_len=5)
        ids = ids % 700
        a, b = cpu(ids, offsets), gpu(ids.cuda(), offsets.cuda())
        R = torch.randn(a.shape, generator=gen)
        (a * R).sum().backward()
        (b * R.cuda()).sum().backward()
    sizes = gpu.sizes()
    assert sizes == cpu.sizes()
    cpu.eval()
    gpu.eval()
    ids, offsets, _ = batch(gen, "cpu", max_len=5)
    ids = ids % 1400  # repeats; ids never stored
    with torch.no_grad():
        want = cpu(ids, offsets)
        got = gpu(ids.cuda(), offsets.cuda())
    torch.testing.assert_close(got.cpu(), want, atol=1e-6, rtol=1e-6)
    assert gpu.sizes() == sizes
    # a failing batch (a negative id): every id reads its fallback row, as if nothing were stored
    fresh = mk("cpu")
    fresh.eval()
    bad = ids.clone()
    bad[ids.numel() // 2] = -5
    with torch.no_grad():
        want = fresh(ids, offsets)
        got = gpu(bad.cuda(), offsets.cuda()).cpu()
    keep = torch.ones(ids.numel(), dtype=torch.bool)
    keep[ids.numel() // 2] = False
    torch.testing.assert_close(got[keep], want[keep], atol=1e-6, rtol=1e-6)
    with pytest.raises(dynamicemb.DeviceInputError):
        dynamicemb.check_errors()
