"""KVCacheManager(offload_pages=): evicted users' caches go to a host tier (pinned host memory on CUDA) and come back
exactly when the users return; what does not fit is dropped and flagged, never read or written out of bounds; host
argument errors. CPU here (torch ops); the same on CUDA (the fused bookkeeping kernel + the page-copy kernel)."""

import random

import pytest
import torch

from hstu_attn import KVCacheError, KVCacheManager

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
H, D, L = 2, 16, 2


def cu_of(lens, device):
    return torch.tensor([0] + list(lens), device=device).cumsum(0).to(torch.int32)


def serve(cache, users, new, app, gen, model, device):
    """One step with random K/V appended for every layer; `model` (user -> (k, v) of all its tokens) follows it."""
    st = cache.begin_step(torch.tensor(users, device=device), cu_of(new, device),
                          torch.tensor(app, dtype=torch.int32, device=device), sum(new), max(new))
    k = torch.randn(L, sum(new), H, D, generator=gen).to(device, cache.dtype)
    v = torch.randn(L, sum(new), H, D, generator=gen).to(device, cache.dtype)
    cache.append(st, k, v)
    off = 0
    for u, n, a in zip(users, new, app):
        ok, ov = model.get(u, (k[:, :0], v[:, :0]))
        model[u] = (torch.cat((ok, k[:, off: off + a]), 1), torch.cat((ov, v[:, off: off + a]), 1))
        off += n
    return st


@pytest.mark.parametrize("device", DEVICES)
def test_evicted_users_come_back_exact(device):
    # A device pool of 8 pages for 10 users of up to 3 pages each: most steps evict; with the host tier every user
    # keeps its whole history across evictions (the model), checked after every step.
    seed = random.randrange(1 << 30)
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    ps, M = 16, 3
    cache = KVCacheManager(L, H, D, num_pages=8, page_size=ps, max_users=4, max_pages_per_user=M,
                           dtype=torch.float32, device=device, offload_pages=40, offload_pages_per_step=12)
    model, reloads = {}, 0
    for it in range(40):
        users = rng.sample(range(10), rng.randint(1, 2))
        have = [model[u][0].shape[1] if u in model else 0 for u in users]
        app = [min(rng.randint(0, 14), M * ps - h) for h in have]
        new = [a + rng.randint(1, 4) for a in app]  # new history, then candidates
        lens_before = [int(x) for x in cache.cached_lengths(torch.tensor(users, device=device)).tolist()]
        st = serve(cache, users, new, app, gen, model, device)
        cache.check()
        # a returning user is served with its whole history, reloaded from the host tier when it was evicted
        assert st.cached_lens.tolist() == have, f"seed {seed} step {it}: {st.cached_lens.tolist()} != {have}"
        reloads += sum(1 for b, h in enumerate(have) if h and lens_before[b] == 0)
        for u in users:
            for layer in range(L):
                k, v = cache.read_user(u, layer)
                assert torch.equal(k, model[u][0][layer]) and torch.equal(v, model[u][1][layer]), \
                    f"seed {seed} step {it} user {u} layer {layer}"
    assert reloads > 0, f"seed {seed}: no user came back from the host tier"
    # every page is free or held exactly once, on both tiers
    free = cache.free_pages[: int(cache.free_count)].tolist()
    held = [p for s in range(cache.max_users) for p in cache.slot_pages[s].tolist() if p < cache.num_pages]
    assert sorted(free + held) == list(range(cache.num_pages))
    t = cache.offload
    free_h = t.free_pages[: int(t.free_count)].tolist()
    held_h = [p for s in range(t.max_users) for p in t.pages[s].tolist() if p < t.num_pages]
    assert sorted(free_h + held_h) == list(range(t.num_pages))


@pytest.mark.parametrize("device", DEVICES)
def test_offload_budget_and_full_host_tier_are_flagged(device):
    gen = torch.Generator().manual_seed(random.randrange(1 << 30))
    ps = 16
    # per-step budget of 1 page: evicting a 2-page user drops it (flagged), the device state stays whole
    cache = KVCacheManager(L, H, D, num_pages=2, page_size=ps, max_users=2, max_pages_per_user=2,
                           dtype=torch.float32, device=device, offload_pages=8, offload_pages_per_step=1)
    model = {}
    serve(cache, [1], [2 * ps], [2 * ps], gen, model, device)
    cache.check()
    serve(cache, [2], [ps], [ps], gen, model, device)  # evicts user 1 (2 pages > budget 1)
    with pytest.raises(KVCacheError, match="offload_pages / offload_pages_per_step: expected room") as e:
        cache.check()
    assert "offload_dropped" in e.value.flags
    st = serve(cache, [1], [3], [0], gen, model, device)  # user 1 comes back empty
    assert st.cached_lens.tolist() == [0]
    # a host tier of 1 page cannot take a 2-page user either
    cache = KVCacheManager(L, H, D, num_pages=2, page_size=ps, max_users=2, max_pages_per_user=2,
                           dtype=torch.float32, device=device, offload_pages=1)
    serve(cache, [1], [2 * ps], [2 * ps], gen, {}, device)
    serve(cache, [2], [ps], [ps], gen, {}, device)
    with pytest.raises(KVCacheError, match="offload_dropped|offload_pages"):
        cache.check()


