"""The cold caching step (issue 32) with and without the store log: NVIDIA's config (10 tables x 1M ids, D128 fp32,
SGD or Adam), a 25 % HBM cache over the uva store, `--batches` distinct batches of 104,857 power-law ids per table
cycled (every step stages ~110K rows in and writes as many back), pipelined with prefetch (forward i, prefetch
i + 1, backward i; one sync at the end), and an all-HBM module on the same batches in the same process.

Variants (``--variants``, in order on ONE caching module): ``0`` the wheel's default (no log); ``SxM``: the store
log (private ``UvaStoreSpec(_log_segments=S, _log_segment_bytes=M MiB)``, dynamicemb/_uva_store.py StoreLog) set
on the module's stores (the previous log flushed first), warmed up over ``--log-warmup`` steps (the ring wraps).
Suffixes: ``/d2``: the prefetch two batches ahead (forward i, prefetch i + 2, backward i: a job's staging and moves
run beside the step before its batch's); ``/vN``: the staging's lab variant N (op _lookup_lab_stage; 13 / 14: the
move passes in 32 / 16 blocks).
Prints one markdown table: ms per step pipelined + prefetch (median of ``--rounds`` rounds of ``--steps`` steps),
synced + prefetch (median), x all-HBM, rows in / out per step, and the share of the write-backs the log took.

Usage: python tools/dynamicemb_dev/store_log_bench.py [--opt sgd] [--variants 0,64x64] [--label tier20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
from embedding_tiers import make_module, rows_moved, step_batches, train_step_fn  # noqa: E402

from dynamicemb._optimizers import SGD, Adam  # noqa: E402


def device_batches(T, B, rows, count):
    """step_batches' law (power law 1.05 over `rows` ids per table, scrambled, one id per bag) drawn on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(1)
    a = 1.0 - 1.05
    out = []
    for _ in range(count):
        u = torch.rand(T * B, generator=g, dtype=torch.float64, device="cuda")
        k = (((rows ** a - 1.0) * u + 1.0) ** (1.0 / a)).floor().clamp_(1, rows).to(torch.int64)
        out.append(((k * -7046029254386353131) & ((1 << 62) - 1),
                    torch.arange(0, T * B + 1, dtype=torch.int64, device="cuda")))
    return out


def set_log(m, segments: int, seg_mib: int) -> bool:
    """The module's store log replaced by one of `segments` x `seg_mib` MiB (0: none); False when this wheel has
    no store log."""
    try:
        from dynamicemb import _device_stage
    except ImportError:
        return False
    if not hasattr(_device_stage, "store_log"):
        return segments == 0
    old = m.__dict__.get("_store_log")
    if old:
        old.flush()
    for t in m.tables:
        st = getattr(t, "store", None)
        if st is not None and hasattr(st, "log_segments"):
            st.log_segments, st.log_segment_bytes, st.log = segments, seg_mib << 20, None
    m.__dict__.pop("_store_log", None)
    if segments:
        _device_stage.store_log(m)
    torch.cuda.synchronize()
    return True


def set_lab(v: int) -> bool:
    op = getattr(torch.ops.dynamicemb, "_lookup_lab_stage", None)
    if op is None:
        return v == 0
    try:
        op(v)
    except RuntimeError:
        return False
    return True


