#!/bin/bash
# fp8b29 run 4 (issue 36, session 26; the lead's offered fourth run): the flipped default (dQ in bf16, 2 of a tile's
# 4 reduce-adds held) against lab variants holding 1 / none (diags H1 / H0) at B16 S16K (variant_split.py: default,
# H1, H0, default; 1.5 s idle, 2.5 s windows), then the benchmark the headline row comes from
# (benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant --variants main_kernel,default: bf16, the new default,
# main 98f618f's kernel, the default again; S16K and S4K), then sancase.py (no sanitizer) of H1 / H0 against the
# default. `OUT=DIR timeout 56 bash .carry/fp8b29/run4.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
H1=268435456 H0=1073741824
smi_on
split 25 0,$H1,$H0,0 --s 16384 --idle 1.5 --window 2.5 --tail 1
smi_off
PYTHONPATH=/tmp/site_$NAME timeout $(( 45 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant \
    --variants main_kernel,default > $OUT/bench.log 2>&1
echo "bench rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( 50 - SECONDS )) python3 -P $C/sancase.py $H1 $H0 > $OUT/san.log 2>&1
echo "sancase rc $? ($SECONDS s)"
echo "#### digest: $GPU"
grep "^| \|^|---\|^####" $OUT/split.log
grep -v "^| \|^|---" $OUT/split.log | tail -1 | cut -c1-200
grep "^| B\|^| case\|rror" $OUT/bench.log | cut -c1-400
tail -5 $OUT/san.log | cut -c1-200
echo "fp8b29 run 4 done at $SECONDS s"
