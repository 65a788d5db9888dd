"""Python and autograd overhead of the fused-kernel training step, measured on the CPU (no GPU needed).

The CUDA module's step is host-bound at NVIDIA's config (docs/dynamicemb.md, "Speed notes: the train step"): the
host takes ~0.43 ms to reach the backward's launch. This script runs the kernel path's Python (forward checks,
table metadata, the autograd function, the backward's bookkeeping) on a CPU module whose two ops,
lookup_step and lookup_backward, are replaced by stubs that return preallocated tensors, so the Python can be
trimmed and timed without a device. What it does not see: the ops' C++ (launches), the CUDA-only steps (pinned
mirror copies, the step counter's kernel, autograd's device thread), so compare its figures with each other, not
with a GPU step.

``--storage uva``: the tables are caching tables over the uva store with 25 % of the rows in the cache (issue 32),
staged by op cache_stage (stubbed as well: the step's staging Python, not the op, is timed); every step's ids are
in the caches (a warm set).

``--prefetch full|bound`` (with ``--storage uva``): every step also prefetches its next batch between its forward
and backward, as a device batch (``_prefetch.queue_device``: the job of op cache_stage on a side stream), with the
CUDA calls stubbed (streams, events, ``record_stream``: no-ops) and the stub op writing 0 into the job's flag slot
(the job staged its batch: the step stages nothing). ``full``: every prefetch takes the full path (``serves``,
``queue_device``, ``_device_stage.stage``); ``bound``: ``prefetch`` through the module's bound job
(``_prefetch._DeviceBinding``), as on CUDA after the first, every job queued (``prefetch_adaptive`` off);
``adaptive``: the same with ``prefetch_adaptive`` on (the stub's misses are 0: a warm set, so 15 prefetches in 16
queue nothing and their steps stage themselves). The stubs skip CUDA calls the paths make, so the differences are
Python only.

Prints the mean us per step and, with --profile, the functions by own time per step (cProfile adds its own cost).

Usage:
    python benchmarks/host_python_embedding.py [--opt adam] [--steps 2000] [--profile] [--storage hbm|uva]
        [--prefetch none|full|bound|adaptive]
"""

from __future__ import annotations

import cProfile
import ctypes
import os
import pstats
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import parser  # noqa: E402

from dynamicemb import SGD, Adam, BatchedDynamicEmbeddingTables, DynamicEmbTableOptions  # noqa: E402
from dynamicemb._batched_kernels import _step_ws_entries  # noqa: E402


def _stub_cuda_prefetch(m, ids, offsets, mode: str):
    """(prefetch function, restore function): a device prefetch of (ids, offsets) on the CPU module ``m`` with its
    CUDA calls stubbed (see the module docstring); ``mode`` full, bound or adaptive."""
    from dynamicemb import _prefetch

    class _Event:
        def record(self, stream=None):
            pass

        def wait(self, stream=None):
            pass

    class _Stream:
        stream_id, device_index, device_type = 0, -1, 1

        def wait_event(self, event):
            pass

    side, key = _Stream(), (0, -1, 1)
    saved = []
    m.prefetch_adaptive = mode == "adaptive"

    def patch(obj, name, value):
        saved.append((obj, name, getattr(obj, name, None)))
        setattr(obj, name, value)

    patch(torch.cuda, "Event", _Event)
    patch(torch.cuda, "current_stream", lambda device=None: side)
    patch(torch.cuda, "current_device", lambda: -1)
    patch(torch.cuda, "set_stream", lambda stream: None)
    patch(torch.Tensor, "record_stream", lambda self, stream: None)
    patch(_prefetch, "_GET_STREAM", lambda index: key)
    patch(_prefetch, "_SET_STREAM", lambda *a: None)
    patch(_prefetch, "_GET_DEVICE", lambda: -1)
    patch(_prefetch, "_CAPTURING", lambda: False)
    if hasattr(_prefetch, "_STREAMS"):
        _prefetch._STREAMS[key] = side

    def prefetch():
        if mode == "full":
            m.__dict__.pop(getattr(_prefetch, "_BIND", "_prefetch_bind"), None)
            m._prefetch_stage(ids, offsets, side)
        elif getattr(_prefetch, "_BIND", "_prefetch_bind") not in m.__dict__:
            m._prefetch_stage(ids, offsets, side)  # (the first: binds)
        else:
            m.prefetch(ids, offsets)

    def restore():
        for obj, name, v in reversed(saved):
            setattr(obj, name, v)
        getattr(_prefetch, "_STREAMS", {}).pop(key, None)

    return prefetch, restore


def stub_module(opt_name: str, tables: int, samples: int, dim: int, storage: str = "hbm", prefetch: str = "none"):
    """(module, step function, restore function): a CPU module on the kernel path with its ops stubbed (lookup_step,
    lookup_backward; with ``storage`` "uva" caching tables over the uva store, staged by a stubbed cache_stage)."""
    opt = Adam(lr=1e-3) if opt_name == "adam" else SGD(lr=0.01)
    cap = 1 << 12
    kw = {}
    if storage == "uva":
        from dynamicemb._uva_store import UvaStoreSpec

        kw = dict(storage="caching", backing_store=UvaStoreSpec(), hbm_budget_bytes=cap // 4 * opt.row_width(dim) * 4)
    m = BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=dim, max_capacity=cap, **kw)] * tables,
                                      pooling="none", optimizer=opt, device="cpu")
    m.device_staging = storage == "uva"  # op cache_stage (the CUDA default over the uva store)
    # what the CUDA constructor sets up for the kernel path
    m._ftable_i32 = torch.tensor(m.feature_table_map, dtype=torch.int32)
    m._fcol = torch.zeros(len(m.feature_table_map), dtype=torch.int64)
    m.use_kernels = True
    m._kernel_meta()
    n = tables * samples
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 1 << 40, (n,), generator=gen)
    offsets = torch.arange(n + 1)
    out = torch.empty(n, dim)
    ws = torch.zeros(_step_ws_entries(n, tables), dtype=torch.int64)
    grad = torch.ones(n, dim)
    ns = torch.ops.dynamicemb
    real = {k: getattr(ns, k) for k in ("lookup_step", "lookup_backward", "cache_stage")}
    setattr(ns, "lookup_step", lambda *a, **k: (out, ws))
    setattr(ns, "lookup_backward", lambda *a: out.new_empty(0))
    failed, info = torch.zeros(1, dtype=torch.int32), torch.zeros(2 * tables + 5, dtype=torch.int64)

    def cache_stage(*a):
        if len(a) > 14 and a[14]:  # the flag slot of a prefetch job: its batch staged
            ctypes.c_int32.from_address(a[14]).value = 0
        return failed, info

    setattr(ns, "cache_stage", cache_stage)
    pre, pre_restore = (_stub_cuda_prefetch(m, ids, offsets, prefetch) if prefetch != "none"
                        else (None, lambda: None))

    def step():
        out = m(ids, offsets, validate="off")
        if pre is not None:
            pre()  # (the next batch: the same tensors here, which the next step takes)
        out.backward(grad)

    def restore():
        pre_restore()
        for k, v in real.items():
            setattr(ns, k, v)

    return m, step, restore


def main(argv=None):
    p = parser(__doc__, quick="few steps (smoke test)")
    p.add_argument("--opt", choices=["sgd", "adam"], default="sgd")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--tables", type=int, default=10)
    p.add_argument("--samples", type=int, default=1000, help="ids per table (the Python does not depend on it)")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--profile", action="store_true", help="also list the functions by own time (cProfile)")
    p.add_argument("--storage", choices=["hbm", "uva"], default="hbm",
                   help="uva: caching tables over the uva store (25 %% cache), staged by a stubbed op cache_stage")
    p.add_argument("--prefetch", choices=["none", "full", "bound", "adaptive"], default="none",
                   help="with --storage uva: a device prefetch per step through the full path or the bound job")
    args = p.parse_args(argv)
    if args.quick:
        args.steps = 20
    if args.prefetch != "none" and args.storage != "uva":
        p.error("--prefetch: expected --storage uva")
    _, step, restore = stub_module(args.opt, args.tables, args.samples, args.dim, args.storage, args.prefetch)
    try:
        for _ in range(max(args.steps // 20, 5)):
            step()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        us = (time.perf_counter() - t0) / args.steps * 1e6
        pre = f" + prefetch ({args.prefetch})" if args.prefetch != "none" else ""
        print(f"{args.opt} {args.storage}{pre}: {us:.1f} us of Python per step (ops stubbed, CPU, mean of "
              f"{args.steps})")
        rows = []
        if args.profile:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(args.steps):
                step()
            pr.disable()
            for (f, line, name), (_, nc, tt, ct, _) in pstats.Stats(pr).stats.items():
                rows.append((tt / args.steps * 1e6, ct / args.steps * 1e6, nc / args.steps,
                             f"{os.path.basename(f)}:{line}({name})"))
            rows.sort(reverse=True)
            print("| own us | cumulative us | calls | function |\n|---:|---:|---:|---|")
            for own, cum, calls, name in rows[:40]:
                print(f"| {own:.1f} | {cum:.1f} | {calls:.1f} | {name} |")
    finally:
        restore()
    return us, rows


if __name__ == "__main__":
    main()
