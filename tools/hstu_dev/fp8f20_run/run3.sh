#!/usr/bin/env bash
# fp8f20 run 3 (issue 36, FP8 forward; <= 30 s): GPU tests of the branch's final product wheel (run 2's wheel: the
# FP8 forward is main's code less the private 96-key D256 kernel; its default kernels' SASS = main 939d473's), serial
# (run 2's 8 xdist workers thrashed the CPU references). Part 1 (14 s): the product build's refusal of the
# timing-only variants, the emulation rule at D256 (the launcher path that changed; all modes x masks); part 2 (the
# rest of the 30 s): seqused / fp16 / GR mask, the wide-tile rule, the schedules, the emulation rule at D128 / D64.
LIM=30
source .carry/fp8f20/setup.sh
T=tests/hstu/test_fp8.py
PYT="python3 -P -m pytest -v -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=3 -rfE"
part() {
  local secs=$1 log=$2
  shift 2
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $secs $PYT "$@" > $OUT/$log 2>&1)
  echo "$log rc $? (124: time ran out; $SECONDS s): $(grep -c PASSED $OUT/$log) passed, $(grep -c -E 'FAILED|ERROR' \
      $OUT/$log) failed lines"
  grep -E "passed|failed|^FAILED|^ERROR" $OUT/$log | tail -4
}
echo "== tests ($SECONDS s)"
part 14 tests1.log $T::test_cuda_fp8_fwd_product_build_refuses_timing_variants \
    $T::test_cuda_fp8_kernel_matches_emulating_reference -k "product_build or 256"
part $(( $(left) - 1 )) tests2.log $T::test_cuda_fp8_kernel_seqused_float16_out_and_gr_mask \
    $T::test_cuda_fp8_kernel_wide_tiles_for_long_sequences $T::test_cuda_fp8_kernel_schedules_match \
    $T::test_cuda_fp8_kernel_matches_emulating_reference -k "not 256"
grep -h -E "PASSED|FAILED" $OUT/tests1.log $OUT/tests2.log | sed 's/\[.*//; s/ *PASSED.*//' | sort | uniq -c
echo "== end ($SECONDS s)"
