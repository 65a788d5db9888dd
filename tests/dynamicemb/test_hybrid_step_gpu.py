"""The training step over hybrid tables (each bucket's rows beyond its HBM slots in pinned host memory) moves the
step's host rows through HBM scratch rows in host-address order (lookup ops, kStepHostRows;
docs/dynamicemb_storage.md "hybrid"). Every path of the fused kernels that reads or writes a row (pooled / sequence
forward, segmented backward, atomic scatter with per-unique sums or straight into the rows, per-sample weight
gradients, fp16 rows, scalar rows, two steps in flight) must give bit-identical outputs, rows and optimizer state
to all-HBM tables, on inputs where the all-HBM step is itself bitwise repeatable (see NOCUT); where it is not
(segments of hot, weighted ids cut by warp boundaries) within a tolerance relative to all-HBM's own run-to-run
difference. Skips without a GPU."""

import os
import sys

import pytest
import torch

from dynamicemb import BatchedDynamicEmbeddingTables, DynamicEmbInitializer, DynamicEmbTableOptions
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adagrad, Adam

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import assert_same, rows  # noqa: E402  (rows: keys, values, scores by key, on the CPU)

pytestmark = [pytest.mark.skipif(not (torch.cuda.is_available() and load_library()), reason="needs a GPU and _C.so"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]

CAP, BC, B = 4096, 128, 48
FEATURES = [0, 1, 1]  # three features over two tables


def make(storage, opt, dim, dtype, pooling, hbm_rows):
    kw = {}
    if storage == "hybrid":
        row = opt.row_width(dim) * torch.empty(0, dtype=dtype).element_size()
        kw = dict(storage="hybrid", hbm_budget_bytes=hbm_rows * row)
    opts = [DynamicEmbTableOptions(dim=dim, dtype=dtype, max_capacity=CAP, bucket_capacity=BC, score_policy=p,
                                   initializer=DynamicEmbInitializer("uniform", seed=5 + i), **kw)
            for i, p in enumerate(("lru", "lfu"))]
    m = BatchedDynamicEmbeddingTables(opts, FEATURES, pooling=pooling, optimizer=opt, device="cuda")
    assert m.use_kernels
    return m


def batch(gen, unique, repeat=2):
    """ids of len(FEATURES) * B bags (0..3 ids each), power law over 3000 ids plus new ids each step; `unique`: no
    id twice in a table's features (for the atomics straight into the rows, whose order is free); else an id occurs
    at most `repeat` times in its table's features (the later ones become new ids; None: no cap)."""
    lengths = torch.randint(0, 4, (len(FEATURES) * B,), generator=gen)
    n = int(lengths.sum())
    if unique:
        ids = torch.randperm(20000, generator=gen)[:n]
    else:
        u = torch.rand(n, generator=gen)
        ids = (3000 * u ** 3).long()  # skewed: hot ids repeat within a step
        ids[::7] = torch.randint(3000, 1 << 40, (ids[::7].numel(),), generator=gen)
        if repeat is not None:
            table = torch.tensor(FEATURES).repeat_interleave(B).repeat_interleave(lengths).tolist()
            seen = {}
            for i, (t, k) in enumerate(zip(table, ids.tolist())):
                seen[t, k] = seen.get((t, k), 0) + 1
                if seen[t, k] > repeat:
                    ids[i] = (1 << 41) + i  # new in this step (and every step: its row is re-created or kept)
    off = torch.zeros(lengths.numel() + 1, dtype=torch.int64)
    off[1:] = torch.cumsum(lengths, 0)
    return ids.cuda(), off.cuda()


def poison():
    """Fills free blocks of the caching allocator (its small-block pool and a large block) with NaN, so that the
    step's outputs and the ops' scratch start as garbage."""
    xs = [torch.full((n,), float("nan"), device="cuda") for n in [1 << 17] * 32 + [1 << 24]]
    del xs


# Bitwise equality needs an all-HBM reference that is itself bitwise repeatable; the code decides which inputs give
# one. Paths whose atomics add several terms into one row (plain SGD straight into the rows, the atomic scatter)
# run on ids that occur once per step. The segmented backward (segment_kernels.cu) sums each unique's CSR segment
# in registers in id order (stable sort), which is repeatable, EXCEPT a segment cut by a warp boundary (every
# backward_chunk entries): its pieces meet in the unique's fp32 sum (red.global.add, arrival order), and WHERE the
# cuts fall moved between runs, because the CSR is in unique order and the dedup numbered uniques by which
# occurrence of a repeated id won its set slot (an atomicCAS race). Since branch detdedup the dedup numbers them by
# first occurrence: the cuts are fixed, and a segment of two pieces (at most backward_chunk + 1 entries, scaled or
# not) is repeatable (test_repeatable_step_gpu.py); what follows held before it. A cut changes the bits even
# for two entries when they carry a scale (per-sample weight, mean pooling): uncut, `acc += g * s` is one FMA per
# entry (fma(g1, s1, g0 * s0), one rounding); cut, the pieces are rounded products added after. Two unscaled
# entries are the same either way (0 + a + b in any order), 3+ are not ((a + b) + c vs a + (b + c)). Hence the
# bitwise cases take NOCUT (backward_chunk >= the step's entries: one warp, no cut at all; any repeats, weights,
# mean), or a small chunk only with at most two occurrences per id, no per-entry scale and no direct SGD (whose cut
# pieces add straight into the row, row + a + b in arrival order). test_hybrid_step_repeated runs both settings with
# the all-HBM vs all-HBM control; cut segments of hot, weighted ids get a noise-relative tolerance
# (test_hybrid_step_cut_segments).
NOCUT = 1 << 20  # the op's largest seg_chunk; far above a step's entries here (~220)
CASES = {  # name: (pooling, optimizer, dim, dtype, per-sample weights, unique ids, backward_chunk)
    # chunk 128 with repeats (ids capped at two per table and step), unscaled entries: cut pieces, still repeatable
    "none-adam-32": ("none", lambda: Adam(lr=0.01), 32, torch.float32, False, False, 128),
    "sum-sgd-16": ("sum", lambda: SGD(lr=0.1), 16, torch.float32, False, True, 128),
    "sum-adam-16-psw": ("sum", lambda: Adam(lr=0.01), 16, torch.float32, True, False, NOCUT),
    "mean-adagrad-6-fp16": ("mean", lambda: Adagrad(lr=0.05), 6, torch.float16, False, False, NOCUT),
    "sum-adam-136-scatter": ("sum", lambda: Adam(lr=0.01), 136, torch.float32, False, True, 128),
    "none-adagrad-12-scatter": ("none", lambda: Adagrad(lr=0.05), 12, torch.float32, False, True, 0),
    "sum-sgd-136-direct": ("sum", lambda: SGD(lr=0.1), 136, torch.float32, False, True, 128),
    "none-sgd-7-bf16": ("none", lambda: SGD(lr=0.1, weight_decay=0.01), 7, torch.bfloat16, False, False, 128),
}


@pytest.mark.parametrize("order", ["step", "forward"])
# 256 HBM rows: 8 of each bucket's 128 slots (split buckets fill their HBM slots first: with more, a bucket of
# these tables would rarely overflow into host slots)
@pytest.mark.parametrize("hbm_rows", [0, 256], ids=["host", "split"])
@pytest.mark.parametrize("case", list(CASES))
def test_hybrid_step_equals_hbm(case, hbm_rows, order):
    pooling, opt, dim, dtype, with_psw, unique, chunk = CASES[case]
    ref = make("hbm", opt(), dim, dtype, pooling, hbm_rows)
    m = make("hybrid", opt(), dim, dtype, pooling, hbm_rows)
    m.host_rows_order = order
    assert all(t.values_host is not None and t.hbm_rows == hbm_rows for t in m.tables)
    for x in (ref, m):
        x.backward_chunk = chunk
    gen = torch.Generator().manual_seed(sum(case.encode()) + hbm_rows)
    for it in range(6):
        ids, off = batch(gen, unique)
        psw = torch.rand(ids.numel(), generator=gen).cuda().requires_grad_() if with_psw else None
        outs, grads = [], []
        for x in (ref, m):
            poison()
            p = None if psw is None else psw.detach().clone().requires_grad_()
            o = x(ids, off, per_sample_weights=p)
            w = torch.randn(o.shape, generator=torch.Generator().manual_seed(it)).cuda()
            (o.float() * w).sum().backward()
            outs.append(o)
            grads.append(None if p is None else p.grad)
        assert torch.equal(outs[0], outs[1]), (case, it)
        if with_psw:
            assert torch.equal(grads[0], grads[1]), (case, it)
    assert_same(ref, m)
    t0 = m.tables[0]
    assert int(t0.host_slots(t0.find_slots(rows(t0)[0].cuda()).slots).sum()) > 0  # host rows trained
    fwd, bwd = m._host_step_flags()  # the ops were asked to stage: the forward always, the backward for "step"
    assert fwd == 1024 and ((bwd >> 32) > 0) == (order == "step") and ((bwd & 1024) > 0) == (order == "step")


@pytest.mark.parametrize("opt,order", [("adam", "forward"), ("adam", "step"), ("sgd", "forward"), ("sgd", "step")])
def test_hybrid_two_steps_in_flight(opt, order):
    """Two forwards, then their backwards (ids shared between the steps): the second backward updates the rows
    the first one wrote (with "step" the backward copies its host rows in after the first wrote them back), as on
    all-HBM."""
    ref = make("hbm", make_opt(opt), 16, torch.float32, "sum", 256)
    m = make("hybrid", make_opt(opt), 16, torch.float32, "sum", 256)
    m.host_rows_order = order
    gen = torch.Generator().manual_seed(3)
    for it in range(4):
        b1, b2 = batch(gen, False), batch(gen, False)
        res = []
        for x in (ref, m):
            poison()
            o1 = x(*b1)
            o2 = x(*b2)
            w1 = torch.randn(o1.shape, generator=torch.Generator().manual_seed(2 * it)).cuda()
            w2 = torch.randn(o2.shape, generator=torch.Generator().manual_seed(2 * it + 1)).cuda()
            (o1 * w1).sum().backward()
            (o2 * w2).sum().backward()
            res.append((o1, o2))
        assert torch.equal(res[0][0], res[1][0]) and torch.equal(res[0][1], res[1][1]), it
    assert_same(ref, m)
    # eval reads the trained rows (find, no insert)
    ref.eval(), m.eval()
    ids, off = batch(gen, False)
    assert torch.equal(ref(ids, off), m(ids, off))


# test_hybrid_step_repeated's settings: (backward_chunk, repeat cap per id / table / step, per-sample weights);
# both bitwise repeatable (see NOCUT above). "cut": the test_hybrid_step_cut_segments inputs (not repeatable).
SETTINGS = {"nocut": (NOCUT, None, True), "cut2": (32, 2, False), "cut": (32, None, True)}


def make_opt(opt):
    return Adam(lr=0.01) if opt == "adam" else SGD(lr=0.1, weight_decay=0.01)  # SGD with decay: not direct


def round_modules(kinds, opt, rnd, chunk):
    """Fresh modules for round rnd: kinds "hbm" or a hybrid host_rows_order, hbm_rows 0 / 128 / 256 by round (0 / 4 /
    8 HBM slots per bucket)."""
    hbm_rows = (0, 128, 256)[rnd % 3]
    mods = []
    for k in kinds:
        x = make("hbm" if k == "hbm" else "hybrid", make_opt(opt), 16, torch.float32, "sum", hbm_rows)
        if k != "hbm":
            x.host_rows_order = k
        x.backward_chunk = chunk
        mods.append(x)
    return mods, hbm_rows


def round_inputs(rnd, repeat, with_psw):
    """Two steps (ids, offsets, per-sample weights or None, output weights), then two batches for two steps in
    flight with their output weights; seeded by rnd."""
    gen = torch.Generator().manual_seed(7919 * rnd + 11)
    steps = []
    for _ in range(2):
        ids, off = batch(gen, False, repeat)
        psw = torch.rand(ids.numel(), generator=gen).cuda() if with_psw else None
        steps.append((ids, off, psw, torch.randn(B, 16 * len(FEATURES), generator=gen).cuda()))  # (B, 3 x 16)
    flight = [batch(gen, False, repeat) for _ in range(2)]
    return steps, flight, [torch.randn(B, 16 * len(FEATURES), generator=gen).cuda() for _ in range(2)]


def run_round(x, inputs):
    """The round on module x: [(what, tensor)]: each step's outputs and per-sample-weight gradients, the outputs
    of two steps in flight, then every table's keys, rows ([embedding | optimizer state]) and scores by key."""
    steps, flight, fw = inputs
    res = []
    for it, (ids, off, psw, w) in enumerate(steps):
        poison()
        p = None if psw is None else psw.clone().requires_grad_()
        o = x(ids, off, per_sample_weights=p)
        (o * w).sum().backward()
        res.append((f"step {it}: outputs", o.detach()))
        if p is not None:
            res.append((f"step {it}: per-sample weight gradients", p.grad))
    poison()
    o1, o2 = x(*flight[0]), x(*flight[1])
    (o1 * fw[0]).sum().backward()
    (o2 * fw[1]).sum().backward()
    res += [("two steps in flight: outputs", torch.cat([o1.detach(), o2.detach()]))]
    for t, tab in enumerate(x.tables):
        k, v, s = rows(tab)
        res += [(f"table {t}: keys", k), (f"table {t}: rows after the round", v), (f"table {t}: scores", s)]
    return res


def bits(x):
    return x.view(torch.uint8) if x.is_floating_point() else x


def one_round(order, opt, rnd, setting="nocut"):
    """One round of the repeated comparison on fresh modules and fresh ids (seeded by rnd). order "hbm": all-HBM
    against all-HBM (the control), else hybrid tables with that host_rows_order. Returns None when everything is
    bitwise equal, else what differed first."""
    chunk, repeat, with_psw = SETTINGS[setting]
    (ref, m), hbm_rows = round_modules(["hbm", order], opt, rnd, chunk)
    inputs = round_inputs(rnd, repeat, with_psw)
    ra, rb = run_round(ref, inputs), run_round(m, inputs)
    assert ref.sizes() == m.sizes()
    for (what, a), (_, b) in zip(ra, rb):
        if a.shape != b.shape or not torch.equal(bits(a), bits(b)):
            return what
    if order != "hbm" and hbm_rows < CAP:  # the hybrid tables really trained host rows
        t1 = m.tables[1]
        assert int(t1.host_slots(t1.find_slots(rows(t1)[0].cuda()).slots).sum()) > 0
    return None


@pytest.mark.parametrize("order,opt", [("hbm", "adam"), ("hbm", "sgd"), ("forward", "adam"), ("step", "adam"),
                                       ("forward", "sgd"), ("step", "sgd")])
@pytest.mark.parametrize("setting", ["nocut", "cut2"])
def test_hybrid_step_repeated(setting, order, opt):
    """20 rounds with fresh ids and fresh modules (hbm_rows 0 / 128 / 256): two steps, two steps in flight, then
    every row, key and score bitwise equal to all-HBM tables. "nocut": backward_chunk NOCUT, hot ids any number of
    times, per-sample weights; "cut2": backward_chunk 32 (segments cut by warp boundaries), ids at most twice per
    table and step, no weights. order "hbm" is the control: all-HBM against all-HBM on the same inputs, which
    proves the setting repeatable (session 9 call 12: with weights and chunk 32 the control itself differed in
    7 of 20 rounds)."""
    bad = [(rnd, why) for rnd in range(20) if (why := one_round(order, opt, rnd, setting)) is not None]
    assert not bad, f"{len(bad)} of 20 rounds differ: {bad[:4]}"


def rel_err(x, y):
    """max |x - y| relative to max |y| (fp64)."""
    x, y = x.double(), y.double()
    if y.numel() == 0:
        return 0.0
    return float((x - y).abs().max() / y.abs().max().clamp_min(1e-30))


@pytest.mark.parametrize("order,opt", [("forward", "adam"), ("step", "adam"), ("forward", "sgd"), ("step", "sgd")])
def test_hybrid_step_cut_segments(order, opt):
    """The path that is not bitwise repeatable even on all-HBM tables: backward_chunk 32, hot ids up to ~10 times
    per table and step, per-sample weights (cut segments whose pieces add in arrival order). 12 rounds, each with
    two all-HBM modules (ref, the control) and the hybrid one on the same inputs: keys and scores equal, and every
    float result (outputs, weight gradients, rows and each optimizer state) within 4x the control's own difference
    from ref plus a floor of 1e-6 (a few fp32 ulps of the largest value; a missed or wrong update of a row is
    ~lr, 1e-2). Error: max |x - ref| / max |ref| per result."""
    worst_h = worst_c = 0.0
    ctrl_rounds = 0
    for rnd in range(12):
        chunk, repeat, with_psw = SETTINGS["cut"]
        mods, _ = round_modules(["hbm", "hbm", order], opt, rnd, chunk)
        inputs = round_inputs(rnd, repeat, with_psw)
        ra, rc, rh = (run_round(x, inputs) for x in mods)
        assert mods[0].sizes() == mods[2].sizes()
        differs = False
        for (what, a), (_, c), (_, h) in zip(ra, rc, rh):
            assert a.shape == c.shape == h.shape, (rnd, what)
            if not a.is_floating_point() or "scores" in what:
                assert torch.equal(a, h) and torch.equal(a, c), (rnd, what)
                continue
            assert torch.isfinite(h).all(), (rnd, what)
            # rows: the embedding and each optimizer state (16 columns each), each on its own scale
            parts = zip(a.split(16, 1), c.split(16, 1), h.split(16, 1)) if "rows" in what else [(a, c, h)]
            for j, (pa, pc, ph) in enumerate(parts):
                ec, eh = rel_err(pc, pa), rel_err(ph, pa)
                differs |= ec > 0
                worst_h, worst_c = max(worst_h, eh), max(worst_c, ec)
                assert eh <= 4 * ec + 1e-6, f"round {rnd}, {what} [{j}]: hybrid {eh:.3g} vs control {ec:.3g}"
        ctrl_rounds += differs
    print(f"cut segments {order}/{opt}: control differs in {ctrl_rounds}/12 rounds; worst error hybrid "
          f"{worst_h:.3g}, control {worst_c:.3g}")
