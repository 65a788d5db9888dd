#!/bin/bash
# split40 run 5 (lead, session 37): the rule's GPU tests (run3.sh RUN4=1), then fwdshort.py on the fix's wheel.
C=$(cd "$(dirname "$0")" && pwd)
RUN4=1 bash $C/run3.sh
echo "## fwdshort ($SECONDS s)"
PYTHONPATH=/tmp/site_fix timeout 200 python3 -P $C/fwdshort.py run5 --reps 5 2>&1 | grep -E "^\||^#|rror" | cut -c1-400
echo "done at $SECONDS s"
