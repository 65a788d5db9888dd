# fp8f19 run scripts' common setup, sourced by run.sh / run2.sh / run3.sh from the root of main's tree (6693e9b):
# bwd15's (strict mode, OUT, C = .carry/fp8f19, left() (seconds to LIM), the branch's wheel in /tmp/site_fp8f19 and
# main18's in /tmp/site_fp8f19_main, gpu_tests SECONDS PYTEST_ARGS... on the branch's test files in $C/tree), then
# bench (tools/hstu_dev/fp8_fwd_run.sh: $C/fp8_fwd_split.py, the branch's copy).
NAME=fp8f19 MAIN=main18
source $PWD/tools/hstu_dev/bwd15_run/setup.sh
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader) ($SECONDS s)"
source $R/tools/hstu_dev/fp8_fwd_run.sh
