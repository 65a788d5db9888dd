#!/bin/bash
# Fills the carry folder /work/main/.carry/fwd25 from this worktree through fwd24's pack.sh (the wheel, the test
# files, the benches, fwd21's / fwd24's setup) with this folder's scripts.
set -eu
NAME=fwd25 RUNS=$(cd "$(dirname "$0")" && pwd) bash "$(dirname "$0")/../fwd24_run/pack.sh"
