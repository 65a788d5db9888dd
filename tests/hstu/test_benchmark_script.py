"""benchmarks/hstu_attention.py: the table, the peer columns and the alternating timer (CPU; the GPU run is the
benchmark itself)."""

import time

import pytest
import torch


@pytest.fixture(scope="module")
def bench(load_script):
    return load_script("benchmarks/hstu_attention.py")


def test_smoke_run_prints_the_table(bench, capsys):
    assert bench.main(["--smoke", "--reps", "2", "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert "| sweep | case |" in out
    assert "| dense | B2 S64 D32 |" in out
    assert "fbgemm" not in out  # no peer columns without --peer


def test_interleaved_timer_alternates_and_returns_one_median_each(bench):
    calls = []
    timer = bench.Timer(torch.device("cpu"), warmup=2, reps=3)
    medians = timer.interleaved(lambda: calls.append("a"), lambda: calls.append("b"))
    assert len(medians) == 2 and all(m >= 0 for m in medians)
    # warm-up of each first, then the timed runs alternate
    assert calls == ["a", "a", "b", "b"] + ["a", "b"] * 3
    assert timer(lambda: calls.append("c")) >= 0 and calls[-1] == "c"


def test_timer_blocks_keep_the_smallest_median_of_short_measurements(bench, monkeypatch):
    # A short measurement runs up to `blocks` blocks of reps and keeps the smallest block median (a row slowed as a
    # whole is outvoted); one whose medians reach block_ms stops after its first block. The timer reads a fake clock
    # that each call advances by its delay, so the busy test machine cannot change the medians.
    delays = iter([0.0] + [0.006] * 3 + [0.001] * 3 + [0.003] * 3)
    calls = []
    clock = [100.0]
    monkeypatch.setattr(bench.time, "perf_counter", lambda: clock[0])

    def fn():
        calls.append(1)
        clock[0] += next(delays)

    timer = bench.Timer(torch.device("cpu"), warmup=1, reps=3, blocks=3, block_ms=100.0)
    ms = timer(fn)
    assert len(calls) == 1 + 9 and ms == pytest.approx(1.0)
    delays = iter([0.0] + [0.006] * 3 + [0.001] * 3)
    calls.clear()
    timer.block_ms = 2.0
    assert timer(fn) == pytest.approx(6.0) and len(calls) == 1 + 3


def test_blocks_below_one_is_refused_naming_the_option(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--smoke", "--blocks", "0"])
    assert "--blocks: expected at least 1, got 0" in capsys.readouterr().err


def test_peer_columns_ratios_and_notes(bench):
    case = bench.Case("dense", "B16 S16K D128", [16384] * 16, 4, 128)
    with_peer = bench.Result(case, fwd_ms=1.0, bwd_ms=4.0, peer_fwd_ms=2.0, peer_bwd_ms=3.0, peer_diff=1.5e-3)
    no_peer = bench.Result(bench.Case("jagged", "zipf B2", [100, 28], 2, 64), fwd_ms=1.0, bwd_ms=2.0,
                           notes=["peer: not built for this head dim"])
    table = bench.markdown_table([with_peer, no_peer], "fbgemm_gpu_hstu")
    lines = table.splitlines()
    assert "fbgemm_gpu_hstu fwd ms" in lines[0] and lines[0].endswith("| fwd ours/peer | bwd ours/peer | diff |")
    assert lines[0].count("|") == lines[1].count("|") == lines[2].count("|") == lines[3].count("|")
    row = lines[2].split("|")
    # peer ms / our ms: 2.0 / 1.0 forward, 3.0 / 4.0 backward (the peer is faster there)
    assert row[-4].strip() == "2.00x" and row[-3].strip() == "0.75x" and row[-2].strip() == "1.5e-03"
    assert lines[3].split("|")[-4].strip() == "n/a" and lines[3].split("|")[-2].strip() == "n/a"
    assert lines[-1] == "- jagged zipf B2: peer: not built for this head dim"
    # peer ms and TFLOP/s from the same FLOP count as ours (4.4e12 forward FLOPs: 2199 TFLOP/s at 2 ms)
    f = case.fwd_flops()
    assert [c.strip() for c in row[-8:-4]] == ["2.000", "2199.0", "3.000", "3665.0"]
    assert row[-7].strip() == bench.tflops(f, 2.0) and row[-5].strip() == bench.tflops(2.5 * f, 3.0)


def test_max_rel_diff(bench):
    a = [torch.tensor([1.0, -4.0]), torch.tensor([2.0])]
    b = [torch.tensor([1.0, -3.0]), torch.tensor([2.5])]
    assert bench.max_rel_diff(a, b) == pytest.approx(1.0 / 4.0)
    assert bench.max_rel_diff(a, a) == 0.0


def test_peer_needs_a_hopper_gpu(bench):
    if torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0):
        pytest.skip("this machine has the peer's GPU")
    with pytest.raises(SystemExit, match="compute capability 9.0"):
        bench.main(["--smoke", "--peer", "fbgemm"])


class _FakePeer:
    """A peer on CPU: `same` runs hstu_attn's own ops (so the diff is 0), otherwise its calls raise like a peer
    build without the case's head dim."""

    name = "fake"

    def __init__(self, same):
        self.same = same

    def calls(self, q, k, v, dout, cu, max_len, nc, nt, case, alpha, scaling):
        if self.same:
            args = (cu, cu, max_len, max_len, nc, nt, case.group, case.window[0], case.window[1], alpha, None,
                    float(scaling), None, None)
            return (lambda: torch.ops.hstu_attn.fwd(q, k, v, *args),
                    lambda: torch.ops.hstu_attn.bwd(dout, q, k, v, *args, False, False)[:3])

        def missing():
            raise RuntimeError("no kernel for this head dim\nmore detail")

        return missing, missing


def test_run_case_with_a_peer(bench):
    case = bench.Case("dense", "B2 S64 D32", [64, 64], 2, 32)
    timer = bench.Timer(torch.device("cpu"), warmup=1, reps=2)
    res = bench.run_case(case, torch.bfloat16, torch.device("cpu"), timer, timer, with_ref=False,
                         peer=_FakePeer(same=True))
    assert res.peer_diff == 0.0 and res.peer_fwd_ms is not None and res.peer_bwd_ms is not None and not res.notes
    res = bench.run_case(case, torch.bfloat16, torch.device("cpu"), timer, timer, with_ref=False,
                         peer=_FakePeer(same=False))
    assert res.peer_fwd_ms is None and res.peer_diff is None and res.fwd_ms >= 0
    assert res.notes == ["peer: no kernel for this head dim"]


def test_run_case_rests_between_forward_and_backward(bench, monkeypatch):
    # --cooldown: the backward's timing starts from a rested GPU, as each case's does (the forward's long timing
    # would otherwise leave it at a power-limited clock); no pause with cooldown 0 (what main passes on CPU).
    events = []

    class Recorder(bench.Timer):
        def __call__(self, fn):
            events.append("timed")
            return super().__call__(fn)

    monkeypatch.setattr(bench.time, "sleep", lambda s: events.append(("sleep", s)))
    case = bench.Case("dense", "B2 S64 D32", [64, 64], 2, 32)
    timer = Recorder(torch.device("cpu"), warmup=1, reps=2)
    res = bench.run_case(case, torch.bfloat16, torch.device("cpu"), timer, timer, with_ref=False, cooldown=0.25)
    assert events == ["timed", ("sleep", 0.25), "timed"] and res.fwd_ms >= 0 and res.bwd_ms >= 0
    events.clear()
    bench.run_case(case, torch.bfloat16, torch.device("cpu"), timer, timer, with_ref=False)
    assert events == ["timed", "timed"]


def test_timer_warms_up_for_a_minimum_time(bench):
    # On a GPU the warm-up also lasts --warmup-ms (an idle GPU's clock needs more than a few short calls); forced on
    # here with a 1 ms "kernel": at least the calls that fill 30 ms, and never fewer than `warmup`.
    timer = bench.Timer(torch.device("cpu"), warmup=3, reps=2, warmup_ms=500.0)
    assert timer.warmup_ms == 0.0  # CPU timings: count-based warm-up only
    calls = []
    assert timer._warm(lambda: calls.append(1)) == 3 and len(calls) == 3
    timer.warmup_ms = 30.0
    t0 = time.perf_counter()
    n = timer._warm(lambda: time.sleep(0.001))
    assert (time.perf_counter() - t0) * 1e3 >= 30.0 and 3 <= n <= 31
