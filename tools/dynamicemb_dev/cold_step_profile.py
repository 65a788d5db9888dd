"""The cold caching step (issue 32) kernel by kernel: NVIDIA's config (10 tables x 104,857 ids, D128 fp32, SGD or `--opt adam`), a
25 % HBM cache over the uva store, 64 distinct batches cycled (every step stages ~106K rows in and writes as many
back), after one warm-up cycle.

1. timeline: every kernel of one step with prefetch (the next batch's staging on the side stream), in start order:
   start (us from the step's first kernel), duration, stream;
2. variants (wheels with the private op ``_lookup_lab_stage``, stage_kernels.cu; older wheels: ``_stage_variant``):
   per variant, the staging kernels' device ms per step (torch profiler, synced steps without prefetch) and the
   step's ms synced / pipelined, with and without prefetch; ``thp``: the stores' rows moved to THP-registered host
   memory first (session 13: the moves did not change, 2.10 ms against 2.09); ``wc``: to write-combined pinned
   memory (unsnooped PCIe accesses); ``capN``: a new module whose stores have N slots per table (fewer 64 KB host
   regions for the same rows); ``slotmajor``: the stores' host rows moved into the slot-major layout (private
   ``HybridTable._set_host_slot_major``: slot j of every bucket contiguous, table_types.h ``host_row_of``);
   ``split1`` / ``split2`` / ``ceN`` and lab variants 11-15: branch tier17's split prefetch job (not in main);
   lab variants 13-20 of branch tier19's commit 3245262: the moves off the step's critical path (timing what-ifs,
   docs/dynamicemb_storage_notes.md "Every byte by the copy engines");
3. ``--pipelined N``: N pipelined steps with prefetch in one profile, with a marker kernel before each: the device
   ops per stream, each step's period, each stream's busy time and their overlap (``--timeline-at``: also at
   chosen variants); ``--hbm``: an all-HBM module's step on the same batches first.

Usage: python tools/dynamicemb_dev/cold_step_profile.py [--variants 3,0,1] [--label main] [--warmup 64]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
from embedding_tiers import make_module, rows_moved, step_batches, train_step_fn  # noqa: E402

from dynamicemb._optimizers import SGD, Adam  # noqa: E402

KERNELS = ("probe_kernel", "stage_list", "stage_owner", "stage_kernel", "move_scan", "move_scatter", "move_stash",
           "move_out", "move_bulk", "move_in_unplace")


def lab_op():
    """The staging's lab selector of this wheel (variant -1 reads it), or None."""
    ops = torch.ops.dynamicemb
    for name in ("_lookup_lab_stage", "_stage_variant"):
        if hasattr(ops, name):
            return getattr(ops, name)
    return None


def short(name):
    n = name.split("(")[0]
    for k in ("dynamicemb::lookup::detail::", "dynamicemb::table::detail::", "void ", "at::native::"):
        n = n.replace(k, "")
    return n[:60]


