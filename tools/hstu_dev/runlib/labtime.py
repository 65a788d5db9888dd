"""Timing helpers of the HSTU lab's device runs (tools/hstu_dev/*_run), one module the bench scripts import.

runlib/pack.sh carries this file beside the run scripts (.carry/NAME/labtime.py); a script in the repository finds it
by `sys.path.insert(0, <tools/hstu_dev>/runlib)`. CUDA graph timing (`timed`, `graphed`, `flops`, `print_row`) stays in
fwd17_run/fwd17_jag.py, which the older benches import; this module holds the measures the session 34-35 scripts
repeated:

  kernel_times(fn, n, warmup)           each device kernel's durations (us) over n calls, torch.profiler
  top_kernels(per, k, width)            "name us, ..." of the k largest
  interleaved_flushed(fns, reps, rng, flush)   the calls in a fresh random order each rep, L2 flushed before each
                                        timed call (CUDA events): {name: [ms, ...]}
  back_to_back(fns, rounds, short, rng) each name's `short` calls in a row after 5 warm-up ones, the names in a fresh
                                        random order each round: {name: [ms per call, one a round]}
  timeline_line(name, ks)               one line of a profiled call's kernels: start, length, gaps, span
  gpu_line()                            the GPU's name and torch's version

Everything takes plain callables; nothing here picks a kernel.
"""
import torch


def gpu_line():
    return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"


def kernel_times(fn, n=3, warmup=3):
    """{kernel name: [us, ...]} of the device kernels of n calls of fn under torch.profiler, after warmup calls"""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    ks = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            ks.setdefault(e.name, []).append(e.time_range.elapsed_us())
    return ks


def short_name(name, width):
    """a kernel's name without its template arguments, parameters and return type, cut to width"""
    return name.split("<")[0].split("(")[0].split(" ")[-1][:width]


def per_call(ks, n, width=None):
    """{short name: us per call}: kernel_times' durations summed per (shortened) name over n calls"""
    per = {}
    for name, ts in ks.items():
        key = short_name(name, width) if width else name
        per[key] = per.get(key, 0.0) + sum(ts) / n
    return per


def top_kernels(per, k=5):
    """'name us, ...' of the k kernels with the largest time per call"""
    return ", ".join(f"{name} {us:.1f}" for name, us in sorted(per.items(), key=lambda kv: -kv[1])[:k])


def interleaved_flushed(fns, reps, rng, flush):
    """{name: [ms, ...]}: each rep runs every fns[name]() once in a fresh random order, flush.zero_() (a buffer larger
    than L2) before each timed call, CUDA events around the call alone"""
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    names = list(fns)
    times = {n: [] for n in names}
    for _ in range(reps):
        for n in rng.sample(names, len(names)):
            flush.zero_()
            ev[0].record()
            fns[n]()
            ev[1].record()
            ev[1].synchronize()
            times[n].append(ev[0].elapsed_time(ev[1]))
    return times


def back_to_back(fns, rounds, short, rng, warm=5):
    """{name: [ms per call, one a round]}: per round, the names in a fresh random order (the clock drifts within a
    process), each one's warm calls, then short calls between two CUDA events"""
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    names = list(fns)
    out = {n: [] for n in names}
    for _ in range(rounds):
        for n in rng.sample(names, len(names)):
            for _ in range(warm):
                fns[n]()
            ev[0].record()
            for _ in range(short):
                fns[n]()
            ev[1].record()
            ev[1].synchronize()
            out[n].append(ev[0].elapsed_time(ev[1]) / short)
    return out


def timeline_line(label, ks):
    """one line of a profiled call's kernels ks = [(name, start us, length us), ...]: each kernel's start and length,
    the idle before the first, the gaps between them and the span"""
    end, gaps = None, []
    for _, s, d in ks:
        if end is not None:
            gaps.append(round(s - end))
        end = s + d
    return (f"{label} (us): " + "; ".join(f"{k[:32]} @{s:.0f} +{d:.1f}" for k, s, d in ks) +
            f"; idle before the first {ks[0][1]:.0f}; gaps {gaps}; span {end:.0f}")
