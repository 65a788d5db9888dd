# fp8f18 run scripts' common setup, sourced by run.sh / run2.sh from the root of main's tree (d901835): bwd15's
# (strict mode, OUT, C = .carry/fp8f18, left() (seconds to LIM), the branch's wheel in /tmp/site_fp8f18 and main17's
# in /tmp/site_fp8f18_main, gpu_tests SECONDS PYTEST_ARGS... on the branch's test files in $C/tree), then bench and
# ncu_profile (tools/hstu_dev/fp8_fwd_run.sh).
NAME=fp8f18 MAIN=main17
source $PWD/tools/hstu_dev/bwd15_run/setup.sh
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader) ($SECONDS s)"
# ncu_profile TAG COUNT PROF_ARGS...: tools/hstu_dev/fp8_fwd_run.sh with fp8f17's prof_fp8.py (D:var ...). (Run 2
# ran an inline copy of it with fewer sections: SpeedOfLight, ComputeWorkloadAnalysis, WarpStateStats,
# InstructionStats and the pipes' counts.)
PROF=$R/tools/hstu_dev/fp8f17_run/prof_fp8.py
source $R/tools/hstu_dev/fp8_fwd_run.sh
