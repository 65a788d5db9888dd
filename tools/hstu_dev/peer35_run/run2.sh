#!/bin/bash
# peer35 call 2: NVIDIA's Ampere HSTU (recsys-examples 43465ae, sm_90 from compute_80; the six causal units built,
# the context / no-mask units stubbed to throw) beside main's portable kernels on the five shapes call 1 lacked
# (D = 256 and D = 64), then FA2 beside them on the same five in the same call.
source .carry/peer35/setup.sh
echo "$GPU"
cases=(--case "B16 S4K D256" --case "B16 S8K D64" --case "B256 S256 D256" --case "B128 S1K D256" --case "B16 S8K D256")
bench nvidia-ampere $((34 - SECONDS)) peer "${cases[@]}"
bench fa2 $((53 - SECONDS)) fa2 "${cases[@]}"
echo "== peer"; digest peer diff
echo "== fa2"; digest fa2
