#!/bin/bash
# bwd26 (issue 39, session 23), run 1 (<= 48 s), from the root of main's tree:
#   OUT=/tmp/o_bwd26 timeout 56 bash .carry/bwd26/run1.sh > /tmp/o_bwd26/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd26_run/pack.sh /work/main/.carry/bwd26)
# Wheel: cfg 6 / 7 at D = 256 (bf16, sm_90+): one block barrier per tile pair with two Q / dO stages whose copies
# complete on mbarriers, two P / dS buffers (224 KB); 7 with the lean Q / dO copies. The default kernels unchanged
# (their sm_90a PTX identical to main's).
# 1. GPU tests: test_sm80_backward_gpu.py's D = 256 cases (cfg 6 / 7 against the fp32 reference and bitwise dK / dV /
#    drab against the default, heads first and batch first) + the kernel-option test
# 2. time: cfg 0 / 6 / 7 and FA2 at B16 S4K D256 (batch first) and B128 S1K D256 (heads first); main26's wheel
# 3. compute-sanitizer racecheck of cfg 6 / 7 on a small case (the time left)
LIM=48
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 15 tests/hstu/test_sm80_backward_gpu.py -k "256 or mbar"
echo "== 2. time ($SECONDS s)"
time_cfgs 14 6 "0 6 7" B16:S4096:D256 B128:S1024:D256
echo "== 3. racecheck ($SECONDS s)"
if [ $(left) -gt 5 ]; then
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 1 )) $CS --tool racecheck --racecheck-report hazard \
      --kernel-name "regex:Li106E|Li234E|106>|234>" python3 -P $C/racecase.py > $OUT/san.log 2>&1
  echo "rc $? ($SECONDS s)" | tee -a $OUT/san.log
fi
digest "cfg 0 = main's kernels (the default); cfg 6 mbarrier copies, one barrier; cfg 7 = 6 + lean copies; main26 = main's wheel, own process"
