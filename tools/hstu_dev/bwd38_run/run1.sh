#!/bin/bash
# bwd38 (issue 39, session 35), run 1 (<= 52 s), from the root of main's tree:
#   OUT=/tmp/out_bwd38 timeout 56 bash .carry/bwd38/run1.sh
# (carry: bash tools/hstu_dev/bwd38_run/pack.sh /work/main/.carry/bwd38 WHEEL, WHEEL from mkwheel.sh)
# Wheel: main38's kernels + kernel_options(fwd_sm80_cfg=13) ("claim"): the dQ workspace not zeroed by the op, each
# warp's block of a dQ tile claimed in the D = 128 / 256 loops (kPdsDqClaim: the first writer stores, later ones add);
# + bwd_sm80_cfg=14 ("late"): the claims published at the next block barrier (kPdsDqLatePub).
# 1. time: main's path / claim / late / FA2 / the peer at B128 S1K, B256 S512, B16 S16K D128 and B256 S256, B128 S1K,
#    B16 S4K D256 (one process)
# 2. GPU tests: test_sm80_backward_dq_claims, bf16 D = 128 / 256 (masks, rab and contexts: the fallback)
# 3. ncu: the loops of main / claim / FA2 at B128 S1K D128: stalls, L2 / DRAM bytes, reductions
# 4. prof: every kernel of one backward, main / claim / late at B128 S1K D128 and B256 S256 D256
# 5. ncu (if time is left): main / FA2 at B16 S4K D256
LIM=52
source "$(dirname "$0")/setup.sh"
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME:$PEER timeout 17 python3 -P $T38 time --bench $R/benchmarks --variants main claim late \
    $PEER_ARG --reps 7 --shapes B128:S1024:D128 B256:S256:D256 B128:S1024:D256 B256:S512:D128 B16:S4096:D256 \
    B16:S16384:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. GPU tests ($SECONDS s)"
gpu_tests 14 tests/hstu/test_sm80_backward_gpu.py -k "dq_claims and bf16 and (128 or 256)"
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_red.sum,lts__t_requests_op_red.sum
M=$M,lts__t_sectors_op_atom.sum,lts__t_sector_hit_rate.pct,lts__t_bytes.sum,smsp__inst_executed.sum,gpu__time_duration.sum
M=$M,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active
# ncu_loops TAG VARIANTS SHAPE: the loop kernels (ours, FA2's dq_dk_dv) of one backward each, raw page as csv
ncu_loops() {
  local tag=$1 vars=$2 shp=$3
  [ -n "$NCU" ] && [ $(left) -gt 7 ] || return 0
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 4 )) $NCU --clock-control none \
      -k "regex:hstu_bwd_pds|flash_bwd_dq_dk_dv" --section WarpStateStats --metrics $M -o $OUT/$tag -f \
      python3 -P $T38 ncu --bench $R/benchmarks --variants $vars --shapes $shp > $OUT/ncu_$tag.log 2>&1
  echo "ncu $tag rc $? ($SECONDS s)"
  [ -f $OUT/$tag.ncu-rep ] && timeout 3 $NCU --import $OUT/$tag.ncu-rep --page raw --csv > $OUT/ncu_$tag.csv \
      2>> $OUT/ncu_$tag.log
}
echo "== 3. ncu ($SECONDS s)"
ncu_loops d128 "main claim fa2" B128:S1024:D128
echo "== 4. prof ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 7 python3 -P $T38 prof --bench $R/benchmarks --variants main claim late \
    --no-fa2 --shapes B128:S1024:D128 B256:S256:D256 > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 5. ncu ($SECONDS s)"
ncu_loops d256 "main fa2" B16:S4096:D256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (ms; main = main's path (the op's fill), claim = fwd_sm80_cfg=13, late = + bwd_sm80_cfg=14; x: the other / ours)"
grep -v "^####" $OUT/time.log | cut -c1-330 | tail -8
digest_gpu_tests 220
echo "#### prof (us)"
grep -E "^####|FillFunctor|hstu_bwd_pds|convert|memset|Memset" $OUT/prof.log | cut -c1-100 | head -24
echo "#### ncu"
ncu_raw $OUT/ncu_d128.csv $OUT/ncu_d256.csv | head -30
tail -1 $OUT/ncu_d128.log $OUT/ncu_d256.log 2>/dev/null | cut -c1-200
