#!/bin/bash
# fcv42 run 1 (issue 39, session 42): the dQ claims' last writers convert their blocks (branch fcv42, not merged)
# against main 9f13b1af's wheel: the portable backward's tests, then t44.py prof per wheel, alternating. Carry:
# .carry/fcv42/{new,old}/hstu_attn*.whl (branch / main), .carry/fcv42/dynamicemb*.whl, this script; bash .carry/fcv42/run1.sh
cd "$(dirname "$0")/../.."
AB_NAME=fcv42 source tools/hstu_dev/runlib/ab_wheels.sh
ab_tests 230
ab_prof 75 2 main fill claim -- B256:S256:D256 B128:S1024:D256 B128:S1024:D128 B64:S2048:D128
