"""benchmarks/hstu_attention.py: the table, the peer columns and the alternating timer (CPU; the GPU run is the
benchmark itself)."""

import functools
import time

import pytest
import torch


@pytest.fixture(scope="module")
def bench(load_script):
    return load_script("benchmarks/hstu_attention.py")


def _device_label():
    """The device the benchmark's heading names (its first CUDA device, else the CPU path)."""
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"


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


def test_peer_choices_and_the_portable_sweep(bench, capsys):
    assert set(bench.PEERS) == {"fbgemm", "fa2", "nvidia-ampere"}
    with pytest.raises(SystemExit):
        bench.main(["--smoke", "--peer", "fa3"])
    assert "invalid choice: 'fa3'" in capsys.readouterr().err
    # issue 39's shapes: a sweep of their own that runs only when named
    cases = [c for c in bench.build_cases(quick=False, smoke=False) if c.sweep == "portable"]
    assert [(len(c.lengths), c.lengths[0], c.D) for c in cases] == bench.PORTABLE_SHAPES
    assert [c.name for c in cases][4] == "B16 S8K D64" and all(c.window == (-1, 0) and c.H == 4 for c in cases)
    assert [c.name for c in cases][5:] == ["B256 S256 D256", "B128 S1K D256", "B16 S8K D256"]
    dense = bench.Case("dense", "B16 S1K D128", [1024] * 16, 4, 128)
    assert bench.wanted(dense, None) and not bench.wanted(cases[0], None)
    assert bench.wanted(cases[0], ["portable"]) and not bench.wanted(dense, ["portable"])


def test_case_option_keeps_the_named_cases(bench, capsys):
    assert bench.main(["--smoke", "--reps", "2", "--warmup", "1", "--case", "zipf B4", "--case", "B2 S64 D32"]) == 0
    out = capsys.readouterr().out
    assert "| dense | B2 S64 D32 |" in out and "| jagged | zipf B4 |" in out and "context+target" not in out


def test_gpu_peers_refuse_a_cpu_run(bench):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    for name in ("fa2", "nvidia-ampere"):
        with pytest.raises(SystemExit, match="compute capability 8.0"):
            bench.main(["--smoke", "--peer", name])


def test_fa2_mask_is_the_nearest_window(bench):
    C = bench.Case
    assert bench.fa2_mask(C("d", "c", [8], 1, 32)) == (True, -1, -1, None)
    assert bench.fa2_mask(C("d", "n", [8], 1, 32, window=(-1, -1))) == (False, -1, -1, None)
    assert bench.fa2_mask(C("d", "l", [8], 1, 32, window=(128, 128))) == (False, 128, 128, None)
    causal, wl, wr, note = bench.fa2_mask(C("d", "t", [8], 1, 32, contexts=3, targets=5))
    assert (causal, wl, wr) == (True, -1, -1) and note == "fa2: causal in place of the contexts / targets mask"
    assert bench.fa2_mask(C("d", "lt", [8], 1, 32, window=(256, 0), targets=5))[1:3] == (256, 0)


def test_table_of_a_peer_with_another_function_has_no_diff_column(bench):
    case = bench.Case("portable", "B16 S4K D256", [4096] * 16, 4, 256)
    res = bench.Result(case, fwd_ms=2.0, bwd_ms=8.0, peer_fwd_ms=1.8, peer_bwd_ms=5.2,
                       notes=["fa2: causal in place of the contexts / targets mask"])
    lines = bench.markdown_table([res], "FlashAttention-2 (torch SDPA flash)", diff=False).splitlines()
    assert lines[0].endswith("| fwd ours/peer | bwd ours/peer |") and "diff" not in lines[0]
    assert lines[0].count("|") == lines[1].count("|") == lines[2].count("|")
    row = lines[2].split("|")
    assert row[-3].strip() == "0.90x" and row[-2].strip() == "0.65x"
    assert lines[-1] == "- portable B16 S4K D256: fa2: causal in place of the contexts / targets mask"

    class Peer:
        name, same_function = "p", False

        def version(self):
            return "v1"

    assert "not HSTU: no diff column" in bench.peer_line(Peer()) and "diff =" not in bench.peer_line(Peer())
    Peer.same_function = True
    assert bench.peer_line(Peer()).endswith("diff = max |ours - peer| / max |ours| over out, dq, dk, dv")


def test_pybind_types(bench):
    def f():
        pass

    f.__doc__ = ("varlen_fwd(arg0: torch.Tensor, arg1: typing.Optional[torch.Tensor], arg2: Tuple[int, int], "
                 "arg3: float) -> list\n\nhelp")
    assert bench.pybind_types(f) == ["torch.Tensor", "typing.Optional[torch.Tensor]", "Tuple[int, int]", "float"]
    # pybind11 3.x (torch 2.11's) spells int / float parameters and optionals otherwise: the same list comes back
    f.__doc__ = ("varlen_fwd(arg0: torch.Tensor, arg1: torch.Tensor | None, arg2: typing.SupportsInt, "
                 "arg3: typing.SupportsFloat, arg4: bool) -> list")
    assert bench.pybind_types(f) == ["torch.Tensor", "typing.Optional[torch.Tensor]", "int", "float", "bool"]
    f.__doc__ = "varlen_fwd() -> None"
    assert bench.pybind_types(f) == []
    f.__doc__ = None
    assert bench.pybind_types(f) is None


T, OPT = "torch.Tensor", "typing.Optional[torch.Tensor]"
# The two parameter layouts of NVIDIA's ops met so far: with scaling_seqlen, func and the KV cache (current), and
# without scaling_seqlen, with is_delta_q (older).
FWD_NEW = [T] * 5 + ["int"] * 3 + [OPT, OPT, "int", "int", "int", "float", OPT] + [OPT] * 6
BWD_NEW = [T] * 4 + [OPT] * 3 + [T, T] + ["int"] * 3 + [OPT, OPT, "int", "int", "int", "float", OPT, "bool", OPT,
                                                         "bool"]
FWD_OLD = [T] * 5 + ["int"] * 2 + [OPT, OPT, "int", "int", "int", "float", OPT, "bool"] + [OPT] * 5
BWD_OLD = [T] * 4 + [OPT] * 3 + [T, T] + ["int"] * 2 + [OPT, OPT, "int", "int", "int", "float", OPT] + ["bool"] * 3


def _fake_ampere_module(fwd_types, bwd_types, calls):
    import types

    mod = types.ModuleType("hstu_attn_2_cuda")
    mod.__file__ = "/peer/hstu_attn_2_cuda.so"

    def varlen_fwd(*args):
        calls.append(("fwd", args))
        return [args[0] * 2]

    def varlen_bwd(*args):
        calls.append(("bwd", args))
        return [args[1], args[2], args[3], None]

    for fn, name, tys in ((varlen_fwd, "varlen_fwd", fwd_types), (varlen_bwd, "varlen_bwd", bwd_types)):
        fn.__doc__ = None if tys is None else f"{name}({', '.join(f'arg{i}: {t}' for i, t in enumerate(tys))}) -> list"
    mod.varlen_fwd, mod.varlen_bwd = varlen_fwd, varlen_bwd
    return mod


