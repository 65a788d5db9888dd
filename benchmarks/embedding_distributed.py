"""Sharded dynamic embedding benchmark, weak scaling: ShardedDynamicEmbeddingTables at world 1, 2, 4, 8.

Workload per rank (benchmarks/embedding.py's, per rank): 10 tables x D128 fp32, one feature each, 104,857 samples
per feature and rank, bags of 1..10 ids (uniform), ids from a power law P(k) ~ k^-1.05 over [1, --id-space] per
table, scrambled (hot ids are not small integers); global capacity --capacity slots per table per rank (so each
rank holds the same share at every world size). ``--preset nvidia``: NVIDIA dynamicemb's published config per
rank: 10 tables x 104,857 samples of ONE id, power law 1.05 over 1,677,721 ids, 1M slots per table.
Weak scaling: the id space grows with the world too (--id-space per rank; ``--fixed-id-space`` keeps it global),
so each owner holds and receives about the same number of ids at every world size.
Cases: pooling none and sum x SGD and Adam, each "pooling/optimizer[/storage]": storage "hybrid" or "caching"
keeps --hbm-fraction of each table's rows in HBM (docs/dynamicemb_storage.md), default all in HBM.
The ranks are spawned by this script (nccl on GPUs, one per rank, NVLink multicast off; gloo on CPU).

Columns (ms, median over --reps steps of the slowest rank, CUDA events on GPU):
    train      forward + backward (with the fused update on the owners) of one step
    a2a        all_to_alls of the step: split sizes (+ the host sync), ids, rows back, gradients (CUDA events
               around each; a rank that arrives early waits inside them, so skew between ranks counts here)
    sync, rows, grads   parts of a2a: the split sizes' all_to_all + host sync, the rows' and the gradients'
    counts     part of sync: the counts' all_to_all on the device (NCCL's latency + waiting for the slowest
               rank's dedup), max / min over the ranks (their difference: the ranks' skew); the rest of sync is
               the device-to-host copy and the host's list work (0 where the module has no "counts a2a" mark)
    wire       dtype of the rows / gradients on the all_to_alls (--qcomms: fp32 = the exact default; bf16 / fp16 =
               ``QCommsConfig``, the casts counted in local)
    lookup     the owners' shard modules: find_or_insert + row gather (forward), optimizer update (backward)
    local      the rest on the sending rank: dedup + routing, pooling, per-unique gradient sums
    ids/rank   ids per rank and step; uniq = unique (table, id) pairs a rank sends per step

Usage:
    python benchmarks/embedding_distributed.py [--worlds 1,2,4,8] [--quick] [--results FILE] [--plot out.png]
    python benchmarks/embedding_distributed.py --preset nvidia --cases none/adam/hybrid,none/adam/caching
    python benchmarks/embedding_distributed.py --preset nvidia --cases none/sgd --qcomms fp32,bf16
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import parser, provenance, publish, pyplot, save_figure  # noqa: E402
from embedding import add_workload_args, make_batch  # noqa: E402  (the single-GPU benchmark's workload)

A2A = ("counts a2a", "splits a2a", "ids a2a", "rows a2a", "grads a2a")
#: NVLink multicast (NVLS) off in every rank (the lent multi-GPU machines require it)
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
LOOKUP = ("lookup", "update")
WIRE = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}  # --qcomms


def phase_ms(log, device):
    """{phase: ms} from the module's phase log (each mark closes the phase named by it)."""
    out = {}
    if device.type == "cuda":
        torch.cuda.synchronize()
    for (_, a), (name, b) in zip(log[:-1], log[1:]):
        if name in ("start", "bwd start"):
            continue
        ms = a.elapsed_time(b) if device.type == "cuda" else (b - a) * 1e3
        out[name] = out.get(name, 0.0) + ms
    return out


