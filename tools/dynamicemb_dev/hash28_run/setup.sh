# Sourced by hash28's runK.sh (copied with them into .carry/hash28/, run from main's tree root on the device): this
# branch's dynamicemb wheel in its own site, main's (.carry/main28/whl) in another when asked ($WITH_MAIN), main's
# tests with this branch's test files over them in /tmp/t28, the branch's tools on the path; `left`: the seconds
# left of the script's budget $B (from $t0).
t0=$(date +%s)
R=${RUN:-hash28}  # the run folder's name (later branches source this file with RUN set: hash29)
C=.carry/$R
S=/tmp/site_$R
M=/tmp/site_main28
mkdir -p "$OUT"
rm -rf $S /tmp/t28
python3 -m pip install -q --no-deps --no-index --no-compile --target $S $C/whl/dynamicemb-*.whl
mkdir -p /tmp/t28 && cp -r tests /tmp/t28/ && cp $C/tree/tests/dynamicemb/*.py /tmp/t28/tests/dynamicemb/
export PYTHONPATH=$S:$C/tree/tools/dynamicemb_dev
PT="python3 -P -m pytest -q -p no:cacheprovider -p dedup_lab_plugin"
T=/tmp/t28/tests/dynamicemb/test_embedding_gpu.py
D=/tmp/t28/tests/dynamicemb/test_dedup_gpu.py
K=/tmp/t28/tests/dynamicemb/test_checks_gpu.py
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
