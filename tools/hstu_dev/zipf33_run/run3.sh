#!/bin/bash
# zipf33 (issue 39, session 30), run 3 (<= 50 s), from the root of main's tree (main 0bb35f74 on the device):
#   OUT=<dir> timeout 56 bash .carry/zipf33/run3.sh > <dir>/stdout.txt 2>&1
# Run 1's programmatic dependent launches plus the split's per-item cost (the default; kernel_options(
# fwd_sm80_split_plain=True): main's path): 32-byte list items carrying Q's first row / rows and the sequence's
# first key / keys (Q and the first K / V copies issued before seq_info's loads), the first partial's base loaded
# in the prologue, the chunk count an acq_rel atomic instead of two __threadfence.
# 1. Tests (the branch's files in .carry/zipf33/tree): every split test of test_sm80_forward_gpu.py (every mask, the
#    64-row tiles, the rule, chunks, main's split, the list's bound and workspace) on the new items, and the default
#    against the plain path bit for bit (eager and in a CUDA graph whose inputs a copy kernel rewrites before each
#    call); the sm80-class forward against the reference at D = 32-256 (test_kernels_gpu.py).
# 2. Time: default / plain on the Zipf batch (seeds 0, 1), its dense twins and B4 S4K, B2 S4K, B8 S1K (ctx3) at D =
#    64 / 128 / 256, and the seed-0 pair's timeline per call (gaps); then main33's wheel in its own process.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 24 "split or sm80_and_sm90" -v $T \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipf33 zipf33 11 ratio gaps --seed1 --edge --reps 5 --dims 64 128 256
bench ${BASE_SITE:-/tmp/site_main} main33 $(( $(left) - 1 )) ratio --base --seed1 --edge --reps 5 --dims 64 128 256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k split; test_kernels_gpu.py sm80_and_sm90_kernels_agree_with_reference)"
digest_verbose
digest_time
