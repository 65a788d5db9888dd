#!/usr/bin/env bash
# Verifies accelerated_modules on a GPU machine from built wheels, in one call:
# installs the wheels, runs the doctor, an import + CPU-op check with the GPU hidden (CUDA_VISIBLE_DEVICES=), a
# `pip install` into a fresh venv + `pip check`, the GPU (and CPU) tests and the quick benchmarks, and prints a
# short table last.
#
#   tools/gpu_check.sh [WHEEL_DIR]      # default: dist/ ; e.g. bazel-bin/ after ./bazelw build //:wheels
#
# Needs: python3 with torch (CUDA build) and pytest; no Bazel, no network. Wheels are installed with
# `pip install --no-deps --target` into a temp dir (nothing is changed in the Python environment).
# Environment: GPU_CHECK_OUT (default $OUT or /tmp/gpu_check) receives the logs and benchmark tables;
# GPU_CHECK_BENCH=0 skips the benchmarks; GPU_CHECK_TESTS=gpu / cpu / none runs one part of the tests or neither
# (default all: both parts at once); PYTEST_ARGS adds pytest arguments; GPU_CHECK_PEER=DIR (a folder holding the
# peer's `hstu` package, as tools/peer/build_fbgemm_hstu.sh builds it) adds the quick HSTU benchmark side by side with
# FBGEMM's HSTU attention (--peer fbgemm; Hopper GPUs only).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
wheels="${1:-$root/dist}"
out="${GPU_CHECK_OUT:-${OUT:-/tmp/gpu_check}}"
mkdir -p "$out"
site="$(mktemp -d)/site"
py="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1

