"""Rows of ids without a slot (refused by a full table in training, missing in eval): the torch path (CPU) draws
them with the table's counter-based initializer, a function of (seed, the table's op clock of the step, key,
column) that never touches torch's RNG and equals the initial row the key would have got had it been inserted in
that step; the fused kernels (GPU) give the same values. The CPU tests run everywhere, the GPU test needs a device.
"""

import pytest
import torch

from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD
from dynamicemb._options import DynamicEmbInitializer, DynamicEmbTableOptions

pytestmark = pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built")

KINDS = ["uniform", "normal", "truncated_normal"]


def _init(kind, seed=123456789):
    # explicit bounds/std: the defaults depend on max_capacity, and the tables compared here differ in it
    return DynamicEmbInitializer(kind, low=-0.3, high=0.3, std=0.2, seed=seed)


def _module(kind, max_capacity, device="cpu", pooling="none", eval_kind="uniform"):
    o = DynamicEmbTableOptions(dim=8, max_capacity=max_capacity, bucket_capacity=16, score_policy="lfu",
                               on_refused="warn", initializer=_init(kind), eval_initializer=_init(eval_kind, 99))
    return BatchedDynamicEmbeddingTables([o], pooling=pooling, optimizer=SGD(lr=0.0), device=device)


HOT = torch.arange(16).repeat(4)  # 16 ids seen 4 times: they fill a 16-slot LFU table with score 4
NEW = torch.tensor([100, 101, 100, 102, 101, 100])  # refused by the full 16-slot table (repeats included)


@pytest.mark.filterwarnings("ignore:dynamicemb")
@pytest.mark.parametrize("kind", KINDS)
def test_refused_rows_are_the_initial_rows_of_the_step(kind):
    """A full table refuses NEW in two steps; in each step a refused id reads the row that a roomy twin table at
    the same op clock stores for it as a new id, whatever torch's global RNG state; repeats of an id agree. (The
    value follows the op clock, as on the kernels: a refused id reads another row in the next step.)"""
    one = torch.tensor([0, NEW.numel()])
    full = _module(kind, 16)
    full(HOT, torch.tensor([0, HOT.numel()]))
    prev = None
    for step in range(2):
        torch.manual_seed(step)  # different global RNG states for the two modules: must not matter
        a = full(NEW, one).detach()
        assert full.sizes() == [16] and int(full.refused_count[0]) == 3 * (step + 1)
        roomy = _module(kind, 1024)
        roomy(HOT, torch.tensor([0, HOT.numel()]))
        for _ in range(step):
            roomy(torch.tensor([999]), torch.tensor([0, 1]))  # one op: the same clock as `full` at this step
        torch.manual_seed(1000 + step)
        torch.rand(17)
        b = roomy(NEW, one).detach()
        w, _, found = roomy.get_rows(0, NEW)
        assert bool(found.all())
        assert torch.equal(b, w)  # NEW stored as new rows: the C++ initializer at this clock (lr=0 keeps them)
        torch.testing.assert_close(a, w, atol=1e-6, rtol=0)  # normal kinds: torch's log/cos vs libm's
        assert torch.equal(a[0], a[2]) and torch.equal(a[0], a[5]) and torch.equal(a[1], a[4])
        assert not torch.equal(a[0], a[1])
        if prev is not None:
            assert not torch.equal(a[0], prev[0])
        prev = a
    # a fresh module with the same ops gives bit-identical refused rows under another global RNG state
    again = _module(kind, 16)
    again(HOT, torch.tensor([0, HOT.numel()]))
    torch.manual_seed(4242)
    again(NEW, one)
    assert torch.equal(again(NEW, one).detach(), a)


@pytest.mark.parametrize("kind", KINDS)
def test_eval_missing_rows_repeat(kind):
    """Eval reads the eval initializer at clock 0 for missing ids: the same row for the same id in every eval step
    and under any global RNG state; stored ids read their rows; nothing is inserted."""
    m = _module("constant", 1024, eval_kind=kind)
    m(HOT, torch.tensor([0, HOT.numel()]))
    m.eval()
    ids = torch.tensor([3, 500, 501, 500])
    outs = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        with torch.no_grad():
            outs.append(m(ids, torch.tensor([0, 4])))
    assert torch.equal(outs[0], outs[1])
    assert torch.equal(outs[0][1], outs[0][3]) and not torch.equal(outs[0][1], outs[0][2])
    assert torch.equal(outs[0][0], torch.zeros(8))  # stored with the constant 0 initializer
    assert m.sizes() == [16]


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:dynamicemb")
@pytest.mark.parametrize("pooling", ["sum", "none"])
@pytest.mark.parametrize("kind", KINDS)
def test_kernels_fallback_rows_match_cpu(kind, pooling):
    """The fused kernels' rows of refused ids (training, two steps) and missing ids (eval) equal the torch path's
    (normal kinds to float rounding: the kernels' cospif vs the host's cos)."""
    cpu, gpu = _module(kind, 16, "cpu", pooling, kind), _module(kind, 16, "cuda", pooling, kind)
    assert gpu.use_kernels, "the CUDA module should run the fused kernels"
    offsets = torch.tensor([0, HOT.numel()]) if pooling == "none" else torch.arange(0, HOT.numel() + 1, 4)
    for m in (cpu, gpu):
        m(HOT.to(m.device), offsets.to(m.device))
    ids = torch.cat([NEW, torch.tensor([5, 6])])
    offsets = torch.tensor([0, ids.numel()]) if pooling == "none" else torch.tensor([0, 3, 3, 8])
    for train in (True, True, False):
        for m in (cpu, gpu):
            m.train(train)
        with torch.no_grad():
            a = cpu(ids, offsets)
            b = gpu(ids.cuda(), offsets.cuda())
        torch.testing.assert_close(b.cpu(), a, atol=1e-5, rtol=1e-5)
    assert gpu.sizes() == cpu.sizes() == [16]
    assert gpu.refused_count.cpu().tolist() == cpu.refused_count.tolist() == [6]
