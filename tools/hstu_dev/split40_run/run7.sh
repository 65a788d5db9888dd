#!/bin/bash
# split40 run 7 (lead, session 37): the merged main's own Bazel wheel (.carry/main42: the split fix and rule, tidy40,
# rab40, fp8b64): the GPU tests of everything the merges touched (FP8 backward, the portable forward with rab, the
# portable backward's launchers and split, kernels, device checks), every failure listed (FILES / K / T: a subset).
set -u
export PYTHONUNBUFFERED=1
C=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/site_m42
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_m42 .carry/main42/whl/*.whl 2>&1 |
    grep -v WARN | tail -2
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=line -rfE"
FILES=${FILES:-"tests/hstu/test_fp8_bwd.py tests/hstu/test_sm80_forward_gpu.py
    tests/hstu/test_sm80_backward_split_gpu.py tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py
    tests/hstu/test_device_checks_gpu.py"}
(cd $C/tree && PYTHONPATH=/tmp/site_m42 timeout ${T:-200} $PT $FILES ${K:+-k "$K"} > $OUT/tests.log 2>&1)
grep -E "^FAILED|passed|failed" $OUT/tests.log | cut -c1-220 | head -40
grep -E "^[.FEsx]+ *(\[ *[0-9]+%\])?$" $OUT/tests.log | tail -2
echo "done at $SECONDS s"
