# zipf32 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fwd28_run's setup (carried
# as fwd28_setup.sh beside carry_setup.sh: main32's hstu_attn wheel in /tmp/site_main, the branch's in
# /tmp/site_zipf32, GPU, run_tests, T, left, bench, digest_verbose) with J = zipf32_bench.py (carried in jag/ beside
# fwd17_jag.py and fwd29_bench.py).
NAME=zipf32 BASE=main32
source "$(dirname "${BASH_SOURCE[0]}")"/fwd28_setup.sh
J=$C/jag/zipf32_bench.py
digest_time() {
  echo "#### time (main32 = main 4d2d71ae's wheel, own process; zipf32 = the branch's; sm90=False; alpha D^-1/2; ctx3;"
  echo "#### w4 / w2 = fwd_sm80_bm64=1 / 2 (the split in 64 x 64 tiles of 4 / 2 warps, D = 64 / 128);"
  echo "#### nK = and fwd_split_tiles=K)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc " $OUT/time.log | cut -c1-250
}
