#!/bin/bash
# Fills the carry folder of fp8b23 (issue 36, session 21) from this worktree: fp8b21's pack (the branch's test /
# benchmark files, the driver under tree/, the wheel), then this task's runs.sh and its wrappers run.sh / run2.sh.
# Usage: bash pack.sh CARRY_DIR
set -eu
H=$(cd "$(dirname "$0")/.." && pwd)
C=$1
bash $H/fp8b21_run/pack.sh $C > /dev/null
rm -f $C/run*.sh
cp $H/fp8b23_run/runs.sh $H/carry_setup.sh $C/
for n in 1 2; do echo 'exec bash "$(dirname "$0")/runs.sh" '$n > $C/run$([ $n = 1 ] || echo $n).sh; done
du -sh $C
