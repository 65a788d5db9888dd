#!/usr/bin/env bash
# dist22, for the lead's multi-GPU call (nvidia-h200-x2 / -x4 / -x8; issue 37), <= ~110 s:
#  1. NCCL's all_to_all alone at the step's sizes (395,713 rows x D128 per rank, fp32 and bf16) at world 1, 2, 4(, 8):
#     separates NCCL's rate from the step's skew / host time (docs/dynamicemb_sharding.md, "The all_to_alls counted")
#  2. QCommsConfig's NCCL tests with 2 and 4 ranks (bf16 / fp16 rows and gradients against the exact step)
#  3. weak scaling, --preset nvidia none/sgd, rows / gradients on the wire in fp32 (default) and bf16, world 1 / 2 / 4(/ 8)
set -u
OUT=${OUT:-/tmp/o_dist22x}; mkdir -p "$OUT"
C=.carry/dist22
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
S=/tmp/site_dist22 T=/tmp/t_dist22
rm -rf $S; python3 -m pip install -q --no-deps --no-index --no-compile --target $S $C/whl/*.whl
rm -rf $T; mkdir -p $T/tests/dynamicemb $T/benchmarks
cp tests/conftest.py $T/tests/; cp $C/tests/*.py $T/tests/dynamicemb/; cp $C/bench/*.py $T/benchmarks/
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
W=1,2; [ "$N" -ge 4 ] && W=1,2,4; [ "$N" -ge 8 ] && W=1,2,4,8
nvidia-smi --query-gpu=index,name,clocks.sm --format=csv,noheader; echo "worlds $W, dist22 wheel 710a21e"
echo "== a2a probe"
PYTHONPATH=$S timeout 30 python3 -P $C/tools/a2a_probe.py --worlds $W --reps 10 > $OUT/probe.md 2>&1; echo "probe rc=$?"
grep -E "^\||x H" $OUT/probe.md
echo "== QCommsConfig NCCL tests"
(cd $T && PYTHONPATH=$S timeout 25 python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib \
  tests/dynamicemb/test_sharded_nccl_gpu.py -k qcomms > $OUT/tests.txt 2>&1; echo "tests rc=$?")
tail -3 $OUT/tests.txt | cut -c1-200
echo "== weak scaling, fp32 and bf16 on the wire"
PYTHONPATH=$S timeout 55 python3 -P $T/benchmarks/embedding_distributed.py --preset nvidia --worlds $W \
  --cases none/sgd --qcomms fp32,bf16 --warmup 3 --reps 10 > $OUT/scaling.md 2>&1; echo "scaling rc=$?"
grep -E "^\| world|^\|---|^\| [0-9]" $OUT/scaling.md
