#!/bin/bash
# claims44 (issue 39): the dQ claims as the default backward at bf16 D = 256 heads first. From the tree root:
# carry: bash tools/hstu_dev/tab44_run/pack.sh .carry/i39 WHEEL PEER_SO (its setup.sh), then this folder's run*.sh into it
#   bash .carry/i39/run3.sh   (the tree: branch claims44's tests)
LIM=${LIM:-400}
source "$(dirname "$0")/setup.sh"
echo "== tests ($SECONDS s)"
(PYTHONPATH=/tmp/site_i39 timeout 230 python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib -rfEs \
   --tb=short -n 4 tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py \
   tests/hstu/test_sm80_backward_split_gpu.py > $OUT/tests.txt 2>&1; echo "tests rc $?") 
tail -1 $OUT/tests.txt; grep -E "^(FAILED|ERROR)" $OUT/tests.txt | head -8 | cut -c1-220
echo "== prof ($SECONDS s)"
PYTHONPATH=/tmp/site_i39:$PEER timeout 60 python3 -P $C/t44.py prof --bench $BENCH --variants main fill claim $PEER_ARG \
    --reps 10 --shapes B256:S256:D256 B128:S1024:D256 B16:S4096:D256 B128:S1024:D128 > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
grep -hE "^(FWD|BWD)" $OUT/prof.log | sed 's/ | at .*//' | cut -c1-240
grep -hE "Error|Traceback" $OUT/prof.log | head -3
echo "== table ($SECONDS s)"
PYTHONPATH=/tmp/site_i39:$PEER timeout 40 python3 -P $T39 table --bench $BENCH --variants main $PEER_ARG --reps 10 \
    --shapes B256:S256:D256 B128:S1024:D256 B16:S4096:D256 B16:S8192:D256 > $OUT/table.log 2>&1
echo "rc $? ($SECONDS s)"; grep "^TABLE" $OUT/table.log | cut -c1-200
