# bwd38's run scripts' common part (issue 39, session 35), sourced from the root of main's tree on the device:
# runlib's common.sh (carried beside it with carry_setup.sh: OUT, R, C, main's wheel in /tmp/site_main, the branch's in
# /tmp/site_bwd38, GPU, PT, run_tests, left (seconds to LIM), NCU, CUOBJ, gpu_tests (the branch's test files, -v),
# digest_gpu_tests, ncu_raw), T38 (the timer), PEER (NVIDIA's Ampere HSTU module's folder, peer35's carry, if there).
NAME=bwd38 BASE=main38 LIM=${LIM:-48}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
T38=$C/t38.py
PEER=$R/.carry/peer35/peer
PEER_ARG=--peer
ls $PEER/hstu_attn_2_cuda*.so > /dev/null 2>&1 || { PEER=/nonexistent; PEER_ARG=; }
