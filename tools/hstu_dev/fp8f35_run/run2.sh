#!/bin/bash
# fp8f35 run 2 (issue 36, session 32; <= 54 s): part 1 again, two processes (D128 then D256, then D256 then D128),
# main35's wheel, this branch's benchmarks/hstu_attention.py --fp8 --method: FA3's FP8 benchmark (fa3: sleep 1 s, 2
# warm-up calls, 30 calls in one block), FA3's do_bench recipe (process 1 only), and the ramp (sleep 1 s, 2.5 / 2 s
# of calls back to back with an event after each: TFLOP/s, SM clock and instant power per 0.25 s bucket, from the
# rest into the 700 W cap), nvidia-smi logged beside them (each process needs ~15 s before its first timed call).
# `OUT=DIR timeout 56 bash .carry/fp8f35/run2.sh` from the root of main's tree (carry: fp8f35_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
smi_on
methods /tmp/site_main mA.log $(( 54 - SECONDS )) --method fa3,do_bench,ramp --ramp-s 2.5 --method-rounds 1 \
  --method-dims 128,256
methods /tmp/site_main mB.log $(( 54 - SECONDS )) --method fa3,ramp --ramp-s 2 --method-rounds 1 --method-dims 256,128
smi_off
echo "#### digest: $GPU"
methods_digest mA.log mB.log
grep -h "SM MHz / W" $OUT/mA.log | cut -c1-150
for f in mA mB; do  # (the ramps: from s: TFLOP/s / SM MHz / W per bucket)
  awk -F' [|] ' -v f=$f '/^[|] B16 S16K D[0-9]+ [|] 1 [|] [0-9.]+ [|] [0-9]+ [|]/ && !seen[$0]++ {
    k = f " " $1; if (!(k in s)) o[++n] = k; s[k] = s[k] " " $3 ":" int($6) "/" $7 "/" $8 }
    END { for (i = 1; i <= n; i++) print o[i] s[o[i]] }' $OUT/$f.log | sed 's/^mA | /mA /; s/^mB | /mB /' | cut -c1-330
done
echo "fp8f35 run 2 done at $SECONDS s"