def pipelined_ms(one, steps: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        one(True)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3 / steps


def synced_ms(one, steps: int) -> float:
    ts = []
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        one(True)
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


OPTS = {"sgd": lambda: SGD(lr=0.01), "adam": lambda: Adam(lr=0.001)}
T, DIM, ROWS, B = 10, 128, 1 << 20, 104857  # NVIDIA's config: 10 tables x 1M ids, D128, 104,857 ids a table a step


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opt", default="sgd", choices=tuple(OPTS))
    ap.add_argument("--variants", default="0")
    ap.add_argument("--label", default="")
    ap.add_argument("--batches", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=64)
    ap.add_argument("--log-warmup", type=int, default=0, help="steps after setting a log (default: its segments)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hbm", action="store_true")
    ap.add_argument("--timeline", type=int, default=0, help="after each variant, a timeline of this many pipelined "
                    "steps (cold_step_profile.pipelined_timeline: every device op per stream, the period)")
    ap.add_argument("--host-batches", action="store_true", help="the batches drawn on the host (embedding_tiers' "
                    "step_batches: the same ids as its tables, ~1-3 s per batch on a slow host); default: the same "
                    "law drawn on the GPU (other ids, the same statistics)")
    return ap.parse_args()


def main():
    a = parse()
    if not torch.cuda.is_available():
        print("store_log_bench: no GPU, skipped")
        return
    t0 = time.perf_counter()
    data = (step_batches if a.host_batches else device_batches)(T, B, ROWS, a.batches)
    grad = torch.ones(T * B, DIM, device="cuda")
    opt, dim, rows = OPTS[a.opt], DIM, ROWS
    print(f"[{a.label}] {a.batches} batches: {time.perf_counter() - t0:.1f} s", flush=True)
    hbm = None
    if a.hbm:
        mh = make_module(T, dim, rows, opt(), "hbm", 1.0, None)
        fh = train_step_fn(mh, data, grad)
        for _ in range(a.batches):
            fh(False)
        hbm = statistics.median(pipelined_ms(lambda pre: fh(False), a.steps) for _ in range(a.rounds))
        print(f"[{a.label}] all-HBM pipelined {hbm:.3f} ms", flush=True)
        del mh, fh
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    t0 = time.perf_counter()
    m = make_module(T, dim, rows, opt(), "caching", 0.25, "uva")
    one = train_step_fn(m, data, grad)
    for _ in range(a.warmup):
        one(True)
    torch.cuda.synchronize()
    print(f"[{a.label}] caching module + {a.warmup} warm-up steps: {time.perf_counter() - t0:.1f} s", flush=True)
    out = []
    for v in a.variants.split(","):
        parts = v.split("/")
        segs, mib = (0, 0) if parts[0] == "0" else (int(parts[0].split("x")[0]), int(parts[0].split("x")[1]))
        depth = 2 if "d2" in parts else 1
        lab = next((int(x[1:]) for x in parts[1:] if x.startswith("v")), 0)
        t0 = time.perf_counter()
        if not set_lab(lab):
            print(f"[{a.label}] {v}: this wheel has no lab variant {lab}: skipped")
            continue
        if not set_log(m, segs, mib):
            print(f"[{a.label}] {v}: this wheel has no store log: skipped")
            continue
        one.ahead = depth
        for _ in range(a.log_warmup or max(segs + 2, 8)):
            one(True)
        r0, lg = rows_moved(m), m.__dict__.get("_store_log")
        l0 = lg.last if lg else 0
        piped = [pipelined_ms(one, a.steps) for _ in range(a.rounds)]
        n_piped = a.steps * a.rounds
        r1 = rows_moved(m)
        synced = synced_ms(one, a.steps)
        logged = ""
        if lg:  # rows of the launches' stashes (the log's share): the stash rows one launch holds
            row_b = 4 * opt().row_width(dim)
            per = lg.segment_bytes // ((row_b + 15) // 16 * 16)
            logged = f"<= {min(1.0, per / max((r1[1] - r0[1]) / n_piped, 1)):.0%}"
        if a.timeline:
            from cold_step_profile import pipelined_timeline

            pipelined_timeline(one, a.timeline, f"{a.label} {v}")
        pm = statistics.median(piped)
        out.append((v, pm, min(piped), max(piped), synced, hbm, (r1[0] - r0[0]) / n_piped, (r1[1] - r0[1]) / n_piped,
                    logged, (lg.last - l0) if lg else 0))
        print(f"[{a.label}] {v}: pipelined + prefetch {pm:.3f} ms ({', '.join(f'{x:.3f}' for x in piped)}), synced "
              f"{synced:.3f}; {time.perf_counter() - t0:.1f} s", flush=True)
    name = torch.cuda.get_device_name()
    print(f"\n### [{a.label}] cold step, {a.opt}, 25 % cache over the uva store, {a.batches} batches cycled ({name})\n")
    print("| variant | pipelined + prefetch ms (median / min / max) | synced + prefetch ms | x all-HBM | rows in / out "
          "per step | log's share of the write-backs | logging launches |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for v, pm, lo, hi, sy, h, rin, rout, lgd, nl in out:
        p = v.split("/")
        name = ("default (no log)" if p[0] == "0" else f"log {p[0]} MiB") + (", depth 2" if "d2" in p else "")
        name += "".join(f", lab {x[1:]}" for x in p[1:] if x.startswith("v"))
        ratio = f"{pm / h:.2f}x" if h else "-"
        print(f"| {name} | {pm:.3f} / {lo:.3f} / {hi:.3f} | {sy:.3f} | {ratio} | {rin:,.0f} / {rout:,.0f} | "
              f"{lgd or '-'} | {nl} |")
    if hbm:
        print(f"| all-HBM | {hbm:.3f} | | 1.00x | | | |")


if __name__ == "__main__":
    main()
