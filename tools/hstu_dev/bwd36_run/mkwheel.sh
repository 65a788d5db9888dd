#!/bin/bash
# The branch's hstu wheel without a full Bazel build (session 33: the shared 2-core machine's remote cache missed
# main's objects, a whole wheel took hours): compiles the branch's bwd sm80 bf16 hdim64 / hdim128 units for sm_90a
# with tools/cuda/cuda.bzl's flags, links them with main's other objects by main's own link parameters (bazel-out of
# /work/main; the same link reproduces main's _C.so bit for bit), and writes main's wheel with that _C.so and the
# branch's _ops.py into $W (default /tmp/bwd36_obj). Only those two units include the branch's kernel change that
# runs (the other units include the header too, but their kernels are main's).
#   bash tools/hstu_dev/bwd36_run/mkwheel.sh   (from the worktree root)
set -eu
W=${W:-/tmp/bwd36_obj}
MAIN=/work/main
ER=$(dirname "$(readlink -f $MAIN/bazel-out)")
mkdir -p $W/whl
for d in 128 64; do
  cp $MAIN/bazel-out/k8-opt/bin/hstu/hstu_bwd_sm80_bf16_hdim$d.cu $W/
  t=$(mktemp -d /tmp/bwd36_nvcc.XXXX)
  TMPDIR=$t nice -n 10 /usr/local/cuda/bin/nvcc -std=c++17 -O3 -DNDEBUG -Xcompiler -fPIC --expt-relaxed-constexpr \
    --expt-extended-lambda -Xcudafe --diag_suppress=177 --resource-usage -gencode=arch=compute_90a,code=sm_90a \
    '-DACCEL_CUDA_ARCHS="sm_90a"' -I. -c $W/hstu_bwd_sm80_bf16_hdim$d.cu -o $W/hstu_bwd_sm80_bf16_hdim$d.o \
    > $W/ptxas_$d.txt 2>&1
  rm -rf $t
done
P=bazel-out/k8-opt/bin/hstu
sed -e "s|^$P/_C.so\$|$W/_C.so|" \
    -e "s|^$P/_cuda_objs/hstu_bwd_sm80_bf16_hdim128_objs/hstu_bwd_sm80_bf16_hdim128.o\$|$W/hstu_bwd_sm80_bf16_hdim128.o|" \
    -e "s|^$P/_cuda_objs/hstu_bwd_sm80_bf16_hdim64_objs/hstu_bwd_sm80_bf16_hdim64.o\$|$W/hstu_bwd_sm80_bf16_hdim64.o|" \
    $ER/$P/_C.so-2.params > $W/params
[ "$(grep -c "$W" $W/params)" = 3 ]
(cd $ER && nice -n 10 gcc @$W/params)
rm -f $W/whl/*.whl
python3 tools/hstu_dev/wheel_swap.py $MAIN/.carry/main36/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl \
  $W/_C.so hstu/_ops.py $W/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl
