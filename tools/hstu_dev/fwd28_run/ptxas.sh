#!/bin/bash
# The ptxas report (registers, spills) of the sm80-class forward's bf16 units at D = 256 (HDIMS) for the archs given
# (default sm_90a), compiled here with nvcc outside Bazel (the flags of tools/cuda/cuda.bzl), for a quick look before
# a wheel build: bash tools/hstu_dev/fwd28_run/ptxas.sh [sm_80 sm_86 sm_89 sm_90a] (HDIMS="256" by default).
set -eu
W=$(cd "$(dirname "$0")/../../.." && pwd)
T=${TMPDIR:-/tmp}/fwd28_ptxas
mkdir -p $T
ARCHS=${*:-sm_90a}
for D in ${HDIMS:-256}; do
  NAME=hstu_fwd_sm80_bf16_hdim$D
  sed -e "s/{{DIRECTION}}/fwd/g" -e "s/{{DTYPE}}/bf16/g" -e "s/{{HDIM}}/$D/g" -e "s/{{ARCH}}/sm80/g" \
      -e "s/{{CTYPE}}/__nv_bfloat16/g" -e "s/{{NAME}}/$NAME/g" \
      $W/hstu/csrc/sm80/hstu_sm80_instance.cu.tmpl > $T/$NAME.cu
  for A in $ARCHS; do
    CC=${A#sm_}
    nice -n 5 nvcc -std=c++17 -O3 -DNDEBUG -Xcompiler -fPIC --expt-relaxed-constexpr --expt-extended-lambda \
        -Xcudafe --diag_suppress=177 --resource-usage -gencode=arch=compute_$CC,code=sm_$CC -I$W \
        -DACCEL_CUDA_ARCHS=\"$A\" -c $T/$NAME.cu -o $T/$NAME.$A.o > $T/$NAME.$A.log 2>&1 ||
      { cat $T/$NAME.$A.log; exit 1; }
    echo "== D$D $A"
    # every kernel: registers, stack, spills
    python3 - $T/$NAME.$A.log <<'PY'
import re, sys
cur, out = None, []
for line in open(sys.argv[1]):
    m = re.search(r"(?:Compiling entry function|Function properties for) '?(_Z\w+)", line)
    if m:
        cur = m.group(1)
        continue
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and cur and "fwd" in cur:
        out.append([cur, None, m.groups()])
    m = re.search(r"Used (\d+) registers", line)
    if m and out and out[-1][0] == cur:
        out[-1][1] = m.group(1)
for name, regs, (stack, st, ld) in out:
    short = re.sub(r"I13__nv_bfloat16", "<bf16,", name.replace("_ZN4hstu", ""))
    print(f"  {short[:110]}: regs {regs}, stack {stack}, spill {st}/{ld}")
PY
  done
done
