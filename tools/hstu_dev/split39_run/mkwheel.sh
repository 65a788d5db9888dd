#!/bin/bash
# The branch's hstu wheel without a full Bazel build (zipfb38's mkwheel.sh: a header of every sm80 unit changed):
# compiles the bf16 bwd sm80 units (hdim64 / 128 / 256: the split's, bf16 only) for sm_90a from main's generated .cu
# files and hstu_ops.cc, links them with main's other objects by main's link parameters and writes main39's wheel with
# that _C.so and the branch's _ops.py into $W/whl (default W=/tmp/split39_obj). (main's forward objects keep the
# retired fwd_sm80_cfg=8 rab path, which nothing selects any more.)
#   bash tools/hstu_dev/split39_run/mkwheel.sh [compile|link] [units...]   (from the worktree root)
set -eu
W=${W:-/tmp/split39_obj}
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
    t=$(mktemp -d /tmp/split39_nvcc.XXXX)
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
python3 tools/hstu_dev/wheel_swap.py $MAIN/.carry/main39/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl \
  $W/_C.so hstu/_ops.py $W/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl
