# fp8f22 run scripts' common setup, sourced by run.sh / run2.sh from the root of the device's tree (main 95270e5):
# fp8f20's (bwd15's strict mode, OUT, C = .carry/fp8f22, left(), the branch's wheel in /tmp/site_fp8f22 and main21's
# in /tmp/site_fp8f22_main, gpu_tests on the branch's test files in $C/tree; fp8_fwd_run.sh's bench with $C's
# fp8_fwd_split.py; smi_log / smi_stop with the instant power, digested by $C/smi_digest.py).
NAME=fp8f22 MAIN=main21 SMI_INSTANT=1
source $PWD/tools/hstu_dev/fp8f20_run/setup.sh
