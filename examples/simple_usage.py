"""Smallest runnable usage of the accelerated_modules packages (CPU or GPU).

    python examples/simple_usage.py
"""

import torch


# --- hstu_attn ---
def hstu_example():
    """HSTU attention over a jagged batch of 3 user histories, with targets and a relative bias."""
    import hstu_attn

    device = "cuda" if torch.cuda.is_available() and hstu_attn.library_loaded() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)

    lengths = torch.tensor([5, 0, 12])  # a zero-length history is fine
    cu_seqlens = torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32).to(device)
    max_seqlen = int(lengths.max())
    total, heads, head_dim = int(lengths.sum()), 2, 64

    q, k, v = (torch.randn(total, heads, head_dim, device=device, dtype=dtype, requires_grad=True)
               for _ in range(3))
    num_targets = torch.tensor([2, 0, 4], dtype=torch.int32, device=device)  # last tokens are candidates
    rab = torch.randn(3, 1, max_seqlen, max_seqlen, device=device, dtype=dtype, requires_grad=True)

    out = hstu_attn.hstu_attn_varlen_func(
        q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
        num_targets=num_targets, target_group_size=2,
        window_size=(-1, 0),  # causal
        alpha=1.0 / head_dim**0.5, rab=rab, has_drab=True,
    )
    out.float().square().sum().backward()
    print(f"hstu_attn on {device}: out {tuple(out.shape)} {out.dtype}, |dq| = {q.grad.float().norm():.4f}, "
          f"|drab| = {rab.grad.float().norm():.4f}")

    # The dense reference computes the same thing (float64 here for a tight comparison).
    ref = hstu_attn.hstu_attn_reference(
        q.detach().double(), k.detach().double(), v.detach().double(), cu_seqlens, cu_seqlens, max_seqlen,
        max_seqlen, num_targets=num_targets, target_group_size=2, window_size=(-1, 0),
        alpha=1.0 / head_dim**0.5, rab=rab.detach().double(),
    )
    print(f"max |kernel - reference| = {(out.double() - ref).abs().max():.2e}")
    # The mask of sequence 2 (12 keys, 4 targets in groups of 2), 1 = attends:
    print(hstu_attn.hstu_mask(12, 12, num_target=4, target_group_size=2, window_size=(-1, 0)).int())


# --- dynamicemb ---
def dynamicemb_example():
    """Two dynamic tables (unbounded int64 ids) with a fused Adam update, one training step, then eval."""
    from dynamicemb import Adam, BatchedDynamicEmbeddingTables, DynamicEmbInitializer, DynamicEmbTableOptions

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tables = [
        DynamicEmbTableOptions(dim=16, max_capacity=1 << 12, score_policy="lru"),
        DynamicEmbTableOptions(dim=8, max_capacity=1 << 12, score_policy="lfu", admission_threshold=2,
                               initializer=DynamicEmbInitializer("truncated_normal", std=0.01)),
    ]
    # 3 features: "user" reads table 0, "item" and "item_history" share table 1
    emb = BatchedDynamicEmbeddingTables(tables, feature_table_map=[0, 1, 1], pooling="sum",
                                        optimizer=Adam(lr=1e-2), table_names=["user", "item"], device=device)
    B = 2  # bags are feature-major: offsets[f * B + b] starts feature f of sample b
    ids = torch.tensor([10**12, 7, 42, 42, 5, 6, 7], device=device)  # any int64 >= 0, no vocabulary needed
    offsets = torch.tensor([0, 1, 2, 3, 4, 5, 7], device=device)
    out = emb(ids, offsets)  # (B, 16 + 8 + 8)
    out.square().sum().backward()  # the backward applies Adam to the rows seen; no gradient tensors for tables
    print(f"dynamicemb on {device}: out {tuple(out.shape)}, stored ids per table {emb.sizes()}, "
          f"Adam steps {int(emb.step)}")
    emb.eval()
    with torch.no_grad():
        unseen = emb(torch.tensor([123, 456, 789], device=device), torch.tensor([0, 1, 2, 3, 3, 3, 3], device=device))
    print(f"eval of unseen ids (eval initializer, nothing inserted): {unseen[0, :4].tolist()}, sizes {emb.sizes()}")


def dynamicemb_torchrec_example():
    """The TorchRec-shaped module: EmbeddingBagConfig in, KeyedJaggedTensor in, KeyedTensor out (a drop-in for
    torchrec.EmbeddingBagCollection), then a checkpoint round trip through state_dict and through dump/load."""
    import importlib.util
    import tempfile

    if importlib.util.find_spec("torchrec") is None:
        print("torchrec is not installed: skipping the TorchRec-shaped example (pip install torchrec)")
        return
    from torchrec import EmbeddingBagConfig, KeyedJaggedTensor

    from dynamicemb import DynamicEmbeddingBagCollection, DynamicEmbTableOptions, SGD

    device = "cuda" if torch.cuda.is_available() else "cpu"
    configs = [
        EmbeddingBagConfig(name="user_table", embedding_dim=16, num_embeddings=1 << 12, feature_names=["user"]),
        EmbeddingBagConfig(name="item_table", embedding_dim=8, num_embeddings=1 << 12,
                           feature_names=["item", "item_history"]),
    ]
    # num_embeddings is only the starting capacity: ids are unbounded int64, evicted by score when the table is full
    ebc = DynamicEmbeddingBagCollection(configs, DynamicEmbTableOptions(score_policy="lru"), optimizer=SGD(lr=0.1),
                                        device=device)
    # 2 samples; lengths are per (feature, sample), feature-major, as TorchRec orders them
    kjt = KeyedJaggedTensor(
        keys=["user", "item", "item_history"],
        values=torch.tensor([10**12, 77, 5, 5, 9, 8, 7, 6], device=device),
        lengths=torch.tensor([1, 1, 1, 1, 2, 2], device=device),
    )
    kt = ebc(kjt)
    print(f"DynamicEmbeddingBagCollection on {device}: keys {kt.keys()}, user {tuple(kt['user'].shape)}, "
          f"item_history {tuple(kt['item_history'].shape)}")
    kt.values().sum().backward()  # SGD applied to the rows seen, inside the backward

    # Checkpoints: state_dict (small tables) and dump/load (large tables, written table by table to a folder).
    state = ebc.state_dict()
    restored = DynamicEmbeddingBagCollection(configs, DynamicEmbTableOptions(score_policy="lru"),
                                             optimizer=SGD(lr=0.1), device=device)
    restored.load_state_dict(state)
    with tempfile.TemporaryDirectory() as d:
        ebc.dump(d)
        from_dump = DynamicEmbeddingBagCollection(configs, DynamicEmbTableOptions(score_policy="lru"),
                                                  optimizer=SGD(lr=0.1), device=device)
        from_dump.load(d)
    ebc.eval(), restored.eval(), from_dump.eval()
    with torch.no_grad():
        same = all(torch.equal(ebc(kjt).values(), m(kjt).values()) for m in (restored, from_dump))
    print(f"after training, state_dict and dump/load round trips give the same outputs: {same}")


def main():
    hstu_example()
    dynamicemb_example()
    dynamicemb_torchrec_example()


if __name__ == "__main__":
    main()
