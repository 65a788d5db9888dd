# fp8f23 run scripts' common setup, sourced by run.sh / run2.sh from the root of the device's tree (main 95270e5):
# fp8f20's (bwd15's strict mode, OUT, C = .carry/fp8f23, left(), the branch's wheel in /tmp/site_fp8f23, smi_log /
# smi_stop with the instant power, digested by $C/smi_digest.py) + lab_tests: the lab variants' GPU tests, one pytest
# process per variant side by side, each under its own timeout (a hung pair kernel costs its process, not the run).
NAME=${NAME:-fp8f23} MAIN=${MAIN:-main21} SMI_INSTANT=1  # (fp8f24's setup.sh sets its own)
source $PWD/tools/hstu_dev/fp8f20_run/setup.sh
T=tests/hstu/test_fp8.py
# lab_test TAG SECONDS PYTEST_ARGS...: the branch's tests ($C/tree) with its wheel, -v, into $OUT/tests_TAG.log.
lab_test() {
  local tag=$1 secs=$2
  shift 2
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME OMP_NUM_THREADS=4 timeout -k 1 $secs python3 -P -m pytest -v \
      -p no:cacheprovider --import-mode=importlib --tb=short -rfE --durations=0 "$@" > $OUT/tests_$tag.log 2>&1
   echo "rc $? ($SECONDS s)" >> $OUT/tests_$tag.log)
}
# passed TAG: PASSED lines of tests_TAG.log; summary TAG: its rc, counts and failures.
passed() { grep -c PASSED $OUT/tests_$1.log; }
summary() {
  echo "$1: $(tail -1 $OUT/tests_$1.log), $(passed $1) passed, $(grep -c -E 'FAILED|ERROR' $OUT/tests_$1.log) failed lines"
  grep -E "^FAILED|^ERROR|^E  " $OUT/tests_$1.log | head -6 | cut -c1-200
  grep -E "::.* (PASSED|FAILED)|::[^ ]* *$" $OUT/tests_$1.log | sed 's/.*test_/test_/' | cut -c1-120
}
# bench_smi SECONDS ARGS...: $C/fp8_fwd_split.py ARGS with the branch's wheel beside the nvidia-smi log, under a
# SECONDS timeout, into $OUT/bench.log; its tables and the smi digest on stdout.
bench_smi() {
  local secs=$1
  shift
  smi_log
  PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P $C/fp8_fwd_split.py "$@" > $OUT/bench.log 2>&1
  echo "bench rc $? ($SECONDS s)"
  smi_stop
  grep -E "^\||^\(case|^\(sustain|^sustained|rror" $OUT/bench.log
}
