#!/bin/bash
# claims128 run 1 (issue 39, session 42): the dQ claims as the default backward at bf16 D = 128 heads first (branch
# claims128) against main 9f13b1af's wheel: the portable backward's tests, then t44.py prof (main = the default,
# fill = fwd_sm80_cfg=15) per wheel, alternating. Carry: .carry/c128/{new,old}/hstu_attn*.whl (branch / main),
# .carry/c128/dynamicemb*.whl and this script; bash .carry/c128/run1.sh
cd "$(dirname "$0")/../.."
AB_NAME=c128 source tools/hstu_dev/runlib/ab_wheels.sh
ab_tests 200
ab_prof 80 3 main fill -- B128:S1024:D128 B64:S2048:D128 B512:S256:D128 B8:S2048:D128 B32:S512:D128
