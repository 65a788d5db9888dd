"""benchmarks/hash_table.py --peer-hkv and tools/peer/build_hkv_benchmark.sh on the CPU: parsing HierarchicalKV's
benchmark output, stopping its run at the hybrid section, the side-by-side table, the bytes per op, the argument
checks and the build script's composed nvcc command (--dry-run). The GPU run is the benchmark itself."""

import argparse
import os
import stat
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_SCRIPT = os.path.join(ROOT, "tools", "peer", "build_hkv_benchmark.sh")

# Written for this test from the print statements of HKV's benchmark (the figures are made up): the title block,
# the pure-HBM tables of two dims (each an "a" table of ops and a "b" table of exports), then the hybrid section.
PURE = textwrap.dedent("""\

    ## Benchmark

    * GPU: 1 x NVIDIA H200: 9.0
    * Key Type = uint64_t
    * Value Type = float32 * {dim}
    * Key-Values per OP = 1048576
    * Evict strategy: LRU
    * `\u03bb`: load factor
    * ***Throughput Unit: Billion-KV/second***

    ### On pure HBM mode: 

    * dim = 8, capacity = 128 Million-KV, HBM = 4 GB, HMEM = 0 GB

    |    \u03bb | insert_or_assign |   find | find_or_insert | assign |  find* | find_or_insert* | insert_and_evict |
    |-----:|-----------------:|-------:|---------------:|-------:|-------:|----------------:|-----------------:|
    | 0.50 |            2.101 |  4.202 |          2.303 |  3.404 |  5.505 |           2.606 |            1.907 |
    | 0.75 |            2.011 |  4.022 |          2.033 |  3.044 |  5.055 |           2.066 |            1.777 |
    | 1.00 |            1.501 |  4.102 |          1.403 |  3.304 |  3.605 |           1.406 |            0.907 |

    |    \u03bb | export_batch | export_batch_if |  contains |
    |-----:|-------------:|----------------:|----------:|
    | 0.50 |        2.222 |          11.111 |     3.333 |
    | 0.75 |        2.121 |          11.212 |     3.232 |
    | 1.00 |        2.020 |           2.525 |     3.131 |

    * dim = 32, capacity = 128 Million-KV, HBM = 16 GB, HMEM = 0 GB

    |    \u03bb | insert_or_assign |   find | find_or_insert | assign |  find* | find_or_insert* | insert_and_evict |
    |-----:|-----------------:|-------:|---------------:|-------:|-------:|----------------:|-----------------:|
    | 0.50 |            1.950 |  3.250 |          1.990 |  2.850 |  4.100 |           2.000 |            1.650 |
    | 0.75 |            1.850 |  3.150 |          1.880 |  2.800 |  4.000 |           1.900 |            1.550 |
    | 1.00 |            1.250 |  3.400 |          1.230 |  2.750 |  2.500 |           1.200 |            0.800 |
    """)
HYBRID = textwrap.dedent("""\

    ### On HBM+HMEM hybrid mode: 

    * dim = 64, capacity = 128 Million-KV, HBM = 16 GB, HMEM = 16 GB

    |    \u03bb | insert_or_assign |   find | find_or_insert | assign |  find* | find_or_insert* |
    |-----:|-----------------:|-------:|---------------:|-------:|-------:|----------------:|
    | 0.50 |            0.150 |  0.190 |          0.140 |  0.180 |  3.000 |           1.000 |
    """)


@pytest.fixture(scope="module")
def peer(load_script):
    return load_script("benchmarks/hkv_peer.py")


@pytest.fixture(scope="module")
def bench(load_script):
    return load_script("benchmarks/hash_table.py")


def test_parse_reads_every_cell_of_both_modes_in_hkv_units(peer):
    run = peer.parse(PURE + HYBRID)
    assert (run.gpu, run.compute_capability) == ("NVIDIA H200", "9.0")
    cap = 128 << 20
    assert run.tables[(peer.PURE_HBM, 8, cap, 0.5)]["find"] == 4.202
    assert run.tables[(peer.PURE_HBM, 8, cap, 1.0)]["insert_and_evict"] == 0.907
    assert run.tables[(peer.PURE_HBM, 8, cap, 0.75)]["contains"] == 3.232  # the second table joins the same row
    assert run.tables[(peer.PURE_HBM, 32, cap, 1.0)]["find_or_insert*"] == 1.200
    assert run.tables[(peer.HYBRID, 64, cap, 0.5)]["find"] == 0.190
    assert len(run.tables) == 3 + 3 + 1
    # get(): pure-HBM only by default, converted from HKV's 2**30 KV/s to 1e9 KV/s
    assert run.get(32, cap, 1.0, "find_or_insert") == pytest.approx(1.230 * 2**30 / 1e9)
    assert run.get(64, cap, 0.5, "find") is None
    assert run.get(32, cap, 0.5, "no_such_op") is None
    assert peer.HKV_UNIT == pytest.approx(1.073741824)


def test_parse_joins_the_grid_drivers_one_table_per_op(peer):
    # tools/peer/hkv_benchmark_grid.cu with --apis: one two-column table per op (rows: the loads), in the order given;
    # a run stopped by the timeout keeps the ops measured before it.
    text = textwrap.dedent("""\
        * GPU: 1 x NVIDIA H200: 9.0
        ### On pure HBM mode: 

        * dim = 32, capacity = 128 Million-KV, HBM = 16 GB, HMEM = 0 GB

        |    \u03bb | find_or_insert |
        |-----:|-------:|
        | 0.50 |          2.078 |
        | 1.00 |          1.230 |

        |    \u03bb | insert_or_assign |
        |-----:|-------:|
        | 0.50 |            2.118 |
        | 1.00 |    """)
    run = peer.parse(text)
    cap = 128 << 20
    assert run.tables[(peer.PURE_HBM, 32, cap, 0.5)] == {"find_or_insert": 2.078, "insert_or_assign": 2.118}
    assert run.tables[(peer.PURE_HBM, 32, cap, 1.0)] == {"find_or_insert": 1.230}
    assert run.get(32, cap, 1.0, "insert_or_assign") is None


def test_parse_drops_a_row_cut_short_and_records_skipped_configs(peer):
    cut = PURE + "\n* dim = 64, capacity = 64 Million-KV, HBM = 16 GB, HMEM = 0 GB\n\n" + (
        "|    \u03bb | insert_or_assign |   find |\n|-----:|-----------------:|-------:|\n"
        "| 0.50 |            1.100 |  2")
    run = peer.parse(cut)
    assert (peer.PURE_HBM, 64, 64 << 20, 0.5) not in run.tables
    assert len(run.tables) == 6
    run = peer.parse(PURE.replace("* dim = 32", "free HBM is not enough, ignore current benchmark!\n* dim = 32"))
    assert run.skipped == ["free HBM is not enough, ignore current benchmark!"]
    assert peer.parse("").tables == {}


def _fake_binary(tmp_path, body):
    path = tmp_path / "fake_hkv"
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_run_stops_the_binary_at_the_hybrid_section(peer, tmp_path):
    (tmp_path / "pure.txt").write_text(PURE)
    (tmp_path / "hybrid.txt").write_text(HYBRID)
    binary = _fake_binary(tmp_path, f"cat {tmp_path}/pure.txt; cat {tmp_path}/hybrid.txt; sleep 60\n")
    seen = []
    log = tmp_path / "hkv.log"
    with open(log, "w") as f:
        t0 = time.time()
        out = peer.run(binary, timeout_s=50, log=f, echo=seen.append)
    assert time.time() - t0 < 30
    assert out.stopped_at_hybrid and not out.timed_out
    assert "hybrid mode" in seen[-1]
    assert log.read_text() == out.text
    run = peer.parse(out.text)
    assert len(run.tables) == 6 and not any(k[0] == peer.HYBRID for k in run.tables)


def test_run_times_out_with_what_was_printed(peer, tmp_path):
    (tmp_path / "pure.txt").write_text(PURE)
    binary = _fake_binary(tmp_path, f"cat {tmp_path}/pure.txt; sleep 60\n")
    t0 = time.time()
    out = peer.run(binary, timeout_s=2)
    assert time.time() - t0 < 30
    assert out.timed_out and not out.stopped_at_hybrid
    assert len(peer.parse(out.text).tables) == 6


def test_run_returns_the_exit_code_of_a_binary_that_ends_by_itself(peer, tmp_path):
    (tmp_path / "pure.txt").write_text(PURE)
    out = peer.run(_fake_binary(tmp_path, f"cat {tmp_path}/pure.txt; exit 3\n"), timeout_s=30)
    assert (out.returncode, out.stopped_at_hybrid, out.timed_out) == (3, False, False)
    assert len(peer.parse(out.text).tables) == 6


