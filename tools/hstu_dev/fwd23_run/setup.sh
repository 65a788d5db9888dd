# fwd23 run scripts' setup, sourced by run.sh / run2.sh from the root of main's tree (main 95270e5 on the device):
# fwd21's setup (carried as fwd21_setup.sh, with carry_setup.sh: J = fwd21_bench.py, jagp, ncu_profile, run_tests,
# digest_verbose) with the baseline = fwd22's final wheel (carried in base/whl) in /tmp/site_fwd23base (main21's
# folder is not this run's baseline), the branch's wheel in /tmp/site_fwd23; digest_time.
NAME=fwd23 BASE=fwd23/base BASE_SITE=/tmp/site_fwd23base
source "$(dirname "${BASH_SOURCE[0]}")/fwd21_setup.sh"  # (carried by pack.sh)
digest_time() {
  echo "#### time (fwd22 = fwd22's final wheel, the base; fwd23 = the branch's; sm90=False; cfg n = fwd_sm80_cfg;"
  echo "#### peer = NVIDIA's Ampere HSTU (.carry/peer); FA2 = torch's flash SDPA)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture" $OUT/time.log | cut -c1-250
}
