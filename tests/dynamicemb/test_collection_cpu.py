"""TorchRec interop on CPU: DynamicEmbeddingBagCollection / DynamicEmbeddingCollection give the same outputs and
the same SGD updates as TorchRec's EmbeddingBagCollection / EmbeddingCollection when given the same weights for
the ids seen; without TorchRec the core still works and the collections say what is missing."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import dynamicemb
from dynamicemb._collection import DynamicEmbeddingBagCollection, DynamicEmbeddingCollection
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD
from dynamicemb._options import DynamicEmbTableOptions

HAVE_TORCHREC = importlib.util.find_spec("torchrec") is not None
pytestmark = pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built")
needs_torchrec = pytest.mark.skipif(not HAVE_TORCHREC, reason="torchrec not installed")

if HAVE_TORCHREC:  # imported as users get it: an installed but broken torchrec fails here, loudly
    from torchrec.modules.embedding_configs import EmbeddingBagConfig, EmbeddingConfig, PoolingType
    from torchrec.modules.embedding_modules import EmbeddingBagCollection, EmbeddingCollection
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor, KeyedTensor

N_EMB = 50


def configs(cls, poolings=None):
    """Two tables: t0 (features f0, f1, dim 8) and t1 (feature f2, dim 4 for bags); ``poolings`` one per table."""
    kw = [{}, {}] if poolings is None else [{"pooling": getattr(PoolingType, p)} for p in poolings]
    return [cls(num_embeddings=N_EMB, embedding_dim=8, name="t0", feature_names=["f0", "f1"], **kw[0]),
            cls(num_embeddings=N_EMB, embedding_dim=8 if cls is EmbeddingConfig else 4, name="t1",
                feature_names=["f2"], **kw[1])]


def kjt(gen, keys=("f0", "f1", "f2"), B=4, weighted=False):
    lengths = torch.randint(0, 4, (len(keys) * B,), generator=gen)
    values = torch.randint(0, N_EMB, (int(lengths.sum()),), generator=gen)
    w = torch.rand(values.numel(), generator=gen) if weighted else None
    return KeyedJaggedTensor(keys=list(keys), values=values, lengths=lengths, weights=w)


def copy_weights(torchrec_module, ours, attr):
    for i, (name, mod) in enumerate(getattr(torchrec_module, attr).items()):
        ours.tables.set_rows(i, torch.arange(N_EMB), mod.weight.detach())


def assert_same_rows(torchrec_module, ours, attr, before):
    """Every row of every table equals TorchRec's; some rows moved since ``before`` (training did something)."""
    moved = False
    for i, (name, mod) in enumerate(getattr(torchrec_module, attr).items()):
        w, _, found = ours.tables.get_rows(i, torch.arange(N_EMB))
        assert bool(found.all())
        torch.testing.assert_close(w, mod.weight.detach(), atol=1e-6, rtol=1e-6)
        moved |= not torch.equal(w, before[i])
    assert moved


STEPS = (("f0", "f1", "f2"), ("f2", "f0", "f1"), ("f1", "f2", "f0"))  # any key order of the KJT


def train_like_torchrec(ref, ours, attr, lr, losses):
    """Trains TorchRec's module `ref` (its dense weights under torch.optim.SGD) and ours (its fused SGD) from the same
    rows over STEPS: `losses(keys)` runs both forwards on one batch, checks the outputs and returns (ref's loss, our
    loss); after each step the rows must be the same."""
    topt = torch.optim.SGD(ref.parameters(), lr=lr)
    copy_weights(ref, ours, attr)
    for keys in STEPS:
        before = [m.weight.detach().clone() for m in getattr(ref, attr).values()]
        loss_a, loss_b = losses(keys)
        loss_a.backward()
        loss_b.backward()
        topt.step()
        topt.zero_grad()
        assert_same_rows(ref, ours, attr, before)
    assert ours.tables.step.item() == len(STEPS)