def test_side_by_side_table_has_the_header_both_timings_hkv_and_ratios(peer, bench):
    run = peer.parse(PURE)
    cap = 128 << 20
    dev = {op: 2.0 for op in bench.OPS}
    host = {op: 1.5 for op in bench.OPS}
    rows = [(32, cap, 1.0, "uniform", dev, host), (32, cap, 1.0, "zipf1.05", dev, host),
            (64, 64 << 20, 0.5, "uniform", dev, None)]
    bw = 4.0e12
    text = peer.side_by_side(rows, run, "NVIDIA H200", bw, 1 << 20, 10, bench.op_bytes, commit="abc",
                             hkv_commit="ae24eec")
    lines = text.splitlines()
    assert lines[0].startswith("### Scored hash table vs HierarchicalKV (ae24eec), NVIDIA H200: keys uint64, "
                               "values fp32, 1,048,576 keys/op, hit rate 0.6, uniform keys")
    assert "billion (1e9) KV/s" in lines[0] and "copy bandwidth 4.00 TB/s" in lines[0]
    assert any("host clock" in ln and "stream synchronize" in ln for ln in lines)
    head = next(i for i, ln in enumerate(lines) if ln.startswith("| dim |"))
    body = lines[head + 2:]
    assert len(body) == 2 * len(peer.HKV_OPS)  # the Zipf row is left out
    fio = next(ln for ln in body if "| 32 |" in ln and "| find_or_insert |" in ln)
    theirs = 1.230 * peer.HKV_UNIT
    nbytes = bench.op_bytes("find_or_insert", 32, 0.6, 1.0)
    cells = [c.strip() for c in fio.strip("|").split("|")]
    assert cells[:4] == ["32", "128M", "1.00", "find_or_insert"]
    assert cells[4] == f"2.000 ({2.0e9 * nbytes / bw:.0%})"
    assert cells[5] == f"1.500 ({1.5e9 * nbytes / bw:.0%})"
    assert cells[6] == f"{theirs:.3f} ({theirs * 1e9 * nbytes / bw:.0%})"
    assert cells[7:] == [f"{2.0 / theirs:.2f}x", f"{1.5 / theirs:.2f}x"]
    # dim 64 is not in the parsed run, and that row has no host timing
    d64 = next(ln for ln in body if "| 64 |" in ln and "| find |" in ln)
    assert d64.count("–") == 4


def test_op_bytes_count_what_each_op_must_move(bench):
    row = 4 * 32
    base = 8 + 128 + 32
    assert bench.op_bytes("find", 32, 0.6) == pytest.approx(base + 0.6 * 2 * row + 1)
    assert bench.op_bytes("assign", 32, 0.6) == pytest.approx(base + 0.6 * (8 + 2 * row))
    assert bench.op_bytes("insert_or_assign", 32, 0.6) == pytest.approx(base + 8 + 2 * row + 0.4 * 9)
    # evicted rows come out only when the table is full
    assert bench.op_bytes("insert_and_evict", 32, 0.6, 0.5) == bench.op_bytes("insert_or_assign", 32, 0.6)
    assert bench.op_bytes("insert_and_evict", 32, 0.6, 1.0) == pytest.approx(
        bench.op_bytes("insert_or_assign", 32, 0.6) + 0.4 * (row + 16))


