#!/bin/bash
# bwd43 (issue 39, session 40), run 1 (<= 92 s), from the root of main's tree:
#   OUT=/tmp/out_bwd43 timeout 100 bash .carry/bwd43/run1.sh
# The branch's wheel: D = 64's default loop = the 128-query tiles with the second half's S MMAs issued in the first
# half's SiLU block (kPdsPipeS; batch first, heads first, the context kernel); bwd_sm80_cfg=6 = main's loop.
# 1. tests: the new loop against cfg 6 (error rule vs the fp32 reference, kernel names, dK / dV / drab bitwise, dQ
#    to the atomics' order; with rab: the pipelined kernel's rab branch), the kernel each cfg runs at D = 64, two
#    D = 64 context loop cases (vs cfgs 5 / 13; one with rab)
# 2. timing, one process, interleaved, L2 flushed: main (the default) / c6 (main's loop) / FA2; bf16 causal H4;
#    B16 S8K, B16 S4K, B128 S1K at D = 64, and B16 S4K D64 with 512 context rows a sequence (the context kernel)
# 3. (if time is left) the batch-first kernels' SASS: HMMAs near the SiLU's MUFU.TANH, default / cfg 6
# Everything comes back as one tar ($OUT/bwd43_run1.tgz); the DIGEST last.
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
F="tests/hstu/test_sm80_backward_gpu.py"
run_tests 45 "(d64_loop_cfgs and pipes) or (runs_its_kernel and 64) or \
  (context_loops and (64-context-0 or 64-context_target_group-2))" $F
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 10 )) python3 -P $T43 time --bench $R/benchmarks \
    --variants main c6 --reps 7 --rounds 2 \
    --shapes B16:S8192:D64 B16:S4096:D64 B128:S1024:D64 B16:S4096:D64:C512 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
# 3. the SASS of the batch-first kernels (if time is left): HMMAs among the SiLU's MUFU.TANH, default / cfg 6
K=_ZN4hstu24hstu_bwd_pds_body_kernelI13__nv_bfloat16Li64ELi2ELi8ELi
SO=$(ls /tmp/site_$NAME/hstu_attn/_C*.so | head -1)
if [ -n "$CUOBJ" ] && [ $(left) -gt 6 ]; then
  for v in 2125386 28234; do
    timeout $(( ($(left) - 2) / 2 )) $CUOBJ -sass -fun ${K}${v}EEEvNS_10HstuParamsEi $SO > $OUT/sass_$v.txt 2>&1
  done
fi
tar czf $OUT/bwd43_run1.tgz -C $OUT --exclude bwd43_run1.tgz . 2>/dev/null
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### bwd ms (median of 7, best of 2 rounds): main (default, kPdsPipeS) / c6 (main's loop) / FA2"
grep -E "^B" $OUT/time.log | sed -E 's/ \| at .*//; s/ +/ /g' | cut -c1-190
grep -E "rror|Traceback" $OUT/time.log | cut -c1-150 | head -2
echo "#### SASS (batch first): default (kPdsPipeS) / cfg 6"
[ -f $OUT/sass_28234.txt ] && python3 $C/sass43.py pipe $OUT/sass_2125386.txt main $OUT/sass_28234.txt
echo "#### tests"
digest_tests | cut -c1-160 | tail -6; digest_progress
