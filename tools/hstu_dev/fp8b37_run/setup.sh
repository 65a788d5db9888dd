# fp8b37 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: runlib's common.sh (carried
# beside this file with carry_setup.sh: main37's hstu_attn wheel in /tmp/site_main, the branch's in /tmp/site_fp8b37,
# GPU, PT, run_tests, digest_tests), then the GPU's line with its temperature and power.
NAME=fp8b37 BASE=main37
source "$(dirname "${BASH_SOURCE[0]}")"/common.sh
gpu_power
