"""Adam with bf16 moments (``Adam(state_dtype=torch.bfloat16)``) on the CPU (torch) path: the layout (m and v packed
as bf16 into dim fp32 state columns), the stochastic rounding against fp32 moments over many steps (a decaying v that
round-to-nearest would hold still), training against fp32 state, checkpoints, and the options it refuses."""

import json

import pytest
import torch

from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._load import load_library
from dynamicemb._optimizers import Adam, _bf16_moments
from dynamicemb._options import DynamicEmbTableOptions

pytestmark = [pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built")]


def make(opt, dim=16, dtype=torch.float32, cap=1 << 12):
    tables = [DynamicEmbTableOptions(dim=dim, dtype=dtype, max_capacity=cap)] * 2
    return BatchedDynamicEmbeddingTables(tables, [0, 1], pooling="sum", optimizer=opt)


def test_layout_and_signature():
    opt = Adam(lr=0.01, state_dtype=torch.bfloat16)
    assert opt.state_dim(128) == 128 and opt.row_width(128) == 256  # 1,024 bytes a row instead of 1,536
    assert Adam().state_dim(128) == 256
    sig = json.loads(json.dumps(opt.signature()))
    assert sig["state_dtype"] == "bfloat16" and Adam().signature()["state_dtype"] == "float32"
    with pytest.raises(ValueError, match="state_dtype"):
        Adam(state_dtype=torch.float16)
    with pytest.raises(ValueError, match="state_dtype=torch.bfloat16 packs"):
        make(Adam(state_dtype=torch.bfloat16), dtype=torch.bfloat16)


def test_dither_is_unbiased_and_exact_on_bf16_values():
    """bf16 values stay as they are; a value between two bf16 neighbours rounds up with the probability of its
    position between them (m and v, mean over many columns and steps within 1 %); NaN and inf stay."""
    gen = torch.Generator().manual_seed(0)
    exact = torch.randn(64, 128, generator=gen).bfloat16().float()
    m16, v16 = _bf16_moments(exact, exact.abs(), torch.tensor(3.0))
    assert torch.equal(m16.float(), exact) and torch.equal(v16.float(), exact.abs())
    x = torch.full((256, 512), 1.0 + 0.3 * 2.0 ** -7)  # 30 % of the way to the next bf16 (ulp 2^-7 at 1.0)
    y = torch.full((256, 512), 2.0 + 0.7 * 2.0 ** -6)  # 70 %
    ups = [_bf16_moments(x, y, torch.tensor(float(s))) for s in range(1, 9)]
    assert abs(float(torch.stack([(a.float() > 1.0).float().mean() for a, _ in ups]).mean()) - 0.3) < 0.01
    assert abs(float(torch.stack([(b.float() > 2.0).float().mean() for _, b in ups]).mean()) - 0.7) < 0.01
    special = torch.tensor([[float("nan"), float("inf"), -float("inf")]])
    a, b = _bf16_moments(special, special, torch.tensor(1.0))
    assert a.float().isnan().tolist() == b.float().isnan().tolist() == [[True, False, False]]
    assert a.float()[0, 1:].tolist() == [float("inf"), -float("inf")]


def test_decaying_v_tracks_fp32():
    """A gradient spike, then 600 steps of small gradients: v decays by beta2 = 0.999 a step. Rounded to nearest,
    the bf16 v never moves (0.1 % a step is under half an ulp); rounded stochastically it stays within 2 % of the
    fp32 v (mean over the row's columns) and m within 2 % of the fp32 m."""
    d = 256
    opt32, opt16 = Adam(lr=1e-3), Adam(lr=1e-3, state_dtype=torch.bfloat16)
    lr = torch.tensor(1e-3)
    w32 = w16 = torch.zeros(1, d)
    s32, s16 = torch.zeros(1, 2 * d), torch.zeros(1, d)
    v_rne = torch.zeros(1, d)
    gen = torch.Generator().manual_seed(1)
    for t in range(1, 602):
        g = torch.full((1, d), 10.0) if t == 1 else 0.01 * torch.randn(1, d, generator=gen)
        step = torch.tensor(float(t))
        w32, s32 = opt32.update(w32, s32, g, lr, step)
        w16, s16 = opt16.update(w16, s16, g, lr, step)
        v_rne = (v_rne + (g * g - v_rne) * 1e-3).bfloat16().float()
    m32, v32 = s32[:, :d], s32[:, d:]
    m16, v16 = opt16.moments(s16)
    assert float((v_rne / v32).mean()) > 1.5  # round-to-nearest: stuck near the spike's v
    assert abs(float((v16 / v32).mean()) - 1.0) < 0.02
    assert float((m16 - m32).abs().mean() / m32.abs().mean()) < 0.02
    torch.testing.assert_close(w16, w32, rtol=0.02, atol=1e-5)


@pytest.mark.parametrize("pooling", ["sum", "none"])
def test_training_tracks_fp32_state(pooling):
    """Two modules from the same rows, trained on the same 40 batches with repeated ids: fp32 moments and bf16
    moments. The rows' total movement differs by under 3 % (relative to the movement) and the moments unpack to
    within 3 % of the fp32 moments."""
    gen = torch.Generator().manual_seed(2)
    V, d = 300, 16
    tables = [DynamicEmbTableOptions(dim=d, max_capacity=1 << 12)] * 2
    mods = [BatchedDynamicEmbeddingTables(tables, [0, 1], pooling=pooling, optimizer=Adam(lr=0.01, state_dtype=sd))
            for sd in (torch.float32, torch.bfloat16)]
    w0 = [torch.randn(V, d, generator=gen) * 0.1 for _ in range(2)]
    for m in mods:
        for t in range(2):
            m.set_rows(t, torch.arange(V), w0[t])
    for _ in range(40):
        lengths = torch.randint(0, 6, (2 * 32,), generator=gen)
        offsets = torch.zeros(65, dtype=torch.int64)
        offsets[1:] = torch.cumsum(lengths, 0)
        ids = torch.randint(0, V, (int(offsets[-1]),), generator=gen)
        R = None
        for m in mods:
            out = m(ids, offsets)
            R = torch.randn(out.shape, generator=gen) if R is None else R
            (out * R).sum().backward()
    for t in range(2):
        w32, s32, f32 = mods[0].get_rows(t, torch.arange(V))
        w16, s16, f16 = mods[1].get_rows(t, torch.arange(V))
        assert torch.equal(f32, f16)
        moved = (w32 - w0[t]).norm()
        assert float((w16 - w32).norm() / moved) < 0.03
        for a, b in zip(mods[1].optimizer.moments(s16), mods[0].optimizer.moments(s32)):
            assert float((a - b).norm() / b.norm()) < 0.03


def test_checkpoint_round_trip_and_mismatch(tmp_path):
    m = make(Adam(lr=0.01, state_dtype=torch.bfloat16))
    gen = torch.Generator().manual_seed(3)
    for _ in range(4):
        ids = torch.randint(0, 200, (60,), generator=gen)
        (m(ids, torch.arange(0, 61, 6)) * torch.randn(5, 32, generator=gen)).sum().backward()
    m.dump(str(tmp_path / "ck"))
    m2 = make(Adam(lr=0.01, state_dtype=torch.bfloat16))
    m2.load(str(tmp_path / "ck"))
    ids = torch.arange(200)
    for t in range(2):
        a, b = m.get_rows(t, ids), m2.get_rows(t, ids)
        assert all(torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(Exception, match="state_dim"):
        make(Adam(lr=0.01)).load(str(tmp_path / "ck"))
