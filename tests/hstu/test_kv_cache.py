"""KVCacheManager: append / evict keep every cached user's K/V exact, LRU picks the victims, page accounting holds;
errors (full pool, full table, unknown user, too long, duplicates) are flagged and raised by check(), never an
out-of-bounds access; a cached multi-step serving run equals the uncached model; CUDA-graph capture (GPU)."""

import random

import pytest
import torch

import hstu_attn
from hstu_attn import KVCacheError, KVCacheManager, cached_hstu_attention, hstu_attn_varlen_func

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
H, D = 2, 16


def cu_of(lens, device):
    return torch.tensor([0] + list(lens), device=device).cumsum(0).to(torch.int32)


def run_step(cache, users, new, app, device, gen, create=True):
    """One bookkeeping step + append of random K/V for every layer; returns the step and the K/V written."""
    ids = torch.tensor(users, dtype=torch.int64, device=device)
    step = cache.begin_step(ids, cu_of(new, device), torch.tensor(app, dtype=torch.int32, device=device),
                            sum(new), max(new), create=create)
    k = torch.randn(cache.num_layers, sum(new), H, D, generator=gen).to(device, cache.dtype)
    v = torch.randn(cache.num_layers, sum(new), H, D, generator=gen).to(device, cache.dtype)
    cache.append(step, k, v)
    return step, k, v


def check_invariants(cache):
    """Every page is either free or held by exactly one valid user; a user holds exactly ceil(len / ps) pages."""
    P, ps = cache.num_pages, cache.page_size
    free = cache.free_pages[: int(cache.free_count)].tolist()
    held = []
    for s in range(cache.max_users):
        pages = [p for p in cache.slot_pages[s].tolist() if p < P]
        n = int(cache.slot_len[s])
        if bool(cache.slot_valid[s]):
            assert len(pages) == (n + ps - 1) // ps, (s, pages, n)
        else:
            assert not pages and n == 0
        held += pages
    assert sorted(free + held) == list(range(P)), (free, held)


@pytest.mark.parametrize("device", DEVICES)
def test_append_evict_keep_users_exact(device):
    seed = random.randrange(1 << 30)
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    cache = KVCacheManager(3, H, D, num_pages=24, page_size=16, max_users=6, max_pages_per_user=8,
                           dtype=torch.float32, device=device)
    truth = {}  # user -> (k list per layer, v list per layer)
    last_use = {}
    for it in range(14):
        users = rng.sample(range(12), rng.randint(1, 4))
        new = [rng.randint(1, 40) for _ in users]
        app = [rng.randint(0, n) for n in new]
        before = {u for u in truth}
        step, k, v = run_step(cache, users, new, app, device, gen)
        cache.check()
        cached = dict(zip(users, step.cached_lens.tolist()))
        off = 0
        for u, n, a in zip(users, new, app):
            if u not in truth:
                truth[u] = ([], [])
            assert cached[u] == (truth[u][0][0].shape[0] if truth[u][0] else 0), (seed, it, u)
            kk, vv = truth[u]
            for l in range(cache.num_layers):
                piece_k, piece_v = k[l, off: off + a].cpu(), v[l, off: off + a].cpu()
                if len(kk) <= l:
                    kk.append(piece_k)
                    vv.append(piece_v)
                else:
                    kk[l] = torch.cat((kk[l], piece_k))
                    vv[l] = torch.cat((vv[l], piece_v))
            off += n
            last_use[u] = it
        # Who is still cached: every user of the batch; the evicted ones were used no later than survivors.
        present = {u for u, ok in zip(cache.slot_user.tolist(), cache.slot_valid.tolist()) if ok}
        assert set(users) <= present
        gone = (before - present)
        for u in gone:
            truth.pop(u)
        survivors = present - set(users)
        for u in gone:
            assert all(last_use[u] <= last_use[s] for s in survivors), (gone, survivors, last_use)
        for u in present:
            for l in range(cache.num_layers):
                ku, vu = cache.read_user(u, l)
                assert torch.equal(ku.cpu(), truth[u][0][l]) and torch.equal(vu.cpu(), truth[u][1][l]), (seed, it, u)
        check_invariants(cache)


