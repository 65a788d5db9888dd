#!/bin/bash
# peer35 call 3 (the last): a repeat of all eight shapes against NVIDIA's Ampere HSTU, now the module that the
# committed tools/peer/build_nvidia_ampere_hstu.sh built with UNITS=causal, then FA2 beside them in the same call
# (B16 S16K D128 left out: time), then the benchmark script's CPU tests of the branch (--case, the eight shapes).
source .carry/peer35/setup.sh
echo "$GPU"
bench nvidia-ampere $((34 - SECONDS)) peer
bench fa2 $((49 - SECONDS)) fa2 --case "B16 S4K D128" --case "B128 S1K D128" --case "B16 S4K D256" \
  --case "B16 S8K D64" --case "B256 S256 D256" --case "B128 S1K D256" --case "B16 S8K D256"
(cd $C/tree && PYTHONPATH=$SITE timeout $((55 - SECONDS)) python3 -P -m pytest -q -p no:cacheprovider \
  --import-mode=importlib tests/hstu/test_benchmark_script.py -k "case_option or portable_sweep" > $OUT/tests.log 2>&1)
echo "tests rc $? ($SECONDS s)"
echo "== peer"; digest peer diff
echo "== fa2"; digest fa2
tail -1 $OUT/tests.log
