#!/bin/bash
# fp8b24 (issue 36, session 22): its device runs, `OUT=/tmp/o_fp8b24 bash .carry/fp8b24/runs.sh N` (N = 1, 2, 3;
# run.sh / run2.sh / run3.sh in the carry call it) from the root of main's tree (carry: bash
# tools/hstu_dev/fp8b24_run/pack.sh /work/main/.carry/fp8b24). One process (fp8b21's drive.py): the whole
# tests/hstu/test_fp8_bwd.py first, then the random-order benchmark (benchmarks/hstu_fp8_bwd.py --no-dequant; the
# variants of the wheel that ran: docs/hstu_kernel_notes.md, "Session 22").
N=${1:-2} NAME=fp8b24 BASE=main22
source "$(dirname "$0")/carry_setup.sh"  # (it sets the positional parameters: N first)
case $N in
  1) T=37 BENCH="--reps 26 --variants default,tree_max,wg_uniform,tree_wg" ;;
  2) T=38 BENCH="--reps 50 --variants default,main_kernel,tree_max,red_next" ;;
  *) T=26 BENCH="--reps 30 --variants default,main_kernel,no_red_next,red_next3" ;;
esac
source "$(dirname "$0")/fp8_bwd_drive_run.sh"
