#!/bin/bash
# The branch's hstu wheel without a full Bazel build (bwd36's mkwheel.sh for the forward): compiles the branch's fwd
# sm80 bf16 hdim64 / 128 / 256 units for sm_90a with tools/cuda/cuda.bzl's flags and hstu_ops.cc with Bazel's opt
# flags (its cfg word: hstu_fwd_sm80_split.h), links them with main's other objects by main's own link parameters
# (bazel-out of /work/main), and writes main's wheel with that _C.so and the branch's _ops.py into $W (default
# /tmp/rabf38_obj). Only those units hold the branch's change that runs (the other units include the header too,
# but their kernels are main's).   bash tools/hstu_dev/rabf38_run/mkwheel.sh [64 128 256 ops]  (default: 64 ops;
# from the worktree root)
set -eu
W=${W:-/tmp/rabf38_obj}
MAIN=/work/main
ER=$(dirname "$(readlink -f $MAIN/bazel-out)")
mkdir -p $W/whl
UNITS=${*:-"64 ops"}
for d in $UNITS; do
  if [ $d = ops ]; then
    # (KEEP_OPS=1: the last build's object, where hstu_ops.cc and its headers did not change)
    [ "${KEEP_OPS:-}" = 1 ] && [ -f $W/hstu_ops.pic.o ] && continue
    nice -n 10 g++ -std=c++17 -fPIC -U_FORTIFY_SOURCE -fstack-protector -Wall -Wunused-but-set-parameter \
      -Wno-free-nonheap-object -fno-omit-frame-pointer -g0 -O2 -D_FORTIFY_SOURCE=1 -DNDEBUG -ffunction-sections \
      -fdata-sections -DTORCH_TARGET_VERSION=0x020a000000000000 -fvisibility=hidden -I. \
      -I$ER/external/local_torch/include -I$ER/external/local_cuda/include -c hstu/csrc/ops/hstu_ops.cc \
      -o $W/hstu_ops.pic.o
    continue
  fi
  # (KEEP_UNITS=1: a unit whose object is in $W already is not compiled again)
  [ "${KEEP_UNITS:-}" = 1 ] && [ -f $W/hstu_fwd_sm80_bf16_hdim$d.o ] && continue
  cp $MAIN/bazel-out/k8-opt/bin/hstu/hstu_fwd_sm80_bf16_hdim$d.cu $W/
  t=$(mktemp -d /tmp/rabf38_nvcc.XXXX)
  TMPDIR=$t nice -n 10 /usr/local/cuda/bin/nvcc -std=c++17 -O3 -DNDEBUG -Xcompiler -fPIC --expt-relaxed-constexpr \
    --expt-extended-lambda -Xcudafe --diag_suppress=177 --resource-usage -gencode=arch=compute_90a,code=sm_90a \
    '-DACCEL_CUDA_ARCHS="sm_90a"' -I. -c $W/hstu_fwd_sm80_bf16_hdim$d.cu -o $W/hstu_fwd_sm80_bf16_hdim$d.o \
    > $W/ptxas_$d.txt 2>&1 || { tail -30 $W/ptxas_$d.txt; exit 1; }
  rm -rf $t
done
[ "${NOLINK:-}" = 1 ] && exit 0
P=bazel-out/k8-opt/bin/hstu
SUB=(-e "s|^$P/_C.so\$|$W/_C.so|")
for d in $UNITS; do  # (the units built here replace main's objects; the others stay main's)
  if [ $d = ops ]; then
    SUB+=(-e "s|^$P/_objs/_C_ops/hstu_ops.pic.o\$|$W/hstu_ops.pic.o|")
  else
    u=hstu_fwd_sm80_bf16_hdim$d
    SUB+=(-e "s|^$P/_cuda_objs/${u}_objs/$u.o\$|$W/$u.o|")
  fi
done
sed "${SUB[@]}" $ER/$P/_C.so-2.params > $W/params
[ "$(grep -c "$W" $W/params)" = $(( $(echo $UNITS | wc -w) + 1 )) ]
(cd $ER && nice -n 10 gcc @$W/params)
rm -f $W/whl/*.whl
python3 tools/hstu_dev/wheel_swap.py $MAIN/.carry/main38/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl \
  $W/_C.so hstu/_ops.py $W/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl
