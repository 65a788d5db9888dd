#!/bin/bash
# fwd33 (issue 39, session 30), run 2 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd33/run2.sh > <dir>/stdout.txt 2>&1
# Run 1 (the lead's call 1): the persistent grid in a static order (rounds over the blocks) bit for bit the default
# (6 passed) but 1.126x its time at B256 S256, 1.32-1.48x at B128 S512 .. B16 S4K: the long tiles unbalanced (a
# model of the static order: 1.0 / 1.43 / 1.52 / 1.66x the hardware's dynamic order) and the two blocks of an SM in
# step. Now the tiles come from a counter (zeroed by a memset before the kernel), in the default grid's order.
# Variants: p1 (fwd_sm80_bm64=1: the next tile's Q / first K copied after the last KV step), p2 (=2: before the last
# step's P V), p1d / p2d (with fwd_sm80_interleave=False: O stored from the registers, no staging, no barrier).
# Question: right (bitwise the default, the error rule), and which, if any, is faster than the default at B256 S256
# D256 (predicted 0.95-0.98x its time) without being slower at the longer rows?
# 1. GPU tests: test_sm80_forward_persist_d256 (6 mask cases x 2 batches x the 4 variants).
# 2. Time in one process: default, p1, p2, p1d, p2d, FA2 at B256 S256, B128 S512, B64 S1K, B16 S4K D256 (5 rounds).
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 24 "persist_d256" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_fwd33 fwd33 $(( $(left) - 1 )) --reps 5 --variants default p1 p2 p1d p2d --fa2 \
  --cases b256 b128s512d256 b64s1k256 s4k256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"
digest_tests
echo "#### time (fwd33 = the branch's wheel: default = main's kernel hstu_fwd_xpf_kernel; p1 / p2 / p1d / p2d ="
echo "#### hstu_fwd_persist_kernel<T, EARLY, DIRECT>; sm90=False; alpha D^-1/2; FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc" $OUT/time.log | cut -c1-250
