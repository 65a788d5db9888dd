# fwd23 run scripts' setup, sourced by run.sh / run2.sh from the root of main's tree (main 95270e5 on the device):
# fwd21's setup (carried as fwd21_setup.sh: J = fwd21_bench.py, jagp, ncu_profile, run_tests, digest_verbose) with
# the baseline = fwd22's final wheel (cfdd6e4's kernels, carried in base/whl) in /tmp/site_fwd23base (not
# /tmp/site_main: main21's folder is not this run's baseline), the branch's wheel in /tmp/site_fwd23.
NAME=fwd23 BASE=fwd23/base
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_$NAME}
mkdir -p "$OUT"
C=$R/.carry/$NAME
for site_whl in "/tmp/site_fwd23base $C/base/whl" "/tmp/site_$NAME $C/whl"; do
  set -- $site_whl
  rm -rf "$1" && python3 -m pip install -q --no-deps --no-index --no-compile --target "$1" $2/hstu_attn-*.whl 2>&1 |
    grep -v WARN | tail -2
done
set --
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=4 -rfE"
digest_tests() {
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | tail -12 | cut -c1-300
}
run_tests() {
  local t=$1 k=$2 d=$R
  shift 2
  [ -d $C/tree ] && d=$C/tree
  (cd $d && PYTHONPATH=/tmp/site_$NAME timeout $t $PT "$@" -k "$k" >> $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s)"
}
J=$C/jag/fwd21_bench.py
PEER=$R/.carry/peer
left() { echo $(( 41 - SECONDS )); }
jagp() {
  local site=$1 label=$2 t=$3
  shift 3
  [ $t -gt 1 ] || { echo "no time left for $label"; return 0; }
  PYTHONPATH=$site:$PEER timeout $t python3 -P $J $label "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
}
digest_verbose() {
  grep -c PASSED $OUT/tests.log | sed 's/^/PASSED lines: /'
  grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*/\1/' | sort | uniq -c
  digest_tests
}
digest_time() {
  echo "#### time (fwd22 = fwd22's final wheel, the base; fwd23 = the branch's; sm90=False; cfg n = fwd_sm80_cfg;"
  echo "#### peer = NVIDIA's Ampere HSTU (.carry/peer); FA2 = torch's flash SDPA)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture" $OUT/time.log | cut -c1-250
}
