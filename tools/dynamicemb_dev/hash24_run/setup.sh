# Sourced by run.sh / run2.sh / run3.sh (copied with them into .carry/hash24/, run from the tree's root): this wheel
# in its own site, the carry folder (table_ab.py, upsert_lab_plugin.py) on the path, the pytest command with the
# plugin, and `left`: the seconds left of the script's budget $B (from $t0).
C=.carry/hash24
S=/tmp/site_hash24
mkdir -p "$OUT"
rm -rf $S; python3 -m pip install -q --no-deps --no-index --no-compile --target $S $C/whl/*.whl
export PYTHONPATH=$S:$C
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib -p upsert_lab_plugin"
T=tests/dynamicemb/test_table_gpu.py
H=tests/dynamicemb/test_hybrid_split_gpu.py
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
t0=$(date +%s)