@pytest.mark.parametrize("device", DEVICES)
def test_full_pool_without_eviction_is_flagged_and_bounded(device):
    gen = torch.Generator().manual_seed(random.randrange(1 << 30))
    cache = KVCacheManager(1, H, D, num_pages=4, page_size=16, max_users=4, max_pages_per_user=4,
                           dtype=torch.float32, device=device, evict=False)
    run_step(cache, [1], [40], [40], device, gen)  # 3 pages
    cache.check()
    k1, _ = cache.read_user(1, 0)
    run_step(cache, [2], [40], [40], device, gen)  # needs 3, 1 free
    with pytest.raises(KVCacheError, match="pool") as info:
        cache.check()
    assert "pool_full" in info.value.flags and "num_pages: expected" in str(info.value)
    assert torch.equal(cache.read_user(1, 0)[0], k1)  # the other user is intact
    check_invariants(cache)
    # A full user table without eviction.
    for u in (3, 4):
        run_step(cache, [u], [1], [0], device, gen)
    run_step(cache, [5], [1], [0], device, gen)
    with pytest.raises(KVCacheError) as info:
        cache.check()
    assert "users_full" in info.value.flags


@pytest.mark.parametrize("device", DEVICES)
def test_unknown_user_too_long_duplicates_are_flagged(device):
    gen = torch.Generator().manual_seed(random.randrange(1 << 30))
    cache = KVCacheManager(1, H, D, num_pages=16, page_size=16, max_users=4, max_pages_per_user=2,
                           dtype=torch.float32, device=device)
    run_step(cache, [1], [10], [10], device, gen)
    step, _, _ = run_step(cache, [1, 9], [3, 4], [3, 4], device, gen, create=False)
    assert step.cached_lens.tolist() == [10, 0]
    with pytest.raises(KVCacheError) as info:
        cache.check()
    assert info.value.flags == ("unknown_user",) and "user_ids: expected" in str(info.value)
    assert cache.cached_lengths(torch.tensor([1, 9], device=device)).tolist() == [13, 0]
    run_step(cache, [1], [40], [40], device, gen)  # 13 + 40 > 2 pages of 16
    with pytest.raises(KVCacheError) as info:
        cache.check()
    assert info.value.flags == ("user_too_long",)
    assert cache.cached_lengths(torch.tensor([1], device=device)).tolist() == [32]
    run_step(cache, [3, 3], [1, 1], [1, 1], device, gen)
    with pytest.raises(KVCacheError) as info:
        cache.check()
    assert "duplicate_user" in info.value.flags
    cache.check()  # check() clears the flags


def test_host_argument_errors():
    cache = KVCacheManager(1, H, D, num_pages=4, page_size=16, max_users=2, max_pages_per_user=2,
                           dtype=torch.float32, device="cpu")
    with pytest.raises(ValueError, match="page_size: expected"):
        KVCacheManager(1, H, D, num_pages=4, page_size=10, max_users=2, max_pages_per_user=2, device="cpu")
    with pytest.raises(TypeError, match="overlap_append: expected a bool"):
        KVCacheManager(1, H, D, num_pages=4, page_size=16, max_users=2, max_pages_per_user=2, device="cpu",
                       overlap_append="no")
    with pytest.raises(TypeError, match="pdl: expected a bool"):
        KVCacheManager(1, H, D, num_pages=4, page_size=16, max_users=2, max_pages_per_user=2, device="cpu", pdl=1)
    with pytest.raises(TypeError, match="user_ids: expected"):
        cache.begin_step(torch.tensor([1], dtype=torch.int32), cu_of([1], "cpu"), torch.ones(1, dtype=torch.int32),
                         1, 1)
    with pytest.raises(ValueError, match="user_ids: expected"):
        cache.begin_step(torch.arange(3), cu_of([1, 1, 1], "cpu"), torch.ones(3, dtype=torch.int32), 3, 1)
    with pytest.raises(ValueError, match="layer: expected"):
        cache.layer_cache(1)


