#!/bin/bash
# A branch's hstu wheel without a full Bazel build (the shared 2-core machine: a change to a header that every sm80
# unit lists recompiles all of them in Bazel). Compiles the branch's UNITS (generated unit names such as
# hstu_bwd_sm80_bf16_hdim128, from main's generated .cu files, with tools/cuda/cuda.bzl's flags for sm_90a; `ops` =
# hstu/csrc/ops/hstu_ops.cc with Bazel's CppCompile flags), links LINK_UNITS' objects with main's other objects by
# main's own link parameters (bazel-out of $MAIN), and writes main's wheel ($MAIN/.carry/$BASE/whl) with that _C.so
# and the branch's hstu/_ops.py into $W/whl. Run from the worktree root:
#   [NAME=x] [BASE=main39] [W=/tmp/x_obj] UNITS="ops hstu_bwd_sm80_bf16_hdim128" [LINK_UNITS=...] [KEEP=1]
#   [FRESH_AGAINST="header..."] [DRY=1] bash tools/hstu_dev/runlib/mkwheel.sh [all|compile|link]
# KEEP=1: a unit whose object is in $W already is not compiled again (KEEP=ops: hstu_ops.cc alone, KEEP=units: the
# CUDA units alone); FRESH_AGAINST: a CUDA unit is not compiled again when its object is newer than each of these
# files. LINK_UNITS (default UNITS): the objects of $W that replace main's in the link (a unit compiled by an earlier
# call may be linked alone). NEW: units of LINK_UNITS that main's link lacks, added after its AFTER unit's line (a
# new FP8 backward head dim: AFTER=hstu_bwd_sm90_fp8_hdim128). PY: more hstu/ files swapped into the wheel with
# _ops.py (e.g. _fp8_bwd.py). DRY=1 prints the commands instead of running them; MODE params writes $W/params, stops.
set -eu
MODE=${1:-all}
NAME=${NAME:-lab}
W=${W:-/tmp/${NAME}_obj}
BASE=${BASE:-main39}
MAIN=${MAIN:-/work/main}
UNITS=${UNITS:?UNITS: the units to compile (generated unit names, ops = hstu_ops.cc)}
LINK_UNITS=${LINK_UNITS:-$UNITS}
NEW=${NEW:-}
AFTER=${AFTER:-hstu_bwd_sm90_fp8_hdim128}
WHEEL=hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl
ER=$(dirname "$(readlink -f $MAIN/bazel-out)")
P=bazel-out/k8-opt/bin/hstu
run() { if [ "${DRY:-0}" = 1 ]; then echo "$*"; else "$@"; fi; }
obj() { if [ $1 = ops ]; then echo $W/hstu_ops.pic.o; else echo $W/$1.o; fi; }
reuse() {  # reuse UNIT: its object may stay
  local o f
  o=$(obj $1)
  [ -f $o ] || return 1
  case ${KEEP:-0} in 1) return 0 ;; ops) [ $1 = ops ] && return 0 ;; units) [ $1 != ops ] && return 0 ;; esac
  [ $1 != ops ] && [ -n "${FRESH_AGAINST:-}" ] || return 1
  for f in $FRESH_AGAINST; do [ $o -nt $f ] || return 1; done
}
[ "${DRY:-0}" = 1 ] || mkdir -p $W/whl
if [ "$MODE" != link ] && [ "$MODE" != params ]; then
  for n in $UNITS; do
    reuse $n && continue
    if [ $n = ops ]; then
      run nice -n 10 gcc -U_FORTIFY_SOURCE -fstack-protector -Wall -Wunused-but-set-parameter \
        -Wno-free-nonheap-object -fno-omit-frame-pointer -g0 -O2 -D_FORTIFY_SOURCE=1 -DNDEBUG -ffunction-sections \
        -fdata-sections -fPIC -iquote . -isystem $ER/external/local_cuda/include \
        -isystem $ER/external/local_torch/include -std=c++17 -DTORCH_TARGET_VERSION=0x020a000000000000 \
        -fvisibility=hidden -c hstu/csrc/ops/hstu_ops.cc -o $W/hstu_ops.pic.o
      continue
    fi
    inc=()
    case $n in  # (FP8 backward units: generated from the branch's template, as the matrix names them; the pre-pass)
      hstu_bwd_sm90_fp8_hdim*)
        run sed -e "s/{{HDIM}}/${n#hstu_bwd_sm90_fp8_hdim}/g; s/{{NAME}}/$n/g" \
          -e "w $W/$n.cu" -n hstu/csrc/sm90/hstu_bwd_fp8_sm90_instance.cu.tmpl
        inc=(-I$ER/external/local_cuda/include) ;;
      hstu_fp8_bwd_prepass) run cp hstu/csrc/fp8/$n.cu $W/$n.cu; inc=(-I$ER/external/local_cuda/include) ;;
      *) run cp $MAIN/$P/$n.cu $W/$n.cu ;;
    esac
    t=$(mktemp -d /tmp/${NAME}_nvcc.XXXX)
    if [ "${DRY:-0}" = 1 ]; then
      echo nvcc ... -c $W/$n.cu -o $W/$n.o
    elif ! TMPDIR=$t nice -n 10 /usr/local/cuda/bin/nvcc -std=c++17 -O3 -DNDEBUG -Xcompiler -fPIC \
        --expt-relaxed-constexpr --expt-extended-lambda -Xcudafe --diag_suppress=177 --resource-usage \
        -gencode=arch=compute_90a,code=sm_90a '-DACCEL_CUDA_ARCHS="sm_90a"' -I. "${inc[@]}" -c $W/$n.cu -o $W/$n.o \
        > $W/ptxas_$n.txt 2>&1; then
      tail -30 $W/ptxas_$n.txt
      rm -rf $t
      exit 1
    fi
    rm -rf $t
  done
