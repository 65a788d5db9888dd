#!/bin/bash
# The branch's hstu wheel without a full Bazel build (drab37's way: any sm80 header change rebuilds all 16 sm80 units
# in Bazel on the shared 2-core machine): compiles the branch's bf16 bwd sm80 units (hdim64 / 128 / 256, the only
# ones whose code runs the split: launch_hstu_bwd_split is bf16 only) for sm_90a with tools/cuda/cuda.bzl's flags
# from main's generated .cu files, and hstu_ops.cc (Bazel's CppCompile flags); links them with main's other objects
# by main's own link parameters (bazel-out of /work/main) and writes main38's wheel with that _C.so and the branch's
# _ops.py into $W/whl (default W=/tmp/zipfb38_obj).
#   bash tools/hstu_dev/zipfb38_run/mkwheel.sh [compile|link] [units...]   (from the worktree root)
set -eu
W=${W:-/tmp/zipfb38_obj}
MAIN=/work/main
ER=$(dirname "$(readlink -f $MAIN/bazel-out)")
MODE=${1:-all}
shift || true
ALL="hstu_bwd_sm80_bf16_hdim128 hstu_bwd_sm80_bf16_hdim64 hstu_bwd_sm80_bf16_hdim256"
UNITS=${*:-$ALL}
mkdir -p $W/whl
if [ "$MODE" != link ]; then
  nice -n 10 gcc -U_FORTIFY_SOURCE -fstack-protector -Wall -Wunused-but-set-parameter -Wno-free-nonheap-object \
    -fno-omit-frame-pointer -g0 -O2 -D_FORTIFY_SOURCE=1 -DNDEBUG -ffunction-sections -fdata-sections -fPIC \
    -iquote . -isystem $ER/external/local_cuda/include -isystem $ER/external/local_torch/include -std=c++17 \
    -DTORCH_TARGET_VERSION=0x020a000000000000 -fvisibility=hidden -c hstu/csrc/ops/hstu_ops.cc -o $W/hstu_ops.pic.o
  for n in $UNITS; do
    cp $MAIN/bazel-out/k8-opt/bin/hstu/$n.cu $W/$n.cu
    t=$(mktemp -d /tmp/zipfb38_nvcc.XXXX)
    TMPDIR=$t nice -n 10 /usr/local/cuda/bin/nvcc -std=c++17 -O3 -DNDEBUG -Xcompiler -fPIC --expt-relaxed-constexpr \
      --expt-extended-lambda -Xcudafe --diag_suppress=177 --resource-usage -gencode=arch=compute_90a,code=sm_90a \
      '-DACCEL_CUDA_ARCHS="sm_90a"' -I. -c $W/$n.cu -o $W/$n.sm_90a.o > $W/ptxas_$n.sm_90a.txt 2>&1 ||
      { tail -30 $W/ptxas_$n.sm_90a.txt; exit 1; }
    rm -rf $t
  done
fi
[ "$MODE" = compile ] && exit 0
P=bazel-out/k8-opt/bin/hstu
args=(-e "s|^$P/_C.so\$|$W/_C.so|" -e "s|^$P/_objs/_C_ops/hstu_ops.pic.o\$|$W/hstu_ops.pic.o|")
for n in $ALL; do args+=(-e "s|^$P/_cuda_objs/${n}_objs/$n.o\$|$W/$n.sm_90a.o|"); done
sed "${args[@]}" $ER/$P/_C.so-2.params > $W/params
[ "$(grep -c "$W" $W/params)" = 5 ]
(cd $ER && nice -n 10 gcc @$W/params)
rm -f $W/whl/*.whl
python3 tools/hstu_dev/wheel_swap.py $MAIN/.carry/main38/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl \
  $W/_C.so hstu/_ops.py $W/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl
