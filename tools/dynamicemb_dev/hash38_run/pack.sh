#!/bin/bash
# Packs run K of hash38 into /work/main/.carry/hash38/ (runlib/pack.sh with run.conf: the lead runs `OUT=... timeout 56
# bash .carry/hash38/runK.sh` from main's tree root on the device): runK.sh, runlib's common.sh / setup.sh, evict_bench
# built with -lineinfo from the lab commit EBC (default 67db0433, the variants' source: the head has main's kernels;
# eb_lab), with PATCH (a file of this folder) applied, and, with WHL=1, this tree's dynamicemb wheel (bazel-bin: build
# it at the lab commit for the variants) with the test files and lab plugins under tree/ (setup.sh installs it).
# NOEB=1 keeps the carry's eb_lab (scripts changed only); NOEB=2 carries no eb_lab (wheel runs); EBBIN=path carries
# that binary (built elsewhere, e.g. from a lab copy of the tree). eb_lab travels gzipped (common.sh unpacks it).
# Usage: [NOEB=1|2] [EBBIN=bin] [EBC=commit] [PATCH=file] [WHL=1] pack.sh K
[ -n "${EBC:-}" ] && export LABC=$EBC
[ -n "${EBBIN:-}" ] && export LABBIN=$EBBIN
case ${NOEB:-0} in 1) export NOLAB=1 ;; 2) export LAB=none ;; esac
exec bash "$(dirname "$0")/../runlib/pack.sh" "$(dirname "$0")" "$@"
