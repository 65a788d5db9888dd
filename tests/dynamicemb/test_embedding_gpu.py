"""BatchedDynamicEmbeddingTables on a CUDA device: the fused kernels (csrc/lookup) against the CPU module (the torch
reference path) for every optimizer and pooling mode, no host sync in a training step, and forward + backward +
fused update captured in one CUDA graph and replayed with fresh ids (vs eager)."""

import pytest
import torch

from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adagrad, Adam, RowWiseAdagrad
from dynamicemb._options import DynamicEmbInitializer, DynamicEmbTableOptions

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


@pytest.mark.parametrize("opt", ["sgd", "adam", "rowwise_adagrad"])
@pytest.mark.parametrize("pooling", ["sum", "mean", "none"])
def test_cuda_graph_train_step_matches_eager(opt, pooling):
    gen = torch.Generator().manual_seed(3)
    eager, graphed = make("cuda", OPTS[opt](), pooling), make("cuda", OPTS[opt](), pooling)
    F = 3
    n = F * B * 2  # fixed ids per step: every bag has 2 ids
    offsets = torch.arange(0, n + 1, 2, device="cuda")
    width = eager.dims[0] if pooling == "none" else sum(eager.feature_dims)

    def new_batch():
        ids = torch.randint(0, V, (n,), generator=gen).cuda()
        R = torch.randn(n if pooling == "none" else B, width, generator=gen).cuda()
        return ids, R

    static_ids, static_R = new_batch()

    def step(module, ids, R):
        out = module(ids, offsets, validate=False)
        (out * R).sum().backward()
        return out

    warm = [new_batch() for _ in range(3)]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for ids, R in warm:
            step(graphed, ids, R)
    torch.cuda.current_stream().wait_stream(s)
    for ids, R in warm:
        step(eager, ids, R)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = step(graphed, static_ids, static_R)
    for it in range(4):
        ids, R = new_batch()
        if it == 2:
            graphed.set_learning_rate(0.05)  # a device tensor: the replay picks it up
            eager.set_learning_rate(0.05)
        static_ids.copy_(ids)
        static_R.copy_(R)
        g.replay()
        ref = step(eager, ids, R)
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
