#!/bin/bash
# fp8b29 run 2 (issue 36, session 26): dq_bf16 (kFp8BwdDqBf16, option bit 60) and the lab variant with 3 of its 4
# reduce-adds held (diag DQ_H3) under compute-sanitizer memcheck (fp8b28's sancase.py: the default and both, causal
# and a 300-key left window, six jagged sequences, an empty one), then burst / sustained against the default
# (main29's kernel) in one process at B16 S4K (default, dq_bf16, default; 1 s idle, 2 s windows) and at B16 S16K
# (default, dq_bf16, DQ_H3; 1.5 s idle, 2.5 s windows), beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8b29/run2.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_$NAME timeout 12 $CS --tool memcheck --kernel-name kns=hstu_bwd_fp8_sm90_kernel \
    python3 -P $C/sancase.py $DQ_BF16 $DQ_H3 > $OUT/san.log 2>&1
echo "memcheck rc $? ($SECONDS s)"
smi_on
split 31 0,$DQ_BF16,0 --s 4096 --idle 1 --window 2 --tail 1
mv $OUT/split.log $OUT/split4k.log
split 47 0,$DQ_BF16,$DQ_H3 --s 16384 --idle 1.5 --window 2.5 --tail 1
smi_off
echo "#### digest: $GPU"
grep "ERROR SUMMARY\|sancase\|window\|rror" $OUT/san.log | head -8 | cut -c1-200
for f in split4k split; do
  grep "^| \|^|---\|^####" $OUT/$f.log
  grep -v "^| \|^|---" $OUT/$f.log | tail -1 | cut -c1-200
done
echo "fp8b29 run 2 done at $SECONDS s"