def rank_main(rank, world, args, store, result_file):
    import dynamicemb as de

    backend = "nccl" if args.device == "cuda" else "gloo"
    if backend == "nccl":
        os.environ.update(MULTICAST_OFF)
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world)
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    T, B = args.tables, args.batch // args.tables
    gen = torch.Generator().manual_seed(1000 + rank)
    space = args.id_space * (1 if args.fixed_id_space else world)
    batches = [make_batch(T, B, args.hotness, space, args.alpha, gen) for _ in range(4)]
    batches = [(i.to(device), o.to(device)) for i, o in batches]
    rows = []
    for case, wire in [(c, q) for c in args.cases.split(",") for q in args.qcomms.split(",")]:
        pooling, opt_name, storage = parse_case(case)
        qc = None if wire == "fp32" else de.QCommsConfig(WIRE[wire], WIRE[wire])
        opt = de.SGD(lr=0.01) if opt_name == "sgd" else de.Adam(lr=1e-3)
        extra = {}
        if storage != "hbm":  # a global budget: --hbm-fraction of the rows ([embedding | optimizer state], fp32)
            row_bytes = args.dim * 4 * (3 if opt_name == "adam" else 1)
            extra = dict(storage=storage, hbm_budget_bytes=int(args.hbm_fraction * args.capacity * world) * row_bytes)
        tables = [de.DynamicEmbTableOptions(dim=args.dim, max_capacity=args.capacity * world, on_refused="zero",
                                            **extra)] * T
        m = de.ShardedDynamicEmbeddingTables(tables, pooling=pooling, optimizer=opt, device=device, qcomms=qc)
        grad = None
        steps, phases = [], []
        for it in range(args.warmup + args.reps):
            ids, off = batches[it % len(batches)]
            m.phase_log = [] if it >= args.warmup else None
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = m(ids, off, validate=False)
            if grad is None or grad.shape != out.shape:
                grad = torch.ones_like(out)
            out.backward(grad)
            if device.type == "cuda":
                torch.cuda.synchronize()
            dt = (time.perf_counter() - t0) * 1e3
            if it >= args.warmup:
                steps.append(dt)
                phases.append(phase_ms(m.phase_log, device))
        med = {k: statistics.median(p.get(k, 0.0) for p in phases) for k in phases[0]}
        r = torch.tensor([statistics.median(steps), sum(med.get(k, 0.0) for k in A2A),
                          sum(med.get(k, 0.0) for k in LOOKUP),
                          sum(v for k, v in med.items() if k not in A2A + LOOKUP)] +
                         [med.get("counts a2a", 0.0) + med.get("splits a2a", 0.0)] +
                         [med.get(k, 0.0) for k in ("rows a2a", "grads a2a", "counts a2a")], dtype=torch.float64)
        r = r.to(device)
        wait_min = r[-1:].clone()
        dist.all_reduce(r, op=dist.ReduceOp.MAX)  # the slowest rank sets the step
        dist.all_reduce(wait_min, op=dist.ReduceOp.MIN)  # the rank that came last to the counts waited least
        r = torch.cat([r, wait_min])
        n_ids = sum(int(o[-1]) for _, o in batches) // len(batches)
        # unique (table, id) pairs one rank sends: the ids all_to_all's payload
        ids0, off0 = batches[0]
        tbl = torch.repeat_interleave(torch.arange(T, device=device), (off0[B::B] - off0[:-1:B]))
        uniq = torch.unique(torch.stack([tbl, ids0]), dim=1).shape[1]
        rows.append((pooling, opt_name, storage, wire, [float(x) for x in r.tolist()], n_ids, uniq))
        del m
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if rank == 0:
        torch.save(rows, result_file)
    dist.barrier()
    dist.destroy_process_group()


def parse_case(case):
    """"pooling/optimizer[/storage]" -> (pooling, optimizer, storage)."""
    parts = case.split("/")
    if len(parts) not in (2, 3) or parts[0] not in ("none", "sum", "mean") or parts[1] not in ("sgd", "adam") or (
            len(parts) == 3 and parts[2] not in ("hbm", "hybrid", "caching")):
        raise SystemExit(f"--cases: expected pooling/optimizer[/storage] (none|sum|mean / sgd|adam / "
                         f"hbm|hybrid|caching), got {case!r}")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else "hbm"


