# Sourced by run2.sh / run3.sh (copied with them into .carry/hash26/, run from main's tree root on the device): this
# branch's dynamicemb wheel in its own site, the carry folder (table_ab.py, upsert_lab_plugin.py) on the path, the
# pytest command with the plugin, the carried test copies (tests_h26/), and `left`: the seconds left of $B from $t0.
C=.carry/hash26
S=/tmp/site_hash26
mkdir -p "$OUT"
t0=$(date +%s)
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
rm -rf $S; python3 -m pip install -q --no-deps --no-index --no-compile --target $S $C/whl/dynamicemb-*.whl
export PYTHONPATH=$S:$C
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib -p upsert_lab_plugin"
TG=$C/tests_h26/test_table_gpu.py
H=tests/dynamicemb/test_hybrid_split_gpu.py
E="tests/dynamicemb/test_evict_ties_gpu.py tests/dynamicemb/test_table_full.py"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
echo "setup: $(( $(date +%s) - t0 )) s"
