"""TorchRec interop on CPU: DynamicEmbeddingBagCollection / DynamicEmbeddingCollection give the same outputs as
TorchRec's EmbeddingBagCollection / EmbeddingCollection when given the same weights for the ids seen."""

import importlib.util
import sys
import types

import pytest
import torch

from dynamicemb._collection import DynamicEmbeddingBagCollection, DynamicEmbeddingCollection
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD
from dynamicemb._options import DynamicEmbTableOptions


def _import_torchrec():
    """torchrec 1.9.2's package __init__ imports tensordict and pyre_extensions, which our pinned venv lacks
    (torchrec is installed --no-deps); stand-ins for exactly those two let the data types we test import."""
    if importlib.util.find_spec("torchrec") is None:
        return None
    for name, attrs in (("tensordict", {"TensorDict": type("TensorDict", (), {})}),
                        ("pyre_extensions", {"none_throws": lambda x, *a: x})):
        if importlib.util.find_spec(name) is None and name not in sys.modules:
            mod = types.ModuleType(name)
            mod.__dict__.update(attrs)
            sys.modules[name] = mod
    import torchrec  # noqa: F401

    return torchrec


trc = _import_torchrec()
pytestmark = [pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
              pytest.mark.skipif(trc is None, reason="torchrec not installed")]

if trc is not None:
    from torchrec.modules.embedding_configs import EmbeddingBagConfig, EmbeddingConfig, PoolingType
    from torchrec.modules.embedding_modules import EmbeddingBagCollection, EmbeddingCollection
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor, KeyedTensor

N_EMB = 50


def configs(cls, pooling=None):
    kw = {} if pooling is None else {"pooling": pooling}
    return [cls(num_embeddings=N_EMB, embedding_dim=8, name="t0", feature_names=["f0", "f1"], **kw),
            cls(num_embeddings=N_EMB, embedding_dim=8 if cls is EmbeddingConfig else 4, name="t1",
                feature_names=["f2"], **kw)]


def kjt(gen, keys=("f0", "f1", "f2"), B=4, weighted=False):
    lengths = torch.randint(0, 4, (len(keys) * B,), generator=gen)
    values = torch.randint(0, N_EMB, (int(lengths.sum()),), generator=gen)
    w = torch.rand(values.numel(), generator=gen) if weighted else None
    return KeyedJaggedTensor(keys=list(keys), values=values, lengths=lengths, weights=w)


def copy_weights(torchrec_module, ours, attr):
    for i, (name, mod) in enumerate(getattr(torchrec_module, attr).items()):
        ours.tables.set_rows(i, torch.arange(N_EMB), mod.weight.detach())


@pytest.mark.parametrize("pooling", ["SUM", "MEAN"])
@pytest.mark.parametrize("weighted", [False, True])
def test_ebc_matches_torchrec(pooling, weighted):
    if weighted and pooling == "MEAN":
        pytest.skip("weighted pooling is SUM only")
    gen = torch.Generator().manual_seed(0)
    cfg = configs(EmbeddingBagConfig, getattr(PoolingType, pooling))
    ref = EmbeddingBagCollection(cfg, is_weighted=weighted)
    ours = DynamicEmbeddingBagCollection(cfg, DynamicEmbTableOptions(bucket_capacity=16, max_capacity=256), optimizer=SGD(lr=0.1),
                                         is_weighted=weighted)
    copy_weights(ref, ours, "embedding_bags")
    for keys in (("f0", "f1", "f2"), ("f2", "f0", "f1")):  # any key order of the KJT
        feats = kjt(gen, keys, weighted=weighted)
        a, b = ref(feats), ours(feats)
        assert isinstance(b, KeyedTensor)
        assert b.keys() == a.keys() and b.length_per_key() == a.length_per_key()
        torch.testing.assert_close(b.values(), a.values(), atol=1e-6, rtol=1e-6)
        for k in a.keys():
            torch.testing.assert_close(b[k], a[k], atol=1e-6, rtol=1e-6)
    # trains like SGD on the reference
    feats = kjt(gen, weighted=weighted)
    out = ours(feats).values()
    (out.sum()).backward()
    assert ours.tables.step.item() == 1.0


def test_ec_matches_torchrec():
    gen = torch.Generator().manual_seed(1)
    cfg = configs(EmbeddingConfig)
    ref = EmbeddingCollection(cfg)
    ours = DynamicEmbeddingCollection(cfg, {"t0": DynamicEmbTableOptions(bucket_capacity=16, max_capacity=256),
                                            "t1": DynamicEmbTableOptions(score_policy="lfu", bucket_capacity=16, max_capacity=256)})
    copy_weights(ref, ours, "embeddings")
    for keys in (("f0", "f1", "f2"), ("f1", "f2", "f0")):
        feats = kjt(gen, keys)
        a, b = ref(feats), ours(feats)
        assert set(a) == set(b)
        for k in a:
            torch.testing.assert_close(b[k].values(), a[k].values(), atol=1e-6, rtol=1e-6)
            assert torch.equal(b[k].lengths(), a[k].lengths())


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
