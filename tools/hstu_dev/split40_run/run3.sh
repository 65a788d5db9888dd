#!/bin/bash
# split40 run 3 (lead, session 37): the split by default (bwd_split_default) on the fix (RUN4=1: tests only,
# test_sm80_backward_gpu.py pinned to bwd_sm80_split=False, every failure listed). GPU tests of the portable
# backward with the rule (split tests incl. the rule's, test_sm80_backward_gpu.py, test_kernels_gpu.py, device
# checks, benchmark script), then split39_bench.py: never / the rule / always (cfg 14) on the Zipf pair and the
# rule's edge shapes at D = 64 / 128 / 256.
set -u
export PYTHONUNBUFFERED=1
C=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/site_fix
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fix $C/whl/hstu_attn-*.whl 2>&1 |
    grep -v WARN | tail -2
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=line -rfE"
echo "## tests ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fix timeout 280 $PT tests/hstu/test_sm80_backward_split_gpu.py \
    tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py \
    tests/hstu/test_device_checks_gpu.py > $OUT/tests.log 2>&1; grep -E "^FAILED|passed|failed" $OUT/tests.log |
    cut -c1-200 | head -60)
[ -n "${RUN4:-}" ] && exit 0
echo "## bench ($SECONDS s)"
PYTHONPATH=/tmp/site_fix timeout 150 python3 -P $C/split39_bench.py run3 --var never=never rule=0 always=14 \
    --edge --reps 3 2>&1 | grep -E "^\(|^\| D|^## |rror|Traceback" | cut -c1-300
echo "done at $SECONDS s"
