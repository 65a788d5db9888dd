#!/bin/bash
# Fills the carry folder of fp8b26 (issue 36, session 23) from this worktree: fp8b22's pack (the test / benchmark
# files, fp8b21's driver and ncu driver under tree/, the wheel, the wrappers run.sh / run2.sh / run3.sh), with this
# task's runs.sh. Usage: bash pack.sh CARRY_DIR
set -eu
H=$(cd "$(dirname "$0")/.." && pwd)
bash $H/fp8b22_run/pack.sh $1 > /dev/null
cp $H/fp8b26_run/runs.sh $H/fp8_bwd_drive_run.sh $1/
du -sh $1
