"""Paged KV attention (hstu_attn_paged_func) against the contiguous call and the reference: random page layouts
(shuffled page ids, partial last pages, empty histories, users with only candidates), every mask, rab; input
validation; device-side errors clamp and flag; torch.export. CPU here; the same cases on CUDA where there is one
(error-relative rule against the fp32 reference)."""

import random

import pytest
import torch

import hstu_attn
from hstu_attn import hstu_attn_paged_func, hstu_attn_paged_reference, hstu_attn_reference, hstu_attn_varlen_func

# name -> (window, contexts, targets, target_group_size)
MASKS = {
    "none": ((-1, -1), False, False, 1),
    "causal": ((-1, 0), False, False, 1),
    "local": ((7, 3), False, False, 1),
    "local_causal": ((9, 0), False, False, 1),
    "context": ((-1, 0), True, False, 1),
    "target": ((-1, 0), False, True, 1),
    "target_group": ((-1, 0), False, True, 3),
    "context_target_group": ((-1, 0), True, True, 2),
    "local_context_target": ((11, 0), True, True, 2),
}
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def make_paged_case(seed, device, dtype, mask, page_size=16, H=2, D=32, batch=5, max_cached=70, max_new=20,
                    rab=False):
    """A random page table over a shuffled pool and the same sequences laid out contiguously."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    window, ctx, tgt, g = MASKS[mask]
    # Lengths at page edges, empty histories, and users with only new tokens.
    cached = [rng.choice([0, 1, page_size - 1, page_size, page_size + 1, rng.randint(0, max_cached)])
              for _ in range(batch)]
    new = [rng.choice([0, 1, rng.randint(1, max_new)]) for _ in range(batch)]
    cached[0], new[0] = 0, max(new[0], 3)  # a user with only candidates
    npages = [(c + page_size - 1) // page_size for c in cached]
    num_pages = sum(npages) + 3  # spare pages hold other (random) data
    perm = torch.randperm(num_pages, generator=gen).tolist()
    ids, k_parts, v_parts = [], [], []
    cache = torch.randn(num_pages, 2, page_size, H, D, generator=gen).to(dtype)
    k_new = torch.randn(sum(new), H, D, generator=gen).to(dtype)
    v_new = torch.randn(sum(new), H, D, generator=gen).to(dtype)
    q = torch.randn(sum(new), H, D, generator=gen).to(dtype)
    pos = 0
    off = 0
    for b in range(batch):
        pages = perm[pos: pos + npages[b]]
        pos += npages[b]
        ids += pages
        if pages:
            kb = cache[pages, 0].reshape(-1, H, D)[: cached[b]]
            vb = cache[pages, 1].reshape(-1, H, D)[: cached[b]]
        else:
            kb = vb = cache.new_zeros(0, H, D)
        k_parts += [kb, k_new[off: off + new[b]]]
        v_parts += [vb, v_new[off: off + new[b]]]
        off += new[b]
    ids += [rng.randrange(num_pages) for _ in range(rng.randint(0, 3))]  # unused entries past page_offsets[B]
    lens_k = [c + n for c, n in zip(cached, new)]
    i32 = dict(dtype=torch.int32)
    page_offsets = torch.tensor([0] + npages, **i32).cumsum(0).to(torch.int32)
    last = torch.tensor([c - (p - 1) * page_size if p else rng.randint(0, 5) for c, p in zip(cached, npages)], **i32)
    cu_q = torch.tensor([0] + new).cumsum(0).to(torch.int32)
    cu_k = torch.tensor([0] + lens_k).cumsum(0).to(torch.int32)
    max_q, max_k = max(new), max(lens_k) + rng.randint(0, 2)
    nt = [rng.randint(0, n) for n in new] if tgt else None
    nc = [rng.randint(0, max(lk - (nt[b] if nt else 0), 0)) for b, lk in enumerate(lens_k)] if ctx else None
    rab_t = torch.randn(batch, H, max_k, max_k, generator=gen).to(dtype) if rab else None
    mv = lambda t: None if t is None else t.to(device)  # noqa: E731
    paged = dict(q=q, k_new=k_new, v_new=v_new, cu_seqlens_q=cu_q, kv_cache=cache, page_offsets=page_offsets,
                 page_ids=torch.tensor(ids, **i32), last_page_lens=last)
    common = dict(max_seqlen_q=max_q, max_seqlen_k=max_k,
                  num_contexts=None if nc is None else torch.tensor(nc, **i32),
                  num_targets=None if nt is None else torch.tensor(nt, **i32),
                  target_group_size=g, window_size=window, alpha=0.7, rab=rab_t)
    contiguous = dict(q=q, k=torch.cat(k_parts), v=torch.cat(v_parts), cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    to = lambda d: {n: (mv(t) if isinstance(t, torch.Tensor) else t) for n, t in d.items()}  # noqa: E731
    return to(paged), to(common), to(contiguous)


def assert_same(got, want, msg=""):
    """The paged call runs the contiguous call's kernel on the gathered K/V: the same result (a strided K/V
    may take another tile path on CUDA, hence the fp32-reduction-order slack there)."""
    if got.device.type == "cpu":
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, msg=msg)
    else:
        scale = want.float().abs().max().item() if want.numel() else 0.0
        err = (got.float() - want.float()).abs().max().item() if want.numel() else 0.0
        assert err <= 1e-2 * scale + 1e-6, f"{msg}: {err:.3e}"


def error_relative_ok(got, paged, common, k=2.0):
    """|got - ref32| <= k |ref_same_dtype - ref32| + atol (the kernels' rule)."""
    f32 = {n: (t.float() if isinstance(t, torch.Tensor) and t.is_floating_point() else t) for n, t in paged.items()}
    c32 = {n: (t.float() if isinstance(t, torch.Tensor) and t.is_floating_point() else t) for n, t in common.items()}
    ref = hstu_attn_paged_reference(**f32, **c32)
    low = hstu_attn_paged_reference(**paged, **common, upcast=False)
    err = (got.float() - ref).abs().max().item() if got.numel() else 0.0
    bound = k * ((low.float() - ref).abs().max().item() if got.numel() else 0.0) + 1e-3
    return err <= bound, (err, bound)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_paged_equals_contiguous_and_reference(device, mask):
    seed = random.randrange(1 << 30)
    if device == "cpu":
        paged, common, contiguous = make_paged_case(seed, device, torch.float64, mask, rab=mask == "causal")
        out = hstu_attn_paged_func(**paged, **common)
        want = hstu_attn_varlen_func(**contiguous, **common)
        torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12, msg=f"seed {seed}")
        ref = hstu_attn_paged_reference(**paged, **common)
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12, msg=f"seed {seed}")
    else:
        for ps, D in ((64, 128), (16, 64)):
            paged, common, contiguous = make_paged_case(seed, device, torch.bfloat16, mask, page_size=ps, D=D, H=4,
                                                        batch=9, max_cached=300, max_new=150,
                                                        rab=mask in ("causal", "target_group"))
            out = hstu_attn_paged_func(**paged, **common)
            want = hstu_attn_varlen_func(**contiguous, **common)
            assert_same(out, want, f"seed {seed} ps {ps}")
            ok, (err, bound) = error_relative_ok(out, paged, common)
            assert ok, f"seed {seed} ps {ps}: {err:.3e} > {bound:.3e}"


@pytest.mark.parametrize("device", DEVICES)
def test_every_page_size_and_shared_layout(device):
    dtype = torch.float64 if device == "cpu" else torch.bfloat16
    for ps in hstu_attn.PAGE_SIZES:
        paged, common, contiguous = make_paged_case(random.randrange(1 << 30), device, dtype, "target_group",
                                                    page_size=ps, batch=3, max_cached=2 * ps + 3, D=32)
        out = hstu_attn_paged_func(**paged, **common)
        assert_same(out, hstu_attn_varlen_func(**contiguous, **common), f"page size {ps}")
        # A layout computed once (what a model step shares across layers) gives the same result.
        layout = hstu_attn.paged_kv_layout(paged["page_offsets"], paged["page_ids"], paged["last_page_lens"],
                                           paged["cu_seqlens_q"], paged["q"].shape[0],
                                           paged["kv_cache"].shape[0], ps)
        again = hstu_attn_paged_func(**paged, **common, layout=layout)
        torch.testing.assert_close(again, out, rtol=0, atol=0)


def _small():
    paged, common, _ = make_paged_case(random.randrange(1 << 30), "cpu", torch.float32, "causal", batch=3)
    return paged, common


def _i32(*v):
    return torch.tensor(v, dtype=torch.int32)


BAD_HOST = {
    "kv_cache_4d": (lambda p: dict(kv_cache=p["kv_cache"][:, 0]), "kv_cache"),
    "kv_cache_page_size": (lambda p: dict(kv_cache=p["kv_cache"][:, :, :8].contiguous()), "kv_cache"),
    "kv_cache_not_contiguous": (lambda p: dict(kv_cache=p["kv_cache"].transpose(3, 4)), "kv_cache"),
    "kv_cache_dtype": (lambda p: dict(kv_cache=p["kv_cache"].double()), "kv_cache"),
    "kv_cache_heads": (lambda p: dict(kv_cache=torch.randn(4, 2, 16, 3, 32)), "kv_cache"),
    "page_offsets_int64": (lambda p: dict(page_offsets=p["page_offsets"].long()), "page_offsets"),
    "page_offsets_length": (lambda p: dict(page_offsets=p["page_offsets"][:-1]), "page_offsets"),
    "page_ids_2d": (lambda p: dict(page_ids=p["page_ids"].view(1, -1)), "page_ids"),
    "last_page_lens_length": (lambda p: dict(last_page_lens=p["last_page_lens"][:1]), "last_page_lens"),
    "k_new_shape": (lambda p: dict(k_new=p["k_new"][:-1]), "k_new"),
    "v_new_dtype": (lambda p: dict(v_new=p["v_new"].double()), "v_new"),
}


@pytest.mark.parametrize("case", sorted(BAD_HOST))
def test_host_validation_names_the_argument(case):
    paged, common = _small()
    over, arg = BAD_HOST[case]
    paged.update(over(paged))
    with pytest.raises((ValueError, TypeError)) as info:
        hstu_attn_paged_func(**paged, **common)
    msg = str(info.value)
    assert f"{arg}:" in msg and "expected" in msg and "got" in msg, msg


def _break(paged, common, what):
    po, ids, last = paged["page_offsets"].clone(), paged["page_ids"].clone(), paged["last_page_lens"].clone()
    npages = po[1:] - po[:-1]
    b = int(torch.nonzero(npages > 0)[0]) if (npages > 0).any() else None
    if what == "page_ids":
        if not ids.numel():
            return False
        ids[0] = paged["kv_cache"].shape[0] + 5
    elif what == "page_offsets":
        po[1] = po[2] + 1
    elif what == "last_page_lens":
        if b is None:
            return False
        last[b] = paged["kv_cache"].shape[2] + 1
    elif what == "max_seqlen_k":
        # breakable only if some sequence's keys (cached + new) outnumber the longest query run
        ps, new = paged["kv_cache"].shape[2], paged["cu_seqlens_q"][1:] - paged["cu_seqlens_q"][:-1]
        cached = torch.where(npages > 0, (npages - 1) * ps + last, torch.zeros_like(last))
        if not bool(((cached + new) > common["max_seqlen_q"]).any()):
            return False
        common["max_seqlen_k"] = common["max_seqlen_q"]
        common["rab"] = None
    paged.update(page_offsets=po, page_ids=ids, last_page_lens=last)
    return True


@pytest.mark.parametrize("what", ["page_ids", "page_offsets", "last_page_lens", "max_seqlen_k"])
def test_device_values_raise_eagerly_or_clamp_and_flag(what):
    for _ in range(20):  # a case where the value can be broken (a user with pages, a cache longer than q)
        paged, common = _small()
        paged["page_offsets"] = _i32(0, 1, 3, paged["page_offsets"][-1].item()) if paged["page_offsets"][-1] >= 3 \
            else paged["page_offsets"]
        # the new offsets give sequences 0 and 1 pages: their last page holds at least one token (the only error
        # of the case is then the one _break plants)
        paged["last_page_lens"] = paged["last_page_lens"].clamp(min=1)
        if paged["page_offsets"][-1] >= 3 and _break(paged, common, what):
            break
    else:
        pytest.skip("no case with enough pages drawn")
    with pytest.raises(ValueError) as info:
        hstu_attn_paged_func(**paged, **common)
    assert f"{what}:" in str(info.value) and "expected" in str(info.value), str(info.value)
    # Without the host check: values are clamped (no out-of-bounds access) and the violation is flagged.
    flags = torch.zeros(1, dtype=torch.int32)
    out = hstu_attn_paged_func(**paged, **common, check_values=False, error_flags=flags)
    assert torch.isfinite(out).all()
    from hstu_attn._paged import PAGED_ERROR_BITS
    assert int(flags) & PAGED_ERROR_BITS[what], int(flags)


def test_empty_batch_and_no_pages():
    paged, common = _small()
    po = torch.zeros(4, dtype=torch.int32)
    out = hstu_attn_paged_func(**dict(paged, page_offsets=po, page_ids=_i32()), **common)
    want = hstu_attn_varlen_func(paged["q"], paged["k_new"], paged["v_new"], paged["cu_seqlens_q"],
                                 paged["cu_seqlens_q"], common["max_seqlen_q"], common["max_seqlen_k"],
                                 window_size=(-1, 0), alpha=common["alpha"])
    torch.testing.assert_close(out, want)


