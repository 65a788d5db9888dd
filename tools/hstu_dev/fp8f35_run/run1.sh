#!/bin/bash
# fp8f35 run 1 (issue 36, session 32; <= 54 s): part 1, the measurement. main35's wheel, this branch's
# benchmarks/hstu_attention.py --fp8 --method fa3,do_bench,sustained: the default FP8 forward at B16 S16K D128 and
# D256 (causal H4, per-tensor) timed in turn by FA3's FP8 benchmark (sleep 1 s, 2 warm-up calls, 30 calls in one
# wall-clock block, mean), FA3's do_bench recipe (sleep 1 s, triton do_bench(5, 30)) and 2 sustained windows of
# 1.5 s back to back, NVML's SM clock / power over each timed block; two processes (2 rounds of D128 then D256,
# then 1 round of D256 then D128; process 1 first times the op's kernels under torch.profiler), nvidia-smi logged
# beside them.
# `OUT=DIR timeout 56 bash .carry/fp8f35/run1.sh` from the root of main's tree (carry: fp8f35_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
smi_on
M="--method fa3,do_bench,sustained"
methods /tmp/site_main m1.log $(( 54 - SECONDS )) $M --method-rounds 2 --method-dims 128,256 --kernel-split
methods /tmp/site_main m2.log $(( 54 - SECONDS )) $M --method-rounds 1 --method-dims 256,128
smi_off
echo "#### digest: $GPU"
methods_digest m1.log m2.log
grep -E "^\| B16 S16K D[0-9]+ \| k: " $OUT/m1.log | cut -c1-170  # (the op's kernels)
grep -E "^\| B16" $OUT/m2.log | tail -4 | cut -c1-120  # (process 2's last rows, if its summary is cut)
echo "fp8f35 run 1 done at $SECONDS s"
