"""torch.compile of a dynamicemb training step on CPU (runs in CI): the module forward + loss compiled with
fullgraph=True (aot_eager and inductor), its backward (the fused update) from the compiled graph, giving the
outputs and rows of eager steps."""

import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_helpers import assert_compiled_steps_match_eager  # noqa: E402

from dynamicemb._batched import BatchedDynamicEmbeddingTables  # noqa: E402
from dynamicemb._load import load_library  # noqa: E402
from dynamicemb._optimizers import SGD, Adam  # noqa: E402
from dynamicemb._options import DynamicEmbTableOptions  # noqa: E402

pytestmark = pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built")

V, B, F = 64, 6, 3
OPT_KINDS = {"sgd": lambda: SGD(lr=0.2), "adam": lambda: Adam(lr=0.05)}


def module(opt, pooling="sum", dims=(8, 4)):
    if pooling == "none":
        dims = (dims[0], dims[0])
    tables = [DynamicEmbTableOptions(dim=d, max_capacity=256, on_refused="zero") for d in dims]
    m = BatchedDynamicEmbeddingTables(tables, [0, 1, 1], pooling=pooling, optimizer=opt)
    gen = torch.Generator().manual_seed(11)
    for t, d in enumerate(m.dims):
        m.set_rows(t, torch.arange(V), torch.randn(V, d, generator=gen) * 0.1)
    return m


def batch(gen):
    lengths = torch.randint(1, 4, (F * B,), generator=gen)
    ids = torch.randint(0, V, (int(lengths.sum()),), generator=gen)
    offsets = torch.zeros(F * B + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    return ids, offsets, torch.rand(ids.numel(), generator=gen) + 0.5


def all_rows(m):
    probe = torch.arange(V)
    return [torch.cat(m.get_rows(t, probe)[:2], 1) for t in range(len(m.tables))]


# ---------------------------------------------------------------------- torch.compile
# inductor compiles C++ on CPU (slow on the CI machine): one case of it
@pytest.mark.parametrize("backend, opt, pooling", [
    ("aot_eager", "sgd", "sum"), ("aot_eager", "adam", "none"), ("inductor", "adam", "sum")])
def test_compiled_training_step_matches_eager(backend, opt, pooling):
    torch._dynamo.reset()
    make = OPT_KINDS[opt]
    eager, compiled = module(make(), pooling), module(make(), pooling)

    def batches():
        gen = torch.Generator().manual_seed(21)
        for _ in range(3):
            ids, offsets, w = batch(gen)
            if pooling != "sum":
                w = None
            width = 16 if pooling == "sum" else 8
            yield ids, offsets, w, torch.randn(ids.numel() if pooling == "none" else B, width, generator=gen)

    assert_compiled_steps_match_eager(eager, compiled, backend, batches(), all_rows, rtol=1e-6, atol=1e-6)
    assert math.isclose(float(eager.step), float(compiled.step))
