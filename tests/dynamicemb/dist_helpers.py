"""Helpers of the multi-process tests: spawn ranks (gloo on CPU, or nccl with one GPU per rank; a file store,
bounded time), global/local batches.

Workers are plain functions of this module, so spawned children import them by name (pytest's importlib mode
does not put the test files on sys.path; the spawn's preparation data carries this directory on it).
"""

import datetime
import os
import sys
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


#: NVLink multicast (NVLS) stays off in every process that runs NCCL here (the lent machines require it)
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def rank_device() -> torch.device:
    """The device of this rank's tensors: its GPU under nccl, the CPU under gloo."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _entry(rank, world, fn, args, store, errdir, backend):
    try:
        if backend == "nccl":
            os.environ.update(MULTICAST_OFF)  # before NCCL initializes in this process
            torch.cuda.set_device(rank)
        dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        torch.set_num_threads(1)
        fn(rank, world, *args)
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        with open(os.path.join(errdir, f"rank{rank}.err"), "w") as f:
            f.write(traceback.format_exc())
        raise
    # The rank's work is done and checked: leave without the interpreter's teardown, where a library's static
    # std::thread still joinable aborted a gloo rank once in 7 runs ("terminate called without an active exception").
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_ranks(fn, world, *args, timeout=150, backend="gloo"):
    """Runs ``fn(rank, world, *args)`` on ``world`` spawned ranks (``backend`` "gloo": CPU tensors; "nccl": rank r
    on GPU r, NVLink multicast off); raises AssertionError with the failing ranks' tracebacks (or on timeout,
    killing the ranks)."""
    if backend == "nccl":
        os.environ.update(MULTICAST_OFF)  # the children inherit it (and set it again before their NCCL init)
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        ctx = mp.start_processes(_entry, args=(world, fn, args, store, tmp, backend), nprocs=world, join=False,
                                 start_method="spawn")
        deadline = time.time() + timeout
        try:
            while not ctx.join(timeout=1.0):
                if time.time() > deadline:
                    raise AssertionError(f"ranks did not finish in {timeout} s")
        except mp.ProcessRaisedException:
            pass
        except mp.ProcessExitedException:
            pass
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
        errs = [open(os.path.join(tmp, f)).read() for f in sorted(os.listdir(tmp)) if f.endswith(".err")]
        if errs:
            raise AssertionError("rank failures:\n" + "\n".join(errs))
        bad = [p.exitcode for p in ctx.processes if p.exitcode != 0]
        if bad:
            raise AssertionError(f"ranks exited with codes {bad}")


def global_batch(gen, F, W, B, V, max_len=3, weighted=False, empty_features=(), empty_rank=None):
    """A batch of W * B samples, features-major, and each rank's slice of it.

    Returns (ids, offsets, weights, locals): ``locals[r]`` = (ids, offsets, weights, gpos) of rank r's samples
    [r * B, (r + 1) * B) of every feature; ``gpos`` maps its ids to positions in the global ids.
    ``empty_features`` / ``empty_rank``: bags of those features / of that rank's samples hold no ids."""
    L = torch.randint(0, max_len + 1, (F, W * B), generator=gen)
    for f in empty_features:
        L[f] = 0
    if empty_rank is not None:
        L[:, empty_rank * B:(empty_rank + 1) * B] = 0
    n = int(L.sum())
    ids = torch.randint(0, V, (n,), generator=gen)
    w = (torch.rand(n, generator=gen) + 0.5) if weighted else None
    offsets = torch.zeros(F * W * B + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(L.reshape(-1), 0)
    locs = []
    for r in range(W):
        pos = []
        lens = []
        for f in range(F):
            for b in range(r * B, (r + 1) * B):
                i = f * W * B + b
                pos.extend(range(int(offsets[i]), int(offsets[i + 1])))
                lens.append(int(L[f, b]))
        gpos = torch.tensor(pos, dtype=torch.int64)
        lo = torch.zeros(F * B + 1, dtype=torch.int64)
        lo[1:] = torch.cumsum(torch.tensor(lens, dtype=torch.int64), 0)
        locs.append((ids[gpos], lo, None if w is None else w[gpos], gpos))
    return ids, offsets, w, locs


def table_rows(table):
    """{key: (row tuple, score)} of a ScoredHashTable."""
    k, v, s = table.items()
    return {int(a): (tuple(b.tolist()), int(c)) for a, b, c in zip(k.view(torch.int64), v.float(), s)}