@pytest.mark.parametrize("device", DEVICES)
def test_reload_budget_is_flagged_and_served_empty(device):
    gen = torch.Generator().manual_seed(random.randrange(1 << 30))
    ps = 16
    cache = KVCacheManager(L, H, D, num_pages=4, page_size=ps, max_users=2, max_pages_per_user=2,
                           dtype=torch.float32, device=device, offload_pages=8, offload_pages_per_step=2)
    model = {}
    serve(cache, [1, 2], [2 * ps, ps], [2 * ps, ps], gen, model, device)
    serve(cache, [3], [2 * ps], [2 * ps], gen, model, device)  # user 1 (2 pages) goes to the host tier
    serve(cache, [4], [2 * ps], [2 * ps], gen, model, device)  # user 2 (1 page) too
    cache.check()
    # users 1 and 2 return together: 3 pages > the budget of 2: user 1 (first, 2 pages) fits, user 2 does not
    # (evicting users 3 and 4 for them exceeds the budget too: offload_dropped may come with it)
    st = serve(cache, [1, 2], [1, 1], [0, 0], gen, {}, device)
    with pytest.raises(KVCacheError, match="offload_pages_per_step: expected room for every returning") as e:
        cache.check()
    assert "reload_dropped" in e.value.flags
    assert st.cached_lens.tolist() == [2 * ps, 0]
    k, v = cache.read_user(1, 1)
    assert torch.equal(k, model[1][0][1]) and torch.equal(v, model[1][1][1])


def test_offload_argument_errors():
    kw = dict(num_pages=4, page_size=16, max_users=2, max_pages_per_user=2, dtype=torch.float32, device="cpu")
    with pytest.raises(ValueError, match="offload_pages_per_step: expected an int >= 1"):
        KVCacheManager(L, H, D, offload_pages=4, offload_pages_per_step=0, **kw)
    with pytest.raises(ValueError, match="offload_users: expected an int >= 1"):
        KVCacheManager(L, H, D, offload_pages=4, offload_users=-2, **kw)
    with pytest.raises(ValueError, match="offload_pages: expected an int >= 1"):
        KVCacheManager(L, H, D, offload_pages=-1, **kw)


@pytest.mark.gpu
def test_offload_step_in_a_cuda_graph():
    # The whole step (bookkeeping of both tiers, the copies, the append) captured once, replayed for rotating
    # users: evictions and reloads happen inside replays, and every user's K/V stays exact.
    dev, ps, M, new = "cuda", 16, 2, 9
    seed = random.randrange(1 << 30)
    rng, gen = random.Random(seed), torch.Generator(device=dev).manual_seed(seed)

    def make():
        return KVCacheManager(L, H, D, num_pages=4, page_size=ps, max_users=2, max_pages_per_user=M,
                              dtype=torch.bfloat16, device=dev, offload_pages=16)

    cache = make()
    uid = torch.zeros(1, dtype=torch.int64, device=dev)
    app = torch.full((1,), new, dtype=torch.int32, device=dev)
    cu = cu_of([new], dev)
    k = torch.zeros(L, new, H, D, dtype=torch.bfloat16, device=dev)
    v = torch.zeros_like(k)

    def step():
        st = cache.begin_step(uid, cu, app, new, new)
        cache.append(st, k, v)
        return st.cached_lens

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()  # warm-up (allocations), then a fresh cache
    torch.cuda.current_stream().wait_stream(s)
    cache = make()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        cached_g = step()
    model = {}
    for it in range(24):
        u = rng.randrange(5)
        have = model[u][0].shape[1] if u in model else 0
        a = min(new, M * ps - have)
        uid.fill_(u)
        app.fill_(a)
        k.copy_(torch.randn(k.shape, device=dev, generator=gen))
        v.copy_(torch.randn(v.shape, device=dev, generator=gen))
        g.replay()
        assert int(cached_g[0]) == have, f"seed {seed} replay {it}"
        ok, ov = model.get(u, (k[:, :0].clone(), v[:, :0].clone()))
        model[u] = (torch.cat((ok, k[:, :a]), 1), torch.cat((ov, v[:, :a]), 1))
        for layer in range(L):
            kk, vv = cache.read_user(u, layer)
            assert torch.equal(kk, model[u][0][layer]) and torch.equal(vv, model[u][1][layer]), \
                f"seed {seed} replay {it} user {u}"
    cache.check()
