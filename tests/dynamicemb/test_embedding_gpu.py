"""BatchedDynamicEmbeddingTables on a CUDA device: parity with the CPU module, no host sync in a training step,
and forward + backward + fused update captured in one CUDA graph and replayed with fresh ids (vs eager)."""

import pytest
import torch

from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adagrad, Adam, RowWiseAdagrad
from dynamicemb._options import DynamicEmbTableOptions

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built")]

V, B = 5000, 64
OPTS = {"sgd": lambda: SGD(lr=0.1, weight_decay=0.01), "adam": lambda: Adam(lr=0.01),
        "adagrad": lambda: Adagrad(lr=0.1), "rowwise_adagrad": lambda: RowWiseAdagrad(lr=0.1, max_grad_norm=1.0)}


def make(device, opt, pooling="sum", dtype=torch.float32, dims=(16, 8)):
    if pooling == "none":
        dims = (dims[0], dims[0])
    tables = [DynamicEmbTableOptions(dim=d, dtype=dtype, max_capacity=1 << 14, on_refused="zero") for d in dims]
    return BatchedDynamicEmbeddingTables(tables, [0, 1, 1], pooling=pooling, optimizer=opt, device=device)


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


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("pooling", ["sum", "none"])
def test_cuda_graph_train_step_matches_eager(opt, pooling):
    gen = torch.Generator().manual_seed(3)
    eager, graphed = make("cuda", OPTS[opt](), pooling), make("cuda", OPTS[opt](), pooling)
    F = 3
    n = F * B * 2  # fixed ids per step: every bag has 2 ids
    offsets = torch.arange(0, n + 1, 2, device="cuda")
    width = sum(eager.feature_dims) if pooling == "sum" else eager.dims[0]

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
