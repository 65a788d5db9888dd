#!/bin/bash
# zipf33 (issue 39, session 30), run 1 (<= 50 s), from the root of main's tree (main 0bb35f74 on the device):
#   OUT=<dir> timeout 56 bash .carry/zipf33/run1.sh > <dir>/stdout.txt 2>&1
# The sm80-class forward's split with its list kernel (behind the validation) and split kernel (behind the list) as
# programmatic dependent launches on sm_90+ (the default; kernel_options(fwd_sm80_pdl=False): plain launches).
# 1. Tests (the branch's files in .carry/zipf33/tree): every split test of test_sm80_forward_gpu.py, now on the PDL
#    launches (with every mask, the 64-row tiles, the rule, chunks, main's split), the new one against plain launches
#    bit for bit (eager and in a CUDA graph whose inputs a copy kernel rewrites before each call).
# 2. Time: default / plain on the Zipf batch (seeds 0, 1), its dense twins and B4 S4K, B2 S4K, B8 S1K (ctx3) at D =
#    64 / 128 / 256, and the seed-0 pair's timeline per call (gaps: the validation, list and split kernels in a CUDA
#    graph); then main33's wheel (its default) in its own process.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 22 "split" -v $T
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipf33 zipf33 12 ratio gaps --seed1 --edge --reps 5 --dims 64 128 256
bench ${BASE_SITE:-/tmp/site_main} main33 $(( $(left) - 1 )) ratio --base --seed1 --edge --reps 5 --dims 64 128 256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k split)"
digest_verbose
digest_time
