# fwd22 run scripts' setup, sourced by run.sh / run2.sh / run3.sh from the root of main's tree: fwd21's
# (tools/hstu_dev/fwd21_run/setup.sh, carried as fwd21_setup.sh) for the branch fwd22 against main21's wheel;
# time_pair, digest_time.
NAME=fwd22 BASE=main21
T=tests/hstu/test_sm80_forward_gpu.py  # (the tests' file)
for f in "$(dirname "${BASH_SOURCE[0]}")"/fwd21_setup.sh "$(dirname "${BASH_SOURCE[0]}")"/../fwd21_run/setup.sh; do
  [ -f "$f" ] && source "$f" && break
done
# digest_time: the timing tables of $OUT/time.log (main21 = main 95270e5's wheel, fwd22 = the branch's)
digest_time() {
  echo "#### time (main21 = main 95270e5's wheel, fwd22 = the branch's; sm90=False; cfg n = fwd_sm80_cfg; peer ="
  echo "#### NVIDIA's Ampere HSTU (.carry/peer); FA2 = torch's flash SDPA)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture" $OUT/time.log | cut -c1-250
}
# time_pair MAIN_TIMEOUT CASES ARGS...: main21's wheel on CASES (its default), then the branch's with ARGS in the time left
time_pair() {
  local t=$1 cases=$2
  shift 2
  jagp /tmp/site_main main21 $t --reps 5 --cases $cases
  jagp /tmp/site_fwd22 fwd22 $(( $(left) - 7 )) --reps 5 --cases $cases "$@"
}
