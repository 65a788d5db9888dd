#!/bin/bash
# Copies what run K needs into /work/main/.carry/hash26/ (the lead runs `OUT=... bash .carry/hash26/runK.sh` from
# main's tree root on the device). Usage: pack.sh K [files...]
set -e
D=/work/main/.carry/hash26
K=$1; shift
mkdir -p $D
cp "$(dirname "$0")/run$K.sh" $D/
for f in "$@"; do cp -r "$f" $D/; done
ls -la $D
