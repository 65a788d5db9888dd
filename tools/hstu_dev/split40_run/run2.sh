#!/bin/bash
# split40 run 2 (lead, session 37): the fix (tile_m_early: the prologue's first tiles from registers) against main.
# The split test file with the fix's wheel (incl. test_sm80_backward_context_loops_repeated), that new test with
# main's wheel (expected to catch the fault), diag_locate at D = 128 (cfg 14 and the default), the portable
# backward's GPU tests with the fix.
set -u
export PYTHONUNBUFFERED=1
C=$(cd "$(dirname "$0")" && pwd)
for s in main:.carry/main40/whl fix:$C/whl; do
  rm -rf /tmp/site_${s%%:*}
  python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_${s%%:*} ${s#*:}/hstu_attn-*.whl 2>&1 |
      grep -v WARN | tail -2
done
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=line -rfE"
echo "## fix: split tests ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fix timeout 120 $PT tests/hstu/test_sm80_backward_split_gpu.py 2>&1 | tail -4)
echo "## main: the repeated test ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_main timeout 60 $PT tests/hstu/test_sm80_backward_split_gpu.py \
    -k context_loops_repeated 2>&1 | tail -6)
echo "## fix: diag ($SECONDS s)"
PYTHONPATH=/tmp/site_fix timeout 40 python3 -P $C/diag_locate.py plain,regrad 100 14
PYTHONPATH=/tmp/site_fix timeout 20 python3 -P $C/diag_locate.py plain 100 0
echo "## fix: portable backward tests ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fix timeout 200 $PT -x tests/hstu/test_sm80_backward_gpu.py 2>&1 | tail -4)
echo "done at $SECONDS s"