class ToyHSTU(torch.nn.Module):
    """Two layers of projections around HSTU attention, written once for the cached and the uncached path."""

    def __init__(self, layers=2, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.qkv = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(H * D, 3 * H * D, generator=g) * 0.2)
                                           for _ in range(layers)])
        self.proj = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(H * D, H * D, generator=g) * 0.2)
                                            for _ in range(layers)])

    def forward(self, x, attend):
        for l in range(len(self.qkv)):
            q, k, v = (x @ self.qkv[l]).view(-1, 3, H, D).unbind(1)
            x = x + attend(l, q.contiguous(), k.contiguous(), v.contiguous()).reshape(-1, H * D) @ self.proj[l]
        return x


def test_cached_serving_equals_uncached_model():
    seed = random.randrange(1 << 30)
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    dt = torch.float64
    model = ToyHSTU(seed=seed).to(dt)
    cache = KVCacheManager(2, H, D, num_pages=64, page_size=16, max_users=8, max_pages_per_user=8, dtype=dt,
                           device="cpu")
    history = {}  # user -> all its history item embeddings so far
    scaling = 200.0  # both paths divide by the same constant
    for it in range(3):
        users = rng.sample(range(6), 3)
        hist_new = [torch.randn(rng.randint(0 if it else 1, 20), H * D, generator=gen, dtype=dt) for _ in users]
        cands = [torch.randn(rng.randint(1, 6), H * D, generator=gen, dtype=dt) for _ in users]
        x = torch.cat([torch.cat((h, c)) for h, c in zip(hist_new, cands)])
        new = [h.shape[0] + c.shape[0] for h, c in zip(hist_new, cands)]
        nt = torch.tensor([c.shape[0] for c in cands], dtype=torch.int32)
        step = cache.begin_step(torch.tensor(users), cu_of(new, "cpu"),
                                torch.tensor([h.shape[0] for h in hist_new], dtype=torch.int32), sum(new), max(new))

        def cached(l, q, k, v):
            return cached_hstu_attention(cache, step, l, q, k, v, max(new), num_targets=nt, target_group_size=2,
                                         scaling_seqlen=scaling)

        out = model(x, cached)
        cache.check()
        # Uncached: each user's whole history (old + new) and candidates, all rows computed.
        full = [torch.cat(history.get(u, []) + [h, c]) for u, h, c in zip(users, hist_new, cands)]
        lens = [f.shape[0] for f in full]
        cu = cu_of(lens, "cpu")

        def uncached(l, q, k, v):
            return hstu_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), None, nt, 2, (-1, 0),
                                         scaling_seqlen=scaling)

        ref = model(torch.cat(full), uncached)
        rows = torch.cat([torch.arange(int(cu[b + 1]) - n, int(cu[b + 1])) for b, n in enumerate(new)])
        torch.testing.assert_close(out, ref[rows], rtol=1e-10, atol=1e-10, msg=f"seed {seed} step {it}")
        for u, h in zip(users, hist_new):
            history.setdefault(u, []).append(h)


@pytest.mark.gpu
@pytest.mark.parametrize("overlap,pdl,option", [(True, False, False), (False, False, False), (True, True, False),
                                                (False, True, False), (True, False, True)])
