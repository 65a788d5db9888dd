# Sourced by run1.sh / run2.sh / run3.sh (copied with them into .carry/step26/, run from main's tree root on the
# device): this branch's dynamicemb wheel in its own site, main's (.carry/main26/whl) in another, main's tests with
# this branch's test_embedding_gpu.py over them in /tmp/t26, the branch's tools on the path; `left`: the seconds
# left of the script's budget $B (from $t0).
t0=$(date +%s)
C=.carry/step26
S=/tmp/site_step26
M=/tmp/site_main26
mkdir -p "$OUT"
rm -rf $S $M /tmp/t26
python3 -m pip install -q --no-deps --no-index --no-compile --target $S $C/whl/dynamicemb-*.whl
mkdir -p /tmp/t26 && cp -r tests /tmp/t26/ && cp $C/tree/tests/dynamicemb/*.py /tmp/t26/tests/dynamicemb/
export PYTHONPATH=$S:$C/tree/tools/dynamicemb_dev
PT="python3 -P -m pytest -q -p no:cacheprovider -p find_lab_plugin"
T=/tmp/t26/tests/dynamicemb/test_embedding_gpu.py
K=/tmp/t26/tests/dynamicemb/test_checks_gpu.py
R=/tmp/t26/tests/dynamicemb/test_repeatable_step_gpu.py
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
