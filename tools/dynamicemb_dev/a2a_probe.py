"""The sharded step's all_to_all alone: NCCL's rate for the rows' exchange at the step's sizes (lab probe, issue 37).

Each rank sends ``--rows`` rows of ``--dim`` columns (the sharded step's uniques per rank, D128) in equal shares to
every rank (itself included, as the step's all_to_all_single does), in fp32 and bf16, after a barrier and a device
sync (no skew between ranks, no host sync inside the timed call: NCCL's own rate). Prints per world and dtype the
median ms of one all_to_all and the rate of the bytes that leave the GPU ((W - 1) / W of the buffer) and of the whole
buffer. The sharded step's a2a column (benchmarks/embedding_distributed.py) against this separates NCCL's rate from
the step's skew, latency and host sync.

``--variants`` (each timed the same way, fp32 rows):
    nccl     all_to_all_single with the rank's own share in it (the step's call; the rows above)
    copy     the own share alone by a device copy (``copy_``): against nccl at world 1 (all of it the own share),
             what NCCL's copy of the own share costs over a plain copy
    noself   the remote shares only (batch_isend_irecv of W - 1 send / recv pairs; the own share not moved): what
             the step would pay if the owner wrote its own share in place
    vdev     torch.ops.symm_mem.all_to_all_vdev (NVSHMEM): the split sizes on the device, no host sync, the
             output sized by a bound (memory, not wire); "unavailable" with the reason where it does not run
    sync     the split sizes alone: all_to_all_single of (W, 10) int64 counts, then .tolist() (the step's host sync
             without the skew of the ranks' dedup)

    python tools/dynamicemb_dev/a2a_probe.py --worlds 1,2,4 [--rows 395713 --dim 128 --reps 20]
"""

import argparse
import os
import statistics
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def rank_main(rank, world, args, store, out):
    os.environ.update(MULTICAST_OFF)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=rank, world_size=world)
    rows = []
    for name in args.dtypes.split(","):
        n = (args.rows // world) * world  # equal shares
        send = torch.randn(n, args.dim, device="cuda").to(DTYPES[name])
        recv = torch.empty_like(send)
        splits = [n // world] * world
        t = _timed(lambda: dist.all_to_all_single(recv, send, splits, splits), args)
        nbytes = send.numel() * send.element_size()
        rows.append((name, t, nbytes))
    for v in [x for x in args.variants.split(",") if x != "nccl"]:
        try:
            rows.append((v, _variant(v, rank, world, args), None))
        except Exception as e:  # a variant that cannot run here reports why
            rows.append((v, f"unavailable: {type(e).__name__}: {str(e)[:150]}", None))
        if rank == 0:  # as it goes (a variant that hangs leaves the earlier ones printed)
            print(f"world {world} {v}: {rows[-1][1]}", flush=True)
    if rank == 0:
        torch.save(rows, out)
    dist.barrier()
    dist.destroy_process_group()


def _timed(fn, args):
    """Median ms of fn() after a barrier and a device sync each time (slowest rank)."""
    times = []
    for it in range(args.warmup + args.reps):
        dist.barrier()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        if it >= args.warmup:
            times.append(a.elapsed_time(b))
    t = torch.tensor([statistics.median(times)], dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def _variant(v, rank, world, args):
    share = args.rows // world
    n = share * world
    if v == "sync":
        cnt = torch.randint(0, 1000, (world * 10,), dtype=torch.int64, device="cuda")
        out = torch.empty_like(cnt)
        return _timed(lambda: (dist.all_to_all_single(out, cnt), out.tolist()), args)
    send = torch.randn(n, args.dim, device="cuda")
    if v == "copy":  # the own share copied by a plain device copy (what NCCL's self copy stands against)
        dst = torch.empty(share, args.dim, device="cuda")
        return _timed(lambda: dst.copy_(send[rank * share:(rank + 1) * share]), args)
    if v == "noself":
        recv = torch.empty_like(send)
        peers = [p for p in range(world) if p != rank]

        def noself():
            ops = []
            for p in peers:
                ops.append(dist.P2POp(dist.isend, send[p * share:(p + 1) * share], p))
                ops.append(dist.P2POp(dist.irecv, recv[p * share:(p + 1) * share], p))
            for w in dist.batch_isend_irecv(ops) if ops else []:
                w.wait()
        return _timed(noself, args)
    if v == "vdev":
        import torch.distributed._symmetric_memory as symm_mem

        if not symm_mem.is_nvshmem_available():
            raise RuntimeError("NVSHMEM not available in this torch build / system")
        symm_mem.set_backend("NVSHMEM")
        g = dist.group.WORLD.group_name
        dev = torch.device("cuda", rank)  # (explicit: NVSHMEM's team manager refuses a second device per process)
        inp = symm_mem.empty(n * args.dim, dtype=torch.float32, device=dev)
        out = symm_mem.empty(n * args.dim * 2, dtype=torch.float32, device=dev)  # a bound: 2x the equal share
        splits = symm_mem.empty(world, dtype=torch.int64, device=dev)
        oso = symm_mem.empty(2, world, dtype=torch.int64, device=dev)
        symm_mem.rendezvous(inp, g)
        symm_mem.rendezvous(out, g)
        inp.copy_(send.view(-1))
        splits.fill_(share * args.dim)  # on the device: no host value is needed by the call
        return _timed(lambda: torch.ops.symm_mem.all_to_all_vdev(inp, out, splits, oso, g), args)
    raise ValueError(f"--variants: unknown {v!r}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worlds", default="1,2,4,8")
    p.add_argument("--rows", type=int, default=395_713, help="rows per rank (default: the step's uniques, world 4)")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--dtypes", default="fp32,bf16")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--variants", default="nccl", help="comma-separated: nccl, noself, vdev, sync (see above)")
    args = p.parse_args(argv)
    os.environ.update(MULTICAST_OFF)
    have = torch.cuda.device_count()
    print(f"{torch.cuda.get_device_name(0)} x {have}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
          f"{args.rows} rows x D{args.dim} per rank\n")
    print("| world | dtype | MB per rank | leaving MB | ms | GB/s leaving | GB/s whole buffer |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for w in [int(x) for x in args.worlds.split(",")]:
        if w > have:
            print(f"| {w} | skipped: {have} GPU(s) | | | | | |")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rows.pt")
            mp.start_processes(rank_main, args=(w, args, os.path.join(tmp, "store"), out), nprocs=w,
                               start_method="spawn")
            for name, ms, nbytes in torch.load(out):
                if nbytes is None:  # a variant: fp32 rows, or the counts' sync
                    if isinstance(ms, str) or name in ("sync", "copy"):
                        print(f"| {w} | {name} | | | {ms if isinstance(ms, str) else f'{ms:.3f}'} | | |")
                        continue
                    nbytes = (args.rows // w) * w * args.dim * 4
                    mv = nbytes * (w - 1) / w
                    print(f"| {w} | fp32 {name} | {nbytes / 1e6:.1f} | {mv / 1e6:.1f} | {ms:.3f} | "
                          f"{mv / ms / 1e6:.0f} | {nbytes / ms / 1e6:.0f} |", flush=True)
                    continue
                leave = nbytes * (w - 1) / w
                print(f"| {w} | {name} | {nbytes / 1e6:.1f} | {leave / 1e6:.1f} | {ms:.3f} | "
                      f"{leave / ms / 1e6:.0f} | {nbytes / ms / 1e6:.0f} |", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
