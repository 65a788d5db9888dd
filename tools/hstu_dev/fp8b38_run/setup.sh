# fp8b38 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: the common carry setup
# (tools/hstu_dev/carry_setup.sh, carried beside this file: main38's hstu_attn wheel in /tmp/site_main, the branch's
# in /tmp/site_fp8b38, GPU, PT, run_tests, digest_tests).
NAME=fp8b38 BASE=main38
source "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh
echo "GPU: $GPU, $(nvidia-smi --query-gpu=temperature.gpu,power.draw --format=csv,noheader) ($SECONDS s)"