def test_export_matches_eager():
    paged, common, _ = make_paged_case(random.randrange(1 << 30), "cpu", torch.float32, "target_group", batch=3)
    m = hstu_attn.PagedHSTUAttention(common["max_seqlen_q"], common["max_seqlen_k"], common["target_group_size"],
                                     common["window_size"], common["alpha"])
    args = tuple(paged[n] for n in ("q", "k_new", "v_new", "cu_seqlens_q", "kv_cache", "page_offsets", "page_ids",
                                    "last_page_lens")) + (common["num_targets"],)
    ep = torch.export.export(m, args)
    assert any("hstu_attn.fwd" in str(n.target) for n in ep.graph.nodes)
    torch.testing.assert_close(ep.module()(*args), m(*args), rtol=0, atol=0)
    # Fresh values of the same shapes through the exported program.
    args2 = (torch.randn_like(args[0]),) + args[1:]
    torch.testing.assert_close(ep.module()(*args2), m(*args2), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("mask", ["causal", "target_group", "context_target_group"])
def test_few_queries_over_long_histories(mask):
    # A cached step of few users: few query tiles over thousands of keys. On an H200/H100 (a wheel with sm_90a) the
    # Hopper forward's planner takes its work list and splits the key ranges (hstu_fwd_sm90_sched_layout: few
    # queries over long keys); the result stays the contiguous call's up to the fp32 summation order, and within
    # the error-relative rule.
    base = random.randrange(1 << 30)
    for n in range(200):  # a case whose longest history has >= 2048 keys
        seed = base + n
        paged, common, contiguous = make_paged_case(seed, "cuda", torch.bfloat16, mask, page_size=64, D=128, H=4,
                                                    batch=3, max_cached=4000, max_new=300)
        if common["max_seqlen_k"] >= 2048:
            break
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = hstu_attn_paged_func(**paged, **common)
        torch.cuda.synchronize()
    info = hstu_attn.compiled_kernels()["instance_archs"]
    if torch.cuda.get_device_capability() == (9, 0) and any("sm_90a" in a for a in info.values()):
        names = [e.name for e in prof.events()]
        assert any("hstu_sm90_plan_kernel" in n and "FwdPlanUnits" in n for n in names), sorted(set(names))
    assert_same(out, hstu_attn_varlen_func(**contiguous, **common), f"seed {seed}")
    ok, (err, bound) = error_relative_ok(out, paged, common)
    assert ok, f"seed {seed}: {err:.3e} > {bound:.3e}"


@pytest.mark.gpu
@pytest.mark.parametrize("mask", ["target", "target_group", "context_target_group", "local_context_target"])
def test_many_candidates_paged(mask):
    # Cached steps with hundreds of candidates per user (targets), so that a query tile of candidates has whole key
    # tiles of other groups between the history and its own group, which the kernels skip: shuffled pages, empty
    # histories, users with candidates only; the paged call equals the contiguous one and meets the error rule.
    seed = random.randrange(1 << 30)
    for ps, D in ((64, 128), (16, 256), (128, 64)):
        paged, common, contiguous = make_paged_case(seed, "cuda", torch.bfloat16, mask, page_size=ps, D=D, H=2,
                                                    batch=6, max_cached=1500, max_new=1200)
        n_new = (contiguous["cu_seqlens_q"][1:] - contiguous["cu_seqlens_q"][:-1]).cpu()
        # Most of each user's new tokens are candidates (make_paged_case draws a random count).
        common["num_targets"] = (n_new * 9 // 10).to(torch.int32).cuda()
        if mask == "target_group":
            common["target_group_size"] = 37
        if common["num_contexts"] is not None:  # contexts stay inside the (now shorter) histories
            n_k = (contiguous["cu_seqlens_k"][1:] - contiguous["cu_seqlens_k"][:-1]).cuda()
            hist = n_k - common["num_targets"]
            common["num_contexts"] = torch.minimum(common["num_contexts"], hist).to(torch.int32)
        out = hstu_attn_paged_func(**paged, **common)
        assert_same(out, hstu_attn_varlen_func(**contiguous, **common), f"seed {seed} ps {ps}")
        ok, (err, bound) = error_relative_ok(out, paged, common)
        assert ok, f"seed {seed} ps {ps}: {err:.3e} > {bound:.3e}"