@needs_torchrec
@pytest.mark.parametrize("poolings, weighted", [
    (("SUM", "SUM"), False), (("SUM", "SUM"), True), (("MEAN", "MEAN"), False),
    (("SUM", "MEAN"), False), (("MEAN", "SUM"), False),  # mixed pooling, as TorchRec allows
], ids=["sum", "sum-weighted", "mean", "sum+mean", "mean+sum"])
def test_ebc_matches_torchrec(poolings, weighted):
    """Same outputs, then the same rows after each SGD step (TorchRec's dense weights with torch.optim.SGD)."""
    gen = torch.Generator().manual_seed(0)
    cfg = configs(EmbeddingBagConfig, poolings)
    ref = EmbeddingBagCollection(cfg, is_weighted=weighted)
    lr = 0.1
    ours = DynamicEmbeddingBagCollection(cfg, DynamicEmbTableOptions(bucket_capacity=16, max_capacity=256),
                                         optimizer=SGD(lr=lr), is_weighted=weighted)

    def losses(keys):
        feats = kjt(gen, keys, weighted=weighted)
        a, b = ref(feats), ours(feats)
        assert isinstance(b, KeyedTensor)
        assert b.keys() == a.keys() and b.length_per_key() == a.length_per_key()
        torch.testing.assert_close(b.values(), a.values(), atol=1e-6, rtol=1e-6)
        for k in a.keys():
            torch.testing.assert_close(b[k], a[k], atol=1e-6, rtol=1e-6)
        R = torch.randn(a.values().shape, generator=gen)
        return (a.values() * R).sum(), (b.values() * R).sum()

    train_like_torchrec(ref, ours, "embedding_bags", lr, losses)


@needs_torchrec
def test_ec_matches_torchrec():
    """Same sequence outputs, then the same rows after each SGD step."""
    gen = torch.Generator().manual_seed(1)
    cfg = configs(EmbeddingConfig)
    ref = EmbeddingCollection(cfg)
    lr = 0.1
    ours = DynamicEmbeddingCollection(cfg, {"t0": DynamicEmbTableOptions(bucket_capacity=16, max_capacity=256),
                                            "t1": DynamicEmbTableOptions(score_policy="lfu", bucket_capacity=16,
                                                                         max_capacity=256)},
                                      optimizer=SGD(lr=lr))

    def losses(keys):
        feats = kjt(gen, keys)
        a, b = ref(feats), ours(feats)
        assert set(a) == set(b)
        loss_a, loss_b = 0.0, 0.0
        for k in sorted(a):
            torch.testing.assert_close(b[k].values(), a[k].values(), atol=1e-6, rtol=1e-6)
            assert torch.equal(b[k].lengths(), a[k].lengths())
            R = torch.randn(a[k].values().shape, generator=gen)
            loss_a = loss_a + (a[k].values() * R).sum()
            loss_b = loss_b + (b[k].values() * R).sum()
        return loss_a, loss_b

    train_like_torchrec(ref, ours, "embeddings", lr, losses)


@needs_torchrec
def test_ebc_mixed_pooling_output_dtype_and_weighted_mean():
    """Mixed SUM/MEAN with a bf16 output: the fp32 result rounded once. Per-sample weights with a MEAN table are
    refused at construction (torch's embedding_bag takes them only for sum)."""
    gen = torch.Generator().manual_seed(3)
    cfg = configs(EmbeddingBagConfig, ("MEAN", "SUM"))
    opts = DynamicEmbTableOptions(bucket_capacity=16, max_capacity=256)
    m32 = DynamicEmbeddingBagCollection(cfg, opts)
    m16 = DynamicEmbeddingBagCollection(cfg, opts, output_dtype=torch.bfloat16)
    w = torch.randn(N_EMB, 8, generator=gen), torch.randn(N_EMB, 4, generator=gen)
    for m in (m32, m16):
        for i in range(2):
            m.tables.set_rows(i, torch.arange(N_EMB), w[i])
    feats = kjt(gen)
    m32.eval(), m16.eval()
    out16 = m16(feats).values()
    assert out16.dtype == torch.bfloat16
    assert torch.equal(out16, m32(feats).values().to(torch.bfloat16))
    with pytest.raises(ValueError, match=r"is_weighted: expected only SUM tables .*got MEAN tables \['t0'\]"):
        DynamicEmbeddingBagCollection(cfg, opts, is_weighted=True)
    with pytest.raises(ValueError, match=r"tables pooling: expected SUM or MEAN for every table, got \['NONE'\]"):
        DynamicEmbeddingBagCollection(configs(EmbeddingBagConfig, ("SUM", "NONE")), opts)


