"""The portable kernels' timing against FA2 and NVIDIA's Ampere HSTU (the peer), shared by bwd36_run/t36.py,
bwd38_run/t38.py and bwdfa39_run/t39.py (issue 39): the product benchmark's (benchmarks/hstu_attention.py) Case, Timer, timed_calls,
Fa2Peer and NvidiaAmperePeer over dense causal shapes `B<batch>:S<len>:D<head dim>` (H = 4, bf16, alpha D^-1/2,
scaling max_len). runlib/pack.sh's callers carry it beside the timer; in the repository it is found in runlib/.

  add_args(ap, modes, variants, shapes)   the timers' common arguments
  Lab(a)                  the product benchmark imported from --bench, the header line, Timer, FA2, the peer
  lab.calls(s, ours, variants, check_peer)   (pairs, labels) of one shape: (forward, backward) callables of ours
                          under kernel_options(sm90=False, **variants[x]), FA2's and the peer's
  lab.time_line(s, labels, fns, n)        the backward times of one shape, `rounds` times, the smallest median
                          kept; ratios variant / main, FA2 or peer / variant
  lab.run(ours, variants)                 every --shapes: time_line (mode time) or run_once (mode ncu), the
                          --prof-shapes profiled
  lab_main(variants, default_variants, default_shapes)   a timer's whole main (t41.py, t43.py): modes time / ncu,
                          lab.run over the --variants that name an entry of `variants`
  lab.elapsed()                           seconds since Lab(a) (the lines' `at` field)
  prof_kernels(label, s, fn)              one call's kernels under torch.profiler (us each)
  run_once(fns)                           one call each, synchronized (what ncu profiles)

Nothing here picks a kernel other than through kernel_options.
"""
import argparse
import sys
import time

import torch

import labtime


def shape(s):
    b, sl, d = s.split(":")[:3]
    return int(b[1:]), int(sl[1:]), int(d[1:])


def dense_case(ha, s, dev, H=4):
    """The dense causal case of shape s ("B128:S1024:D128"; a fourth field "C<n>" gives each sequence n context
    rows: the ops' num_contexts, the context kernel) as the product benchmark ha (benchmarks/hstu_attention.py)
    builds it: (B, S, D), its ha.Case, cu, randn bf16 q / k / v / dout and the ops' length / mask arguments (alpha
    D^-1/2). FA2 and the peer take the plain causal call of the same shape."""
    B, S, D = shape(s)
    fields = s.split(":")
    case = ha.Case("portable", s, [S] * B, H, D)
    cu = torch.tensor([0] + case.lengths, device=dev).cumsum(0).to(torch.int32)
    q, k, v, dout = (torch.randn(B * S, H, D, device=dev, dtype=torch.bfloat16) for _ in range(4))
    nc = None
    if len(fields) > 3:
        nc = torch.full((B,), min(int(fields[3][1:]), S), dtype=torch.int32, device=dev)
    args = (cu, cu, S, S, nc, None, 1, -1, 0, 1.0 / D**0.5, None, float(S), None, None)
    return (B, S, D), case, cu, (q, k, v, dout), args


def add_args(ap, modes, variants, shapes, prof_help=None):
    ap.add_argument("mode", choices=modes)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--variants", nargs="+", default=variants)
    ap.add_argument("--shapes", nargs="+", default=shapes)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-fa2", action="store_true")
    ap.add_argument("--peer", action="store_true")
    ap.add_argument("--prof-shapes", nargs="*", default=[], help=prof_help)


def lab_main(variants, default_variants, default_shapes):
    """Parses add_args's arguments (modes time / ncu) and runs Lab.run over the --variants found in `variants`
    ({name: kernel_options of ours}; other names, e.g. fa2, only select what ncu mode runs)."""
    ap = argparse.ArgumentParser()
    add_args(ap, ["time", "ncu"], default_variants, default_shapes)
    a = ap.parse_args()
    Lab(a).run([x for x in a.variants if x in variants], variants)


