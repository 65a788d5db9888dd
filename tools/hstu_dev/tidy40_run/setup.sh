# tidy40's run scripts' common part (session 37), sourced from the root of main's tree on the device: runlib's
# common.sh (OUT, R, C, main40's wheel in /tmp/site_main, the branch's in /tmp/site_tidy40, GPU, left, gpu_tests),
# S (same40.py: one wheel's backward kernels and gradients per case, and their comparison).
NAME=tidy40 BASE=main40 LIM=${LIM:-52}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
S=$C/same40.py
