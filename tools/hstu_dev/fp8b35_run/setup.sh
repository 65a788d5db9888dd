# fp8b35 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: the common carry setup
# (tools/hstu_dev/carry_setup.sh, carried beside this file: main35's hstu_attn wheel in /tmp/site_main, the branch's
# in /tmp/site_fp8b35, GPU, PT, run_tests, digest_tests) and NCU (ncu's path, empty if none).
NAME=fp8b35 BASE=main35
source "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh
echo "GPU: $GPU, $(nvidia-smi --query-gpu=temperature.gpu,power.draw --format=csv,noheader) ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /usr/local/cuda-*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
