#!/bin/bash
# fp8b30 run 3 (issue 36, session 27; the lab wheel of run 2): compute-sanitizer memcheck of fp8b28's sancase.py with
# lean (diag 8388608) and lean2 (8421376) against the default (causal and a 300-key left window, six jagged sequences:
# dk / dv bit-equal, dq within the bf16 bound), then burst / sustained at B16 S4K in one process beside nvidia-smi:
# default, lean, lean2, default (1 s idle, 2 s windows), and B16 S16K lean2, default (1.5 s idle, 2.5 s windows).
# `OUT=DIR timeout 56 bash .carry/fp8b30/run3.sh` from the root of main's tree (carry: fp8b30_run/pack.sh).
NAME=fp8b30 BASE=main30
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
LEAN=8388608 LEAN2=8421376  # the op's diags
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_$NAME timeout 14 $CS --tool memcheck --kernel-name kns=hstu_bwd_fp8_sm90_kernel \
    python3 -P $C/sancase.py $LEAN $LEAN2 > $OUT/san.log 2>&1
echo "memcheck rc $? ($SECONDS s)"
smi_on
split 34 0,$LEAN,$LEAN2,0 --s 4096 --idle 1 --window 2 --tail 1
mv $OUT/split.log $OUT/split4k.log
split 48 $LEAN2,0 --s 16384 --idle 1.5 --window 2.5 --tail 1
smi_off
echo "#### digest: $GPU"
grep "ERROR SUMMARY\|sancase\|window\|rror" $OUT/san.log | head -8 | cut -c1-200
for f in split4k split; do
  grep "^| \|^|---\|^####" $OUT/$f.log
  grep -v "^| \|^|---" $OUT/$f.log | tail -1 | cut -c1-200
done
echo "fp8b30 run 3 done at $SECONDS s"
