#!/bin/bash
# fp8d256's wheel: main43's objects + the branch's FP8 backward unit at D = 256 (a new unit, its line added to main's
# link after hdim128's), the pre-pass / finishing unit and hstu_ops.cc; the branch's _ops.py and _fp8_bwd.py.
# From the worktree root: bash tools/hstu_dev/fp8d256_run/mkwheel.sh [compile|link|all] (UNITS: the CUDA units).
set -eu
MODE=${1:-all}
W=${W:-/tmp/fp8d256_obj}
MAIN=/work/main
BASE=${BASE:-main43}
ER=$(dirname "$(readlink -f $MAIN/bazel-out)")
P=bazel-out/k8-opt/bin/hstu
UNITS=${UNITS:-"hstu_bwd_sm90_fp8_hdim256 hstu_fp8_bwd_prepass ops"}
mkdir -p $W/whl
src_of() {  # a unit's source: generated from its template here (the matrix's names), or the plain .cu
  case $1 in
    hstu_bwd_sm90_fp8_hdim*) local d=${1#hstu_bwd_sm90_fp8_hdim}
      sed "s/{{HDIM}}/$d/g; s/{{NAME}}/$1/g" hstu/csrc/sm90/hstu_bwd_fp8_sm90_instance.cu.tmpl > $W/$1.cu
      echo $W/$1.cu ;;
    hstu_fp8_bwd_prepass) echo hstu/csrc/fp8/hstu_fp8_bwd_prepass.cu ;;
  esac
}
if [ "$MODE" != link ]; then
  for n in $UNITS; do
    if [ $n = ops ]; then
      nice -n 10 gcc -U_FORTIFY_SOURCE -fstack-protector -Wall -Wunused-but-set-parameter \
        -Wno-free-nonheap-object -fno-omit-frame-pointer -g0 -O2 -D_FORTIFY_SOURCE=1 -DNDEBUG -ffunction-sections \
        -fdata-sections -fPIC -iquote . -isystem $ER/external/local_cuda/include \
        -isystem $ER/external/local_torch/include -std=c++17 -DTORCH_TARGET_VERSION=0x020a000000000000 \
        -fvisibility=hidden -c hstu/csrc/ops/hstu_ops.cc -o $W/hstu_ops.pic.o
      continue
    fi
    s=$(src_of $n)
    t=$(mktemp -d /tmp/fp8d256_nvcc.XXXX)
    if ! TMPDIR=$t nice -n 10 /usr/local/cuda/bin/nvcc -std=c++17 -O3 -DNDEBUG -Xcompiler -fPIC \
        --expt-relaxed-constexpr --expt-extended-lambda -Xcudafe --diag_suppress=177 --resource-usage \
        -gencode=arch=compute_90a,code=sm_90a '-DACCEL_CUDA_ARCHS="sm_90a"' -I. -I$ER/external/local_cuda/include \
        -c $s -o $W/$n.o > $W/ptxas_$n.txt 2>&1; then
      tail -30 $W/ptxas_$n.txt; rm -rf $t; exit 1
    fi
    rm -rf $t
  done
fi
[ "$MODE" = compile ] && exit 0
sed -e "s|^$P/_C.so\$|$W/_C.so|" -e "s|^$P/_objs/_C_ops/hstu_ops.pic.o\$|$W/hstu_ops.pic.o|" \
    -e "s|^$P/_cuda_objs/hstu_fp8_bwd_prepass_objs/hstu_fp8_bwd_prepass.o\$|$W/hstu_fp8_bwd_prepass.o|" \
    -e "s|^\($P/_cuda_objs/hstu_bwd_sm90_fp8_hdim128_objs/hstu_bwd_sm90_fp8_hdim128.o\)\$|\1\n$W/hstu_bwd_sm90_fp8_hdim256.o|" \
    $ER/$P/_C.so-2.params > $W/params
[ "$(grep -c "$W" $W/params)" = 4 ] || { echo "mkwheel: $(grep -c "$W" $W/params) of 4 link lines" >&2; exit 1; }
(cd $ER && nice -n 10 gcc @$W/params)
python3 tools/hstu_dev/wheel_swap.py $MAIN/.carry/$BASE/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl \
  $W/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl hstu_attn/_C.so=$W/_C.so \
  hstu_attn/_ops.py=hstu/_ops.py hstu_attn/_fp8_bwd.py=hstu/_fp8_bwd.py
