#!/bin/bash
# tidy40's wheel: main40's objects + the branch's eight bwd sm80 units (hstu_bwd_sm80_kernel.cuh) and hstu_ops.cc.
U="ops $(for t in bf16 fp16; do for d in 32 64 128 256; do echo -n "hstu_bwd_sm80_${t}_hdim$d "; done; done)"
NAME=tidy40 BASE=main40 UNITS=${UNITS:-$U} exec bash tools/hstu_dev/runlib/mkwheel.sh "$@"