def test_cuda_graph_step_replays_like_eager(overlap, pdl, option):
    # overlap: the captured step runs each layer's append on the cache's side stream beside the attention; pdl
    # (KVCacheManager(pdl=), the default on Hopper) or option (kernel_options(pdl=True) around the capture of a
    # pdl=False cache): the attention, its plan's validation and the appends as programmatic dependent launches
    # (their captured edges programmatic). The eager reference serves with plain launches.
    dev, dt = "cuda", torch.bfloat16
    B, new, L = 4, [40, 7, 64, 1], 2

    def make(pdl):
        return KVCacheManager(L, H, 64, num_pages=64, page_size=16, max_users=8, max_pages_per_user=16, dtype=dt,
                              device=dev, overlap_append=overlap, pdl=pdl)  # 3 steps of 60 appended tokens fit 16 pages

    eager, graphed = make(False), make(pdl)
    gen = torch.Generator(device=dev).manual_seed(random.randrange(1 << 30))
    users = torch.tensor([3, 1, 4, 5], device=dev)
    cu = cu_of(new, dev)
    app = torch.tensor([30, 0, 60, 1], dtype=torch.int32, device=dev)
    q, k, v = (torch.randn(L, sum(new), H, 64, device=dev, dtype=dt, generator=gen) for _ in range(3))

    def serve(cache):
        step = cache.begin_step(users, cu, app, sum(new), max(new))
        return torch.stack([cached_hstu_attention(cache, step, l, q[l], k[l], v[l], max(new), window_size=(-1, 0))
                            for l in range(L)])

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        serve(graphed)  # warm-up step (allocations), then reset the cache by hand
    torch.cuda.current_stream().wait_stream(s)
    graphed.__init__(L, H, 64, num_pages=64, page_size=16, max_users=8, max_pages_per_user=16, dtype=dt, device=dev,
                     overlap_append=overlap, pdl=pdl)
    assert hstu_attn._inference._append_stream(graphed, k[0]) is None  # not capturing: in order
    assert graphed.pdl == (pdl and torch.cuda.get_device_capability() == (9, 0)) and not eager.pdl
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), hstu_attn._ops.kernel_options(pdl=option):
        side = hstu_attn._inference._append_stream(graphed, k[0])
        out_g = serve(graphed)
    assert (side is graphed._append_stream) if overlap else side is None
    for it in range(3):  # the same users come back: each replay appends and reads the growing history
        want = serve(eager)
        g.replay()
        torch.testing.assert_close(out_g, want, rtol=0, atol=0)
    eager.check()
    graphed.check()
    # every page but the sink (pool[:, num_pages]: the dump target of tokens that are not appended, written in
    # whatever order duplicate destinations land)
    torch.testing.assert_close(graphed.pool[:, :64], eager.pool[:, :64], rtol=0, atol=0)


STATE = ("slot_user", "slot_valid", "slot_len", "slot_pages", "last_used", "free_pages", "free_count", "clock",
         "error_flags")
STEP = ("slots", "num_append", "page_offsets", "page_ids", "last_page_lens", "cached_lens", "append_rows")
LAYOUT = ("src_rows", "dst_new", "cu_seqlens_k", "cached_lens", "error_flags")


def test_duplicate_is_served_empty_and_keeps_the_pool_whole():
    # The later copy of an id goes to the sink slot (nothing appended), so no page leaks.
    cache = KVCacheManager(1, H, D, num_pages=8, page_size=16, max_users=4, max_pages_per_user=4,
                           dtype=torch.float32, device="cpu")
    gen = torch.Generator().manual_seed(random.randrange(1 << 30))
    step, _, _ = run_step(cache, [5, 5, 6], [20, 20, 3], [20, 20, 3], "cpu", gen)
    assert step.slots.tolist()[1] == cache.max_users and step.num_append.tolist() == [20, 0, 3]
    with pytest.raises(KVCacheError):
        cache.check()
    check_invariants(cache)


