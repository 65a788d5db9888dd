#!/bin/bash
# fp8b29 run 2 (issue 36, session 26): dq_bf16 (kFp8BwdDqBf16, option bit 60) under compute-sanitizer memcheck
# (fp8b28's sancase.py with the default and dq_bf16: causal and a 300-key left window, six jagged sequences, an empty
# one), then burst / sustained against the default (main29's kernel) in one process at B16 S4K (default, dq_bf16,
# default, dq_bf16; 1 s idle, 2 s windows) and again at B16 S16K (dq_bf16, default; 1.5 s idle, 2.5 s windows),
# beside nvidia-smi. `OUT=DIR timeout 56 bash .carry/fp8b29/run2.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_$NAME timeout 14 $CS --tool memcheck --kernel-name kns=hstu_bwd_fp8_sm90_kernel \
    python3 -P $C/sancase.py $DQ_BF16 > $OUT/san.log 2>&1
echo "memcheck rc $? ($SECONDS s)"
smi_on
split 32 0,$DQ_BF16,0,$DQ_BF16 --s 4096 --idle 1 --window 2 --tail 1
mv $OUT/split.log $OUT/split4k.log
split 47 $DQ_BF16,0 --s 16384 --idle 1.5 --window 2.5 --tail 1
smi_off
echo "#### digest: $GPU"
grep "ERROR SUMMARY\|sancase\|window\|rror" $OUT/san.log | head -8 | cut -c1-200
for f in split4k split; do
  grep "^| \|^|---\|^####" $OUT/$f.log
  grep -v "^| \|^|---" $OUT/$f.log | tail -1 | cut -c1-200
done
echo "fp8b29 run 2 done at $SECONDS s"
