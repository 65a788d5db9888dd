"""torch.export of the inference model: `CachedHSTUStack` (an HSTUStack's serving step over the paged cache) exports,
the exported program equals eager serving through the manager (outputs and the K/V appended afterwards), on fresh
values of the same shapes too. CPU here (the ops' CPU paths); the same on CUDA where there is one."""

import random

import pytest
import torch

import hstu_attn
from hstu_attn import CachedHSTUStack, KVCacheManager

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
H, D, E = 2, 32, 48


def cu_of(lens, device):
    return torch.tensor([0] + list(lens), device=device).cumsum(0).to(torch.int32)


def serving_batch(rng, gen, users, device, dtype, first):
    hist = [rng.randint(0 if not first else 1, 20) for _ in users]
    cands = [rng.randint(1, 6) for _ in users]
    new = [h + c for h, c in zip(hist, cands)]
    x = torch.randn(sum(new), E, generator=gen, dtype=torch.float64).to(device, dtype)
    nt = torch.tensor(cands, dtype=torch.int32, device=device)
    app = torch.tensor(hist, dtype=torch.int32, device=device)
    return x, new, nt, app


@pytest.mark.parametrize("device", DEVICES)
def test_exported_serving_stack_matches_eager(device):
    seed = random.randrange(1 << 30)
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    # CPU: float64 end to end; CUDA: float32 activations, bf16 attention and cache (the kernels' dtypes).
    dt, cache_dt = (torch.float64, torch.float64) if device == "cpu" else (torch.float32, torch.bfloat16)
    stack = hstu_attn.HSTUStack(2, embedding_dim=E, num_heads=H, head_dim=D, target_group_size=2).to(device, dt)
    stack.eval()
    mk = lambda: KVCacheManager(2, H, D, num_pages=40, page_size=16, max_users=8,  # noqa: E731
                                max_pages_per_user=5, dtype=cache_dt, device=device)
    eager_cache, exp_cache = mk(), mk()
    users = torch.tensor(rng.sample(range(100), 3), device=device)
    ep = None
    for it in range(3):  # the first step fills the caches, the next ones read them
        x, new, nt, app = serving_batch(rng, gen, users.tolist(), device, dt, it == 0)
        cu = cu_of(new, device)
        with torch.no_grad():
            s1 = eager_cache.begin_step(users, cu, app, sum(new), max(new))
            want = stack(x, s1.cu_seqlens_q, max(new), num_targets=nt, kv_manager=eager_cache, cache_step=s1)
            s2 = exp_cache.begin_step(users, cu, app, sum(new), max(new))
            m = CachedHSTUStack(stack, max(new), s2.max_seqlen_k)
            args = (x, exp_cache.pool, s2.cu_seqlens_q, s2.page_offsets, s2.page_ids, s2.last_page_lens, nt)
            ep = torch.export.export(m, args)
            targets = [str(n.target) for n in ep.graph.nodes]
            # (the Hopper paged forward where it applies: D 64 / 128 / 256; D 32 here gathers, then hstu_attn.fwd)
            assert any("hstu_attn.fwd" in t or "hstu_attn.paged_fwd_sm90" in t for t in targets), targets
            got, k_new, v_new = ep.module()(*args)
            exp_cache.append(s2, k_new, v_new)
        eager_cache.check()
        exp_cache.check()
        tol = dict(rtol=0, atol=0) if device == "cpu" else dict(rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(got, want, **tol, msg=f"seed {seed} step {it}")
        # the exported step appended what eager serving appended (bitwise on the CPU)
        for layer in range(2):
            for u in users.tolist():
                ke, ve = eager_cache.read_user(u, layer)
                kx, vx = exp_cache.read_user(u, layer)
                torch.testing.assert_close(kx, ke, **tol)
                torch.testing.assert_close(vx, ve, **tol)
    # The last exported program on fresh values of the same shapes equals the eager module.
    x2 = torch.randn_like(args[0])
    args2 = (x2,) + args[1:]
    with torch.no_grad():
        for a, b in zip(ep.module()(*args2), m(*args2)):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_serving_stack_rejects_a_relative_bias():
    stack = hstu_attn.HSTUStack(1, embedding_dim=E, num_heads=H, head_dim=D,
                                relative_bias=hstu_attn.RelativeBucketedBias(1, max_distance=8))
    with pytest.raises(NotImplementedError, match="stack: expected an HSTUStack without relative_bias"):
        CachedHSTUStack(stack, 8, 64)