fi
[ "$MODE" = compile ] && exit 0
args=(-e "s|^$P/_C.so\$|$W/_C.so|")
for n in $LINK_UNITS; do
  case " $NEW " in *" $n "*) continue ;; esac
  if [ $n = ops ]; then
    args+=(-e "s|^$P/_objs/_C_ops/hstu_ops.pic.o\$|$W/hstu_ops.pic.o|")
  else
    args+=(-e "s|^$P/_cuda_objs/${n}_objs/$n.o\$|$W/$n.o|")
  fi
done
for n in $NEW; do args+=(-e "s|^\(.*/$AFTER.o\)\$|\1\n$W/$n.o|"); done
PARAMS=$W/params
[ "${DRY:-0}" = 1 ] && PARAMS=$(mktemp /tmp/mkwheel_dry.XXXX)
sed "${args[@]}" $ER/$P/_C.so-2.params > $PARAMS
# every unit named must have replaced one line of main's link (a unit name off by a letter links main's object)
[ "$(grep -c "$W" $PARAMS)" = $(( $(echo $LINK_UNITS | wc -w) + 1 )) ] ||
  { echo "mkwheel: $(grep -c "$W" $PARAMS) of $(( $(echo $LINK_UNITS | wc -w) + 1 )) link lines replaced" >&2; exit 1; }
[ "$MODE" = params ] && exit 0
if [ "${DRY:-0}" = 1 ]; then
  grep "$W" $PARAMS
  rm -f $PARAMS
  exit 0
fi
(cd $ER && nice -n 10 gcc @$W/params)
rm -f $W/whl/*.whl
python3 tools/hstu_dev/wheel_swap.py $MAIN/.carry/$BASE/whl/$WHEEL $W/whl/$WHEEL hstu_attn/_C.so=$W/_C.so \
  hstu_attn/_ops.py=hstu/_ops.py $(for f in ${PY:-}; do echo hstu_attn/$f=hstu/$f; done)
