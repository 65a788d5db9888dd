#!/bin/bash
# fp8b25 (issue 36, session 22, wave 2): its device runs, `OUT=/tmp/o_fp8b25 bash .carry/fp8b25/runs.sh N` (N = 1,
# 2; run.sh / run2.sh in the carry call it) from the root of main's tree (carry: bash
# tools/hstu_dev/fp8b25_run/pack.sh /work/main/.carry/fp8b25). One process (fp8b21's drive.py): the whole
# tests/hstu/test_fp8_bwd.py first, then 30 reps of the random-order benchmark (benchmarks/hstu_fp8_bwd.py
# --no-dequant) with the wheel's variants (run 1: red_next3, exact_div, exact_red3; run 2: red_next3, main_kernel,
# red_next3_main; the wheels of 5e94c62 / 20b171b; docs/hstu_kernel_notes.md, "Session 22, wave 2").
N=${1:-1} NAME=fp8b25 BASE=main22b
source "$(dirname "$0")/carry_setup.sh"  # (it sets the positional parameters: N first)
V=red_next3,exact_div,exact_red3
[ "$N" = 1 ] || V=red_next3,main_kernel,red_next3_main
T=30 BENCH="--reps 30 --variants default,$V"
source "$(dirname "$0")/fp8_bwd_drive_run.sh"
