#!/bin/bash
# split40 run 6 (lead, session 37): main 1de0deed's own Bazel wheel (.carry/main41: the fix + the split by default):
# the portable GPU tests (split, backward loops, kernels, device checks, forward), then fwdshort.py.
set -u
export PYTHONUNBUFFERED=1
C=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/site_m41
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_m41 .carry/main41/whl/*.whl 2>&1 |
    grep -v WARN | tail -2
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=line -rfE"
echo "## tests ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_m41 timeout 150 $PT tests/hstu/test_sm80_backward_split_gpu.py \
    tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py tests/hstu/test_device_checks_gpu.py \
    tests/hstu/test_sm80_forward_gpu.py > $OUT/tests.log 2>&1; grep -E "^FAILED|passed|failed" $OUT/tests.log |
    cut -c1-200 | head -40)
echo "## fwdshort ($SECONDS s)"
[ -n "${FWDSHORT:-}" ] && PYTHONPATH=/tmp/site_m41 timeout 70 python3 -P $C/fwdshort.py run6 --reps 5 2>&1 | grep -E "^\||^#|rror" | cut -c1-400
echo "done at $SECONDS s"