ls "$wheels"/*.whl >/dev/null 2>&1 || { echo "gpu_check: no wheels in $wheels" >&2; exit 2; }
"$py" -m pip install -q --no-deps --no-index --no-compile --target "$site" "$wheels"/*.whl || exit 2
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

declare -a names=() results=()
step() {  # step NAME CMD...: run, log to $out/NAME.log, remember the outcome
  local name="$1"; shift
  echo "=== $name: $*"
  local t0=$(date +%s)
  "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  local summary
  summary="$(grep -E '^=* ?[0-9]+ (passed|failed|error|skipped).* in [0-9.]+s' "$out/$name.log" | tail -1 | tr -d '=' | xargs)"
  names+=("$name")
  results+=("$( [ $rc -eq 0 ] && echo PASS || echo "FAIL(rc=$rc)" ) | $(( $(date +%s) - t0 )) s | ${summary:-}")
}

# Import and CPU ops with CUDA torch but no visible GPU: importing must never raise, CPU paths must work.
hidden_gpu_smoke='
import torch, hstu_attn, dynamicemb
assert not torch.cuda.is_available()
k = torch.arange(16, dtype=torch.int64)
assert torch.equal(dynamicemb.hash_keys(k), dynamicemb._hash.hash_keys_reference(k))
t = dynamicemb.ScoredHashTable(capacity=128, value_dim=4)
t.insert_or_assign(k, torch.ones(16, 4))
assert bool(t.find(k).found.all())
q = torch.randn(6, 2, 32)
cu = torch.tensor([0, 2, 6], dtype=torch.int32)
assert bool(torch.isfinite(hstu_attn.hstu_attn_varlen_func(q, q, q, cu, cu, 4, 4)).all())
print("no visible GPU: import and CPU ops OK, torch", torch.__version__)
'

# `pip install` (not --target) into a fresh venv that sees this Python's packages (torch, pip) through a .pth file;
# pip check must name neither wheel; both import from the venv.
pip_install_check() {
  local v purelib chk
  v="$(mktemp -d)/venv"
  "$py" -m venv --without-pip "$v" || return 1
  purelib="$("$v/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  env -u PYTHONPATH "$py" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))' \
    >"$purelib/host_site.pth" || return 1
  # Without PYTHONPATH: the --target install above would make pip think the wheels are already there.
  env -u PYTHONPATH "$v/bin/python" -m pip install -q --no-index --no-cache-dir "$wheels"/*.whl || return 1
  chk="$(env -u PYTHONPATH "$v/bin/python" -m pip check 2>&1)"
  echo "pip check: $chk"
  ! grep -qiE "^(hstu[-_]attn|dynamicemb) " <<<"$chk" || return 1
  (cd / && env -u PYTHONPATH "$v/bin/python" -c 'import torch, hstu_attn, dynamicemb; print("imported", hstu_attn.__file__, dynamicemb.__file__)')
}

cd "$root"
# -P: do not put the current directory on sys.path; the source dir dynamicemb/ would shadow the wheel.
step doctor "$py" -P -m hstu_attn.doctor
step hidden_gpu env CUDA_VISIBLE_DEVICES= "$py" -P -c "$hidden_gpu_smoke"
step pip_install pip_install_check
# The same test files CI runs (the build tests need Bazel and are not run here), in two parts at once: the GPU tests
# (markers gpu / sm90 / gpus) in this process's turn, the CPU tests beside them in the background (the whole suite in
# one process took > 430 s on an H200 machine; the GPU serializes the GPU tests, the CPU tests need only CPUs).
# GPU_CHECK_TESTS=gpu / cpu / none runs one part or neither. Failures print their names and short tracebacks.
test_files="tests/hstu tests/dynamicemb tests/build/test_hash_op.py"
pt=("$py" -P -m pytest -q -p no:cacheprovider --import-mode=importlib -rfEs --tb=short)
parts="${GPU_CHECK_TESTS:-all}"
cpu_pid=
if [ "$parts" = all ] || [ "$parts" = cpu ]; then
  (t0=$(date +%s); "${pt[@]}" -m "not (gpu or sm90 or gpus)" $test_files ${PYTEST_ARGS:-} > "$out/tests_cpu.log" 2>&1
   echo "rc $? in $(( $(date +%s) - t0 )) s" >> "$out/tests_cpu.log") &
  cpu_pid=$!
fi
if [ "$parts" = all ] || [ "$parts" = gpu ]; then
  step tests_gpu "${pt[@]}" -m "gpu or sm90 or gpus" $test_files ${PYTEST_ARGS:-}
fi
if [ -n "$cpu_pid" ]; then
  wait "$cpu_pid"
  cpu_rc="$(sed -n 's/^rc \([0-9]*\) in .*/\1/p' "$out/tests_cpu.log" | tail -1)"
  grep -E "^(FAILED|ERROR)" "$out/tests_cpu.log" | head -20
  names+=("tests_cpu")
  cpu_s="$(sed -n 's/^rc [0-9]* in \([0-9]*\) s/\1/p' "$out/tests_cpu.log" | tail -1)"
  cpu_sum="$(grep -E '^=* ?[0-9]+ (passed|failed|error|skipped).* in [0-9.]+s' "$out/tests_cpu.log" | tail -1)"
  results+=("$( [ "${cpu_rc:-1}" = 0 ] && echo PASS || echo "FAIL(rc=${cpu_rc:-?})" ) | $cpu_s s | \
$(tr -d '=' <<<"$cpu_sum" | xargs)")
fi
if [ "${GPU_CHECK_BENCH:-1}" != 0 ]; then
  for b in benchmarks/*.py; do
    n="$(basename "$b" .py)"
    case "$n" in *_profile) continue ;; esac  # diagnostic profilers (no --quick table), run by hand
    step "bench_$n" "$py" -P "$b" --quick --results "$out/bench_$n.md"
  done
  # On a Hopper GPU the default forward is the sm90 kernel: also time the portable sm80-class kernels.
  if "$py" -P -c 'import sys, torch, hstu_attn; sys.exit(0 if torch.cuda.get_device_capability() == (9, 0) and any("_sm90_" in n for n in hstu_attn.compiled_kernels().get("instances", [])) else 1)' 2>/dev/null; then
    step bench_hstu_attention_sm80 "$py" -P benchmarks/hstu_attention.py --quick --kernels portable \
      --results "$out/bench_hstu_attention_sm80.md"
    if [ -n "${GPU_CHECK_PEER:-}" ]; then
      step bench_hstu_attention_peer env PYTHONPATH="$GPU_CHECK_PEER:$PYTHONPATH" "$py" -P \
        benchmarks/hstu_attention.py --quick --sweep dense --sweep jagged --no-ref --peer fbgemm \
        --results "$out/bench_hstu_attention_peer.md"
    fi
  fi
fi

echo
echo "## gpu_check on $("$py" -c 'import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")')"
echo
echo "| step | result | time | summary |"
echo "|---|---|---|---|"
for i in "${!names[@]}"; do echo "| ${names[$i]} | ${results[$i]} |"; done
for f in "$out"/bench_*.md; do [ -f "$f" ] && { echo; cat "$f"; }; done
# Exit status: 1 if any step failed, else 0 (not the last test above's).
for r in "${results[@]}"; do [[ "$r" == FAIL* ]] && exit 1; done
exit 0
