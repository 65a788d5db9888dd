# fp8f24 run scripts' common setup, sourced by run.sh / run2.sh from the root of the device's tree (main 708f92a):
# fp8f23's (fp8f20's strict mode, OUT, C = .carry/fp8f24, left(), the branch's wheel in /tmp/site_fp8f24, main22's
# in /tmp/site_fp8f24_main, smi_log / smi_stop with the instant power digested by $C/smi_digest.py) + lab_test /
# passed / summary (one pytest process per group, side by side, each under its own timeout).
NAME=fp8f24 MAIN=main22 SMI_INSTANT=1
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
passed() { grep -c PASSED $OUT/tests_$1.log; }
summary() {
  local f=$OUT/tests_$1.log
  echo "$1: $(tail -1 $f), $(passed $1) passed, $(grep -c -E 'FAILED|ERROR' $f) failed lines"
  grep -E "^FAILED|^ERROR|^E  " $OUT/tests_$1.log | head -6 | cut -c1-200
  grep -E "::.* (PASSED|FAILED)|::[^ ]* *$" $OUT/tests_$1.log | sed 's/.*test_/test_/' | cut -c1-120
}
