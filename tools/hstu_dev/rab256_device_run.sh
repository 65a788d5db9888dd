#!/bin/bash
# One device call for the D = 256 backward with rab (docs/archive/hstu_sm90_log.md, "D = 256 backward with rab / drab"): run from the
# repository root with C (default .carry_s5r) holding the sm90 wheel, rab_check_sm90.py, test_kernels_gpu.py and
# race_rab256.py of this branch (copied over the device's tree first, so it also works on a tree without them).
set -o pipefail
export PYTHONUNBUFFERED=1
C=${C:-.carry_s5r}
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site $C/*.whl && export PYTHONPATH=/tmp/site
cp $C/test_kernels_gpu.py tests/hstu/ && cp $C/rab_check_sm90.py tools/hstu_dev/  # this branch's versions
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
echo "== checker (correctness + dispatch)"
timeout 60 python3 -P tools/hstu_dev/rab_check_sm90.py --no-bench 2>&1 | tee $OUT/check.log | grep -v "^PASS"
echo "== pytest tests/hstu"
timeout 75 python3 -P -m pytest -q -p no:cacheprovider tests/hstu -x 2>&1 | tail -6 | tee $OUT/pytest.log
echo "== timing"
timeout 35 python3 -P tools/hstu_dev/rab_check_sm90.py --no-check --bench-d256 2>&1 | tee $OUT/bench.log
echo "== racecheck B1 H1 S512 full window, rab + drab"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 45 $CS --tool racecheck --kernel-name kns=hstu_bwd_sm90 python3 -P $C/race_rab256.py none 1 2>&1 | tail -6 | tee $OUT/race.log
echo "== done"