_NO_TORCHREC = textwrap.dedent("""
    import sys
    sys.modules["torchrec"] = None  # "import torchrec" now raises ImportError, as if it were not installed
    import torch
    import dynamicemb
    from dynamicemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions, SGD

    emb = BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=4, max_capacity=128)] * 2,
                                        optimizer=SGD(lr=0.5))
    ids, offsets = torch.tensor([3, 5, 5, 7]), torch.tensor([0, 1, 3, 3, 4])
    emb.set_rows(0, torch.tensor([3, 5]), torch.ones(2, 4))
    out = emb(ids, offsets)
    assert out.shape == (2, 8)
    assert torch.equal(out[:, :4], torch.tensor([[1.0] * 4, [2.0] * 4]))
    out[:, :4].sum().backward()
    w, _, found = emb.get_rows(0, torch.tensor([3, 5]))
    assert bool(found.all()) and torch.equal(w, torch.tensor([[0.5] * 4, [0.0] * 4]))  # 1 - 0.5 * (1, 2)
    for cls in (dynamicemb.DynamicEmbeddingBagCollection, dynamicemb.DynamicEmbeddingCollection):
        try:
            cls([])
        except ImportError as e:
            print(cls.__name__, "ImportError:", e)
        else:
            raise AssertionError(cls.__name__ + " built without torchrec")
    assert "torchrec" not in {m.split(".")[0] for m, v in sys.modules.items() if v is not None}
""")


def test_core_works_without_torchrec(tmp_path):
    """A fresh interpreter where torchrec cannot be imported: the plain-tensor API trains; the TorchRec-shaped
    collections raise ImportError naming torchrec and the API that works without it."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(dynamicemb.__file__)))  # the dynamicemb under test
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    r = subprocess.run([sys.executable, "-c", _NO_TORCHREC], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 2
    for line, name in zip(lines, ("DynamicEmbeddingBagCollection", "DynamicEmbeddingCollection")):
        assert line.startswith(f"{name} ImportError: dynamicemb: the TorchRec-shaped collections need torchrec")
        assert "BatchedDynamicEmbeddingTables works without it" in line


@needs_torchrec
def test_state_dict_keys_and_bad_features():
    cfg = configs(EmbeddingBagConfig)
    ours = DynamicEmbeddingBagCollection(cfg, DynamicEmbTableOptions(bucket_capacity=16, max_capacity=256))
    keys = list(ours.state_dict())
    assert "embedding_bags.t0.values" in keys and "embedding_bags.t1.keys" in keys
    gen = torch.Generator().manual_seed(2)
    with pytest.raises(ValueError, match=r"features: keys \['zz'\] are not in the config"):
        ours(kjt(gen, ("f0", "f1", "f2", "zz")))
    with pytest.raises(ValueError, match=r"features: missing keys \['f2'\] of the config"):
        ours(kjt(gen, ("f0", "f1")))
    with pytest.raises(TypeError, match=r"features: expected a torchrec KeyedJaggedTensor"):
        ours(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"data_type"):
        DynamicEmbeddingBagCollection(cfg, DynamicEmbTableOptions(dtype=torch.float16))
    with pytest.raises(ValueError, match=r"embedding_dim: expected one dim"):
        DynamicEmbeddingCollection(configs(EmbeddingBagConfig))
