"""Bitwise comparison of training steps between two builds of dynamicemb (run once per wheel, then --compare).

Each run trains fresh modules on fixed inputs and records GPU checksums of every step's output and, at the end,
of every table's stored keys (ascending) with their rows ([embedding | optimizer state]) and scores, plus one
eval output:
  - "preset": NVIDIA's config (benchmarks/embedding.py make_batch: 10 tables x 104,857 ids, power law 1.05 over
    1,677,721 ids, D128, pooling none), gradient of ones (hot ids' cut segments then sum identical pieces, so the
    rows do not depend on the arrival order of the pieces), SGD and Adam;
  - "random": 10 tables x 104,857 ids uniform over 300K ids per table (a unique repeats a few times, no segment is
    cut into more than two pieces), a random gradient (the sum order inside each segment shows in the rows), Adam.
With the lab ops _lookup_lab_csr_sort / _lookup_lab_find_later (builds that have them) each variant S/F[/D] in
--variants (tools/dynamicemb_dev/csr_sort_ab.py) runs as its own record. Run:
    python3 -P tools/dynamicemb_dev/step_same.py --bench benchmarks --out a.json [--variants 0/0,2/1]
    python3 -P tools/dynamicemb_dev/step_same.py --compare a.json b.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch


def checksum(t: torch.Tensor) -> list:
    """Three 64-bit sums over the tensor's bytes (plain, position-weighted, mixed): equal for equal bytes."""
    x = t.detach().contiguous().view(-1).view(torch.uint8)
    pad = (-x.numel()) % 8
    if pad:
        x = torch.cat([x, x.new_zeros(pad)])
    y = x.view(torch.int64)
    out = [0, 0, 0]
    step = 1 << 25
    for s in range(0, y.numel(), step):
        c = y[s:s + step]
        i = torch.arange(s, s + c.numel(), device=c.device, dtype=torch.int64)
        out[0] += int(c.sum())
        out[1] += int((c * (i * 2654435761 + 97)).sum())
        out[2] += int((c ^ (c >> 13) ^ (i * 40503)).sum())
    return [v % (1 << 64) for v in out]


def table_sums(m) -> dict:
    """Per table: the stored keys in ascending order, and their rows ([embedding | optimizer state]) and scores in
    that order (which slot holds a key depends on the insert's scheduling, so raw slot arrays differ run to run)."""
    res = {}
    for k, t in enumerate(m.tables):
        keys = t.keys.view(torch.int64)
        slots = torch.nonzero(keys != -(2**63)).view(-1)
        order = torch.argsort(keys[slots])
        slots = slots[order]
        res[f"t{k}.keys"] = checksum(keys[slots])
        res[f"t{k}.rows"] = checksum(t.values[slots])
        res[f"t{k}.scores"] = checksum(t.scores[slots])
    return res


def run_case(case, opt_name, dev, mods):
    make_batch, SGD, Adam, DynamicEmbTableOptions, BatchedDynamicEmbeddingTables = mods
    T, B, D = 10, 104_857, 128
    gen = torch.Generator().manual_seed(0)
    if case == "preset":
        batches = [make_batch(T, B, 1, 1_677_721, 1.05, gen) for _ in range(3)]
    else:
        batches = []
        for _ in range(3):
            ids = torch.randint(0, 300_000, (T * B,), generator=gen)
            batches.append((ids, torch.arange(T * B + 1, dtype=torch.int64)))
    batches = [(i.to(dev), o.to(dev)) for i, o in batches]
    torch.manual_seed(1)
    opt = SGD(lr=0.01) if opt_name == "sgd" else Adam(lr=1e-3)
    tables = [DynamicEmbTableOptions(dim=D, max_capacity=1 << 20, on_refused="zero")] * T
    m = BatchedDynamicEmbeddingTables(tables, pooling="none", optimizer=opt, device=dev)
    rec = {}
    ggen = torch.Generator(device=dev).manual_seed(2)
    for s in range(5):
        ids, off = batches[s % len(batches)]
        out = m(ids, off)
        rec[f"step{s}.out"] = checksum(out)
        if case == "preset":
            g = torch.ones_like(out)
        else:
            g = torch.randn(out.shape, generator=ggen, device=dev)
        out.backward(g)
    torch.cuda.synchronize()
    rec.update(table_sums(m))
    m.eval()
    with torch.no_grad():
        rec["eval.out"] = checksum(m(batches[0][0], batches[0][1]))
    del m
    torch.cuda.empty_cache()
    return rec


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", default="benchmarks")
    p.add_argument("--out")
    p.add_argument("--variants", default="")
    p.add_argument("--compare", nargs=2, help="base.json other.json (base: its first record)")
    p.add_argument("--cases", default="preset.sgd,preset.adam,random.adam", help="of the three, those to run")
    a = p.parse_args()
    if a.compare:
        base, other = (json.load(open(f)) for f in a.compare)
        bname, brec = next(iter(base.items()))
        total = bad = 0
        for name, rec in other.items():
            diff = [k for k in rec if rec[k] != brec.get(k)]
            total += len(rec)
            bad += len(diff)
            print(f"{name} vs {bname}: {len(rec) - len(diff)} / {len(rec)} checksums equal"
                  + (f"; differ: {diff[:8]}" if diff else ""))
        print(f"same_as_main: {total} results compared, {bad} differ")
        return
    sys.path.insert(0, os.path.abspath(a.bench))
    from embedding import make_batch  # noqa: E402

    from dynamicemb._batched import BatchedDynamicEmbeddingTables  # noqa: E402
    from dynamicemb._optimizers import SGD, Adam  # noqa: E402
    from dynamicemb._options import DynamicEmbTableOptions  # noqa: E402
    mods = (make_batch, SGD, Adam, DynamicEmbTableOptions, BatchedDynamicEmbeddingTables)
    dev = torch.device("cuda")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from lab_variants import lab_ops, use_variant  # noqa: E402

    lab, lab_dedup = lab_ops()
    variants = [v for v in a.variants.split(",") if v] if lab is not None else []
    res = {}
    for v in variants or [None]:
        use_variant(lab, lab_dedup, v)
        name = "main" if v is None else f"sort/find_later/insert={v}"
        rec = {}
        for case, opt in (("preset", "sgd"), ("preset", "adam"), ("random", "adam")):
            if f"{case}.{opt}" not in a.cases.split(","):
                continue
            if v is not None and v.split("/")[:2] not in (["1", "0"], ["0", "0"]) and case == "preset" and opt == "adam":
                continue  # the build without variants, cub's sort and the default run every case
            r = run_case(case, opt, dev, mods)
            rec.update({f"{case}.{opt}.{k}": x for k, x in r.items()})
        res[name] = rec
        print(f"{name}: {len(rec)} checksums", flush=True)
    with open(a.out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
