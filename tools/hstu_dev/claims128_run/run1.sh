#!/bin/bash
# claims128 run 1 (issue 39, session 42): the dQ claims as the default backward at bf16 D = 128 heads first (branch
# claims128) against main 9f13b1af's wheel: the portable backward's tests, then t44.py prof (main = the default,
# fill = fwd_sm80_cfg=15) per wheel, alternating. Carry: .carry/c128/{new,old}/hstu_attn*.whl (branch / main),
# .carry/c128/dynamicemb*.whl and this script; bash .carry/c128/run1.sh
cd "$(dirname "$0")/../.."
R=$PWD; C=$R/.carry/c128
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for w in new old; do
  python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_$w $C/$w/*.whl $C/dynamicemb*.whl \
    > /dev/null 2>&1 || echo "install $w failed"
done
md5sum $C/new/*.whl $C/old/*.whl
pt=(python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib -rfEs --tb=short -n 4)
(PYTHONPATH=/tmp/site_new timeout 200 "${pt[@]}" tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py \
   tests/hstu/test_sm80_backward_split_gpu.py tests/hstu/test_kernel_options.py > $OUT/tests.txt 2>&1; echo "tests rc $? ($SECONDS s)")
tail -1 $OUT/tests.txt; grep -E "^(FAILED|ERROR)" $OUT/tests.txt | head -8 | cut -c1-260
T44=$R/tools/hstu_dev/tab44_run/t44.py
for r in 1 2 3; do
  for w in new old; do
    PYTHONPATH=/tmp/site_$w timeout 80 python3 -P $T44 prof --bench $R/benchmarks --variants main fill --reps 10 \
      --shapes B128:S1024:D128 B64:S2048:D128 B512:S256:D128 B8:S2048:D128 B32:S512:D128 > $OUT/prof_${w}_$r.log 2>&1
    echo "== $w round $r rc $? ($SECONDS s)"
    grep -hE "^BWD" $OUT/prof_${w}_$r.log | sed 's/ | at .*//' | cut -c1-200
    grep -hE "Error|Traceback" $OUT/prof_${w}_$r.log | head -3
  done
done
