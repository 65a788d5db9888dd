#!/bin/bash
# Fills peer35's carry folder (run from the worktree root): bash tools/hstu_dev/peer35_run/pack.sh /work/main/.carry/peer35
# PEER_SO: the peer module built by tools/peer/build_nvidia_ampere_hstu.sh (a stripped copy is carried in peer/).
# Built in a fresh folder, then swapped in.
set -eu
C=$1
PEER_SO=${PEER_SO:-/tmp/peer35/out/hstu_attn_2_cuda.cpython-312-x86_64-linux-gnu.so}
N=$C.new
rm -rf "$N" && mkdir -p "$N/peer" "$N/tree/benchmarks"
cp tools/hstu_dev/peer35_run/{setup.sh,run*.sh} "$N/"
cp benchmarks/{hstu_attention.py,bench_util.py} "$N/tree/benchmarks/"
mkdir -p "$N/tree/tests/hstu" && cp tests/conftest.py "$N/tree/tests/" && cp tests/hstu/test_benchmark_script.py "$N/tree/tests/hstu/"
strip --strip-unneeded -o "$N/peer/$(basename "$PEER_SO")" "$PEER_SO"
rm -rf "$C.old" && { [ ! -e "$C" ] || mv "$C" "$C.old"; } && mv "$N" "$C" && rm -rf "$C.old"
du -sh "$C" "$C/peer"/*
