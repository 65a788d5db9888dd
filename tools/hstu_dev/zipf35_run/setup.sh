# zipf35 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fwd28_run's setup (carried
# as fwd28_setup.sh beside carry_setup.sh: main35's hstu_attn wheel in /tmp/site_main, the branch's in
# /tmp/site_zipf35, GPU, run_tests, T, left, bench, digest_verbose) with J = zipf35_bench.py (carried in jag/ beside
# fwd17_jag.py, fwd29_bench.py and zipf32_bench.py).
NAME=zipf35 BASE=main35
source "$(dirname "${BASH_SOURCE[0]}")"/fwd28_setup.sh
J=$C/jag/zipf35_bench.py
digest_time() {
  echo "#### time (zipf35 = the branch's wheel; sm90=False; alpha D^-1/2; ctx3; default = the branch's split (<= 32"
  echo "#### sequences: no list kernel, each split block derives its own item), main = fwd_sm80_split_main=True"
  echo "#### (main's path: the list kernel, then the split kernel); gaps: V / L / S = validation / list / split us)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc " $OUT/time.log | cut -c1-250
}
