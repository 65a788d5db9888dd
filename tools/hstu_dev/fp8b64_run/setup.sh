# fp8b64's run scripts' common part (issue 36, session 37: the FP8 backward at D = 64), sourced from the root of
# main's tree on the device: runlib's common.sh (main40's wheel in /tmp/site_main, the branch's in /tmp/site_fp8b64,
# run_tests over the carry's tree/, left), B36 (benchmarks/hstu_fp8_bwd.py with bench_util.py beside it).
NAME=fp8b64 BASE=main40 LIM=${LIM:-53}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" > /tmp/fp8b64_setup.log 2>&1
grep -iE "error|warn" /tmp/fp8b64_setup.log | grep -v "$C/whl" | head -3
B36=$C/hstu_fp8_bwd.py