def test_bench_config_fills_on_the_cpu_twin_once_or_as_hkv_does(bench, monkeypatch):
    # The table's CPU twin runs the benchmark's own fill, batches and restores (the host timer stands in for the
    # events); at load factor 1 the "once" fill ends below full with part of the hits evicted, the HKV-style fill
    # tops it up and draws its hits from keys that are all present.
    monkeypatch.setattr(bench.torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(bench, "Timer", bench.HostTimer)
    batch = 1 << 10
    nh = int(batch * 0.6) / batch
    seen = {}
    for fill in ("once", "hkv"):
        for lam in (0.5, 1.0):
            info = {}
            dev, host = bench.bench_config(1 << 14, 8, lam, batch, 2, dev="cpu", host=True, fill=fill, info=info)
            assert set(dev) == set(host) == set(bench.OPS)
            assert all(v > 0 for v in list(dev.values()) + list(host.values()))
            seen[(fill, lam)] = info
    assert seen[("once", 0.5)] == seen[("hkv", 0.5)] == {"real_lambda": 0.5, "hits": pytest.approx(nh)}
    assert seen[("once", 1.0)]["real_lambda"] < 0.99 and seen[("once", 1.0)]["hits"] < nh
    assert seen[("hkv", 1.0)]["real_lambda"] >= 0.999 and seen[("hkv", 1.0)]["hits"] == pytest.approx(nh)


def test_peer_arguments_are_checked_before_anything_runs(bench, tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--peer-hkv", str(tmp_path / "missing")])
    assert "--peer-hkv: expected an executable file" in capsys.readouterr().err
    exe = _fake_binary(tmp_path, "exit 0\n")
    with pytest.raises(SystemExit):
        bench.main(["--peer-hkv", exe, "--batch", "1000"])
    assert "--batch: HKV's benchmark runs 1048576 keys per op" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--peer-hkv", exe, "--quick"])
    assert "expected neither --quick nor --capacity" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--peer-hkv", exe, "--peer-timeout", "0"])
    assert "--peer-timeout: expected a positive number" in capsys.readouterr().err


def test_main_with_a_peer_runs_it_first_and_prints_both_tables(bench, tmp_path, monkeypatch, capsys):
    # The GPU parts stubbed (the table ops are the GPU benchmark's): what main assembles from HKV's run and ours.
    (tmp_path / "out.txt").write_text(PURE + HYBRID)
    (tmp_path / "hkv_commit.txt").write_text("ae24eec\n")
    exe = _fake_binary(tmp_path, f"echo \"$@\" > {tmp_path}/args.txt; cat {tmp_path}/out.txt; sleep 60\n")
    order = []
    monkeypatch.setattr(bench.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench.torch.cuda, "get_device_name", lambda *a: "Fake GPU")
    monkeypatch.setattr(bench, "copy_bandwidth", lambda dev: order.append("bw") or 4.0e12)

    def fake_config(cap, dim, lam, batch, reps, zipf=False, initializer="constant", host=False, fill="once",
                    info=None):
        order.append(("ours", dim, lam, host, fill))
        info.update(real_lambda=min(lam, 0.999), hits=0.6)
        return {op: 3.0 for op in bench.OPS}, {op: 2.5 for op in bench.OPS}

    monkeypatch.setattr(bench, "bench_config", fake_config)
    real_run = bench.hkv_peer.run
    monkeypatch.setattr(bench.hkv_peer, "run", lambda *a, **k: order.append("hkv") or real_run(*a, **k))
    results = tmp_path / "results.md"
    log = tmp_path / "hkv.log"
    assert bench.main(["--peer-hkv", exe, "--dims", "32", "--lambdas", "0.5", "1.0", "--dists", "uniform",
                       "--reps", "3", "--results", str(results), "--hkv-log", str(log), "--commit", "c0ffee",
                       "--plot", str(tmp_path / "p.png")]) == 0
    assert order[0] == "hkv" and order[1] == "bw"
    assert order[2:] == [("ours", 32, 0.5, True, "hkv"), ("ours", 32, 1.0, True, "hkv")]  # HKV's fill by default
    out = capsys.readouterr().out
    assert "HierarchicalKV: complete" in out and "hkv| ### On pure HBM mode:" in out
    assert "### Scored hash table vs HierarchicalKV (ae24eec), Fake GPU" in out
    fio = f"| 32 | 128M | 1.00 | find_or_insert | 3.000 ("
    line = next(ln for ln in out.splitlines() if ln.startswith(fio))
    theirs = 1.230 * bench.hkv_peer.HKV_UNIT
    assert line.endswith(f"| {3.0 / theirs:.2f}x | {2.5 / theirs:.2f}x |")
    assert "ours: the same (--fill hkv)" in out
    assert "dim 32 λ 1.0 uniform: 0.9990 / 0.600" in out  # the real load factor and the found fraction
    assert "vs HierarchicalKV" in results.read_text() and "hybrid mode" in log.read_text()
    # the grid driver's slice: our dims and loads, the five compared ops
    assert (tmp_path / "args.txt").read_text().split() == [
        "--dims", "32", "--lambdas", "0.5,1", "--apis", "find_or_insert,insert_or_assign,insert_and_evict,assign,find"]


def test_grid_driver_run_that_ends_by_itself_is_complete(bench, tmp_path, monkeypatch, capsys):
    # The grid driver prints only its slice (no hybrid heading) and exits 0: a complete run, not a timeout.
    (tmp_path / "pure.txt").write_text(PURE)
    exe = _fake_binary(tmp_path, f"cat {tmp_path}/pure.txt; exit 0\n")
    run, commit = bench.run_peer(argparse.Namespace(
        peer_hkv=exe, hkv_commit="ae24eec", peer_timeout=30.0, hkv_log=None), [32], [0.5, 1.0])
    assert commit == "ae24eec" and len(run.tables) == 6
    assert "HierarchicalKV: complete in" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ the build script
def _checkout(tmp_path):
    hkv = tmp_path / "hkv"
    (hkv / "include").mkdir(parents=True)
    (hkv / "benchmark").mkdir()
    for f in ("include/merlin_hashtable.cuh", "benchmark/merlin_hashtable_benchmark.cc.cu",
              "benchmark/benchmark_util.cuh"):
        (hkv / f).write_text("// empty\n")
    return hkv


def _script(*args, **env):
    if not os.path.exists(BUILD_SCRIPT):
        pytest.skip("tools/peer/build_hkv_benchmark.sh is not in this tree")
    return subprocess.run(["bash", BUILD_SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **env))


def test_build_script_dry_run_prints_the_nvcc_command(tmp_path):
    hkv = _checkout(tmp_path)
    out = tmp_path / "out"
    r = _script("--dry-run", hkv, out, ARCH="90", NVCC="/opt/cuda/bin/nvcc", HKV_COMMIT="ae24eec",
                EXTRA_NVCC_FLAGS="-lineinfo")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == ("peer: HierarchicalKV ae24eec, benchmark merlin_hashtable_benchmark through "
                        "hkv_benchmark_grid.cu, sm_90")
    cmd = lines[1].split()
    assert cmd[:2] == ["peer:", "/opt/cuda/bin/nvcc"]
    driver = os.path.join(os.path.dirname(BUILD_SCRIPT), "hkv_benchmark_grid.cu")
    for flag in ("-O3", "-std=c++17", "-DNDEBUG", "arch=compute_90,code=sm_90", "arch=compute_90,code=compute_90",
                 f"-I{hkv}/include", f"-I{hkv}/benchmark", "-lineinfo", driver):
        assert flag in cmd
    assert cmd[cmd.index("-o") + 1] == f"{out}/merlin_hashtable_benchmark"
    assert not out.exists()  # a dry run builds and creates nothing
    # --plain: HKV's benchmark file alone (no grid selection)
    r = _script("--dry-run", "--plain", hkv, out, ARCH="90", HKV_COMMIT="ae24eec")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "peer: HierarchicalKV ae24eec, benchmark merlin_hashtable_benchmark, sm_90"
    cmd = r.stdout.splitlines()[1].split()
    assert f"{hkv}/benchmark/merlin_hashtable_benchmark.cc.cu" in cmd and driver not in cmd
    r = _script("--dry-run", hkv, out, ARCH="80")
    assert r.returncode == 0 and "arch=compute_80,code=sm_80" in r.stdout
    r = _script("--dry-run", hkv, out)  # ARCH from nvidia-smi, else 90
    assert r.returncode == 0 and "code=sm_" in r.stdout


@pytest.mark.parametrize("case", ["one_arg", "three_args", "bad_option", "no_checkout", "no_source", "bad_arch"])
def test_build_script_refuses_bad_arguments_with_the_reason(tmp_path, case):
    hkv = _checkout(tmp_path)
    out = tmp_path / "out"
    args, env, why = {
        "one_arg": ((hkv,), {}, "expected 2 arguments (HKV_DIR OUT_DIR), got 1"),
        "three_args": ((hkv, out, out), {}, "expected 2 arguments (HKV_DIR OUT_DIR), got 3"),
        "bad_option": (("--fast", hkv, out), {}, "unknown option --fast"),
        "no_checkout": ((tmp_path / "nowhere", out), {}, "HKV_DIR: no directory"),
        "no_source": ((hkv, out), {"BENCHMARK": "dual_bucket_benchmark"},
                      "HKV_DIR: no benchmark/dual_bucket_benchmark.cc.cu"),
        "bad_arch": ((hkv, out), {"ARCH": "9.0"}, "ARCH: expected compute capability digits such as 90, got '9.0'"),
    }[case]
    r = _script("--dry-run", *args, **env)
    assert r.returncode == 2
    assert why in r.stderr
    assert not out.exists()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
