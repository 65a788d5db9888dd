"""Device diagnostic (not a test): where the sorted hybrid backward (host_rows_order "step") with Adam leaves rows
that differ from all-HBM tables (session 9, call 7: `sum-adam-16-psw-quarter-step` and two steps in flight failed;
"step" is refused with optimizer state since). It forces the "step" flags past the refusal, trains one step (or two
steps in flight) on hybrid and all-HBM tables, and prints per tier (HBM / host rows) how many rows differ in their
embedding, m and v columns, and whether a differing row equals its value before the backward (a lost write) or
after the other mode's update. Usage: python3 hybrid_step_diag.py [seeds]; a few seconds on an H200."""

import sys

import torch

from test_hybrid_step_gpu import batch, make

from dynamicemb._optimizers import Adam

DIM = 16


def snapshot(m):
    """{table: (keys, rows, slots)} sorted by key."""
    out = []
    for t in m.tables:
        k, v, _ = t.items()
        o = torch.argsort(k.view(torch.int64))
        k, v = k[o], v[o]
        out.append((k, v.float().cpu(), t.find_slots(k).slots.cpu()))
    return out


def compare(tag, ref_after, m_after, m_before, hbm_rows):
    total = 0
    for ti, ((kr, vr, _), (km, vm, sm), (kb, vb, _)) in enumerate(zip(ref_after, m_after, m_before)):
        if not torch.equal(kr.cpu(), km.cpu()):
            print(f"{tag} table {ti}: key sets differ ({kr.numel()} vs {km.numel()})")
            continue
        before = dict(zip(kb.cpu().tolist(), vb))
        for tier, sel in (("hbm", sm < hbm_rows), ("host", sm >= hbm_rows)):
            r, x = vr[sel], vm[sel]
            cols = {"w": slice(0, DIM), "m": slice(DIM, 2 * DIM), "v": slice(2 * DIM, 3 * DIM)}
            bad = {c: (r[:, s] != x[:, s]).any(1) for c, s in cols.items()}
            anyb = bad["w"] | bad["m"] | bad["v"]
            lost = 0
            for i in torch.nonzero(anyb).flatten().tolist():
                k = int(km[sel][i])
                if k in before and torch.equal(before[k], x[i]):
                    lost += 1
            total += int(anyb.sum())
            if not anyb.any():
                continue
            print(f"{tag} table {ti} {tier}: rows {int(sel.sum())}, differ {int(anyb.sum())} (w {int(bad['w'].sum())}"
                  f", m {int(bad['m'].sum())}, v {int(bad['v'].sum())}), equal to before the backward {lost}")
            for i in torch.nonzero(anyb).flatten().tolist()[:2]:
                print(f"   key {int(km[sel][i])} slot {int(sm[sel][i])}: ref {r[i, ::DIM // 2].tolist()} "
                      f"got {x[i, ::DIM // 2].tolist()}")
    if total == 0:
        print(f"{tag} every row equal")


def one_step(seed, hbm_rows, psw, order):
    ref = make("hbm", Adam(lr=0.01), DIM, torch.float32, "sum", hbm_rows)
    m = make("hybrid", Adam(lr=0.01), DIM, torch.float32, "sum", hbm_rows)
    if order == "step":
        m._host_step_flags = lambda: m.__dict__.get("_host_flags", (0, 0))  # past the refusal (diagnostic only)
    gen = torch.Generator().manual_seed(seed)
    ids, off = batch(gen, False)
    p = torch.rand(ids.numel(), generator=gen).cuda() if psw else None
    w = torch.randn(48, 48, generator=torch.Generator().manual_seed(0)).cuda()  # the test's first weights
    snaps = []
    for x in (ref, m):
        q = None if p is None else p.clone().requires_grad_()
        o = x(ids, off, per_sample_weights=q)
        torch.cuda.synchronize()
        before = snapshot(x)
        (o.float() * w).sum().backward()
        torch.cuda.synchronize()
        snaps.append((before, snapshot(x)))
    compare(f"seed {seed} hbm_rows {hbm_rows} psw {psw} {order}:", snaps[0][1], snaps[1][1], snaps[1][0], hbm_rows)


if __name__ == "__main__":
    seeds = [int(s) for s in sys.argv[1:]] or [sum(b"sum-adam-16-psw") + 1024, 3]
    for s in seeds:
        for order in ("step", "forward"):
            one_step(s, 1024, True, order)
            one_step(s, 512, False, order)
