# fwd29 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fwd28's
# (tools/hstu_dev/fwd28_run/setup.sh, carried as fwd28_setup.sh: the common carry setup, main29's hstu_attn wheel in
# /tmp/site_main and the branch's in /tmp/site_fwd29, GPU, run_tests, left, bench, digest_verbose) with J =
# fwd29_bench.py (carried in jag/ beside fwd17_jag.py and fwd21_bench.py).
NAME=fwd29 BASE=main29
source "$(dirname "${BASH_SOURCE[0]}")"/fwd28_setup.sh
J=$C/jag/fwd29_bench.py
digest_time() {
  echo "#### time (main29 = main 98f618f's wheel, own process; fwd29 = the branch's; sm90=False; alpha D^-1/2; ctx3;"
  echo "#### nK = fwd_split_tiles=K (exact chunks of K KV tiles); split main = fwd_sm80_split_main=True (run 1:"
  echo "#### walks twice = fwd_sm80_list_cache=False)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc " $OUT/time.log | cut -c1-250
}
