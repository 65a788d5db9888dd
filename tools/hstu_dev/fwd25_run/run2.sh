#!/bin/bash
# fwd25 run 2 (the lead's batch 2): run.sh again on the final wheel (the helpers the default at D = 64 only; the
# test's kernel-name check fixed): OUT=/tmp/o_fwd25 timeout 60 bash .carry/fwd25/run2.sh > /tmp/o_fwd25/stdout.txt 2>&1
exec bash "$(dirname "$0")/run.sh"
