#!/bin/bash
# peer35 call 1: NVIDIA's Ampere HSTU (recsys-examples 43465ae, sm_90 from compute_80; this module holds the D = 128
# causal units only, the others stubbed to throw: a partial build) beside main's portable kernels on issue 39's
# three D = 128 shapes, then FA2 beside them on all eight shapes in the time left.
source .carry/peer35/setup.sh
python3 -c 'import torch,sys;print("torch", torch.__version__, "python", sys.version.split()[0])'
echo "$GPU"
bench nvidia-ampere $((30 - SECONDS)) peer --case "B16 S4K D128" --case "B16 S16K D128" --case "B128 S1K D128"
bench fa2 $((53 - SECONDS)) fa2
echo "== peer"; digest peer diff
echo "== fa2"; digest fa2
