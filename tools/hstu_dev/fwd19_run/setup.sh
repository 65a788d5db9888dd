# fwd19 run scripts' common setup, sourced by run.sh / run2.sh / run3.sh from the root of main's tree: strict mode,
# OUT, R (the tree), C (the carry folder), main18's wheel in /tmp/site_main and the branch's in /tmp/site_fwd19,
# GPU (name and clocks), J (fwd19_jag.py, carried with fwd17_jag.py), PT (pytest's command line).
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_fwd19}
mkdir -p "$OUT"
C=$R/.carry/fwd19
for site_whl in "/tmp/site_main $R/.carry/main18/whl" "/tmp/site_fwd19 $C/whl"; do
  set -- $site_whl
  rm -rf "$1" && python3 -m pip install -q --no-deps --no-index --no-compile --target "$1" $2/hstu_attn-*.whl 2>&1 |
    grep -v WARN | tail -2
done
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
J=$C/jag/fwd19_jag.py
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=4 -rfE"
digest_tests() {
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | tail -12 | cut -c1-300
}
# run_tests TIMEOUT EXPR FILE...: test files (the carry's tree where it has them, else main's) under pytest -k EXPR
run_tests() {
  local t=$1 k=$2 d=$R
  shift 2
  [ -d $C/tree ] && d=$C/tree
  (cd $d && PYTHONPATH=/tmp/site_fwd19 timeout $t $PT "$@" -k "$k" >> $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s)"
}
# jag SITE LABEL TIMEOUT ARGS...: fwd19_jag.py LABEL ARGS with SITE's wheel, appended to $OUT/time.log
jag() {
  local site=$1 label=$2 t=$3
  shift 3
  PYTHONPATH=$site timeout $t python3 -P $J $label "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
}
