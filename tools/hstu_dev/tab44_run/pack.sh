#!/bin/bash
# Copies what tab44's device run needs into the carry folder (runlib/pack.sh; run from anywhere):
#   bash tools/hstu_dev/tab44_run/pack.sh DEST WHEEL [PEER_SO [OLD_WHEEL]]
# main's hstu wheel (WHEEL, e.g. bazel-bin/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl) as xz (setup.sh unpacks
# it), the run scripts, bwdfa39_run's t39.py with runlib's bwdtime.py, the benchmark (benchmarks/hstu_attention.py,
# bench_util.py) under bench/, and the peer module (PEER_SO, the .so that tools/peer/build_nvidia_ampere_hstu.sh
# built, stripped here) under peer/, and for run 2 t44.py and OLD_WHEEL (main 9ce5c6b3's, xz) under whl_old/.
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin i39 "$1"
pack_add tools/hstu_dev/tab44_run/{run*.sh,setup.sh,t44.py} tools/hstu_dev/bwdfa39_run/t39.py \
    tools/hstu_dev/bwd41_run/xzwheel.py tools/hstu_dev/runlib/bwdtime.py
pack_add -d bench benchmarks/{hstu_attention.py,bench_util.py}
mkdir -p $PACK_DIR/whl
nice python3 $R/tools/hstu_dev/bwd41_run/xzwheel.py pack "$2" $PACK_DIR/whl/$(basename "$2").xz
md5sum "$2"
if [ -n "${3:-}" ]; then
  mkdir -p $PACK_DIR/peer
  strip -o $PACK_DIR/peer/$(basename "$3") "$3"
fi
if [ -n "${4:-}" ]; then
  mkdir -p $PACK_DIR/whl_old
  nice python3 $R/tools/hstu_dev/bwd41_run/xzwheel.py pack "$4" $PACK_DIR/whl_old/$(basename "$4").xz
  md5sum "$4"
fi
pack_end
