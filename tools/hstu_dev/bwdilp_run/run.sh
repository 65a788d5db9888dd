#!/bin/bash
# bwdilp2 (issue 39; branch bwdilp2 = bwdilp + main 8e9e73d + these changes): the portable (sm80-class) backward in
# FA2's warp layout (hstu_bwd_pds_kernel):
#  - the context-gap skip of bwdilp only in a separate kernel for calls with contexts (hstu_bwd_pds_ctx_kernel, chosen
#    on the host by num_contexts != nullptr): without contexts the plain tile walk of main (D = 128's causal kernels:
#    main's loop again; D = 256 keeps bwdilp's dP / SiLU overlap);
#  - drab stores dS + 0: masked entries +0 (main: -0 where dP < 0, so the skip changed drab's bits, not its values).
# Every hstu call forces the portable kernels (kernel_options(sm90=False)). main/ = main's wheel (.carry/main11).
#  1. bits80.py: gradients bitwise vs main (dk / dv / drab / deterministic dq by SHA-1, drab also with zeros made +0;
#     atomic dq within spread) + errors vs the fp64 reference of the context cases, main -> bwdilp2
#  2. GPU tests: -k "sm80 and (bwd or backward)" of test_kernels_gpu.py + test_sm80_backward_gpu.py (115 tests, incl.
#     the new test_sm80_backward_context_kernel and test_sm80_backward_long_contexts_drab)
#  3. time_ilp.py: portable backward ms, main then bwdilp2 (all cases), then bwdilp2 then main (causal cases: the
#     order reversed, so a clock drift across the run shows)
#  4. FA2 peer sweep (bwdilp2) if time is left
# <= 160 s; 4 logs in $OUT; a digest at the end of stdout.
set -u
export PYTHONUNBUFFERED=1
R=$PWD
C=$R/.carry/bwdilp2
left() { echo $((158 - SECONDS)); }
rm -rf /tmp/site_bwdilp2 /tmp/site_bwdilp2main
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_bwdilp2 $C/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_bwdilp2main $C/main/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
echo "== 1. bits80 ($SECONDS s)"
PYTHONPATH=/tmp/site_bwdilp2main timeout 30 python3 -P $C/bits80.py dump /tmp/bits_ilp2_main.pt > $OUT/bits.log 2>&1
echo "dump rc $? ($SECONDS s)" | tee -a $OUT/bits.log
PYTHONPATH=/tmp/site_bwdilp2 timeout 30 python3 -P $C/bits80.py check /tmp/bits_ilp2_main.pt >> $OUT/bits.log 2>&1
echo "check rc $? ($SECONDS s)" | tee -a $OUT/bits.log
echo "== 2. GPU tests ($SECONDS s)"
cd $C && PYTHONPATH=/tmp/site_bwdilp2 timeout -s INT -k 3 $(( $(left) > 125 ? 80 : $(left) - 45 )) python3 -P -m pytest -q \
  -p no:cacheprovider --import-mode=importlib -rfE --tb=short -k "sm80 and (bwd or backward)" \
  tests/hstu/test_kernels_gpu.py tests/hstu/test_sm80_backward_gpu.py > $OUT/tests.log 2>&1
echo "tests rc $? (124: time ran out; $SECONDS s)"
cd $R
for w in bwdilp2main bwdilp2; do
  echo "== 3. time_ilp ($w, $SECONDS s)" | tee -a $OUT/time.log
  PYTHONPATH=/tmp/site_$w timeout 16 python3 -P $C/time_ilp.py $w --reps 10 >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)" | tee -a $OUT/time.log
done
for w in bwdilp2 bwdilp2main; do
  [ "$(left)" -gt 12 ] || break
  echo "== 3b. time_ilp causal ($w, $SECONDS s)" | tee -a $OUT/time.log
  PYTHONPATH=/tmp/site_$w timeout $(( $(left) > 22 ? 10 : $(left) / 2 )) python3 -P $C/time_ilp.py ${w}_2 --reps 10 --only causal >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)" | tee -a $OUT/time.log
done
if [ "$(left)" -gt 12 ]; then
  echo "== 4. FA2 peer sweep ($SECONDS s)"
  PYTHONPATH=/tmp/site_bwdilp2 timeout $(( $(left) - 4 )) python3 -P benchmarks/hstu_attention.py \
    --kernels portable --sweep portable --no-ref --peer fa2 --reps 10 --blocks 1 --cooldown 0.2 > $OUT/bench.log 2>&1
  echo "portable+fa2 rc $? ($SECONDS s)" | tee -a $OUT/bench.log
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### bitwise vs main"; grep -E "bits80|DIFFERS|REFERR|Error|rc " $OUT/bits.log | cut -c1-260 | head -40
echo "#### portable backward ms (median of 10; main = bwdilp2main)"; grep -E "^timeilp|^rc|Error" $OUT/time.log | cut -c1-120
echo "#### tests"; grep -E "passed|failed|skipped|^FAILED|^ERROR" $OUT/tests.log | tail -8
echo "progress: $(grep -oE '^[.FsEx]+' $OUT/tests.log | tr -d '\n' | wc -c) of 115 tests run, F: $(grep -oE '^[.FsEx]+' $OUT/tests.log | tr -cd 'FE' | wc -c)"
[ -f $OUT/bench.log ] && { echo "#### FA2 sweep"; grep -E "^portable |rc " $OUT/bench.log | cut -c1-200 | head -8; }
