# fp8f34 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fp8f31's (carried here as
# setup_f31.sh, with fp8b29's as setup_b29.sh and the common carry setup): main34's hstu_attn wheel in /tmp/site_main
# and this branch's in /tmp/site_fp8f34, GPU, PT, run_tests, digest_tests, smi_on / smi_off, bench (fp8_fwd_split.py
# beside the nvidia-smi log), digest.
NAME=fp8f34 BASE=main34
source "$(dirname "${BASH_SOURCE[0]}")"/setup_f31.sh