def prof_kernels(label, s, fn):
    ks = labtime.kernel_times(fn, n=3, warmup=3)
    tot = sum(sum(ts) for ts in ks.values()) / 3
    print(f"#### prof {s} {label} (sum of kernels {tot:.1f} us)")
    for n_, ts in sorted(ks.items(), key=lambda x: -sum(x[1])):
        print(f"  {sum(ts) / 3:9.1f} us x{len(ts) // 3}  {n_[:140]}")


def run_once(fns):
    for fn in fns:
        fn()
    torch.cuda.synchronize()


class Lab:
    def __init__(self, a):
        sys.path.insert(0, a.bench)
        import hstu_attention as ha  # the product benchmark (its Case, Timer, timed_calls, Fa2Peer, NvidiaAmperePeer)
        from hstu_attn._ops import kernel_options

        self.a, self.ha, self.kernel_options = a, ha, kernel_options
        self.t0 = time.time()
        self.dev = dev = torch.device("cuda")
        print(f"#### {a.mode} ({torch.cuda.get_device_name(0)}, torch {torch.__version__}; bf16 causal H4; ms)",
              flush=True)
        self.timer = ha.Timer(dev, warmup=3, reps=a.reps, warmup_ms=100.0)
        self.fa2 = None if a.no_fa2 or (a.mode == "ncu" and "fa2" not in a.variants) else ha.Fa2Peer(dev)
        self.peer = None
        if getattr(a, "peer", False):  # (t36.py has no --peer)
            try:
                self.peer = ha.NvidiaAmperePeer(dev)
            except SystemExit as e:
                print(f"(no peer: {e})")

    def calls(self, s, ours, variants, check_peer):
        """check_peer: the peer's backward run once before it is listed (a failure cut to 100 characters)"""
        ha, dev = self.ha, self.dev
        (B, S, D), case, cu, (q, k, v, dout), args = dense_case(ha, s, dev)
        pairs, labels = [], []
        for x in ours:
            with self.kernel_options(sm90=False, **variants[x]):
                pairs.append(ha.timed_calls(q, k, v, dout, args))
            labels.append(x)
        if self.fa2 is not None:
            pairs.append(self.fa2.calls(q, k, v, dout, cu, S, None, None, case, 1.0 / D**0.5, S))
            labels.append("fa2")
        if self.peer is not None:
            try:
                pp = self.peer.calls(q, k, v, dout, cu, S, None, None, case, 1.0 / D**0.5, S)
                if check_peer:
                    pp[1]()
                    torch.cuda.synchronize()
                pairs.append(pp)
                labels.append("peer")
            except Exception as e:  # (a shape the peer's build does not cover)
                print(f"(peer n/a at {s}: {str(e)[:100] if check_peer else e})")
        return pairs, labels

    def time_line(self, s, labels, fns, n):
        """n: how many of labels are ours (the first, main, is the ratios' base)"""
        best = None
        for _ in range(self.a.rounds):
            t = self.timer.interleaved(*fns)
            best = t if best is None else [min(x, y) for x, y in zip(best, t)]
        line = f"{s:18s} " + " ".join(f"{lab} {t:.4f}" for lab, t in zip(labels, best))
        line += " | " + " ".join(f"{lab}/main {t / best[0] - 1:+.2%}" for lab, t in zip(labels[1:n], best[1:n]))
        for j in range(n, len(labels)):
            line += " | " + " ".join(f"{labels[j]}/{lab} {best[j] / t:.3f}x" for lab, t in zip(labels[:n], best[:n]))
        print(line + f" | at {self.elapsed():.1f} s", flush=True)

    def run(self, ours, variants):
        """Each of --shapes in turn: the calls (the peer checked once), then by mode: `time` one time_line,
        `ncu` one call each; --prof-shapes also profiled outside ncu mode"""
        a = self.a
        for s in a.shapes:
            pairs, labels = self.calls(s, ours, variants, check_peer=True)
            fns = [p[1] for p in pairs]
            if a.mode == "time":
                self.time_line(s, labels, fns, len(ours))
            else:
                run_once(fns)
            if a.mode != "ncu" and s in a.prof_shapes:
                for label, fn in zip(labels, fns):
                    prof_kernels(label, s, fn)
            del fns, pairs
            torch.cuda.empty_cache()

    def elapsed(self):
        """seconds since the Lab was made (the lines' `at` field)"""
        return time.time() - self.t0