@pytest.mark.gpu
@pytest.mark.parametrize("evict", [True, False])
def test_fused_kernel_equals_torch_path(evict):
    # Random multi-step serving through both paths: every state tensor and every step tensor equal, exactly.
    if not hstu_attn._kv_cache.kernel_available():
        pytest.skip("the fused bookkeeping kernel is not compiled in")
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    # (the fourth: gather plans over kvcache::kFoldRows rows (B >= 11) come from the grid kernel, smaller ones from
    # the bookkeeping kernel itself; the last: page-table rows of B x M > kvcache::kRowsInSmem entries (B >= 21)
    # read from global memory, smaller ones kept in shared memory)
    configs = [(6, 20, 4, 16), (16, 40, 6, 32), (300, 900, 5, 16), (40, 400, 24, 32), (40, 2000, 200, 16)]
    for trial in range(10):
        U, P, M, ps = configs[trial % len(configs)]
        kw = dict(num_pages=P, page_size=ps, max_users=U, max_pages_per_user=M, dtype=torch.bfloat16,
                  device="cuda", evict=evict)
        a = KVCacheManager(1, H, D, use_kernel=True, **kw)
        b = KVCacheManager(1, H, D, use_kernel=False, **kw)
        # every other trial without the kernel's gather plan (made on demand from the step's page table, as on
        # Hopper at the paged forward's head dims)
        a._lazy_gather_plan = trial % 2 == 1
        # (and half of them with the ready word after cu_seqlens_k, where the cache runs pdl: Hopper; with it, its
        # early form or not)
        a._plan_ready = trial % 4 >= 2
        a._begin_early = trial % 3 != 0
        for it in range(12):
            B = rng.randint(1, min(U, 24))
            users = [rng.randrange(3 * U) for _ in range(B)]
            if rng.random() < 0.15 and B > 1:
                users[-1] = users[0]  # a duplicate now and then
            new = [rng.randint(0, 3 * ps) for _ in users]
            app = [rng.randint(0, n) for n in new]
            create = rng.random() < 0.85
            ids = torch.tensor(users, dtype=torch.int64, device="cuda")
            cu = cu_of(new, "cuda")
            na = torch.tensor(app, dtype=torch.int32, device="cuda")
            tq = sum(new) + rng.randint(0, 3)  # padding rows past the last user
            sa = a.begin_step(ids, cu, na, tq, max(new), create=create)
            sb = b.begin_step(ids, cu, na, tq, max(new), create=create)
            where = f"seed {seed} trial {trial} step {it}"
            for n in STATE:
                assert torch.equal(getattr(a, n), getattr(b, n)), f"{n}: {where}"
            for n in STEP:
                assert torch.equal(getattr(sa, n), getattr(sb, n)), f"step.{n}: {where}"
            assert ("src_rows" in vars(sa.layout)) != a._lazy_gather_plan, where  # (made on the first read)
            for n in LAYOUT:
                x, y = getattr(sa.layout, n), getattr(sb.layout, n)
                assert torch.equal(x.reshape(-1), y.reshape(-1)), f"layout.{n}: {where}"
            assert sa.layout.capacity == sb.layout.capacity and sa.max_seqlen_k == sb.max_seqlen_k
        check_invariants(a)


