# bwd22's run scripts' common part, sourced from the root of main's tree on the device: bwd15's setup (setup15.sh in
# the carry folder: strict mode, OUT, C, left(), the branch's wheel in /tmp/site_bwd22 and main21's in
# /tmp/site_bwd22_main, GPU, TF, TK, gpu_tests), then PP / PM (those sites + the NVIDIA Ampere peer's module,
# .carry/peer) and B21 (bwd21.py's timer in main's tree: ours under --cfgs, FA2, the peer, interleaved rounds).
NAME=bwd22 MAIN=main21
S15="$(dirname "${BASH_SOURCE[0]}")/setup15.sh"
[ -f "$S15" ] || S15="$(dirname "${BASH_SOURCE[0]}")/../bwd15_run/setup.sh"
source "$S15"
PP=/tmp/site_$NAME:$R/.carry/peer
PM=/tmp/site_${NAME}_main:$R/.carry/peer
B21=$R/tools/hstu_dev/bwd21_run/bwd21.py
# memcheck_case SECS ARGS...: compute-sanitizer memcheck of memcheck_case.py (bwd21's faulting inputs, forward and
# backward, no reference) with PyTorch's caching allocator off (each tensor its own cudaMalloc: a read past the
# workspace is caught), into $OUT/memcheck.log.
memcheck_case() {
  local secs=$1 cs
  shift
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  [ $secs -gt 3 ] || { echo "memcheck: no time left"; return 0; }
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONPATH=/tmp/site_$NAME timeout $secs $cs --tool memcheck --error-exitcode 9 \
      python3 -P $C/memcheck_case.py $C/tree/tests/hstu "$@" > $OUT/memcheck.log 2>&1
  echo "memcheck rc $? (9: errors, 124: time ran out; $SECONDS s)"
  grep -E "ERROR SUMMARY|Invalid|: ok|Error" $OUT/memcheck.log | head -8
}
# memcheck_layouts SECS K: compute-sanitizer memcheck of the dQ workspace layout test (-k K) with PyTorch's caching
# allocator off (each tensor its own cudaMalloc: a read past the workspace is caught), into $OUT/memcheck.log.
memcheck_layouts() {
  local secs=$1 k=$2 cs
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  [ $secs -gt 3 ] || { echo "memcheck: no time left"; return 0; }
  (cd $C/tree && PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONPATH=/tmp/site_$NAME timeout $secs $cs --tool memcheck \
      --error-exitcode 9 python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib -x \
      "$TF::test_sm80_backward_dq_workspace_layouts" -k "$k" > $OUT/memcheck.log 2>&1)
  echo "memcheck rc $? (9: errors, 124: time ran out; $SECONDS s)"
  grep -E "ERROR SUMMARY|Invalid|passed|failed" $OUT/memcheck.log | head -6
}
# digest "WHAT THE TIME COLUMNS ARE": the end of stdout: the tests' summary and the time tables.
digest() {
  echo
  echo "################ DIGEST ($GPU; done at $SECONDS s)"
  echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | cut -c1-160 | tail -12
  grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//; s/.*:://' | sort | uniq -c
  echo "#### time (ms; $1)"
  cut -c1-250 $OUT/time.log
}
