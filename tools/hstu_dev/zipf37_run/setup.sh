# zipf37 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fwd28_run's setup (carried
# as fwd28_setup.sh beside carry_setup.sh: main37's hstu_attn wheel in /tmp/site_main, the branch's in
# /tmp/site_zipf37, GPU, run_tests, T, left, bench, digest_verbose) with J = zipf37_bench.py (carried in jag/ beside
# fwd17_jag.py, fwd29_bench.py, zipf32_bench.py and zipf35_bench.py).
NAME=zipf37 BASE=main37
source "$(dirname "${BASH_SOURCE[0]}")"/fwd28_setup.sh
J=$C/jag/zipf37_bench.py
digest_time() {
  echo "#### time (zipf37 = the branch's wheel; sm90=False; alpha D^-1/2; ctx3; g2 = the branch's default (the split's"
  echo "#### short items two to a block at the list's tail), place = fwd_sm80_cfg=12 (run 1: g3, three to a block; run 2 on:"
  echo "#### the pairs placed by their weight), main = fwd_sm80_cfg=11 (one item per block:"
  echo "#### main's split kernel); bwd = the portable backward (main's), Zipf / dense)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc " $OUT/time.log | cut -c1-250
}
