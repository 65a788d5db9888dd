#!/bin/bash
# Builds the sm90 development library by hand (no Bazel): .carry_sm90/libhstu_sm90_dev.so at the repository root.
# Forward and backward (D = 64/128/256) instantiations + the dev ops (fwd, bwd).
#   bash tools/hstu_dev/build_dev.sh [all]      (default: D = 128 only; `all` adds D = 64 and 256)
# All experimental configurations are compiled (-DHSTU_SM90_ALL_VARIANTS); SM90_VARIANTS= builds the default only.
set -euo pipefail
cd "$(dirname "$0")/../.."
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
PY=${PY:-$HOME/.cache/accelerated_modules/venv/bin/python}
TORCH=$($PY -c "import os, torch; print(os.path.dirname(torch.__file__))")
OUT=.carry_sm90
OBJ=/tmp/hstu_sm90_obj
mkdir -p $OUT $OBJ
FLAGS="-std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Xcompiler -fPIC -I. ${SM90_VARIANTS--DHSTU_SM90_ALL_VARIANTS}"
DIMS="128"
DEFS=""
if [ "${1:-}" = all ]; then DIMS="64 128 256"; DEFS="-DHSTU_SM90_WITH_D64 -DHSTU_SM90_WITH_D256"; fi
OBJS=""
for d in $DIMS; do
  for t in bf16 fp16; do
    ty=$([ $t = bf16 ] && echo __nv_bfloat16 || echo __half)
    o=$OBJ/hstu_fwd_sm90_${t}_hdim$d.o
    $NVCC $FLAGS --resource-usage -DHSTU_SM90_DTYPE=$ty -DHSTU_SM90_HDIM=$d -c tools/hstu_dev/hstu_fwd_sm90_inst.cu \
      -o $o 2>&1 | grep -E "warning|error|registers|spill|stack" || true
    OBJS="$OBJS $o"
    o=$OBJ/hstu_bwd_sm90_${t}_hdim$d.o
    $NVCC $FLAGS --resource-usage -DHSTU_SM90_DTYPE=$ty -DHSTU_SM90_HDIM=$d -c tools/hstu_dev/hstu_bwd_sm90_inst.cu \
      -o $o 2>&1 | grep -E "warning|error|registers|spill|stack|C75" || true
    OBJS="$OBJS $o"
  done
done
g++ -std=c++17 -O2 -fPIC $DEFS -DTORCH_TARGET_VERSION=0x020a000000000000 -I. -I$TORCH/include \
  -I/usr/local/cuda/include -c tools/hstu_dev/hstu_sm90_dev_ops.cc -o $OBJ/ops.o
g++ -shared -o $OUT/libhstu_sm90_dev.so $OBJS $OBJ/ops.o -L$TORCH/lib -ltorch_cpu -L/usr/local/cuda/lib64 \
  -lcudart_static -lpthread -ldl -lrt -Wl,--exclude-libs,ALL
ls -la $OUT/libhstu_sm90_dev.so
