#!/bin/bash
# The branch's hstu wheel without a full Bazel build (bwd36's way, session 33): its change touches
# hstu_fwd_sm80_split.h, which every sm80 unit and the op include, so Bazel recompiles ~20 units on the shared 2-core
# machine. Compiles the branch's fwd sm80 bf16 hdim64 / 128 / 256 units for sm_90a with tools/cuda/cuda.bzl's flags
# and hstu_ops.cc with Bazel's own command line (bazel aquery), links them with main's other objects by main's link
# parameters (bazel-out of /work/main), and writes main's wheel with that _C.so and the branch's _ops.py into $W
# (default /tmp/zipf37_obj). Only those units hold code the branch changed that runs (the other units include the
# headers too, but their kernels and the cfg word's other values are main's).
#   bash tools/hstu_dev/zipf37_run/mkwheel.sh [64 128 256]   (from the worktree root; the units to recompile)
set -eu
W=${W:-/tmp/zipf37_obj}
MAIN=/work/main
ER=$(dirname "$(readlink -f $MAIN/bazel-out)")
MY=$(dirname "$(readlink -f bazel-out)")
mkdir -p $W/whl
for d in ${@:-64 128 256}; do
  cp $MAIN/bazel-out/k8-opt/bin/hstu/hstu_fwd_sm80_bf16_hdim$d.cu $W/
  t=$(mktemp -d /tmp/zipf37_nvcc.XXXX)
  TMPDIR=$t nice -n 10 /usr/local/cuda/bin/nvcc -std=c++17 -O3 -DNDEBUG -Xcompiler -fPIC --expt-relaxed-constexpr \
    --expt-extended-lambda -Xcudafe --diag_suppress=177 --resource-usage -gencode=arch=compute_90a,code=sm_90a \
    '-DACCEL_CUDA_ARCHS="sm_90a"' -I. -c $W/hstu_fwd_sm80_bf16_hdim$d.cu -o $W/hstu_fwd_sm80_bf16_hdim$d.o \
    > $W/ptxas_$d.txt 2>&1
  rm -rf $t
done
[ "${OPS:-1}" = 0 ] || (cd $MY && nice -n 10 /usr/bin/gcc -U_FORTIFY_SOURCE -fstack-protector -Wall -Wunused-but-set-parameter \
  -Wno-free-nonheap-object -fno-omit-frame-pointer -g0 -O2 '-D_FORTIFY_SOURCE=1' -DNDEBUG -ffunction-sections \
  -fdata-sections -fPIC -iquote . -iquote bazel-out/k8-opt/bin -iquote external/local_cuda -iquote external/local_torch \
  -isystem external/local_cuda/include -isystem external/local_torch/include '-std=c++17' \
  '-DTORCH_TARGET_VERSION=0x020a000000000000' '-fvisibility=hidden' -c hstu/csrc/ops/hstu_ops.cc -o $W/hstu_ops.pic.o)
P=bazel-out/k8-opt/bin/hstu
sed -e "s|^$P/_C.so\$|$W/_C.so|" \
    -e "s|^$P/_objs/_C_ops/hstu_ops.pic.o\$|$W/hstu_ops.pic.o|" \
    -e "s#^$P/_cuda_objs/hstu_fwd_sm80_bf16_hdim\(64\|128\|256\)_objs/hstu_fwd_sm80_bf16_hdim\(64\|128\|256\).o\$#$W/hstu_fwd_sm80_bf16_hdim\2.o#" \
    $ER/$P/_C.so-2.params > $W/params
[ "$(grep -c "$W" $W/params)" = 5 ]
(cd $ER && nice -n 10 gcc @$W/params)
rm -f $W/whl/*.whl
python3 tools/hstu_dev/wheel_swap.py $MAIN/.carry/main37/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl \
  $W/_C.so hstu/_ops.py $W/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl
