#!/bin/bash
# bwdilp (issue 39): the portable (sm80-class) backward in FA2's warp layout (hstu_bwd_pds_kernel):
#  (a) skips the query tiles between a key block's context rows and its causal rows (bwd_work_tiles' gap; main walks
#      every query tile of every history key block when contexts exist: ~2.2x the causal time at B16 S4K ctx 64);
#  (b) D = 256: each dP GEMM's k-loop fully unrolled in one basic block with the SiLU / SiLU' pointwise work, so ptxas
#      interleaves the pointwise instructions into the 5 idle issue slots behind each mma.sync (bitwise the same sums).
# Every hstu call forces the portable kernels (kernel_options(sm90=False); the benchmark: --kernels portable).
# main/ = main a514216's hstu wheel (built in this worktree before the change).
#  1. bits80.py: gradients bitwise vs main (dk / dv / drab / deterministic dq by SHA-1; atomic dq within spread)
#  2. GPU tests: -k "sm80 and (bwd or backward)" of test_kernels_gpu.py + test_sm80_backward_gpu.py (95 tests, incl.
#     the new test_sm80_backward_with_long_contexts)
#  3. time_ilp.py: portable backward ms, main vs bwdilp (issue 39's causal shapes + contexts + targets), median of 10
#  4. hstu_attention.py --kernels portable --sweep masks (bwdilp) and --sweep portable --peer fa2 (bwdilp), as time
#     allows (the FA2 sweep is the first thing cut)
# <= 160 s; 5 logs in $OUT; a digest at the end of stdout.
set -u
export PYTHONUNBUFFERED=1
R=$PWD
C=$R/.carry/bwdilp
left() { echo $((158 - SECONDS)); }
rm -rf /tmp/site_bwdilp /tmp/site_bwdilpmain
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_bwdilp $C/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_bwdilpmain $C/main/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
echo "== 1. bits80 ($SECONDS s)"
PYTHONPATH=/tmp/site_bwdilpmain timeout 22 python3 -P $C/bits80.py dump /tmp/bits_ilp_main.pt > $OUT/bits.log 2>&1
echo "dump rc $? ($SECONDS s)" | tee -a $OUT/bits.log
PYTHONPATH=/tmp/site_bwdilp timeout 22 python3 -P $C/bits80.py check /tmp/bits_ilp_main.pt >> $OUT/bits.log 2>&1
echo "check rc $? ($SECONDS s)" | tee -a $OUT/bits.log
echo "== 2. GPU tests ($SECONDS s)"
cd $C && PYTHONPATH=/tmp/site_bwdilp timeout -s INT -k 3 $(( $(left) > 100 ? 55 : $(left) - 45 )) python3 -P -m pytest -q \
  -p no:cacheprovider --import-mode=importlib -rfE --tb=short -k "sm80 and (bwd or backward)" \
  tests/hstu/test_kernels_gpu.py tests/hstu/test_sm80_backward_gpu.py > $OUT/tests.log 2>&1
echo "tests rc $? (124: time ran out; $SECONDS s)"
cd $R
for w in bwdilpmain bwdilp; do
  echo "== 3. time_ilp ($w, $SECONDS s)" | tee -a $OUT/time.log
  PYTHONPATH=/tmp/site_$w timeout 14 python3 -P $C/time_ilp.py $w --reps 10 >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)" | tee -a $OUT/time.log
done
echo "== 4. benchmarks ($SECONDS s)"
if [ "$(left)" -gt 12 ]; then
  PYTHONPATH=/tmp/site_bwdilp timeout $(( $(left) > 40 ? 18 : $(left) - 8 )) python3 -P benchmarks/hstu_attention.py \
    --kernels portable --sweep masks --no-ref --reps 10 --blocks 1 --cooldown 0.2 > $OUT/bench.log 2>&1
  echo "masks rc $? ($SECONDS s)" | tee -a $OUT/bench.log
fi
if [ "$(left)" -gt 10 ]; then
  PYTHONPATH=/tmp/site_bwdilp timeout $(( $(left) > 26 ? 22 : $(left) - 4 )) python3 -P benchmarks/hstu_attention.py \
    --kernels portable --sweep portable --no-ref --peer fa2 --reps 10 --blocks 1 --cooldown 0.2 >> $OUT/bench.log 2>&1
  echo "portable+fa2 rc $? ($SECONDS s)" | tee -a $OUT/bench.log
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### bitwise vs main"; grep -E "bits80|DIFFERS|Error|rc " $OUT/bits.log | cut -c1-220 | head -20
echo "#### portable backward ms (median of 10; main = bwdilpmain)"; grep -E "^timeilp|^rc|Error" $OUT/time.log | cut -c1-120
echo "#### tests"; grep -E "passed|failed|skipped|^FAILED|^ERROR" $OUT/tests.log | tail -8
echo "progress: $(grep -oE '^[.FsEx]+' $OUT/tests.log | tr -d '\n' | wc -c) of 95 tests run, F: $(grep -oE '^[.FsEx]+' $OUT/tests.log | tr -cd 'FE' | wc -c)"
echo "#### benchmarks"; grep -E "^\| (masks|portable) |rc |^#|Error" $OUT/bench.log | cut -c1-200 | head -30
