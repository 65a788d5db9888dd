#!/bin/bash
# fp8b32 run 2 (issue 36, session 29): the flipped default (kFp8BwdDs8Early in kFp8BwdDefault: the late part's dS8
# stores, their fence and the dQ issue ahead of the amax barrier, 4 dS8 buffers; its kernel's SASS = run 1's diag
# 2097664; option bit 59 main_kernel = main 4d2d71ae's kernel, diag 2097152). compute-sanitizer memcheck of fp8b28's
# sancase.py (the default and main's kernel, causal and a 300-key left window, six jagged sequences: dk / dv
# bit-equal, dq within the order bound), then burst / sustained in one process each beside nvidia-smi: B16 S4K
# default, main's, default (1 s idle, 2 s windows), and B16 S16K default, main's, default (1.5 s idle, 2.5 s).
# `OUT=DIR timeout 56 bash .carry/fp8b32/run2.sh` from the root of main's tree (carry: fp8b32_run/pack.sh).
NAME=fp8b32 BASE=main32
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
MAIN=2097152  # the op's diag toggling kFp8BwdDs8Early: main 4d2d71ae's kernel
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_$NAME timeout 14 $CS --tool memcheck --kernel-name kns=hstu_bwd_fp8_sm90_kernel \
    python3 -P $C/sancase.py $MAIN > $OUT/san.log 2>&1
echo "memcheck rc $? ($SECONDS s)"
smi_on
split 30 0,$MAIN,0 --s 4096 --idle 1 --window 2 --tail 1
mv $OUT/split.log $OUT/split4k.log
split 48 0,$MAIN,0 --s 16384 --idle 1.5 --window 2.5 --tail 1
smi_off
echo "#### digest: $GPU"
grep "ERROR SUMMARY\|sancase\|window\|rror" $OUT/san.log | head -8 | cut -c1-200
for f in split4k split; do
  grep "^| \|^|---\|^####" $OUT/$f.log
  grep -v "^| \|^|---" $OUT/$f.log | tail -1 | cut -c1-200
done
echo "fp8b32 run 2 done at $SECONDS s"
