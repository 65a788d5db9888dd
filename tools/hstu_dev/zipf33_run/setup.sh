# zipf33 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fwd28_run's setup (carried
# as fwd28_setup.sh beside carry_setup.sh: main33's hstu_attn wheel in /tmp/site_main, the branch's in
# /tmp/site_zipf33, GPU, run_tests, T, left, bench, digest_verbose) with J = zipf33_bench.py (carried in jag/ beside
# fwd17_jag.py, fwd29_bench.py and zipf32_bench.py).
NAME=zipf33 BASE=main33
source "$(dirname "${BASH_SOURCE[0]}")"/fwd28_setup.sh
J=$C/jag/zipf33_bench.py
digest_time() {
  echo "#### time (main33 = main 0bb35f74's wheel, own process; zipf33 = the branch's; sm90=False; alpha D^-1/2; ctx3;"
  echo "#### default = the branch's split (run 1: PDL; run 2: PDL + the per-item changes), plain = main's path in the branch)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc " $OUT/time.log | cut -c1-250
}
