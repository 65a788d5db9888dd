#!/bin/bash
# fp8f32 run 3 (issue 36, session 29; <= 50 s): run 2's wheel (the default copies P after the next turn's S issue;
# kernel_options(fp8_fwd_var=2) = the copy at the loop's tail, main's default kernels). compute-sanitizer memcheck
# of sancase.py with var 2 against the default at D128 192-key and 128-key (tensor / block; three masks,
# jagged, an empty sequence; bit-equal); then fp8_fwd_split.py: burst and sustained 1.5 s windows A B A B A
# (default / var 2) at B16 S4K D128 (192-key tiles) and S16K D256, causal H4, per-tensor, beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8f32/run3.sh` from the root of main's tree (carry: fp8f32_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
(cd $C && PYTHONPATH=/tmp/site_$NAME timeout 16 $CS --tool memcheck --kernel-name kns=hstu_fwd_fp8_sm90_kernel \
    python3 -P $C/sancase.py 2 128:192,128:128 > $OUT/san.log 2>&1)
echo "memcheck rc $? ($SECONDS s)"
bench 49 --reps 5 --warmup-ms 25 --fwd-vars 2 --sustain 1.5 --sustain-rounds 2 --cases B16S4KD128,B16S16KD256
digest
grep "ERROR SUMMARY\|sancase\|bit-equal\|rror" $OUT/san.log | head -16 | cut -c1-200
echo "fp8f32 run 3 done at $SECONDS s"
