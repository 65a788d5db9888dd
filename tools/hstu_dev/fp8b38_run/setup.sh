# fp8b38 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: runlib's common.sh (carried
# beside this file with carry_setup.sh: main38's hstu_attn wheel in /tmp/site_main, the branch's in /tmp/site_fp8b38,
# GPU, PT, run_tests, digest_tests), then the GPU's line with its temperature and power.
NAME=fp8b38 BASE=main38
source "$(dirname "${BASH_SOURCE[0]}")"/common.sh
gpu_power
