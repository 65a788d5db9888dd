# fp8b37 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: the common carry setup
# (tools/hstu_dev/carry_setup.sh, carried beside this file: main37's hstu_attn wheel in /tmp/site_main, the branch's
# in /tmp/site_fp8b37, GPU, PT, run_tests, digest_tests).
NAME=fp8b37 BASE=main37
source "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh
echo "GPU: $GPU, $(nvidia-smi --query-gpu=temperature.gpu,power.draw --format=csv,noheader) ($SECONDS s)"
