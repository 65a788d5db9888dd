# bwd36's run scripts' common part (issue 39, session 33), sourced from the root of main's tree on the device:
# runlib's common.sh (carried beside it with carry_setup.sh: OUT, R, C, main's wheel in /tmp/site_main, the branch's in
# /tmp/site_bwd36, GPU, PT, run_tests, left (seconds to LIM), gpu_tests (the branch's test files, -v)), T36 (the
# timer).
NAME=bwd36 BASE=main36 LIM=${LIM:-48}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
T36=$C/t36.py
