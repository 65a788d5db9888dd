#!/bin/bash
# fp8b29 run 1 (issue 36, session 26): dq_bf16 (kFp8BwdDqBf16, option bit 60: dQ's partials reduce-added in bf16,
# half the L2 reduce bytes). Its tests (test_fp8_bwd.py -k "dq_bf16 or refuses_a_variant": against the default
# kernel, the fp64 emulation on five masks, one causal 16K sequence against the fp64 emulation on the GPU), then
# burst / sustained at B16 S16K against the default (main29's kernel) in one process: variant_split.py windows
# default, dq_bf16, default, dq_bf16 (1.5 s idle, 2.5 s back to back the benchmark's way) beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8b29/run1.sh` from the root of main's tree (carry: fp8b29_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 17 "dq_bf16 or refuses_a_variant" tests/hstu/test_fp8_bwd.py -s
smi_on
split 47 0,$DQ_BF16,0,$DQ_BF16 --idle 1.5 --window 2.5 --tail 1
smi_off
echo "#### digest: $GPU"
digest_tests
grep "dq at 16K" $OUT/tests.log | cut -c1-300
grep "^| \|^|---\|^####" $OUT/split.log
grep -v "^| \|^|---" $OUT/split.log | tail -2 | cut -c1-200
echo "fp8b29 run 1 done at $SECONDS s"
