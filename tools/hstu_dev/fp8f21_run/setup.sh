# fp8f21 run scripts' common setup, sourced by run.sh / run2.sh from the root of the device's tree: fp8f20's
# (bwd15's strict mode, OUT, C = .carry/fp8f21, left(), the branch's wheel in /tmp/site_fp8f21 and main20's in
# /tmp/site_fp8f21_main, gpu_tests; fp8_fwd_run.sh's bench; smi_log / smi_stop) with the instant power logged too
# (power.draw is a 1 s average), digested by $C/smi_digest.py (per case and sustained window: SM MHz, W, energy and
# SM cycles per call). (Runs 1 / 2 carried the same functions in one file, beside an ncu step that failed on the
# device: "Failed to prepare kernel for profiling" in run 1, no FP8 kernel reached within its time in run 2.)
NAME=fp8f21 MAIN=main20 SMI_INSTANT=1
source $PWD/tools/hstu_dev/fp8f20_run/setup.sh
