#!/bin/bash
# fwd30 (issue 39, session 27), run 1 (<= 48 s; main30's wheel only, no branch wheel), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd30/run1.sh > <dir>/stdout.txt 2>&1
# The count before a change: ncu of main's default forward (sm90=False) and FA2 (torch's flash SDPA), bf16 H4 causal,
# at B16 S8K D64 (hstu_fwd_qreg_scaled_kernel), B16 S4K D256 (the warp pairs, hstu_fwd_kernel) and B256 S256 D256 (the
# pairs with Q early, hstu_fwd_qearly_kernel): issue slots, stall reasons per instruction, the pipes (tensor, XU =
# MUFU and conversions, FMA, ALU, LSU), shared-memory wavefronts and bank conflicts, opcode mix, and the source page
# (per-SASS-instruction executions and stall samples) for the per-step counts by kind, digested off the device.
source "$(dirname "$0")/setup.sh"
echo "== 1. ncu ($SECONDS s)"
ncu_case fwd30m /tmp/site_main 6 "hstu_fwd|flash_fwd_kernel" --cases s8k s4k256 b256 --fa2
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### ncu (kernel order: S8K D64 ours, FA2; S4K D256 ours, FA2; B256 S256 D256 ours, FA2)"
grep -E "^ncu:|rror|==PROF==|Traceback" $OUT/ncu_fwd30m.log | tail -14 | cut -c1-200
cut -c1-300 $OUT/fwd30m_digest.md 2>/dev/null | head -90
ls -la $OUT
