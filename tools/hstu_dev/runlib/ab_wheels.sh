# A / B of two hstu wheels on the device (fcv42_run, claims128_run; issue 39, session 42), sourced from the root of the
# tree by a run script carried in .carry/NAME/ with new/hstu_attn*.whl (the branch), old/hstu_attn*.whl (main) and
# dynamicemb*.whl beside it. Sets R (the tree), C (the carry), prints the GPU and the wheels' md5, installs them into
# /tmp/site_new and /tmp/site_old, and gives
#   ab_tests SECS    the portable backward's four test files with the branch's wheel (pytest -n 4) into $OUT/tests.txt
#   ab_prof TIMEOUT ROUNDS VARIANTS -- SHAPES...   tab44's t44.py prof with each wheel, alternating, ROUNDS rounds,
#                    into $OUT/prof_{new,old}_ROUND.log; prints the BWD lines
R=$PWD
C=$R/.carry/$AB_NAME
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for w in new old; do
  python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_$w $C/$w/*.whl $C/dynamicemb*.whl \
    > /dev/null 2>&1 || echo "install $w failed"
done
md5sum $C/new/*.whl $C/old/*.whl
ab_tests() {
  local pt=(python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib -rfEs --tb=short -n 4)
  (PYTHONPATH=/tmp/site_new timeout "$1" "${pt[@]}" tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py \
     tests/hstu/test_sm80_backward_split_gpu.py tests/hstu/test_kernel_options.py > $OUT/tests.txt 2>&1
   echo "tests rc $? ($SECONDS s)")
  tail -1 $OUT/tests.txt; grep -E "^(FAILED|ERROR)" $OUT/tests.txt | head -8 | cut -c1-260
}
ab_prof() {
  local t=$1 rounds=$2 variants=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do variants+=("$1"); shift; done
  shift
  for r in $(seq 1 $rounds); do
    for w in new old; do
      PYTHONPATH=/tmp/site_$w timeout $t python3 -P $R/tools/hstu_dev/tab44_run/t44.py prof --bench $R/benchmarks \
        --variants "${variants[@]}" --reps 10 --shapes "$@" > $OUT/prof_${w}_$r.log 2>&1
      echo "== $w round $r rc $? ($SECONDS s)"
      grep -hE "^BWD" $OUT/prof_${w}_$r.log | sed 's/ | at .*//' | cut -c1-230
      grep -hE "Error|Traceback" $OUT/prof_${w}_$r.log | head -3
    done
  done
}
