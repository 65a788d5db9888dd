# fp8f24 run scripts' common setup, sourced by run.sh / run2.sh / run3.sh from the root of the device's tree:
# fp8f23's (fp8f20's strict mode, OUT, C = .carry/fp8f24, left(), the branch's wheel in /tmp/site_fp8f24, main22's in
# /tmp/site_fp8f24_main, smi_log / smi_stop with the instant power; lab_test / passed / summary; bench_smi).
# (The device runs of session 22 sourced a self-contained copy: main22's fp8f23 setup.sh fixed NAME there.)
NAME=fp8f24 MAIN=main22
source $PWD/tools/hstu_dev/fp8f23_run/setup.sh