def anon_huge_mb():
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("AnonHugePages"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def move_stores(m, alloc):
    """Moves every caching table's store rows into host memory from ``alloc(nbytes)`` -> (owner kept alive, uint8
    CPU tensor of nbytes the GPU can address) or None (a failure, printed). Lab only: the stores' other users are
    not updated. Returns the owners, or None."""
    keep = []
    for t in m.tables:
        st = getattr(getattr(t, "store", None), "table", None)
        old = getattr(st, "values_host", None)
        if old is None:
            continue
        got = alloc(old.numel() * old.element_size())
        if got is None:
            return None
        new = got[1].view(old.dtype).view(old.shape)
        new.copy_(old)
        keep.append(got)
        st.values_host = new
        if hasattr(st, "_state") and isinstance(st._state, dict) and "values_host" in st._state:
            st._state["values_host"] = new
    m.__dict__.pop("_stage_meta", None)
    torch.cuda.synchronize()
    return keep


def thp_stores(m):
    """The stores' rows (pinned host memory from torch's allocator: cudaHostAlloc) moved into anonymous mappings
    advised MADV_HUGEPAGE (2 MB aligned) and registered with cudaHostRegister: whether the moves' per-host-region
    cost follows the host pages' size."""
    import ctypes
    import mmap

    def alloc(nbytes):
        align = 2 << 20
        mm = mmap.mmap(-1, nbytes + align, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        off = (-ctypes.addressof(ctypes.c_char.from_buffer(mm))) % align
        mm.madvise(mmap.MADV_HUGEPAGE, off, nbytes - nbytes % align)
        buf = torch.frombuffer(mm, dtype=torch.uint8)[off:off + nbytes]
        rc = torch.cuda.cudart().cudaHostRegister(buf.data_ptr(), nbytes, 0)
        if int(rc) != 0:
            print(f"cudaHostRegister failed: {rc}")
            return None
        return mm, buf

    before, t0 = anon_huge_mb(), time.perf_counter()
    keep = move_stores(m, alloc)
    print(f"thp stores: {len(keep or [])} buffers in {time.perf_counter() - t0:.1f} s; AnonHugePages {before:.0f} "
          f"-> {anon_huge_mb():.0f} MB")
    return keep


def wc_stores(m):
    """The stores' rows moved into write-combined pinned host memory (cuMemHostAlloc with
    CU_MEMHOSTALLOC_WRITECOMBINED: the GPU's accesses cross PCIe unsnooped; the CPU reads it slowly): whether the
    moves are bound by the host's cache snoops."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]

    def alloc(nbytes):
        ptr = ctypes.c_void_p()
        rc = cuda.cuMemHostAlloc(ctypes.byref(ptr), nbytes, 1 | 2 | 4)  # portable, device-mapped, write-combined
        if rc != 0:
            print(f"cuMemHostAlloc failed: {rc}")
            return None
        arr = (ctypes.c_uint8 * nbytes).from_address(ptr.value)
        return arr, torch.frombuffer(arr, dtype=torch.uint8)

    t0 = time.perf_counter()
    keep = move_stores(m, alloc)
    print(f"wc stores: {len(keep or [])} buffers in {time.perf_counter() - t0:.1f} s")
    return keep


class HostLoad:
    """What a copy-engine step asks of the host (a read-in gathered and a write-back scattered by the host's cores):
    `pcie_move_probe load N` in a process of its own, N/2 threads gathering 110K random 512-byte rows of a 2 GB
    buffer and N/2 scattering as many, over and over, while the steps run; ``close`` stops it and returns its line
    (ms per 110K rows each way)."""

    def __init__(self, binary, threads):
        import subprocess

        self.proc = subprocess.Popen([binary, "load", str(threads)], stdout=subprocess.PIPE, text=True)

    def close(self):
        self.proc.terminate()
        try:
            return self.proc.communicate(timeout=10)[0].strip()
        except Exception as e:  # noqa: BLE001  (a lab tool: report and go on)
            self.proc.kill()
            return f"host load: no report ({e})"


def step_ms(one, pre, n_synced, n_pipelined):
    """(median ms of n_synced steps each followed by a device sync, mean ms of n_pipelined steps queued back to back
    with one sync at the end); ``one(pre)`` runs a step (pre: with the next batch's prefetch)."""
    ts = []
    for _ in range(n_synced):
        t0 = time.perf_counter()
        one(pre)
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    t0 = time.perf_counter()
    for _ in range(n_pipelined):
        one(pre)
    torch.cuda.synchronize()
    return statistics.median(ts), (time.perf_counter() - t0) * 1e3 / n_pipelined


def _union(iv):
    """Total length of the union of intervals [(start, end)]."""
    tot, cur_s, cur_e = 0.0, None, None
    for s0, e0 in sorted(iv):
        if cur_e is None or s0 > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = s0, e0
        else:
            cur_e = max(cur_e, e0)
    return tot + (cur_e - cur_s if cur_e is not None else 0.0)


def pipelined_timeline(one, n, label):
    try:
        _pipelined_timeline(one, n, label)
    except Exception as e:  # noqa: BLE001  (a lab printout: the measurements after it still run)
        print(f"[{label}] pipelined timeline failed: {type(e).__name__}: {e}", flush=True)


def _pipelined_timeline(one, n, label):
    """n pipelined steps with prefetch (the host queues them back to back; one sync at the end), each preceded by a
    marker kernel (torch.cuda._sleep) on the step's stream: every device op of the steps in start order (us from the
    first marker), then per step the device period (marker to marker) and per stream its busy time, and the time
    both streams ran kernels at once."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(2):
        one(True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(n):
            torch.cuda._sleep(1)
            one(True)
        torch.cuda._sleep(1)
        torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "t.json")
    p.export_chrome_trace(path)
    ev = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    ev.sort(key=lambda e: e["ts"])
    mark = lambda e: "spin_kernel" in e["name"] or "sleep" in e["name"].lower()  # noqa: E731  (torch.cuda._sleep)
    marks = [e["ts"] for e in ev if mark(e)]
    if len(marks) < n + 1:
        print(f"[{label}] pipelined timeline: {len(marks)} markers found, expected {n + 1}")
        return
    t_0 = marks[0]
    stream = lambda e: e.get("args", {}).get("stream", e.get("tid"))  # noqa: E731
    first = marks[max(0, n - 2)]
    print(f"\n### [{label}] {n} pipelined cold steps with prefetch: every device op of the last two (us from the "
          f"first step's marker)\n")
    print("| start us | dur us | stream | op |")
    print("|---:|---:|---:|---|")
    for e in ev:
        if first <= e["ts"] <= marks[-1]:
            print(f"| {e['ts'] - t_0:.0f} | {e.get('dur', 0):.0f} | {stream(e)} | {short(e['name'])} |")
    print(f"\n[{label}] per step (marker to marker): period us, busy us per stream, both streams busy at once us\n")
    print("| step | period | " + "busy per stream | both at once | longest idle gap on the marker's stream |")
    print("|---:|---:|---|---:|---:|")
    mstream = stream(next(e for e in ev if mark(e)))
    for k in range(n):
        s0, s1 = marks[k], marks[k + 1]
        iv = {}
        for e in ev:
            a0, a1 = max(e["ts"], s0), min(e["ts"] + e.get("dur", 0), s1)
            if a1 > a0 and not mark(e):
                iv.setdefault(stream(e), []).append((a0, a1))
        busy = {k2: _union(v) for k2, v in iv.items()}
        ks = list(iv)
        both = (sum(busy.values()) - _union([x for v in iv.values() for x in v])) if len(ks) > 1 else 0.0
        main_iv = sorted(iv.get(mstream, []))
        gap, last = 0.0, s0
        for a0, a1 in main_iv:
            gap, last = max(gap, a0 - last), max(last, a1)
        gap = max(gap, s1 - last)
        print(f"| {k} | {s1 - s0:.0f} | " + ", ".join(f"{k2}: {v:.0f}" for k2, v in busy.items())
              + f" | {both:.0f} | {gap:.0f} |")
    tot = {}
    for e in ev:
        if marks[0] <= e["ts"] < marks[-1] and not mark(e):
            tot[short(e["name"])] = tot.get(short(e["name"]), 0) + e.get("dur", 0)
    print(f"\n[{label}] device us per step by op ({n} steps): "
          + ", ".join(f"{k2} {v / n:.0f}" for k2, v in sorted(tot.items(), key=lambda x: -x[1])))
    print(f"[{label}] mean period {(marks[-1] - marks[0]) / n / 1e3:.3f} ms per step", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="", help="comma list of _lookup_lab_stage values (empty: the wheel's "
                    "default); 'capN': a new module whose stores have N slots per table (the host rows' footprint), "
                    "then the wheel's default; "
                    "'thp' / 'wc': the stores' rows moved to THP-registered / write-combined host memory, then the "
                    "wheel's default (the variants after it run on that memory too); 'slotmajor': the stores' host "
                    "rows moved into the slot-major layout, then the wheel's default (the variants after it too); "
                    "'split1' / 'split2' / 'nosplit' (a wheel of branch tier17, not main): the module's private "
                    "split prefetch (1: the victims' copies late on the job's stream, 2: on a stream of their own) or "
                    "none (the variants after it too); "
                    "'hostN': from here on a process of its own (--probe-bin's load mode) gathers and scatters 110K "
                    "random 512-byte host rows on N threads over and over (what a copy-engine step asks of the "
                    "host), keeping the current lab variant (the variants after it too); "
                    "'ceN': every prefetched step also copies N MB device -> host on the copy engine from its job's "
                    "end (a what-if, with branch tier17's lab variant 14), keeping the current lab variant (the "
                    "variants after it too)")
    ap.add_argument("--label", default="")
    ap.add_argument("--probe-bin", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "pcie_move_probe"),
                    help="the built pcie_move_probe (its 'load' mode) for the 'hostN' entries of --variants")
    ap.add_argument("--opt", default="sgd", choices=("sgd", "adam"), help="the tables' optimizer (both modules)")
    ap.add_argument("--warmup", type=int, default=64)
    ap.add_argument("--batches", type=int, default=64)
    ap.add_argument("--frac", type=float, default=0.25)
    ap.add_argument("--steps", type=int, default=6, help="profiled / timed steps per variant")
    ap.add_argument("--no-timeline", action="store_true")
    ap.add_argument("--timeline-at", default="", help="with --pipelined: a pipelined timeline at each of these "
                    "entries of --variants (once it is set), and of the default first only if 'default' is listed")
    ap.add_argument("--hbm", action="store_true", help="first an all-HBM module on the same batches (one warm-up "
                    "cycle): its step ms synced / pipelined and, with --pipelined, its pipelined timeline")
    ap.add_argument("--pipelined", type=int, default=0, help="also a timeline of this many pipelined steps with "
                    "prefetch (no sync between them; a marker kernel on the step's stream before each): the kernels "
                    "per stream, the device period per step, each stream's busy time, the overlap of the streams")
    ap.add_argument("--ncu", default="", help="after the warm-up, set this comma list of _lookup_lab_stage values "
                    "(or 'wc' first: the stores in write-combined memory) and run one synced step without prefetch "
                    "per value between cudaProfilerStart / Stop, then exit (for ncu --profile-from-start off)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("no GPU: skipped")
        return
    from torch.profiler import ProfilerActivity, profile

    T, dim, rows, B = 10, 128, 1 << 20, 104857
    opt = (lambda: SGD(lr=0.01)) if a.opt == "sgd" else (lambda: Adam(lr=0.001))
    data = step_batches(T, B, rows, a.batches)
    grad = torch.ones(T * B, dim, device="cuda")

    def build(cap):
        """The module with stores of `cap` slots per table (the ids still over `rows`; the cache the same), warmed
        up over one cycle of the batches."""
        mm = make_module(T, dim, cap, opt(), "caching", (rows * a.frac + 0.5) / cap, "uva")
        fn = train_step_fn(mm, data, grad)  # fn(prefetch)
        t0 = time.perf_counter()
        for _ in range(a.warmup):
            fn(True)
        torch.cuda.synchronize()
        print(f"[{a.label}] warm-up {a.warmup} steps (stores of {cap:,} slots): {time.perf_counter() - t0:.1f} s")
        stores = [t.store for t in mm.tables if hasattr(getattr(t, "store", None), "size")]
        if stores:  # the rows the stores hold, and the 64 KB host regions they would fill if packed densely
            live = sum(int(s.size()) for s in stores)
            row_b = 4 * opt().row_width(dim)  # (fp32 rows: the embedding and the optimizer state)
            print(f"[{a.label}] stores: {live:,} rows ({live / len(stores):,.0f} per table) = "
                  f"{live * row_b / 2**20:,.0f} MB, {live * row_b / 65536:,.0f} regions of 64 KB packed densely; "
                  f"{len(stores) * cap * row_b / 65536:,.0f} regions allocated")
            # where the rows sit in their buckets (first-fit: a prefix with holes): the 64 KB regions a slot-major
            # host layout (slot j of every bucket contiguous) would span, slots j < J of every bucket
            occ = sum((s.table.keys.view(torch.int64).view(-1, 128) > -(2**63) + 2).sum(0).cpu() for s in stores)
            share = occ.cumsum(0).double() / max(int(occ.sum()), 1)
            js = [int((share < q).sum()) + 1 for q in (0.5, 0.9, 0.99, 0.999)]
            print(f"[{a.label}] store slots holding 50 / 90 / 99 / 99.9 % of the rows: j < {js[0]} / {js[1]} / "
                  f"{js[2]} / {js[3]} of 128; slot-major, j < {js[3]}: "
                  f"{len(stores) * (cap // 128) * js[3] * row_b / 65536:,.0f} regions")
        return mm, fn

    if a.hbm:
        mh = make_module(T, dim, rows, opt(), "hbm", 1.0, None)
        fh = train_step_fn(mh, data, grad)
        for _ in range(max(a.warmup, a.batches)):
            fh(False)
        torch.cuda.synchronize()
        synced, piped = step_ms(fh, False, 2 * a.steps, 4 * a.steps)
        print(f"[{a.label}] all-HBM step: synced {synced:.2f} ms, pipelined {piped:.2f} ms", flush=True)
        if a.pipelined:
            pipelined_timeline(fh, a.pipelined, a.label + " all-HBM")
        del mh, fh
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    m, one = build(rows)
    lab = lab_op()
    has_op = lab is not None
    default = int(lab(-1)) if has_op else None

    if a.ncu:
        for v in a.ncu.split(","):
            if v == "wc":
                keep = wc_stores(m)  # noqa: F841  (kept alive to the end)
                continue
            if has_op:
                lab(int(v))
            one(False)
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStart()
            one(False)
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()
        return
    if not a.no_timeline:  # (one synced step's timeline; --pipelined: the pipelined steps')
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(3):
                one(True)
                torch.cuda.synchronize()
        path = os.path.join(tempfile.mkdtemp(), "t.json")
        p.export_chrome_trace(path)
        ev = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel" or
              e.get("cat") == "gpu_memcpy" or e.get("cat") == "gpu_memset"]
        ev.sort(key=lambda e: e["ts"])
        # the last step: from the last forward's first kernel (after the last sync gap > 200 us)
        cut = 0
        for j in range(1, len(ev)):
            if ev[j]["ts"] - (ev[j - 1]["ts"] + ev[j - 1].get("dur", 0)) > 200:
                cut = j
        step = ev[cut:]
        t_0 = step[0]["ts"]
        end = max(e["ts"] + e.get("dur", 0) for e in step)
        print(f"\n### [{a.label}] timeline of one cold step with prefetch (variant {default}): {len(step)} device "
              f"ops, {end - t_0:.0f} us from first start to last end\n")
        print("| start us | dur us | stream | kernel |")
        print("|---:|---:|---:|---|")
        for e in step:
            print(f"| {e['ts'] - t_0:.0f} | {e.get('dur', 0):.0f} | {e.get('args', {}).get('stream', e.get('tid'))} | "
                  f"{short(e['name'])} |")
        busy = {}
        for e in step:
            s = e.get("args", {}).get("stream", e.get("tid"))
            busy[s] = busy.get(s, 0) + e.get("dur", 0)
        print("\nbusy us per stream: " + ", ".join(f"{k}: {v:.0f}" for k, v in busy.items()))

    if a.pipelined and (not a.timeline_at or "default" in a.timeline_at.split(",")):
        pipelined_timeline(one, a.pipelined, a.label)

    variants = [x for x in a.variants.split(",") if x] if has_op else []
    if not variants:
        variants = [str(default)]
    print(f"\n### [{a.label}] per variant: staging kernels (ms per step, {a.steps} synced steps without prefetch), "
          f"step ms (median of {2 * a.steps} synced / pipelined over {2 * a.steps}), rows in / out per step\n")
    print("| variant | " + " | ".join(KERNELS) + " | sum | synced | pipelined | synced + prefetch | "
          "pipelined + prefetch | rows in / out |")
    print("|---" * (len(KERNELS) + 7) + "|")
    keep, mem = None, ""
    timeline_at = set(filter(None, a.timeline_at.split(",")))
    for v in variants:
        raw = v
        if v in ("thp", "wc"):  # (from here on every variant runs on THP-registered / write-combined store rows)
            keep, mem = (thp_stores if v == "thp" else wc_stores)(m), v
            if keep is None:
                break
            v = str(default)
        elif v == "slotmajor":  # the stores' host rows slot-major (the same rows at the same slots)
            sts = [t.store.table for t in m.tables if hasattr(getattr(t, "store", None), "table")]
            if not all(hasattr(st, "_set_host_slot_major") for st in sts):
                print(f"[{a.label}] slotmajor: this wheel has no HybridTable._set_host_slot_major")
                break
            one(False)  # (takes the pending prefetch's batch: no staging job holds the old rows)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for st in sts:
                st._set_host_slot_major(True)
            m.__dict__.pop("_stage_meta", None)
            torch.cuda.synchronize()
            print(f"[{a.label}] slotmajor: {len(sts)} stores relaid in {time.perf_counter() - t0:.1f} s", flush=True)
            keep, mem, v = [], v, str(default)
        elif v in ("split1", "split2", "nosplit"):  # the module's private split prefetch (_cache_stage_split)
            if not hasattr(torch.ops.dynamicemb, "_cache_stage_split"):
                print(f"[{a.label}] {v}: this wheel has no op _cache_stage_split")
                break
            one(False)  # (takes the pending prefetch's batch)
            torch.cuda.synchronize()
            m._prefetch_split = 0 if v == "nosplit" else int(v[-1])
            keep, mem, v = [], v, str(default)
        elif v.startswith("ce"):  # what-if (with a split prefetch and lab variant 14, the late copies left out):
            # every step with prefetch also copies N MB device -> host on the copy engine, on a stream of its own,
            # from its job's done event: what a write-back as one contiguous copy would cost beside the step
            nbytes = int(float(v[2:] or 56) * 1e6)
            src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            dst = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
            ce = torch.cuda.Stream()
            from dynamicemb import _prefetch as _pf

            done = _pf._events(m, m._prefetch_stream())[1]

            def one(pre=True, _inner=one, _src=src, _dst=dst, _ce=ce, _done=done):
                _inner(pre)
                if pre:
                    _ce.wait_event(_done)
                    with torch.cuda.stream(_ce):
                        _dst.copy_(_src, non_blocking=True)

            keep, mem, v = [src, dst], v, str(int(lab(-1)) if has_op else default)
        elif v.startswith("host"):  # what-if: the host gathers and scatters a cold step's rows in the background
            # on N threads from here on (HostLoad), keeping the current lab variant
            for x in keep or []:
                if isinstance(x, HostLoad):
                    print(f"[{a.label}] {x.close()}", flush=True)
            keep, mem, v = [HostLoad(a.probe_bin, int(v[4:] or 8))], v, str(int(lab(-1)) if has_op else default)
            time.sleep(1.0)  # (its 2 GB buffer written first)
        elif v.startswith("cap"):  # a new module whose stores have this many slots per table (the wheel's default)
            del one, m
            keep = None
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            m, one = build(int(v[3:]))
            keep, mem, v = [], v, str(default)
        if has_op:
            lab(int(v))
        if keep is not None:
            v = f"{v} {mem}"
        if a.pipelined and raw in timeline_at:
            pipelined_timeline(one, a.pipelined, f"{a.label} {v}")
        for _ in range(3):
            one(False)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(a.steps):
                one(False)
                torch.cuda.synchronize()
        ka = p.key_averages()
        ms = {k: sum(e.device_time_total for e in ka if k in e.key) / a.steps / 1e3 for k in KERNELS}
        res = []
        r0 = rows_moved(m)
        for pre in (False, True):
            for _ in range(2):
                one(pre)
            torch.cuda.synchronize()
            res += list(step_ms(one, pre, 2 * a.steps, 2 * a.steps))
        r1 = rows_moved(m)
        k = 2 * (2 * a.steps + 2 + 2 * a.steps)
        print(f"| {a.label} {v} | " + " | ".join(f"{ms[x]:.3f}" for x in KERNELS) + f" | {sum(ms.values()):.3f} | "
              + " | ".join(f"{x:.2f}" for x in res) + f" | {(r1[0] - r0[0]) / k:,.0f} / {(r1[1] - r0[1]) / k:,.0f} |",
              flush=True)

    for x in keep or []:
        if isinstance(x, HostLoad):
            print(f"[{a.label}] {x.close()}", flush=True)
    if has_op:
        lab(default)


if __name__ == "__main__":
    main()
