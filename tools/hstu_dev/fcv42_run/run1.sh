#!/bin/bash
# fcv42 run 1 (issue 39, session 42): the dQ claims' last writers convert their blocks (branch fcv42, not merged)
# against main 9f13b1af's wheel: the portable backward's tests, then t44.py prof per wheel, alternating. Carry:
# .carry/fcv42/{new,old}/hstu_attn*.whl (branch / main), .carry/fcv42/dynamicemb*.whl, this script; bash .carry/fcv42/run1.sh
cd "$(dirname "$0")/../.."
R=$PWD; C=$R/.carry/fcv42
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for w in new old; do
  python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_$w $C/$w/*.whl > /dev/null 2>&1 || echo "install $w failed"
done
for w in new old; do python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_$w $C/dynamicemb*.whl > /dev/null 2>&1; done
md5sum $C/new/*.whl $C/old/*.whl
pt=(python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib -rfEs --tb=short -n 4)
(PYTHONPATH=/tmp/site_new timeout 230 "${pt[@]}" tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py \
   tests/hstu/test_sm80_backward_split_gpu.py tests/hstu/test_kernel_options.py > $OUT/tests.txt 2>&1; echo "tests rc $? ($SECONDS s)")
tail -1 $OUT/tests.txt; grep -E "^(FAILED|ERROR)" $OUT/tests.txt | head -8 | cut -c1-260
T44=$R/tools/hstu_dev/tab44_run/t44.py
for r in 1 2; do
  for w in new old; do
    PYTHONPATH=/tmp/site_$w timeout 75 python3 -P $T44 prof --bench $R/benchmarks --variants main fill claim --reps 10 \
      --shapes B256:S256:D256 B128:S1024:D256 B128:S1024:D128 B64:S2048:D128 > $OUT/prof_${w}_$r.log 2>&1
    echo "== $w round $r rc $? ($SECONDS s)"
    grep -hE "^BWD" $OUT/prof_${w}_$r.log | sed 's/ | at .*//' | cut -c1-230
    grep -hE "Error|Traceback" $OUT/prof_${w}_$r.log | head -3
  done
done
