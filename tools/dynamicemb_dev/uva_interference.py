"""What UVA row moves cost the kernels beside them (issue 32, the cold step's overlap question): a mover on one
stream (SM loads of random host rows into HBM, SM stores of HBM rows to random host rows, both mixed, or one
contiguous copy-engine D2H copy of the same bytes) and a victim on another (an HBM row gather shaped like the step's
forward gather, or a bf16 GEMM), each timed with CUDA events alone and beside each mover.

The rows: ROWS x 512 bytes (D128 fp32) moved per mover launch (the cold step moves ~110K a direction), at random
slots of a pinned host buffer of HOST_GB (the store's footprint decides the moves' rate: docs/dynamicemb_storage_notes.md).
The movers are Triton kernels on the pinned buffer's UVA address (the same SM load / store path as the staging's
move pass: 16-byte words); their grid is capped at BLOCKS_PER_SM x SMs programs
looping over the rows, 32 at a time (the move pass: 2 blocks of 256 threads per SM, 8 lanes per row).

Usage: python tools/dynamicemb_dev/uva_interference.py [--rows 110000] [--host-gb 4] [--reps 5]
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl


@triton.jit
def _move_rows(host, dev, idx, n, D: tl.constexpr, R: tl.constexpr, LOAD: tl.constexpr, STORE: tl.constexpr):
    """Programs stride over the rows, R at a time: LOAD: dev[k] = host[idx[k]]; STORE: host[idx[n + k]] = dev[n + k]
    (the write-back's slots differ from the read-in's); both: a mixed pass."""
    pid = tl.program_id(0)
    cols = tl.arange(0, D)[None, :]
    for k0 in range(pid * R, n, tl.num_programs(0) * R):
        ks = k0 + tl.arange(0, R)
        m = ks < n
        if LOAD:
            r = tl.load(idx + ks, mask=m, other=0).to(tl.int64)[:, None]
            v = tl.load(host + r * D + cols, mask=m[:, None])
            tl.store(dev + ks.to(tl.int64)[:, None] * D + cols, v, mask=m[:, None])
        if STORE:
            w = tl.load(idx + n + ks, mask=m, other=0).to(tl.int64)[:, None]
            v2 = tl.load(dev + (n + ks.to(tl.int64))[:, None] * D + cols, mask=m[:, None])
            tl.store(host + w * D + cols, v2, mask=m[:, None])


def ms(fn, start, end, stream):
    with torch.cuda.stream(stream):
        start.record(stream)
        fn()
        end.record(stream)
    return start, end


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=110_000)
    ap.add_argument("--host-gb", type=float, default=4.0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--blocks-per-sm", type=int, default=2)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("no GPU: skipped")
        return
    D = 128
    n = a.rows
    slots = int(a.host_gb * 2**30 / (D * 4))
    host = torch.empty(slots * D, dtype=torch.float32, pin_memory=True)
    host[: D * 1024].zero_()
    dev = torch.randn(2 * n * D, device="cuda")
    idx = torch.randperm(slots, device="cuda")[: 2 * n].to(torch.int32)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    R = 32  # rows per program and iteration (8 warps: 4 rows of 16-byte words per thread in flight, as the move pass)
    grid = (min(triton.cdiv(n, R), a.blocks_per_sm * sms),)
    hb = host.view(-1)

    def mover(kind):
        if kind == "ce":
            nbytes = n * D  # (fp32 elements of one direction's rows)
            return lambda: hb[:nbytes].copy_(dev[:nbytes], non_blocking=True)
        load, store = kind in ("load", "mixed"), kind in ("store", "mixed")
        return lambda: _move_rows[grid](hb, dev, idx, n, D=D, R=R, LOAD=load, STORE=store, num_warps=8)

    # victims: the forward's HBM gather (1.05M ids over a 1.3 GB table, D128 fp32) and a GEMM
    table = torch.randn(2_600_000, D, device="cuda")
    ids = torch.randint(0, table.shape[0], (1_048_570,), device="cuda")
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    victims = {"gather": lambda: table.index_select(0, ids), "gemm": lambda: x @ x}
    s_mov, s_vic = torch.cuda.Stream(priority=0), torch.cuda.Stream(priority=-1)
    for k in ("load", "store", "mixed", "ce"):
        mover(k)()
    for v in victims.values():
        v()
    torch.cuda.synchronize()

    def timed(fn, stream, reps):
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        with torch.cuda.stream(stream):
            for e0, e1 in ev:
                e0.record(stream)
                fn()
                e1.record(stream)
        return ev

    alone_m = {}
    for k in ("load", "store", "mixed", "ce"):
        ev = timed(mover(k), s_mov, a.reps)
        torch.cuda.synchronize()
        alone_m[k] = sorted(e0.elapsed_time(e1) for e0, e1 in ev)[a.reps // 2]
    print(f"\n### UVA movers alone ({n:,} rows of {D * 4} B a direction, {a.host_gb:g} GB pinned host buffer, grid "
          f"{grid[0]} programs of 256 threads, {R} rows each at a time; ms, median of {a.reps})")
    print("| mover | ms | GB/s (bytes of the rows moved) |\n|---|---:|---:|")
    for k, t in alone_m.items():
        by = n * D * 4 * (2 if k == "mixed" else 1)
        print(f"| {k} | {t:.3f} | {by / t / 1e6:.1f} |")

    print(f"\n### victims beside each mover (victim ms: median of {a.reps}; the mover runs in a loop on its own stream "
          "over the victim's whole span; the victim's stream has the higher priority)")
    print("| victim | alone | + load | + store | + mixed | + ce (D2H copy) |\n|---|---:|---:|---:|---:|---:|")
    for vn, vf in victims.items():
        ev = timed(vf, s_vic, a.reps)
        torch.cuda.synchronize()
        alone = sorted(e0.elapsed_time(e1) for e0, e1 in ev)[a.reps // 2]
        row = [f"{alone:.3f}"]
        for k in ("load", "store", "mixed", "ce"):
            reps_m = max(2, int(alone * a.reps / max(alone_m[k], 1e-3)) + 4)
            f = mover(k)
            with torch.cuda.stream(s_mov):
                for _ in range(2):  # (the mover first, so that the victim starts beside a running mover)
                    f()
            ev = timed(vf, s_vic, a.reps)
            with torch.cuda.stream(s_mov):
                for _ in range(reps_m):
                    f()
            torch.cuda.synchronize()
            row.append(f"{sorted(e0.elapsed_time(e1) for e0, e1 in ev)[a.reps // 2]:.3f}")
        print(f"| {vn} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