@pytest.mark.gpu
def test_gather_plan_on_demand_serves_a_rab_call():
    # Where the Hopper paged forward reads the pages (KVCacheManager._lazy_gather_plan: compute capability 9.0,
    # fp16 / bf16, head dim 64 / 128 / 256) begin_step leaves the gather plan to its first reader, a call the paged
    # forward does not serve (rab): the same rows and the same output as with the kernel's plan, in two steps.
    if not hstu_attn._kv_cache.kernel_available():
        pytest.skip("the fused bookkeeping kernel is not compiled in")
    Hh, Dd = 2, 64
    kw = dict(num_pages=24, page_size=16, max_users=4, max_pages_per_user=8, dtype=torch.bfloat16, device="cuda")
    lazy, eager = KVCacheManager(1, Hh, Dd, **kw), KVCacheManager(1, Hh, Dd, **kw)
    lazy._lazy_gather_plan, eager._lazy_gather_plan = True, False
    gen = torch.Generator(device="cuda").manual_seed(random.randrange(1 << 30))
    users = torch.tensor([3, 9], device="cuda")
    for new, app in (([40, 17], [40, 17]), ([6, 9], [3, 5])):
        cu = cu_of(new, "cuda")
        na = torch.tensor(app, dtype=torch.int32, device="cuda")
        q, k, v = (torch.randn(sum(new), Hh, Dd, device="cuda", generator=gen).to(torch.bfloat16) for _ in range(3))
        outs = []
        for cache in (lazy, eager):
            st = cache.begin_step(users, cu, na, sum(new), max(new))
            assert ("src_rows" in vars(st.layout)) != cache._lazy_gather_plan
            mk = st.max_seqlen_k
            rab = torch.randn(2, Hh, mk, mk, device="cuda", generator=torch.Generator(device="cuda").manual_seed(1))
            outs.append(cached_hstu_attention(cache, st, 0, q, k, v, max(new), rab=rab.to(torch.bfloat16)))
            assert "src_rows" in vars(st.layout)
            outs.append(st.layout.src_rows)
        assert torch.equal(outs[1], outs[3])
        assert torch.equal(outs[0], outs[2])
        torch.testing.assert_close(lazy.pool, eager.pool, rtol=0, atol=0)