def test_nvidia_ampere_peer_maps_the_arguments(bench, monkeypatch):
    # No GPU needed: the capability check and the extension module are stood in for.
    import sys

    monkeypatch.setattr(bench.torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    dev = torch.device("cuda")
    monkeypatch.setitem(sys.modules, "hstu_attn_2_cuda", None)
    with pytest.raises(SystemExit, match="build it with tools/peer/build_nvidia_ampere_hstu.sh"):
        bench.NvidiaAmperePeer(dev)
    calls = []
    monkeypatch.setitem(sys.modules, "hstu_attn_2_cuda", _fake_ampere_module(None, BWD_NEW, calls))
    with pytest.raises(SystemExit, match="expected pybind11 signatures"):
        bench.NvidiaAmperePeer(dev)
    case = bench.Case("masks", "ctx + targets g16", [64, 64], 2, 32, contexts=3, targets=5, group=16)
    q, k, v, do = (torch.randn(128, 2, 32) for _ in range(4))
    cu, nc, nt = torch.tensor([0, 64, 128]), torch.tensor([3, 3]), torch.tensor([5, 5])
    monkeypatch.setitem(sys.modules, "hstu_attn_2_cuda", _fake_ampere_module(FWD_NEW, BWD_NEW, calls))
    peer = bench.NvidiaAmperePeer(dev)
    assert "hstu_attn_2_cuda from /peer" in peer.version()
    fwd, bwd = peer.calls(q, k, v, do, cu, 64, nc, nt, case, 0.25, 100)
    assert torch.equal(fwd(), q * 2) and len(bwd()) == 3
    (_, fa), (_, ba) = calls
    assert len(fa) == len(FWD_NEW) and fa[5:8] == (64, 64, 100) and fa[8] is nc and fa[9] is nt
    assert fa[10:] == (16, -1, 0, 0.25) + (None,) * 7
    assert len(ba) == len(BWD_NEW) and ba[0] is do and ba[4:7] == (None,) * 3 and ba[9:12] == (64, 64, 100)
    assert ba[12] is nc and ba[14:] == (16, -1, 0, 0.25, None, False, None, False)
    # the older layout: no scaling_seqlen (so only scaling = max_seqlen_q), is_delta_q
    calls.clear()
    monkeypatch.setitem(sys.modules, "hstu_attn_2_cuda", _fake_ampere_module(FWD_OLD, BWD_OLD, calls))
    peer = bench.NvidiaAmperePeer(dev)
    fwd, bwd = peer.calls(q, k, v, do, cu, 64, nc, nt, case, 0.25, 64)
    fwd(), bwd()
    (_, fa), (_, ba) = calls
    assert fa[5:7] == (64, 64) and fa[7] is nc and fa[9:] == (16, -1, 0, 0.25, None, False) + (None,) * 5
    assert ba[9:11] == (64, 64) and ba[11] is nc and ba[13:] == (16, -1, 0, 0.25, None, False, False, False)
    with pytest.raises(RuntimeError, match="divides by max_seqlen_q only"):
        peer.calls(q, k, v, do, cu, 64, nc, nt, case, 0.25, 100)
    with pytest.raises(RuntimeError, match=r"alpha \(float\) not where expected"):
        bench.hstu_peer_args(FWD_OLD[:12] + ["int"] + FWD_OLD[13:], [q, k, v, cu, cu, 64, 64],
                             (nc, nt, 16, -1, 0, 0.25, None), 64, 64)


def test_run_case_with_a_peer_of_another_function(bench):
    class Other(_FakePeer):
        same_function = False

        def case_note(self, case):
            return "fa2: causal in place of the contexts / targets mask" if case.contexts else None

    case = bench.Case("masks", "context+target", [64, 64], 2, 32, contexts=3, targets=5)
    timer = bench.Timer(torch.device("cpu"), warmup=1, reps=2)
    res = bench.run_case(case, torch.bfloat16, torch.device("cpu"), timer, timer, with_ref=False,
                         peer=Other(same=True))
    assert res.peer_diff is None and res.peer_fwd_ms is not None and res.peer_bwd_ms is not None
    assert res.notes == ["fa2: causal in place of the contexts / targets mask"]


def test_kernel_option_switches(bench, capsys, monkeypatch):
    p = bench.parser("doc", quick="q")
    assert bench.parse_kernel_options(p, ["bwd_sm80_pair=0", "bwd_grid=2"]) == {"bwd_sm80_pair": 0, "bwd_grid": 2}
    for bad in ("bwd_sm80_pairs=0", "bwd_sm80_pair", "bwd_sm80_pair=no"):
        with pytest.raises(SystemExit):
            bench.parse_kernel_options(p, [bad])
        assert "--kernel-option: expected NAME=INT with NAME one of" in capsys.readouterr().err
    # the switches reach kernel_options (portable adds sm90=False) and the table's header
    seen = []
    real = bench.hstu_attn._ops.kernel_options

    @functools.wraps(real)
    def recording(**kw):
        seen.append(kw)
        return real(**kw)

    monkeypatch.setattr(bench.hstu_attn._ops, "kernel_options", recording)
    assert bench.main(["--smoke", "--reps", "2", "--warmup", "1", "--kernels", "portable",
                       "--kernel-option", "bwd_sm80_pair=0"]) == 0
    assert seen == [{"bwd_sm80_pair": 0, "sm90": False}]
    assert "kernel_options(bwd_sm80_pair=0, sm90=False)" in capsys.readouterr().out


def _ops_called(fn):
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Log():
        fn()
    return [s for s in seen if s.startswith("hstu_attn.")]


def test_timed_calls_follow_the_kernel_options(bench):
    # --kernels portable / --kernel-option must reach the timed ops (the public ops take no options: timing them
    # measured the default kernels whatever was asked)
    import hstu_attn

    torch.manual_seed(5)
    q, k, v, dout = (torch.randn(12, 2, 32, dtype=torch.bfloat16) for _ in range(4))
    cu = torch.tensor([0, 5, 12], dtype=torch.int32)
    args = (cu, cu, 7, 7, None, None, 1, -1, 0, 32 ** -0.5, None, 7.0, None, None)
    fwd, bwd = bench.timed_calls(q, k, v, dout, args)
    assert _ops_called(fwd) == ["hstu_attn.fwd.default"]
    plain = fwd()
    with hstu_attn._ops.kernel_options(sm90=False):
        fwd, bwd = bench.timed_calls(q, k, v, dout, args)
    assert _ops_called(fwd) == ["hstu_attn.fwd_with_options.default"]
    assert _ops_called(bwd) == ["hstu_attn.bwd_with_options.default"]
    torch.testing.assert_close(fwd(), plain, rtol=0, atol=0)  # the CPU path ignores kernel choices


def test_sm80_candidates_script_shapes_variants_and_cpu_run(load_script, capsys):
    # benchmarks/hstu_sm80_candidates.py (issue 39): its shapes parse to causal H4 cases, every variant's switches
    # are accepted by kernel_options, bad shapes are refused, and without a GPU it says so and times nothing.
    import hstu_attn

    cand = load_script("benchmarks/hstu_sm80_candidates.py")
    case = cand.parse_shape("B128 S1K D128")
    assert (len(case.lengths), case.lengths[0], case.H, case.D, case.window) == (128, 1024, 4, 128, (-1, 0))
    assert cand.parse_shape("B2 S300 D64").lengths == [300, 300]
    with pytest.raises(SystemExit, match="--shapes: expected"):
        cand.parse_shape("B16 X D1")
    assert [n for n, _ in cand.variants(32)] == ["default"]
    for D in (64, 128, 256):
        names = [n for n, _ in cand.variants(D)]
        assert names[:2] == ["old default", "default"] and len(set(names)) == len(names) >= 4
        assert cand.variants(D)[0][1] == {"bwd_sm80_cfg": hstu_attn._ops.BWD_SM80_CFG_OLD}
        cfg4 = [n for n in names if n.startswith("cfg4")]
        assert [n for n, _ in cand.variants(D, ["default", "cfg4"])] == ["old default", "default"] + cfg4
        for _, switches in cand.variants(D):
            with hstu_attn._ops.kernel_options(sm90=False, **switches):
                pass
    # The forward's candidates (--fwd): the default first, only those the head dim has, all accepted.
    assert [n for n, _ in cand.fwd_variants(32)] == ["default"]
    for D, count in ((64, 7), (128, 6), (256, 4)):  # (3 at D = 64, 5 at D = 64 / 128: at D = 256 the default)
        names = [n for n, _ in cand.fwd_variants(D)]
        assert names[0] == "default" and len(set(names)) == len(names) == count
        assert [n for n, _ in cand.fwd_variants(D, ["fcfg2"])] == ["default", "fcfg2 FA2 tiles 1st"]
        for _, switches in cand.fwd_variants(D):
            with hstu_attn._ops.kernel_options(sm90=False, **switches):
                pass
    if not torch.cuda.is_available():
        assert cand.main(["--no-peers"]) == 0
        assert "nothing timed" in capsys.readouterr().out


@pytest.mark.parametrize("mode", ["--fp8", "--fp8-sched"])
def test_fp8_modes_smoke_run_print_their_tables(bench, capsys, mode):
    """--fp8 / --fp8-sched (the CPU path in CI, the kernels on a GPU): one case, its row in a table under the mode's heading (--fp8: the default
    and the late P conversion the same output as the tanh SiLU; --fp8-sched: the default and fp8_sched=True calls
    give the same output)."""
    assert bench.main([mode, "--smoke", "--reps", "2", "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert f"## hstu_attention {mode}: {_device_label()}" in out
    rows = [line for line in out.splitlines() if line.startswith("| B2 S256 D64") or line.startswith("| smoke B3")]
    assert rows, out
    if mode == "--fp8-sched":
        assert rows[-1].rstrip().endswith("| True |"), rows[-1]
    else:
        assert "| True |" in rows[-1], rows[-1]


def test_fp8_methods_smoke_run_prints_rows_and_summary(bench, capsys):
    """--fp8 --method (the CPU path in CI, the kernels on a GPU): each method's row per round (sustained: one per window) and a summary row per
    method whose min <= median <= max; a method name it does not know is refused naming the option."""
    assert bench.main(["--fp8", "--smoke", "--method", "fa3,do_bench,sustained", "--method-rounds", "2",
                       "--method-rest", "0", "--sustain-s", "0.05", "--sustain-windows", "2"]) == 0
    out = capsys.readouterr().out
    assert f"## hstu_attention --fp8 --method: {_device_label()}" in out
    rows = [line for line in out.splitlines() if line.startswith("| B2 S256 D64 | ")]
    per_round = [r.split(" | ")[2] for r in rows if r.split(" | ")[1] in ("1", "2")]
    assert per_round.count("fa3") == 4 and per_round.count("sustained 2/2") == 4, rows  # (as printed and in the table)
    summary = {r.split(" | ")[1]: r for r in rows if r.split(" | ")[1] in ("fa3", "do_bench", "sustained")}
    assert set(summary) == {"fa3", "do_bench", "sustained"}
    assert summary["sustained"].split(" | ")[2] == "4"
    for r in summary.values():
        lo, med, hi = (float(x) for x in r.split(" | ")[3:6])
        assert lo <= med <= hi
    assert bench.main(["--fp8", "--smoke", "--method", "ramp", "--method-rounds", "1", "--method-rest", "0",
                       "--ramp-s", "0.05", "--ramp-bucket", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "| case | round | from s | calls | ms | TFLOP/s | SM MHz | W | C |" in out
    assert "| B2 S256 D64 | ramp, first bucket | 1 |" in out and "| B2 S256 D64 | ramp, last bucket | 1 |" in out
    with pytest.raises(SystemExit):
        bench.main(["--fp8", "--smoke", "--method", "fa4"])
    assert "--method" in capsys.readouterr().err


def test_fa3_and_do_bench_recipes_count_their_calls(bench):
    """fa3: 1 + 2 warm-up + 30 timed calls (timeit(30)); do_bench: 1 + 5 estimate + warm-up + timed calls as
    triton's do_bench(5, 30) sizes them from the estimate; both return the start of their timed calls."""
    calls = []

    def fn():
        calls.append(time.perf_counter())
        time.sleep(0.002)

    t0 = time.perf_counter()
    ms, n, t_from = bench.fa3_timeit_ms(fn, rest_s=0)
    assert n == 30 and len(calls) == 32 and ms >= 2.0 and t0 <= t_from <= calls[2] + 1e-3
    calls.clear()
    ms, n, t_from = bench.do_bench_ms(fn, None, rest_s=0)
    assert ms >= 2.0 and 1 <= n <= 15 and len(calls) >= 1 + 5 + 1 + n and t_from <= calls[-n]
