#!/bin/bash
# fp8b23 (issue 36, session 21): its two device runs, `OUT=/tmp/o_fp8b23 bash .carry/fp8b23/runs.sh N` (N = 1, 2;
# run.sh / run2.sh in the carry call it) from the root of main's tree (carry: bash
# tools/hstu_dev/fp8b23_run/pack.sh /work/main/.carry/fp8b23). One process (fp8b21's drive.py): the whole
# tests/hstu/test_fp8_bwd.py first, then the random-order benchmark (benchmarks/hstu_fp8_bwd.py --no-dequant, 30
# reps; run 1: the default and the variant dq_early twice each beside the kernel column).
N=${1:-2} NAME=fp8b23 BASE=main21
source "$(dirname "$0")/carry_setup.sh"  # (it sets the positional parameters: N first)
case $N in
  1) T=34 BENCH="--reps 30 --variants default,dq_early,default,dq_early" ;;
  *) T=30 BENCH="--reps 30 --variants default" ;;
esac
source "$(dirname "$0")/fp8_bwd_drive_run.sh"
