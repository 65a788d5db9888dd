"""One plan per serving step for the Hopper paged forward (hstu_attn._paged._kernel_plan): the layers of a step share
the layout, and with it the device validation of the lengths and the kernel's work list, made by the first layer.

CPU: the plan cache's rules (made once for the same tensors and masks, again for others, none while tracing) with
a stand-in for the op, and a shared layout over several layers computing what separate calls compute. CUDA (Hopper
wheel): several layers over one layout run the planner and the validation once, give bitwise the outputs of
separate calls (whose split tiles sum their partials alone or together: the same order, also checked directly at
the same chunks), repeat bitwise (the split counters end at zero), and a violation found by the step's validation
turns every layer's output to NaN and raises.
"""

import contextlib
import random

import pytest
import torch

import hstu_attn
from hstu_attn import _paged, hstu_attn_paged_func, hstu_attn_paged_reference


def make_step(seed, device, dtype, batch, cached, new, page_size, H, D, num_cand):
    """A page table over a shuffled pool (cached[b] tokens of user b), new tokens per user, num_cand[b] of them
    candidates; q, k, v of one layer come from `layer_qkv`."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    npages = [(c + page_size - 1) // page_size for c in cached]
    num_pages = sum(npages) + 2
    perm = list(range(num_pages))
    rng.shuffle(perm)
    ids, po, last = [], [0], []
    for b in range(batch):
        ids += perm[len(ids): len(ids) + npages[b]]
        po.append(len(ids))
        last.append(cached[b] - (npages[b] - 1) * page_size if npages[b] else 0)
    i32 = dict(dtype=torch.int32, device=device)
    cu_q = torch.tensor([0] + [sum(new[: b + 1]) for b in range(batch)], **i32)
    step = dict(
        cu_seqlens_q=cu_q,
        kv_cache=torch.randn(num_pages, 2, page_size, H, D, generator=gen).to(device=device, dtype=dtype),
        page_offsets=torch.tensor(po, **i32), page_ids=torch.tensor(ids or [0], **i32),
        last_page_lens=torch.tensor(last, **i32))
    common = dict(max_seqlen_q=max(new), max_seqlen_k=max(c + n for c, n in zip(cached, new)),
                  num_targets=torch.tensor(num_cand, **i32), window_size=(-1, 0), alpha=0.5)
    return step, common, gen


def layer_qkv(gen, total_q, H, D, device, dtype):
    return {n: torch.randn(total_q, H, D, generator=gen).to(device=device, dtype=dtype)
            for n in ("q", "k_new", "v_new")}


def shared_layout(step, common, total_q):
    return hstu_attn.paged_kv_layout(step["page_offsets"], step["page_ids"], step["last_page_lens"],
                                     step["cu_seqlens_q"], total_q, step["kv_cache"].shape[0],
                                     step["kv_cache"].shape[2], common["max_seqlen_k"])


def test_pre_wait_bit_only_behind_an_earlier_call_of_the_plan(monkeypatch):
    # _paged_kernel sets the paged op's pre-wait bit (the CTAs read their work item and lengths before waiting for
    # the kernel before them) only inside _pre_wait_on, under pdl, for a call whose plan an earlier call over the
    # layout made: never for the call that makes the plan (it runs right behind the plan's kernel, which writes
    # the work list). The op and the planner are stand-ins here (CPU); the bits they are given are what is checked.
    step, common, gen = make_step(1, "cpu", torch.float32, 2, [40, 7], [5, 3], 16, 2, 32, [2, 1])
    seen = []
    monkeypatch.setattr(_paged, "_make_plan", lambda *a: torch.empty(1, dtype=torch.uint8))

    class Op:
        def paged_fwd_sm90(self, *a):
            seen.append(a[19])  # (the op's options)
            return torch.zeros_like(a[0])

    class Channel:
        strict = False

        def raise_pending(self):
            pass

        def ensure_block(self):
            pass

    monkeypatch.setattr(_paged.torch.ops, "hstu_attn", Op())
    monkeypatch.setattr(_paged, "_channel", Channel())
    pdl, bit = hstu_attn._ops.OPTION_BITS["pdl"], _paged._PAGED_PRE_WAIT

    def layers(n, layout, pre_wait, use_pdl):
        qkv = layer_qkv(gen, 8, 2, 32, "cpu", torch.float32)
        with hstu_attn._ops.kernel_options(pdl=use_pdl), \
                _paged._pre_wait_on() if pre_wait else contextlib.nullcontext():
            for _ in range(n):
                _paged._paged_kernel(qkv["q"], qkv["k_new"], qkv["v_new"], step["cu_seqlens_q"], step["kv_cache"],
                                     step["page_offsets"], step["page_ids"], layout, common["max_seqlen_q"],
                                     common["max_seqlen_k"], None, common["num_targets"], 1, (-1, 0), 0.5, -1.0,
                                     False, shared_layout=True)
        return [bool(o & bit) for o in seen[-n:]], [bool(o & pdl) for o in seen[-n:]]

    assert layers(4, shared_layout(step, common, 8), True, True) == ([False, True, True, True], [True] * 4)
    assert layers(3, shared_layout(step, common, 8), False, True)[0] == [False] * 3  # (_pre_wait off)
    assert layers(3, shared_layout(step, common, 8), True, False)[0] == [False] * 3  # (no pdl)


def test_plan_made_once_per_tensors_and_masks(monkeypatch):
    made = []
    step, common, gen = make_step(1, "cpu", torch.float32, 2, [40, 7], [5, 3], 16, 2, 32, [2, 1])
    layout = shared_layout(step, common, 8)
    q = torch.randn(8, 2, 32)
    nt = common["num_targets"]

    def make():
        made.append(torch.empty(1))
        return made[-1]

    key = (5, 47, 1, (-1, 0), True, False)
    first = _paged._kernel_plan(layout, make, q, (step["cu_seqlens_q"], None, nt), key)
    for _ in range(3):  # the other layers of the step
        assert _paged._kernel_plan(layout, make, q, (step["cu_seqlens_q"], None, nt), key) is first
    assert len(made) == 1
    # Another num_targets tensor (same values), other masks, other kernel options, another shape: a plan each. A
    # plan over other tensors takes the entry of its key (one entry per key: fresh tensors every call do not grow
    # the layout's plans), so the first tensor plans again after it.
    nt2 = nt.clone()
    other = _paged._kernel_plan(layout, make, q, (step["cu_seqlens_q"], None, nt2), key)
    assert other is not first and len(made) == 2
    assert len(layout.kernel_plans) == 1 and next(iter(layout.kernel_plans.values()))[0][2] is nt2
    assert _paged._kernel_plan(layout, make, q, (step["cu_seqlens_q"], None, nt2), key) is other
    assert _paged._kernel_plan(layout, make, q, (step["cu_seqlens_q"], None, nt), key) is not first
    assert len(made) == 3
    _paged._kernel_plan(layout, make, q, (step["cu_seqlens_q"], None, nt), key[:3] + ((7, 0),) + key[4:])
    assert len(made) == 4
    with hstu_attn._ops.kernel_options(fwd_work_list=False):
        _paged._kernel_plan(layout, make, q, (step["cu_seqlens_q"], None, nt), key)
    assert len(made) == 5
    with hstu_attn._ops.kernel_options(fwd_split_tiles=3):
        _paged._kernel_plan(layout, make, q, (step["cu_seqlens_q"], None, nt), key)
    assert len(made) == 6
    _paged._kernel_plan(layout, make, q[:, :1].contiguous(), (step["cu_seqlens_q"], None, nt), key)
    assert len(made) == 7
    # A fresh layout (the next step) has no plans.
    assert not shared_layout(step, common, 8).kernel_plans
    # While torch.compile / torch.export trace: no plan (the op validates and plans itself).
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert _paged._kernel_plan(layout, make, q, (step["cu_seqlens_q"], None, nt), key) is None
    assert len(made) == 7


def test_shared_layout_over_layers_cpu():
    # The CPU path (gather + the varlen reference kernels) over a layout shared by four layers computes what
    # separate calls compute, and keeps no kernel plan (there is no kernel to plan for).
    H, D = 2, 32
    step, common, gen = make_step(random.randrange(1 << 30), "cpu", torch.float64, 3, [70, 0, 33], [9, 4, 6], 16, H, D,
                                  [4, 4, 2])
    layout = shared_layout(step, common, 19)
    for _ in range(4):
        qkv = layer_qkv(gen, 19, H, D, "cpu", torch.float64)
        got = hstu_attn_paged_func(**qkv, **step, **common, layout=layout)
        want = hstu_attn_paged_func(**qkv, **step, **common)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        ref = hstu_attn_paged_reference(**qkv, **step, **common)
        torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
    assert not layout.kernel_plans


def _hopper_wheel() -> bool:
    info = hstu_attn.compiled_kernels()["instance_archs"]
    return torch.cuda.get_device_capability() == (9, 0) and any("sm_90a" in a for a in info.values())


def _hopper_step(shape):
    """Skips without the Hopper paged forward; else (seed, step, common, gen, total_q, H, D) of SHAPES[shape] at a
    fresh seed (make_step's step and common arguments, bf16 on CUDA)."""
    if not _hopper_wheel():
        pytest.skip("the Hopper paged forward (compute capability 9.0 and an sm_90a wheel)")
    batch, cached, new, cand, H, D, ps = SHAPES[shape]
    seed = random.randrange(1 << 30)
    step, common, gen = make_step(seed, "cuda", torch.bfloat16, batch, cached, new, ps, H, D, cand)
    return seed, step, common, gen, sum(new), H, D


def _kernel_counts(prof):
    names = [e.name for e in prof.events()]
    return (sum("hstu_sm90_plan_kernel" in n for n in names), sum("hstu_validate_kernel" in n for n in names),
            sum("hstu_fwd_sm90_kernel" in n for n in names))


# (batch, cached, new, candidates, H, D, page size): few queries over long histories (the NVIDIA batch-1 shape: the
# list splits every query tile's KV range and the chunks sum together), and a larger jagged batch.
SHAPES = {
    "b1_long": (1, [3968], [384], [256], 4, 128, 64),
    "b3_mixed": (3, [2000, 0, 700], [300, 40, 129], [128, 40, 64], 2, 64, 32),
    "b2_d256": (2, [2600, 1500], [130, 256], [100, 200], 2, 256, 128),
}


@pytest.mark.gpu
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_one_plan_for_every_layer(shape):
    seed, step, common, gen, total_q, H, D = _hopper_step(shape)
    layers = [layer_qkv(gen, total_q, H, D, "cuda", torch.bfloat16) for _ in range(4)]
    separate = [hstu_attn_paged_func(**qkv, **step, **common, check_values=False) for qkv in layers]
    layout = shared_layout(step, common, total_q)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        shared = [hstu_attn_paged_func(**qkv, **step, **common, check_values=False, layout=layout) for qkv in layers]
        torch.cuda.synchronize()
    plans, validations, kernels = _kernel_counts(prof)
    assert kernels == 4 and validations == 1 and plans <= 1, (seed, plans, validations, kernels)
    assert len(layout.kernel_plans) == 1
    for l, (a, b) in enumerate(zip(shared, separate)):
        assert torch.isfinite(a).all(), f"seed {seed} layer {l}"
        assert torch.equal(a, b), f"seed {seed} layer {l}: the shared plan differs from a call's own"
        ref = hstu_attn_paged_reference(**{n: t.float() for n, t in layers[l].items()}, **dict(
            step, kv_cache=step["kv_cache"].float()), **common)
        low = hstu_attn_paged_reference(**layers[l], **step, **common, upcast=False)
        err, bound = (a.float() - ref).abs().max().item(), 2 * (low.float() - ref).abs().max().item() + 1e-3
        assert err <= bound, f"seed {seed} layer {l}: {err:.3e} > {bound:.3e}"
    # The plan again (the split counters ended at zero; outputs poisoned first): the same bits.
    again = [torch.full_like(s, float("nan")) for s in shared]
    for qkv, out in zip(layers, again):
        out.copy_(hstu_attn_paged_func(**qkv, **step, **common, check_values=False, layout=layout))
    for l, (a, b) in enumerate(zip(again, shared)):
        assert torch.equal(a, b), f"seed {seed} layer {l}: a second run over the plan differs"
    # Other num_targets (a new tensor, same values): a plan of its own (the planner and the validation run again),
    # which takes the key's entry in the layout (one entry per key), and the same output.
    (_, first_plan), = layout.kernel_plans.values()
    nt2 = common["num_targets"].clone()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out2 = hstu_attn_paged_func(**layers[0], **step, **dict(common, num_targets=nt2), check_values=False,
                                    layout=layout)
        torch.cuda.synchronize()
    plans, validations, kernels = _kernel_counts(prof)
    assert kernels == 1 and validations == 1 and plans <= 1, (seed, plans, validations, kernels)
    (args2, plan2), = layout.kernel_plans.values()
    assert plan2 is not first_plan and args2[2] is nt2
    assert torch.equal(out2, shared[0]), f"seed {seed}: a plan over a copy of num_targets differs"


@pytest.mark.gpu
@pytest.mark.parametrize("pdl", [False, True])
def test_violation_in_the_plan_poisons_every_layer(pdl):
    # pdl=True: the serving step's plan, one block that validates and plans (hstu/csrc/paged); False: the
    # validation kernel and the planner.
    with hstu_attn._ops.kernel_options(pdl=pdl):
        _violation_in_the_plan_poisons_every_layer()


def _violation_in_the_plan_poisons_every_layer():
    if not _hopper_wheel():
        pytest.skip("the Hopper paged forward (compute capability 9.0 and an sm_90a wheel)")
    try:
        hstu_attn.check_errors()
    except hstu_attn.DeviceInputError:
        pass
    batch, cached, new, cand, H, D, ps = SHAPES["b1_long"]
    step, common, gen = make_step(random.randrange(1 << 30), "cuda", torch.bfloat16, batch, cached, new, ps, H, D,
                                  cand)
    common["num_targets"] = torch.tensor([cached[0] + new[0] + 1], dtype=torch.int32, device="cuda")  # > Lk
    total_q = sum(new)
    # Every input on the device first: a host-to-device copy from pageable memory synchronizes the stream, and a
    # call after that would see the violation the first layer's plan recorded and raise (a call raises what an
    # earlier one recorded; here all three must run).
    layers = [layer_qkv(gen, total_q, H, D, "cuda", torch.bfloat16) for _ in range(3)]
    layout = shared_layout(step, common, total_q)
    # The same kernels once over a valid plan: their modules loaded and the allocator's blocks cached, so nothing
    # in the calls below waits for the device.
    ok = dict(common, num_targets=torch.tensor(cand, dtype=torch.int32, device="cuda"))
    warm = hstu_attn_paged_func(**layers[0], **step, **ok, check_values=False, layout=shared_layout(step, ok, total_q))
    torch.cuda.synchronize()
    assert torch.isfinite(warm).all()
    hstu_attn.check_errors()
    del warm
    # The stream busy (~0.5 s), so that no layer's call sees the record before all are queued.
    torch.cuda._sleep(1_000_000_000)
    asleep = torch.cuda.Event()
    asleep.record()
    outs = [hstu_attn_paged_func(**qkv, **step, **common, check_values=False, layout=layout) for qkv in layers]
    assert not asleep.query(), "the stream went idle before every layer was queued (the test's premise)"
    torch.cuda.synchronize()
    for l, o in enumerate(outs):
        assert torch.isnan(o).all(), f"layer {l}: expected every element NaN after the plan's violation"
    with pytest.raises(hstu_attn.DeviceInputError, match="num_targets"):
        hstu_attn.check_errors()


def _b1_list(tiles, heads, sms):
    """The work list the planner makes for SHAPES["b1_long"] (hstu_sm90_plan_kernel, hstu_fwd_sm90_launch.cuh):
    three query tiles of 128 rows over 32, 33 and 33 KV tiles of 128 keys (rows at key positions 3968-4095 see keys
    0-4095; the 256 targets see the 4096 history keys and themselves, the last tile past a gap of one tile). Cap C:
    the rule max(ceil(1.2 W H / SMs), 4) with W = sum(n + 1), or `tiles`, or ("wave") the smallest C from
    ceil(sum(n) H / SMs) up (steps of C / 8 + 1) whose chunks x H fit the SMs; grown by C / 2 + 1 while the partials
    (chunks of split units x H, 128 x 128 fp32 each) exceed 16 MB. Returns (items, together)."""
    n = [32, 33, 33]
    if tiles == 0:
        return len(n), int(len(n) * heads <= sms)

    def chunks(c):
        return sum(-(-x // c) if x > c else 1 for x in n)

    cap = max((sum(x + 1 for x in n) * heads * 120 + 100 * sms - 1) // (100 * sms), 4)
    if tiles == "wave":
        c = max(2, -(-sum(n) * heads // sms))
        while c <= max(n) and chunks(c) * heads > sms:
            c += c // 8 + 1
        cap = c if c <= max(n) else cap
    elif tiles:
        cap = tiles
    while cap < max(n) and sum(-(-x // cap) for x in n if x > cap) * heads > (16 << 20) // (128 * 128 * 4):
        cap += cap // 2 + 1
    items = chunks(cap)
    return items, int(items * heads <= sms)


@pytest.mark.gpu
def test_split_settings_b1():
    # kernel_options(fwd_split_tiles=...) reaches the planner through the plan op: the list read back from the plan
    # holds the predicted chunks, the output is right for every setting and repeats bitwise over the plan.
    seed, step, common, gen, total_q, H, D = _hopper_step("b1_long")
    qkv = layer_qkv(gen, total_q, H, D, "cuda", torch.bfloat16)
    ref = hstu_attn_paged_reference(**{n: t.float() for n, t in qkv.items()}, **dict(
        step, kv_cache=step["kv_cache"].float()), **common)
    low = hstu_attn_paged_reference(**qkv, **step, **common, upcast=False)
    bound = 2 * (low.float() - ref).abs().max().item() + 1e-3
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for tiles in (None, 0, "wave", 1, 2, 3, 8, 16):
        with hstu_attn._ops.kernel_options(fwd_split_tiles=tiles):
            layout = shared_layout(step, common, total_q)
            out = hstu_attn_paged_func(**qkv, **step, **common, check_values=False, layout=layout)
            again = torch.full_like(out, float("nan"))
            again.copy_(hstu_attn_paged_func(**qkv, **step, **common, check_values=False, layout=layout))
        (_, plan), = layout.kernel_plans.values()
        items, _, together = plan[:12].view(torch.int32).tolist()
        assert (items, together) == _b1_list(tiles, H, sms), (seed, tiles, items, together)
        err = (out.float() - ref).abs().max().item()
        assert err <= bound, f"seed {seed} fwd_split_tiles={tiles}: {err:.3e} > {bound:.3e}"
        assert torch.equal(out, again), f"seed {seed} fwd_split_tiles={tiles}: a second run over the plan differs"


# ---------------------------------------------------------------------------------------------------------------
# kernel_options(pdl=True): the paged forward as a programmatic dependent launch (hstu_fwd_sm90_kernel.cuh: its
# CTAs set up under the previous kernel and wait for it before their first global read). Same bits as without.


def test_pdl_option_leaves_the_cpu_path_alone():
    step, common, gen = make_step(5, "cpu", torch.float64, 2, [40, 7], [5, 3], 16, 2, 32, [2, 1])
    qkv = layer_qkv(gen, 8, 2, 32, "cpu", torch.float64)
    want = hstu_attn_paged_func(**qkv, **step, **common)
    with hstu_attn._ops.kernel_options(pdl=True):
        got = hstu_attn_paged_func(**qkv, **step, **common)
    assert torch.equal(got, want)


def _staged(qkv, pad=1 << 24):
    """q, k_new, v_new as views at the end of one large buffer that a single elementwise kernel writes (x * 1.0,
    exact; its last CTAs write them, ~15 us after it starts): the kernel right before the attention produces its
    inputs, as a layer's projection does, so an attention CTA that read them before its wait would read the NaN
    poison."""
    total_q, H, D = qkv["q"].shape
    body = torch.stack([qkv[n] for n in ("q", "k_new", "v_new")]).flatten()
    src = torch.cat([torch.randn(pad, device=body.device).to(body.dtype), body])
    big = torch.full_like(src, float("nan"))
    views = big[pad:].view(3, total_q, H, D)
    return src, big, dict(q=views[0], k_new=views[1], v_new=views[2])


def _produce_and_attend(staged, step, common, layout):
    src, big, views = staged
    big.fill_(float("nan"))
    torch.mul(src, 1.0, out=big)  # the attention's producer: a kernel right before it on the stream (not a memcpy)
    return hstu_attn_paged_func(**views, **step, **common, check_values=False, layout=layout)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_pdl_gives_the_same_bits(shape):
    # Lone calls (validation and planner before the kernel), a shared plan (the kernel right behind its
    # producer), the grid order (no work list): the PDL launch's output equals the plain launch's bit for bit,
    # over several layers, and no input is read before the producer finished (else NaN).
    seed, step, common, gen, total_q, H, D = _hopper_step(shape)
    layers = [_staged(layer_qkv(gen, total_q, H, D, "cuda", torch.bfloat16)) for _ in range(3)]
    for mode in ("lone", "shared", "grid"):
        outs = {}
        for pdl in (False, True):
            with hstu_attn._ops.kernel_options(pdl=pdl, fwd_work_list=mode != "grid"):
                layout = None if mode == "lone" else shared_layout(step, common, total_q)
                outs[pdl] = [_produce_and_attend(st, step, common, layout) for st in layers]
        torch.cuda.synchronize()
        for l, (a, b) in enumerate(zip(outs[True], outs[False])):
            msg = f"seed {seed} {shape} {mode} layer {l}"
            assert torch.isfinite(b).all(), msg
            assert torch.equal(a, b), f"{msg}: the PDL launch differs from the plain one"


@pytest.mark.gpu
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_step_plan_one_block_under_pdl(shape):
    # Under pdl=True a step's plan is one block that validates and plans (hstu_paged_step_plan_kernel) instead of
    # the validation kernel and the planner: the same status word and sanitized vectors (the plan's last bytes,
    # hstu_validate.h's layout) and, over the plan, the same output bits as the plain launches' two kernels.
    seed, step, common, gen, total_q, H, D = _hopper_step(shape)
    qkv = layer_qkv(gen, total_q, H, D, "cuda", torch.bfloat16)
    outs, plans, counts = {}, {}, {}
    for name, pdl in (("plain", False), ("block", True)):
        layout = shared_layout(step, common, total_q)
        with hstu_attn._ops.kernel_options(pdl=pdl), torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            outs[name] = hstu_attn_paged_func(**qkv, **step, **common, check_values=False, layout=layout)
            torch.cuda.synchronize()
        names = [e.name for e in prof.events()]
        counts[name] = (sum("hstu_paged_step_plan_kernel" in n for n in names),) + _kernel_counts(prof)
        (_, plans[name]), = layout.kernel_plans.values()
    # (fused, planners, validations, attention kernels); a shape without a work list: the validation alone
    listed = counts["plain"][1] == 1
    two = (0, int(listed), 1, 1)
    assert counts["plain"] == two, (seed, counts)
    assert counts["block"] == ((1, 0, 0, 1) if listed else (0, 0, 1, 1)), (seed, counts)
    B = step["cu_seqlens_q"].numel() - 1
    r4 = lambda n: (n + 3) // 4 * 4  # noqa: E731
    given = [common[n] for n in ("num_targets", "num_contexts") if common.get(n) is not None]
    words = 4 + 2 * r4(B + 1) + r4(B) * len(given)

    def written(plan):  # the status word and the sanitized vectors (hstu_validate.h's layout; padding unwritten)
        w = plan[-4 * words:].view(torch.int32)
        parts, off = [w[:1], w[4:5 + B], w[4 + r4(B + 1):5 + r4(B + 1) + B]], 4 + 2 * r4(B + 1)
        for _ in given:
            parts.append(w[off:off + B])
            off += r4(B)
        return torch.cat(parts).tolist()

    want = written(plans["plain"])
    assert want[:B + 2] == [0] + step["cu_seqlens_q"].tolist(), (seed, want)
    assert want[2 * B + 3:] == sum((g.tolist() for g in given), []), (seed, want)
    assert torch.isfinite(outs["plain"]).all(), f"seed {seed}"
    for name in ("block",):
        assert plans[name].numel() == plans["plain"].numel(), name
        assert written(plans[name]) == want, f"seed {seed} {name}: the validation words differ"
        assert torch.equal(outs[name], outs["plain"]), f"seed {seed} {name}: the output differs from the plain one"


@pytest.mark.gpu
def test_pdl_in_a_cuda_graph():
    # The serving step's shape (NVIDIA batch 1) captured with pdl=True: each layer's producer, then its attention
    # (the first layer's plan inside the graph too). Replays over fresh inputs equal eager plain launches bitwise.
    seed, step, common, gen, total_q, H, D = _hopper_step("b1_long")
    layers = [_staged(layer_qkv(gen, total_q, H, D, "cuda", torch.bfloat16)) for _ in range(4)]
    with hstu_attn._ops.kernel_options(pdl=True):
        warm = [_produce_and_attend(st, step, common, shared_layout(step, common, total_q)) for st in layers[:1]]
        torch.cuda.synchronize()
        del warm
        layout = shared_layout(step, common, total_q)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = [_produce_and_attend(st, step, common, layout) for st in layers]
    for rep in range(2):
        for src, _, _ in layers:  # fresh inputs in place
            pad = src.numel() - 3 * total_q * H * D
            src[pad:].copy_(torch.randn(3 * total_q * H * D, generator=gen).to(device="cuda", dtype=src.dtype))
        for o in outs:
            o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        want = [_produce_and_attend(st, step, common, shared_layout(step, common, total_q)) for st in layers]
        for l, (a, b) in enumerate(zip(outs, want)):
            msg = f"seed {seed} replay {rep} layer {l}"
            assert torch.isfinite(b).all(), msg
            assert torch.equal(a, b), f"{msg}: the captured PDL step differs from eager plain launches"


@pytest.mark.gpu
def test_pdl_behind_the_append_in_a_serving_run():
    # The serving path: per layer the paged forward, then the append of its new K/V (under pdl=True both are
    # programmatic dependent launches: the append behind the forward, the next layer's forward behind the append,
    # whose kernel signals right after its own wait). Two managers, the same inputs, pdl off and on: every layer's
    # output and the pools end bitwise equal.
    if not _hopper_wheel():
        pytest.skip("the Hopper paged forward (compute capability 9.0 and an sm_90a wheel)")
    seed = random.randrange(1 << 30)
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    L, H, D = 3, 2, 64
    # (KVCacheManager(pdl=) is the serving step's switch, on by default: off for the plain run)
    caches = [hstu_attn.KVCacheManager(L, H, D, num_pages=64, page_size=64, max_users=4, max_pages_per_user=12,
                                       dtype=torch.bfloat16, device="cuda", pdl=pdl) for pdl in (False, True)]
    assert not caches[0].pdl and caches[1].pdl
    users = torch.tensor([3, 1], device="cuda")
    outs = {False: [], True: []}
    for it in range(3):
        hist = [rng.randint(1, 200) for _ in range(2)]
        cand = [rng.randint(1, 40) for _ in range(2)]
        new = [h + c for h, c in zip(hist, cand)]
        cu = torch.tensor([0, new[0], new[0] + new[1]], dtype=torch.int32, device="cuda")
        nt = torch.tensor(cand, dtype=torch.int32, device="cuda")
        qkv = [[torch.randn(sum(new), H, D, generator=gen).to("cuda", torch.bfloat16) for _ in range(3)]
               for _ in range(L)]
        for pdl, cache in zip((False, True), caches):
            step = cache.begin_step(users, cu, torch.tensor(hist, dtype=torch.int32, device="cuda"), sum(new),
                                    max(new))
            with hstu_attn._ops.kernel_options(pdl=pdl):
                for l in range(L):
                    outs[pdl].append(hstu_attn.cached_hstu_attention(cache, step, l, *qkv[l], max(new),
                                                                     num_targets=nt))
    torch.cuda.synchronize()
    for c in caches:
        c.check()
    for i, (a, b) in enumerate(zip(outs[True], outs[False])):
        assert torch.isfinite(b).all(), f"seed {seed} call {i}"
        assert torch.equal(a, b), f"seed {seed} call {i}: pdl=True differs behind the append"
    assert torch.equal(caches[0].pool, caches[1].pool), f"seed {seed}: the pools differ"


@pytest.mark.gpu
@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("variant", ["default", "plan_ready", "split_arrive", "early", "pre_wait_off"])
def test_step_variants_bitwise_plain(variant, graph):
    # The serving step's switches: KVCacheManager._plan_ready (begin_step publishes the key offsets early and the
    # step plan's block spins on its ready word instead of waiting for begin_step's end, then exits on begin_step's
    # step tensors; with it _begin_early, the word's early form), ._split_arrive (the split sum's quick arrival) and
    # ._pre_wait (the later layers' work items and lengths read before their wait); "default": as constructed (all
    # on); the others one at a time (early with the ready word; pre_wait_off: the default without _pre_wait).
    # Against a manager without them (same inputs, plain launches): every layer's output of three steps and the
    # pools bitwise equal, eagerly and with the step captured in a CUDA graph (the appends beside the attention on
    # the side stream, each layer's q / k / v written by a kernel right before its call); long cached histories
    # (split units, summed together).
    if not _hopper_wheel():
        pytest.skip("the Hopper paged forward (compute capability 9.0 and an sm_90a wheel)")
    seed = random.randrange(1 << 30)
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    L, H, D, B = 4, 2, 128, 2
    kw = dict(num_pages=160, page_size=64, max_users=4, max_pages_per_user=70, dtype=torch.bfloat16, device="cuda")
    plain = hstu_attn.KVCacheManager(L, H, D, pdl=False, **kw)
    pre = hstu_attn.KVCacheManager(L, H, D, **kw)
    plain._plan_ready, plain._split_arrive = False, False
    # (_plan_ready, _split_arrive, _begin_early)
    settings = {"plan_ready": (True, False, False), "split_arrive": (False, True, False), "early": (True, False, True)}
    if variant in settings:
        pre._plan_ready, pre._split_arrive, pre._begin_early = settings[variant]
    else:
        assert pre._plan_ready and pre._split_arrive and pre._begin_early and pre._pre_wait
        pre._pre_wait = variant == "default"
    assert pre.pdl
    users = torch.tensor([5, 2], device="cuda")
    for it in range(3):
        hist = [rng.randint(1500, 2000) if it == 0 else rng.randint(1, 150) for _ in range(B)]
        cand = [rng.randint(1, 100) for _ in range(B)]
        new = [h + c for h, c in zip(hist, cand)]
        tq, mq = sum(new), max(new)
        cu = torch.tensor([0, new[0], tq], dtype=torch.int32, device="cuda")
        nt = torch.tensor(cand, dtype=torch.int32, device="cuda")
        na = torch.tensor(hist, dtype=torch.int32, device="cuda")
        base = torch.randn(L, 3, tq, H, D, generator=gen).to("cuda", torch.bfloat16)
        outs = {}
        for name, cache in (("plain", plain), ("pre", pre)):
            res = [torch.empty(tq, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(L)]

            def step():
                st = cache.begin_step(users, cu, na, tq, mq)
                for l in range(L):
                    q, k, v = (base[l, i] * 1.0 for i in range(3))  # (written right before the call)
                    res[l].copy_(hstu_attn.cached_hstu_attention(cache, st, l, q, k, v, mq, num_targets=nt))

            if graph and name == "pre":
                saved = {n: getattr(cache, n).clone() for n in ("slot_user", "slot_valid", "slot_len", "slot_pages",
                                                                "last_used", "free_pages", "free_count", "clock",
                                                                "pool")}
                g = torch.cuda.CUDAGraph()
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    step()  # (warm-up, then the state restored)
                torch.cuda.current_stream().wait_stream(side)
                for n, t in saved.items():
                    getattr(cache, n).copy_(t)
                with torch.cuda.graph(g):
                    step()
                for n, t in saved.items():
                    getattr(cache, n).copy_(t)
                for r in res:
                    r.fill_(float("nan"))
                g.replay()
            else:
                step()
            outs[name] = res
        torch.cuda.synchronize()
        for l in range(L):
            a, b = outs["pre"][l], outs["plain"][l]
            assert torch.isfinite(b).all(), f"seed {seed} step {it} layer {l}"
            assert torch.equal(a, b), f"seed {seed} step {it} layer {l}: {variant} changed the output"
        assert torch.equal(plain.pool, pre.pool), f"seed {seed} step {it}: the pools differ"
    plain.check()
    pre.check()


@pytest.mark.gpu
def test_pdl_validation_waits_for_its_producer():
    # Under pdl=True the device validation of a step's plan is a programmatic dependent launch too (hstu_validate.cu):
    # its block starts under the kernel before it and must wait for it before reading the vectors. Here that kernel
    # writes cu_seqlens_q and num_targets last (views at the end of a large buffer, ~30 us of one elementwise
    # kernel) over a poison the validation rejects (cu_seqlens_q[0] = -7), and nothing runs between it and the
    # validation (the layout made before it from equal tensors, a fresh one per call so each call plans): a
    # validation that read before its wait would flag the call (check_errors raises) and NaN the output. Equal
    # bitwise to plain launches, finite.
    seed, step, common, gen, total_q, H, D = _hopper_step("b1_long")
    qkv = layer_qkv(gen, total_q, H, D, "cuda", torch.bfloat16)
    cu, nt = step["cu_seqlens_q"], common["num_targets"]
    pad = 1 << 24
    src = torch.cat([torch.randint(0, 100, (pad,), dtype=torch.int32, device="cuda"), cu, nt])
    big = torch.empty_like(src)
    args = dict(step, cu_seqlens_q=big[pad:pad + cu.numel()])
    common_v = dict(common, num_targets=big[pad + cu.numel():])
    outs = {}
    for pdl in (False, True):
        with hstu_attn._ops.kernel_options(pdl=pdl):
            outs[pdl] = []
            for _ in range(3):
                layout = shared_layout(step, common, total_q)  # (from cu itself, before the producer)
                big.fill_(-7)
                torch.add(src, 0, out=big)  # the vectors' producer, right before the plan's validation
                outs[pdl].append(hstu_attn_paged_func(**qkv, **args, **common_v, check_values=False, layout=layout))
    torch.cuda.synchronize()
    hstu_attn.check_errors()  # (a flagged validation would raise here)
    for i, (a, b) in enumerate(zip(outs[True], outs[False])):
        msg = f"seed {seed} call {i}"
        assert torch.isfinite(b).all() and torch.isfinite(a).all(), msg
        assert torch.equal(a, b), f"{msg}: the PDL validation's call differs from the plain one"


@pytest.mark.gpu
@pytest.mark.parametrize("tiles", [16, 8, 4])
def test_split_together_bitwise_alone(tiles):
    # The chunks' partials summed together (every chunk adds its share of the tile over the k partials,
    # hstu_fwd_sm90_split.cuh fwd_split_sum_together) give the bits of the last chunk summing alone: both add in
    # chunk order from 0.0f. Heads are independent, so the b1 shape at H = 4 (few CTAs: together) is compared with
    # its first 4 heads inside a larger H whose CTAs overflow the SMs (alone), at the same chunks (caps 16 / 8 / 4:
    # k = 2-3, 4-5, 8-9, the last the rule's batch-1 list).
    if not _hopper_wheel():
        pytest.skip("the Hopper paged forward (compute capability 9.0 and an sm_90a wheel)")
    batch, cached, new, cand, _, D, ps = SHAPES["b1_long"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    items, together = _b1_list(tiles, 4, sms)
    if not together:
        pytest.skip(f"{items} items x 4 heads exceed the {sms} SMs: no sum together to compare")
    big = sms // items + 1  # items x big > SMs: alone
    assert _b1_list(tiles, big, sms) == (items, 0), (tiles, big, sms)
    seed = random.randrange(1 << 30)
    step, common, gen = make_step(seed, "cuda", torch.bfloat16, batch, cached, new, ps, big, D, cand)
    total_q = sum(new)
    qkv = layer_qkv(gen, total_q, big, D, "cuda", torch.bfloat16)
    small_step = dict(step, kv_cache=step["kv_cache"][:, :, :, :4].contiguous())
    small_qkv = {n: t[:, :4].contiguous() for n, t in qkv.items()}
    outs, flags = [], []
    for s, x in ((step, qkv), (small_step, small_qkv)):
        with hstu_attn._ops.kernel_options(fwd_split_tiles=tiles):
            layout = shared_layout(s, common, total_q)
            out = hstu_attn_paged_func(**x, **s, **common, check_values=False, layout=layout)
        (_, plan), = layout.kernel_plans.values()
        n, _, together = plan[:12].view(torch.int32).tolist()
        flags.append((n, together))
        outs.append(out[:, :4])
    assert flags == [(items, 0), (items, 1)], (seed, tiles, flags)
    assert torch.isfinite(outs[1]).all(), f"seed {seed} tiles {tiles}"
    assert torch.equal(outs[0], outs[1]), f"seed {seed} tiles {tiles}: the chunks summing together differ from alone"


@pytest.mark.gpu
@pytest.mark.parametrize("quick", [False, True])
def test_split_decided_alone_bitwise_together(quick):
    # A unit whose chunks were not all running when the first of them finished sums alone (hstu_fwd_sm90_split.cuh:
    # the last to arrive sums every partial). Forced here by raising the started count of every split unit in the
    # plan's counters (no chunk then sees all k started): the same bits as the sum together, the trace's mode word
    # says which path ran (2 together; alone: 1 the summing chunk, 0 the others), and the counters end at zero (the
    # next launch sums together). quick: the quick arrival (KVCacheManager._split_arrive's path), the same bits.
    seed, step, common, gen, total_q, H, D = _hopper_step("b1_long")
    qkv = layer_qkv(gen, total_q, H, D, "cuda", torch.bfloat16)

    def run():
        with _paged._split_arrive_on() if quick else contextlib.nullcontext():
            out = hstu_attn_paged_func(**qkv, **step, **common, check_values=False, layout=layout)
        tr = torch.ops.hstu_attn.paged_fwd_trace(qkv["q"]).cpu()
        work = tr[:, 10] > 0
        return out, ((tr[work, 12] >> 62) & 3).tolist()

    with hstu_attn._ops.kernel_options(fwd_trace=True):
        layout = shared_layout(step, common, total_q)
        together, modes = run()
        (_, plan), = layout.kernel_plans.values()
        n, _, tog = plan[:12].view(torch.int32).tolist()
        assert tog == 1 and set(modes) == {2}, (seed, tog, sorted(set(modes)))
        # The list's layout (hstu_sm90_sched_layout): items at byte 16 (two int4 each), counters after capacity x H
        # item slots, one int32 per partial; a split unit's two words per head at its first part and the next (the
        # planner zeroes those; the rest of the region is not initialized).
        items = plan[16: 16 + 32 * n].view(torch.int32).view(n, 8).cpu()
        units = min(-(-total_q // 128) + 1, -(-common["max_seqlen_q"] // 128))
        max_parts = (16 << 20) // (128 * D * 4)
        off = 16 + 32 * (units + max_parts // H) * H
        counters = plan[off: off + 4 * max_parts].view(torch.int32)
        firsts = [first for split, chunk, _, first in items[:, 4:].tolist() if split >= 0 and chunk == 0]
        words = torch.tensor([w * H + h for f in firsts for w in (f, f + 1) for h in range(H)], device=plan.device)
        assert firsts and int(counters[words].abs().sum()) == 0, (seed, firsts)
        for first in firsts:
            counters[first * H: first * H + H] += 256
        alone, modes = run()
        assert set(modes) <= {0, 1} and modes.count(1) == len(firsts) * H, (seed, firsts, modes)
        assert int(counters[words].abs().sum()) == 0, f"seed {seed}: the counters did not end at zero"
        again, modes = run()
        assert set(modes) == {2}, (seed, sorted(set(modes)))
    assert torch.isfinite(together).all(), f"seed {seed}"
    assert torch.equal(alone, together), f"seed {seed}: the sum alone after the decision differs from together"
    assert torch.equal(again, together), f"seed {seed}"


@pytest.mark.gpu
def test_trace_stamps_b1():
    # kernel_options(fwd_trace=True) (diagnostics): the same bits as without; every listed CTA stamps its phases in
    # order (start, item, barriers, Q / first K / V issued, all issued; consumers: start, Q landed, K landed, first
    # P, main loop done, end), the CTAs past the list only their start, item and end.
    seed, step, common, gen, total_q, H, D = _hopper_step("b1_long")
    qkv = layer_qkv(gen, total_q, H, D, "cuda", torch.bfloat16)
    layout = shared_layout(step, common, total_q)
    plain = hstu_attn_paged_func(**qkv, **step, **common, check_values=False, layout=layout)
    with hstu_attn._ops.kernel_options(fwd_trace=True):
        layout_t = shared_layout(step, common, total_q)
        traced = hstu_attn_paged_func(**qkv, **step, **common, check_values=False, layout=layout_t)
        tr = torch.ops.hstu_attn.paged_fwd_trace(qkv["q"]).cpu()
    assert torch.equal(traced, plain), f"seed {seed}: the traced launch differs"
    (_, plan), = layout_t.kernel_plans.values()
    items = plan[:4].view(torch.int32).item()
    ran = tr[:, 0] > 0
    work = tr[:, 10] > 0
    assert int(work.sum()) == items * H, (seed, int(work.sum()), items)
    assert bool((work <= ran).all()) and bool((tr[:, 14][ran] > 0).all())
    # (8 and 9 only where warpgroup 0 has a tile of its own in the chunk)
    for a, b in ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (1, 6), (6, 7), (7, 10), (7, 8), (8, 9), (9, 10), (10, 14)):
        rows = work & (tr[:, a] > 0) & (tr[:, b] > 0)
        assert bool((tr[rows, a] <= tr[rows, b]).all()), f"seed {seed}: stamp {a} after stamp {b}"
    for a in (1, 2, 3, 4, 5, 6, 7):
        assert bool((tr[work, a] > 0).all()), f"seed {seed}: stamp {a} missing"