def markdown_table(results, args, hw):
    """The table of all world sizes (rows as rank_main leaves them), headed by the workload."""
    T = args.tables
    lines = [
        f"### dynamicemb sharded embedding, weak scaling, on {hw}",
        "",
        f"Per rank: {T} tables x D={args.dim} fp32 rows (rows and gradients on the wire in the wire column's "
        f"dtype, int64 ids), "
        f"{args.batch // T} samples x {T} features, hotness 1..{args.hotness}, power law alpha={args.alpha} over "
        f"{args.id_space} ids{' (global)' if args.fixed_id_space else ' per rank (x world)'}, {args.capacity} "
        f"slots/table/rank, routing hash; storage hybrid/caching: {args.hbm_fraction:.0%} of the rows in HBM. "
        f"Times in ms per step (median of {args.reps}, slowest rank); a2a = all_to_alls incl. the split-size sync, "
        f"lookup = owners' find_or_insert + update, local = dedup, pooling, gradient sums.",
        "",
        "| world | pooling | optimizer | storage | wire | train (ms) | a2a (ms) | sync | counts max / min | rows | "
        "grads | lookup (ms) | local (ms) | ids/rank | uniq/rank |",
        "|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w, rows in results.items():
        for pooling, opt_name, storage, wire, times, n_ids, uniq in rows:
            train, a2a, lookup, local, sync, ra, ga, cmax, cmin = times
            lines.append(f"| {w} | {pooling} | {opt_name} | {storage} | {wire} | {train:.3f} | {a2a:.3f} | {sync:.3f} "
                         f"| {cmax:.3f} / {cmin:.3f} | {ra:.3f} | {ga:.3f} | {lookup:.3f} | {local:.3f} | {n_ids} | "
                         f"{uniq} |")
    return "\n".join(lines) + "\n"


def plot(results, path, hw):
    """Step and all_to_all time per case against the world size."""
    plt = pyplot(path)
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    cases = [r[:4] for r in next(iter(results.values()))]
    for i, (pooling, opt_name, storage, wire) in enumerate(cases):
        ws = sorted(results)
        name = f"{pooling}/{opt_name}" + ("" if storage == "hbm" else f"/{storage}") + ("" if wire == "fp32" else
                                                                                         f"/{wire}")
        ax.plot(ws, [results[w][i][4][0] for w in ws], "o-", label=f"{name} train")
        ax.plot(ws, [results[w][i][4][1] for w in ws], "x--", label=f"{name} a2a")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("world size (ranks)")
    ax.set_ylabel("ms per step")
    ax.set_title(f"dynamicemb weak scaling on {hw}")
    ax.legend(fontsize=7)
    save_figure(fig, path, dpi=100)


def main(argv=None):
    p = parser(__doc__, quick="small sizes (smoke test; also runs on CPU)")
    p.add_argument("--worlds", default="1,2,4,8", help="world sizes (default 1,2,4,8; sizes above the GPU count "
                                                         "are skipped on GPUs)")
    add_workload_args(p, per_rank=True)
    p.add_argument("--cases", default="none/sgd,none/adam,sum/sgd,sum/adam",
                   help="comma-separated pooling/optimizer[/storage] (storage: hbm (default), hybrid, caching)")
    p.add_argument("--preset", choices=["default", "nvidia"], default="default",
                   help="nvidia: NVIDIA dynamicemb's published config per rank (10 tables x 104,857 samples of one "
                        "id, power law 1.05 over 1,677,721 ids, 1M slots per table)")
    p.add_argument("--qcomms", default="fp32",
                   help="comma-separated wire dtypes of the rows and gradients, each case runs with each: fp32 (the "
                        "exact default), bf16, fp16 (QCommsConfig)")
    p.add_argument("--hbm-fraction", type=float, default=0.25,
                   help="share of each table's rows in HBM for the hybrid/caching cases (default 0.25)")
    p.add_argument("--fixed-id-space", action="store_true",
                   help="one id space for all world sizes (default: --id-space per rank, growing with the world)")
    p.add_argument("--results", help="append the markdown table (with commit and command) to this file")
    p.add_argument("--plot", help="write a PNG plot of step time vs world size here (needs matplotlib)")
    args = p.parse_args(argv)
    if args.preset == "nvidia":
        args.tables, args.batch, args.hotness, args.dim, args.alpha = 10, 1_048_570, 1, 128, 1.05
        args.id_space, args.capacity = 1_677_721, 1 << 20
    for c in args.cases.split(","):
        parse_case(c)
    if any(q not in WIRE for q in args.qcomms.split(",")):
        raise SystemExit(f"--qcomms: expected fp32, bf16 or fp16 (comma-separated), got {args.qcomms!r}")
    if args.quick:
        args.batch, args.capacity, args.id_space, args.warmup, args.reps = 2_000, 1 << 14, 100_000, 2, 3
    worlds = [int(w) for w in args.worlds.split(",")]
    if args.device == "cuda":
        have = torch.cuda.device_count()
        skipped = [w for w in worlds if w > have]
        worlds = [w for w in worlds if w <= have]
        if skipped:
            print(f"skipping world sizes {skipped}: {have} GPU(s) here", flush=True)
    if args.device == "cuda":
        os.environ.update(MULTICAST_OFF)  # inherited by the spawned ranks (which set it again)
    results = {}
    for w in worlds:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rows.pt")
            mp.start_processes(rank_main, args=(w, args, os.path.join(tmp, "store"), out), nprocs=w,
                               start_method="spawn")
            results[w] = torch.load(out)
        for pooling, opt_name, storage, wire, (train, a2a, lookup, local, *_), n_ids, uniq in results[w]:
            print(f"world {w} {pooling:4s} {opt_name:4s} {storage:7s} {wire} train {train:.3f} a2a {a2a:.3f} lookup "
                  f"{lookup:.3f} local {local:.3f} ms", flush=True)
    hw = (f"{torch.cuda.get_device_name(0)} (one per rank, nccl)" if args.device == "cuda"
          else f"CPU ({os.cpu_count()} cores), gloo")
    publish(markdown_table(results, args, hw), args.results, provenance(argv))
    if args.plot:
        plot(results, args.plot, hw)


if __name__ == "__main__":
    main()
