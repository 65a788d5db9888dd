# zipf34 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fwd28_run's setup (carried
# as fwd28_setup.sh beside carry_setup.sh: main34's hstu_attn wheel in /tmp/site_main, the branch's in
# /tmp/site_zipf34, GPU, run_tests, T, left, bench, digest_verbose) with J = zipf33_bench.py (carried in jag/ beside
# fwd17_jag.py, fwd29_bench.py and zipf32_bench.py).
NAME=zipf34 BASE=main34
source "$(dirname "${BASH_SOURCE[0]}")"/fwd28_setup.sh
J=$C/jag/zipf33_bench.py
digest_time() {
  echo "#### time (main34 = main 39ee30ed's wheel, own process; zipf34 = the branch's; sm90=False; alpha D^-1/2; ctx3;"
  echo "#### default = the branch's split (the lean list kernel), plain = fwd_sm80_split_plain=True (main33's path:"
  echo "#### plain launches, fences, prologue, and main 39ee30ed's list kernel); gaps: L = the list kernel's us)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc " $OUT/time.log | cut -c1-250
}