@pytest.mark.gpu
def test_fused_kernel_in_cuda_graph_and_compile():
    if not hstu_attn._kv_cache.kernel_available():
        pytest.skip("the fused bookkeeping kernel is not compiled in")
    kw = dict(num_pages=32, page_size=16, max_users=8, max_pages_per_user=8, dtype=torch.bfloat16, device="cuda")
    eager, graphed = KVCacheManager(1, H, D, **kw), KVCacheManager(1, H, D, **kw)
    assert eager.use_kernel
    users = torch.randperm(20, device="cuda")[:4]
    cu = cu_of([9, 3, 17, 1], "cuda")
    app = torch.tensor([9, 1, 16, 0], dtype=torch.int32, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        graphed.begin_step(users, cu, app, 30, 17)
    torch.cuda.current_stream().wait_stream(s)
    graphed.__init__(1, H, D, **kw)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = graphed.begin_step(users, cu, app, 30, 17)
    for _ in range(3):
        want = eager.begin_step(users, cu, app, 30, 17)
        g.replay()
        assert torch.equal(out.append_rows, want.append_rows) and torch.equal(out.page_ids, want.page_ids)
    for n in STATE:
        assert torch.equal(getattr(graphed, n), getattr(eager, n)), n
    # torch.compile traces the op through its fake implementation (no graph break on the op).
    fn = torch.compile(lambda: eager.begin_step(users, cu, app, 30, 17).append_rows, fullgraph=True)
    assert fn().shape == (30,)


def test_stack_serving_through_the_manager_equals_uncached_stack():
    # HSTUStack with kv_manager: history computed once, candidates scored against it; equals one uncached pass over
    # history + candidates (same scaling_seqlen) for the new rows, over several serving steps.
    seed = random.randrange(1 << 30)
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    dt, E = torch.float64, 24
    stack = hstu_attn.HSTUStack(2, embedding_dim=E, num_heads=H, head_dim=D, scaling_seqlen=150.0,
                                target_group_size=2).to(dt).eval()
    cache = KVCacheManager(2, H, D, num_pages=48, page_size=16, max_users=8, max_pages_per_user=6, dtype=dt,
                           device="cpu")
    history = {}
    for it in range(3):
        users = rng.sample(range(6), 3)
        hist = [torch.randn(rng.randint(0 if it else 1, 15), E, generator=gen, dtype=dt) for _ in users]
        cands = [torch.randn(rng.randint(1, 5), E, generator=gen, dtype=dt) for _ in users]
        new = [h.shape[0] + c.shape[0] for h, c in zip(hist, cands)]
        nt = torch.tensor([c.shape[0] for c in cands], dtype=torch.int32)
        step = cache.begin_step(torch.tensor(users), cu_of(new, "cpu"),
                                torch.tensor([h.shape[0] for h in hist], dtype=torch.int32), sum(new), max(new))
        x = torch.cat([torch.cat((h, c)) for h, c in zip(hist, cands)])
        with torch.no_grad():
            out = stack(x, step.cu_seqlens_q, max(new), num_targets=nt, kv_manager=cache, cache_step=step)
            cache.check()
            full = [torch.cat(history.get(u, []) + [h, c]) for u, h, c in zip(users, hist, cands)]
            lens = [f.shape[0] for f in full]
            cu = cu_of(lens, "cpu")
            ref = stack(torch.cat(full), cu, max(lens), num_targets=nt)
        rows = torch.cat([torch.arange(int(cu[b + 1]) - n, int(cu[b + 1])) for b, n in enumerate(new)])
        torch.testing.assert_close(out, ref[rows], rtol=1e-9, atol=1e-9, msg=f"seed {seed} step {it}")
        for u, h in zip(users, hist):
            history.setdefault(u, []).append(h)
    with pytest.raises(ValueError, match="cache_step: expected"):
        stack.layers[0](x, step.cu_seqlens_q, max(new), kv_manager=cache)


@pytest.mark.parametrize("device", DEVICES)
def test_max_append_moves_only_the_appended_rows(device):
    # begin_step(max_append=sum(num_append)) + append equals the unbounded step page for page (both layers and
    # per-layer appends); a smaller bound keeps each user's appends while the running total fits, flags the rest.
    seed = random.randrange(1 << 30)
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)

    def make():
        return KVCacheManager(2, H, D, num_pages=40, page_size=16, max_users=6, max_pages_per_user=8,
                              dtype=torch.float32, device=device)

    full, bounded = make(), make()
    for it in range(6):
        users = rng.sample(range(9), 3)
        app = [rng.randint(0, 20) for _ in users]
        new = [a + rng.randint(1, 5) for a in app]
        ids = torch.tensor(users, device=device)
        cu, na = cu_of(new, device), torch.tensor(app, dtype=torch.int32, device=device)
        k = torch.randn(2, sum(new), H, D, generator=gen).to(device)
        v = torch.randn(2, sum(new), H, D, generator=gen).to(device)
        s1 = full.begin_step(ids, cu, na, sum(new), max(new))
        s2 = bounded.begin_step(ids, cu, na, sum(new), max(new), max_append=sum(app) + rng.randint(0, 3))
        full.append(s1, k, v)
        if it % 2:
            bounded.append(s2, k, v)
        else:
            for layer in range(2):
                bounded.append(s2, k[layer], v[layer], layer=layer)
        full.check()
        bounded.check()
        assert torch.equal(s2.cached_lens, s1.cached_lens)
        P = full.num_pages
        assert torch.equal(bounded.pool[:, :P], full.pool[:, :P]), f"seed {seed} step {it}"
    # a bound below the appended tokens: user 0 keeps 5 of 10, user 1 none of its 4
    cache = make()
    ids = torch.tensor([1, 2], device=device)
    st = cache.begin_step(ids, cu_of([12, 6], device), torch.tensor([10, 4], dtype=torch.int32, device=device), 18,
                          12, max_append=5)
    k = torch.randn(2, 18, H, D, generator=gen).to(device)
    cache.append(st, k, k)
    with pytest.raises(KVCacheError, match="max_append: expected >= the step's appended tokens") as e:
        cache.check()
    assert e.value.flags == ("append_bound",)
    assert st.num_append.tolist() == [5, 0]
    assert torch.equal(cache.read_user(1, 1)[0], k[1, :5])
    with pytest.raises(ValueError, match="max_append: expected an int >= 0 or None"):
        cache.begin_step(ids, cu_of([1, 1], device), torch.ones(2, dtype=torch.int32, device=device), 2, 1,
                         max_append=-1)
