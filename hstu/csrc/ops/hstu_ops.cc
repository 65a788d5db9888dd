// hstu_attn ops on the torch stable ABI: schema definitions, the CUDA implementations (validation, output
// allocation, launch on the caller's current stream), `compiled_kernels` for the doctor, and the device error
// record's two ops (`device_error_block`, `clear_device_error`; common/device_errors.cuh).
//
// The Python package registers the fake (meta) and CPU implementations of fwd/bwd (hstu/_ops.py).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include "common/stable_utils.h"
#include "hstu/csrc/common/hstu_launch.h"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/ops/hstu_plan.h"
#include "hstu/csrc/sm80/hstu_bwd_sm80_walk_split.h"
#include "hstu/csrc/common/hstu_validate.h"
#include "hstu/csrc/fp8/hstu_fp8_bwd_prepass.h"
#include "hstu/csrc/ops/hstu_op_params.h"
#include "hstu/csrc/paged/hstu_paged_step_plan.h"
#include "hstu/csrc/sm80/hstu_fwd_sm80_split.h"
#include "hstu/csrc/sm90/hstu_bwd_fp8_sm90.h"
#include "hstu/csrc/sm90/hstu_fp8_sm90.h"
#include "hstu/csrc/sm90/hstu_fwd_sm90_paged.h"
#include "hstu/csrc/sm90/hstu_sm90_launch.h"

namespace hstu {
namespace {

using torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;

using op_params::check_qkv;
using op_params::make_params;

// Dev builds (--define hstu_dev=1) hold the FP8 kernels' timing-only variants (wrong or stamped outputs by design).
#ifdef HSTU_DEV_VARIANTS
constexpr bool kDevBuild = true;
#else
constexpr bool kDevBuild = false;
#endif

cudaStream_t stream_of(const Tensor& q) {
  return static_cast<cudaStream_t>(accel::current_cuda_stream(static_cast<int32_t>(q.get_device())));
}

// f(std::integral_constant<int, D>{}) for the head dim among Ds (the last one also for any other value: the op has
// checked it), so that each launcher below names its instantiations once.
template <int D0, int... Ds, class F>
cudaError_t by_head_dim(int head_dim, F&& f) {
  if constexpr (sizeof...(Ds) == 0) {
    return f(std::integral_constant<int, D0>{});
  } else {
    return head_dim == D0 ? f(std::integral_constant<int, D0>{}) : by_head_dim<Ds...>(head_dim, f);
  }
}

template <typename T>
cudaError_t dispatch_fwd(const HstuParams& p, cudaStream_t s) {
  return by_head_dim<32, 64, 128, 256>(p.head_dim, [&](auto d) { return run_hstu_fwd<T, decltype(d)::value>(p, s); });
}

template <typename T>
cudaError_t dispatch_fwd_sm90(const HstuParams& p, int64_t total_k, cudaStream_t s) {
  return by_head_dim<64, 128, 256>(
      p.head_dim, [&](auto d) { return run_hstu_fwd_sm90<T, decltype(d)::value>(p, total_k, s); });
}

template <typename T>
cudaError_t dispatch_bwd_sm90(const HstuParams& p, int64_t total_k, cudaStream_t s) {
  return by_head_dim<64, 128, 256>(
      p.head_dim, [&](auto d) { return run_hstu_bwd_sm90<T, decltype(d)::value>(p, total_k, s); });
}

template <typename T>
cudaError_t dispatch_bwd(const HstuParams& p, cudaStream_t s) {
  return by_head_dim<32, 64, 128, 256>(p.head_dim, [&](auto d) { return run_hstu_bwd<T, decltype(d)::value>(p, s); });
}

// Tag of this package's device error block (common/device_errors.cuh).
struct HstuErrorTag {};

uint16_t nan_bits(const Tensor& t) { return t.scalar_type() == ScalarType::Half ? 0x7E00 : 0x7FC0; }

// The device error block for a kernel that records bad inputs on `s`: allocated by the Python channel before the
// first call, or here for a call that skipped it (a torch.compile'd graph), but never during a capture
// (cudaHostAlloc would invalidate it): then nullptr, and nothing is recorded.
accel::DeviceErrorBlock* error_block_for(cudaStream_t s) {
  accel::DeviceErrorBlock* b = accel::device_error_block_if_allocated<HstuErrorTag>();
  if (b == nullptr) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
    if (cudaStreamIsCapturing(s, &status) == cudaSuccess && status == cudaStreamCaptureStatusNone) {
      b = accel::device_error_block<HstuErrorTag>();
    }
  }
  return b;
}

// Allocates the call's scratch: `extra_bytes` for the caller first (offset 0, 256-aligned), then the validation's
// words (hstu_validate.h). Launches the validation on `s` (on a violation it fills `fill`, fill_numel 16-bit
// elements, with NaN) and points p's int32 vectors at the sanitized copies, so the kernels read only those.
// pdl (the paged Hopper forward under kOptPdl): the validation as a programmatic dependent launch (hstu_validate.h).
// validation_scratch: the same scratch and the validation's parameters in *v, p pointed at the copies, nothing
// launched (the caller launches a block that validates: hstu_paged_step_plan).
Tensor validation_scratch(HstuParams& p, const Tensor& q, int64_t total_k, int64_t extra_bytes, void* fill,
                          int64_t fill_numel, cudaStream_t s, bool pdl, HstuValidateParams* out) {
  const HstuScratchLayout l = hstu_scratch_layout(p.batch, p.seqused_q != nullptr, p.seqused_k != nullptr,
                                                  p.num_targets != nullptr, p.num_contexts != nullptr);
  const int64_t extra = (extra_bytes + 255) / 256 * 256;
  Tensor scratch = torch::stable::new_empty(q, {extra + 4 * l.words}, ScalarType::Byte);
  int32_t* w = reinterpret_cast<int32_t*>(static_cast<char*>(scratch.data_ptr()) + extra);
  HstuValidateParams v{};
  v.cu_seqlens_q = p.cu_seqlens_q;
  v.cu_seqlens_k = p.cu_seqlens_k;
  v.seqused_q = p.seqused_q;
  v.seqused_k = p.seqused_k;
  v.num_targets = p.num_targets;
  v.num_contexts = p.num_contexts;
  v.batch = p.batch;
  v.total_q = p.total_q;
  v.total_k = total_k;
  v.max_seqlen_q = p.max_seqlen_q;
  v.max_seqlen_k = p.max_seqlen_k;
  v.scratch = w;
  v.layout = l;
  v.fill = static_cast<uint16_t*>(fill);
  v.fill_numel = fill_numel;
  v.nan_bits = nan_bits(q);
  v.errors = error_block_for(s);
  v.device = static_cast<int>(q.get_device());
  v.pdl = pdl;
  *out = v;
  p.cu_seqlens_q = w + l.cu_q;
  p.cu_seqlens_k = w + l.cu_k;
  p.seqused_q = l.seqused_q >= 0 ? w + l.seqused_q : nullptr;
  p.seqused_k = l.seqused_k >= 0 ? w + l.seqused_k : nullptr;
  p.num_targets = l.num_targets >= 0 ? w + l.num_targets : nullptr;
  p.num_contexts = l.num_contexts >= 0 ? w + l.num_contexts : nullptr;
  return scratch;
}

Tensor validate_on_device(HstuParams& p, const Tensor& q, int64_t total_k, int64_t extra_bytes, void* fill,
                          int64_t fill_numel, cudaStream_t s, bool pdl = false) {
  HstuValidateParams v{};
  Tensor scratch = validation_scratch(p, q, total_k, extra_bytes, fill, fill_numel, s, pdl, &v);
  const cudaError_t err = hstu_validate(v, s);
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn: input validation kernel: CUDA error ", cudaGetErrorString(err));
  return scratch;
}

// Points p at the work list's workspace and the tile counter that `plan` asked for in front of `scratch`'s
// validation words (validate_on_device's extra bytes).
void use_fwd_plan(HstuParams& p, const FwdPlan& plan, const Tensor& scratch) {
  char* extra = static_cast<char*>(scratch.data_ptr());
  if (plan.sched_bytes > 0) {  // the jagged work list's workspace (docs/archive/hstu_sm90_log.md)
    p.fwd_sched = extra;
    p.fwd_sched_bytes = plan.sched_bytes;
  }
  if (plan.tile_counter) p.fwd_tile_counter = reinterpret_cast<int*>(extra + plan.sched_bytes);
}

// fp8_bwd_sm90's private A/B of its path outside the kernel (hstu/_fp8_bwd.py FP8_BWD_VARIANT_BITS "main_path", option
// bit 60; the op masks it off before call_params): the former path, the descale factors' check as a one-block launch
// of its own, the finishing pass's owner search per pair.
constexpr int64_t kOptFp8BwdMainPath = int64_t{1} << 60;

// make_params' HstuParams for a call of the *_with_options ops: `options` checked, decoded once into `o` (for the
// op's plan), its semantic flags and the kernels' option fields applied.
template <class... Args>
HstuParams call_params(int64_t options, HstuOptions& o, const Args&... args) {
  // (kOptFp8BwdMask: the FP8 backward's routing bit and its private kernel variants, hstu_bwd_fp8_sm90.h)
  constexpr int64_t kKnown = int64_t{kOptKnownMask} | kFlagKnownMask | kOptFp8FwdDiagMask | kOptFp8SiluMask |
                             kOptFp8FwdVarMask | kOptFp8BwdMask | kOptNoFwdSm80Qscale |
                             kOptFwdSm80SplitMain | kOptNoFwdSm80Ilv | kOptFwdSm80Bm64Mask |
                             kOptFwdSm80SplitPlain | kOptFwdSm80CfgHi | kOptNoBwdSm80Split | kOptFwdSm80RabEvict;
  ACCEL_CHECK((options & ~kKnown) == 0, "options: expected bits of ", kKnown, ", got ", options);
  HstuParams p = make_params(args...);
  o = HstuOptions::from_bits(options);
  p.mask_gr = (options & kFlagMaskGr) ? 1 : 0;
  p.fwd_split_tiles = o.fwd_split_tiles;
  // (cfg 15, kFwdSm80CfgDrabMain: the forward's default; the backward's drab zeroed by the op as main had it. cfg 12,
  // kFwdSm80CfgDrabLsu: the forward's default; the rab loops' drab zeros by 16-byte stores. cfg 13,
  // kFwdSm80CfgDqClaim: the forward's default; the sm80-class backward's dQ workspace by claims, the run below. cfg
  // 14, kFwdSm80CfgBwdSplit: the forward's default; the sm80-class backward's split of long key-block walks)
  const bool drab_main = o.fwd_sm80_cfg == kFwdSm80CfgDrabMain, drab_lsu = o.fwd_sm80_cfg == kFwdSm80CfgDrabLsu;
  const bool dq_claim = o.fwd_sm80_cfg == kFwdSm80CfgDqClaim, bwd_split = o.fwd_sm80_cfg == kFwdSm80CfgBwdSplit;
  p.fwd_sm80_cfg = fwd_sm80_cfg_word(drab_main || drab_lsu || dq_claim || bwd_split ? 0 : o.fwd_sm80_cfg,
                                     o.fwd_sm80_qscale, o.fwd_sm80_split_main, o.fwd_sm80_ilv,
                                     fwd_sm80_bm64_forced(o.fwd_sm80_bm64), o.fwd_sm80_split_plain,
                                     o.fwd_sm80_rab_evict) |
                   (drab_main ? kBwdSm80DrabZeroed : 0) | (drab_lsu ? kBwdSm80DrabLsu : 0) |
                   (dq_claim ? kBwdSm80DqClaim : 0) |
                   (bwd_split ? kBwdSm80SplitWalk : 0);  // (..._split.h, hstu_bwd_sm80_limits.h, ..._walk_split.h)
  return p;
}

Tensor fwd_with_options(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k,
                        int64_t max_seqlen_q, int64_t max_seqlen_k, std::optional<Tensor> num_contexts,
                        std::optional<Tensor> num_targets, int64_t target_group_size, int64_t window_left,
                        int64_t window_right, double alpha, std::optional<Tensor> rab, double scaling_seqlen,
                        std::optional<Tensor> seqused_q, std::optional<Tensor> seqused_k, int64_t options) {
  torch::stable::accelerator::DeviceGuard guard(q.get_device());
  HstuOptions o;
  HstuParams p = call_params(options, o, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             num_contexts, num_targets, target_group_size, window_left, window_right, alpha, rab,
                             scaling_seqlen, seqused_q, seqused_k);
  Tensor out = torch::stable::new_empty(q, {q.size(0), q.size(1), q.size(2)});
  p.out = out.data_ptr();
  p.o_row_stride = out.stride(0);
  p.o_head_stride = out.stride(1);
  const bool half = q.scalar_type() == ScalarType::Half;
  const FwdPlan plan = plan_fwd(p, k.size(0), q.get_device(), half, o);
  cudaStream_t s = stream_of(q);
  // The work list's workspace and the persistent kernel's tile counter (zeroed by the launcher) live in the call's
  // scratch, in front of the validation's words. Every kernel writes only rows inside the (sanitized) sequences:
  // after a violation (all empty) `out` keeps the validation's NaN.
  // The sm80-class forward's split (hstu_fwd_sm80_split.h, bf16): planned here once; its counters, work list and
  // partials there too, its chunk in p.fwd_split_tiles.
  FwdSm80Split split = plan.family == KernelFamily::kSm80 && !half ? fwd_sm80_split_for(p) : FwdSm80Split{};
  if (const int bm64 = fwd_sm80_bm64_rule(p, o.fwd_sm80_bm64, split)) {  // (the split in 64-row tiles: re-planned)
    p.fwd_sm80_cfg |= bm64 << kFwdSm80SplitBm64Shift;
    split = fwd_sm80_split_for(p);
  }
  Tensor scratch = validate_on_device(p, q, k.size(0), plan.sched_bytes + (plan.tile_counter ? 16 : 0) + split.bytes,
                                      p.out, q.size(0) * q.size(1) * q.size(2), s);
  use_fwd_plan(p, plan, scratch);
  if (split.bytes > 0) {
    p.fwd_sched = scratch.data_ptr();
    p.fwd_sched_bytes = split.bytes;
    p.fwd_split_tiles = split.exact ? split.chunk : -split.chunk;  // (negated: the least chunk, fwd_sm80_split_for)
  }
  cudaError_t err;
  if (plan.family == KernelFamily::kSm90) {
    err = half ? dispatch_fwd_sm90<__half>(p, k.size(0), s) : dispatch_fwd_sm90<__nv_bfloat16>(p, k.size(0), s);
  } else {
    err = half ? dispatch_fwd<__half>(p, s) : dispatch_fwd<__nv_bfloat16>(p, s);
  }
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::fwd: CUDA error ", cudaGetErrorString(err));
  return out;
}

Tensor fwd_cuda(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int64_t max_seqlen_q,
                int64_t max_seqlen_k, std::optional<Tensor> num_contexts, std::optional<Tensor> num_targets,
                int64_t target_group_size, int64_t window_left, int64_t window_right, double alpha,
                std::optional<Tensor> rab, double scaling_seqlen, std::optional<Tensor> seqused_q,
                std::optional<Tensor> seqused_k) {
  return fwd_with_options(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts,
                          num_targets, target_group_size, window_left, window_right, alpha, rab, scaling_seqlen,
                          seqused_q, seqused_k, 0);
}

// dk / dv of a backward op (bf16 or FP8 kernels): pointers and (row, head) strides into p.
void set_grads(HstuParams& p, const Tensor& dk, const Tensor& dv) {
  p.dk = dk.data_ptr();
  p.dv = dv.data_ptr();
  p.dk_row_stride = dk.stride(0);
  p.dk_head_stride = dk.stride(1);
  p.dv_row_stride = dv.stride(0);
  p.dv_head_stride = dv.stride(1);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> bwd_with_options(
    Tensor dout, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int64_t max_seqlen_q,
    int64_t max_seqlen_k, std::optional<Tensor> num_contexts, std::optional<Tensor> num_targets,
    int64_t target_group_size, int64_t window_left, int64_t window_right, double alpha, std::optional<Tensor> rab,
    double scaling_seqlen, std::optional<Tensor> seqused_q, std::optional<Tensor> seqused_k, bool has_drab,
    bool deterministic, int64_t options) {
  torch::stable::accelerator::DeviceGuard guard(q.get_device());
  HstuOptions o;
  HstuParams p = call_params(options, o, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             num_contexts, num_targets, target_group_size, window_left, window_right, alpha, rab,
                             scaling_seqlen, seqused_q, seqused_k);
  check_qkv(dout, "dout", q);
  ACCEL_CHECK(dout.size(0) == q.size(0), "dout: expected shape like q ", accel::shape_str(q), ", got ",
              accel::shape_str(dout));
  ACCEL_CHECK(!has_drab || rab.has_value(), "has_drab: needs rab");
  p.dout = dout.data_ptr();
  p.do_row_stride = dout.stride(0);
  p.do_head_stride = dout.stride(1);

  // deterministic: dq comes from a query-parallel kernel that writes every row of every sequence once (rows
  // outside cu_seqlens_q stay zero), instead of fp32 atomics into a workspace.
  Tensor dq = deterministic ? torch::stable::new_zeros(q, {q.size(0), q.size(1), q.size(2)})
                            : torch::stable::new_empty(q, {q.size(0), q.size(1), q.size(2)});
  Tensor dk = torch::stable::new_empty(k, {k.size(0), k.size(1), k.size(2)});
  Tensor dv = torch::stable::new_empty(v, {v.size(0), v.size(1), v.size(2)});
  const bool half = q.scalar_type() == ScalarType::Half;
  BwdPlan plan = plan_bwd(p, k.size(0), q.get_device(), half, deterministic, dq.stride(0), o);
  // The rules below (the dQ claims, the split) apply to the sm80-class family's default backward only: bf16, no
  // comparison cfg, warp pairs, rab, deterministic dQ or work list. split_rule: bwd_split_default says so.
  const int d = static_cast<int>(q.size(2)), sms = accel::current_device_sms();
  const bool plain_default = plan.family == KernelFamily::kSm80 && o.fwd_sm80_cfg == 0 && o.bwd_sm80_cfg == 0 &&
                             !o.bwd_sm80_pair && !half && !rab.has_value() && !deterministic && plan.sched_bytes == 0;
  const bool split_rule = plain_default && o.bwd_sm80_split &&
                          bwd_split_default(k.size(0), p.batch, p.heads, max_seqlen_q, max_seqlen_k, d, sms);
  // The dQ claims by default at D = 128 / 256 heads first (at most 2,048 keys, no contexts, not where the split runs):
  // the workspace's fill (10 % of a B256 S256 D256 backward, 4 % at B128 S1K D128) costs more than the claims' loop
  // adds (H200: -7.8 % at B256 S256 D256, tab44 session 41; D = 128 -1.1 to -2.3 % at B128 S1K / B64 S2K in four of
  // five runs, sessions 37-42). Batch first they stay opt-in (slower). fwd_sm80_cfg=15 runs the default with the
  // fill, for comparisons.
  if (plain_default && (d == 128 || d == 256) && !num_contexts.has_value() && max_seqlen_k <= 2048 && !split_rule) {
    p.fwd_sm80_cfg |= kBwdSm80DqClaim;
  }
  // kBwdSm80DqClaim (kernel_options(fwd_sm80_cfg=13)): the sm80-class family's fragment-ordered workspace at bf16
  // D = 128 / 256 uninitialized, its claim words behind it (the launcher zeroes them, or the whole workspace where
  // the claims' loop does not apply)
  if ((p.fwd_sm80_cfg & kBwdSm80DqClaim) != 0) {
    if (plan.family == KernelFamily::kSm80 && plan.dq_floats > 0 && (d == 128 || d == 256) && !half) {
      plan.zero_words = bwd_sm80_dq_claim_words(p.total_q, p.batch, p.heads);
    } else {
      p.fwd_sm80_cfg &= ~kBwdSm80DqClaim;
    }
  }
  ACCEL_CHECK(plan.family != KernelFamily::kSm80 || p.max_seqlen_k <= kBwdSm80MaxSeqlenK,
              "max_seqlen_k: expected at most ", kBwdSm80MaxSeqlenK,
              " for the sm80-class backward (65535 key blocks of 64 in gridDim.y), got ", p.max_seqlen_k);
  p.bwd_grid = plan.bwd_grid;
  p.bwd_sm80_pair = plan.bwd_sm80_pair;
  p.bwd_sm80_cfg = plan.bwd_sm80_cfg;
  // dq_accum: the fp32 dq workspace, zeroed unless the Hopper kernel zeroes it itself (its flags behind the floats)
  // or the D = 256 work list's planner does (the list's workspace in `sched`).
  std::optional<Tensor> dq_accum;
  if (plan.dq_floats > 0) {
    dq_accum = plan.zeroed_workspace()
                   ? torch::stable::new_zeros(q, {plan.dq_floats}, ScalarType::Float)
                   : torch::stable::new_empty(q, {plan.dq_floats + plan.zero_words}, ScalarType::Float);
    p.dq_accum = static_cast<float*>(dq_accum->data_ptr());
  }
  cudaStream_t s = stream_of(q);
  // The D = 256 work list's workspace lives in the call's scratch, in front of the validation's words.
  Tensor scratch = validate_on_device(p, q, k.size(0), plan.sched_bytes, nullptr, 0, s);
  if (plan.sched_bytes > 0) {
    p.bwd_sched = scratch.data_ptr();
    p.bwd_sched_bytes = plan.sched_bytes;
  }
  // The sm80-class backward's split (hstu_bwd_sm80_walk_split.h): where bwd_split_default says so (bf16, no rab, not
  // deterministic, sm_90-class devices, no comparison cfg; kernel_options(bwd_sm80_split=False): never), or wherever
  // it applies under kernel_options(fwd_sm80_cfg=14). Its work list, counters and dK / dV partials (uninitialized:
  // the list kernel writes what the backward reads).
  std::optional<Tensor> split_ws;
  const int split_bn = bwd_split_block_n(d);
  if (split_rule && device_sm90_class(q.get_device())) p.fwd_sm80_cfg |= kBwdSm80SplitWalk;
  if (plan.family == KernelFamily::kSm80 && (p.fwd_sm80_cfg & kBwdSm80SplitWalk) && p.bwd_sched == nullptr &&
      split_bn > 0) {
    const BwdSplitLayout l = bwd_split_layout(k.size(0), p.batch, p.heads, split_bn, d, sms);
    split_ws = torch::stable::new_empty(q, {l.bytes}, ScalarType::Byte);
    p.bwd_sched = split_ws->data_ptr();
    p.bwd_sched_bytes = l.bytes;
  }
  if (plan.zero_words > 0) {
    p.dq_zero_flags = reinterpret_cast<uint32_t*>(p.dq_accum + plan.dq_floats);
    p.dq_conv_behind = plan.dq_conv_behind;
  }
  p.dq = dq.data_ptr();
  p.dq_row_stride = dq.stride(0);
  p.dq_head_stride = dq.stride(1);
  set_grads(p, dk, dv);

  Tensor drab = torch::stable::new_empty(q, {0});
  std::optional<Tensor> drab_accum;
  if (has_drab) {
    const Tensor& r = *rab;
    // The sm80-class launcher writes every element of drab (hstu_bwd_sm80_limits.h kBwdSm80DrabZeroed: its rab
    // loops, else a memset; a shared rab's from the fp32 sums) unless the op zeroed it (kernel_options(fwd_sm80_cfg=
    // 15), for comparisons); the Hopper kernels store only their walk's dS.
    const bool zeroed = plan.family != KernelFamily::kSm80 || (p.fwd_sm80_cfg & kBwdSm80DrabZeroed) != 0;
    drab = zeroed ? torch::stable::new_zeros(r, {r.size(0), r.size(1), r.size(2), r.size(3)})
                  : torch::stable::new_empty(r, {r.size(0), r.size(1), r.size(2), r.size(3)});
    p.drab = drab.data_ptr();
    p.drab_batch_stride = drab.stride(0);
    p.drab_head_stride = r.size(1) == 1 ? 0 : drab.stride(1);
    p.drab_row_stride = drab.stride(2);
    p.drab_numel = r.size(0) * r.size(1) * r.size(2) * r.size(3);
    if (r.size(1) == 1 && q.size(1) > 1) {
      if (deterministic) {  // per-head fp32 slices summed over heads in order (no atomics)
        drab_accum = torch::stable::new_zeros(r, {r.size(0), q.size(1), r.size(2), r.size(3)}, ScalarType::Float);
        p.drab_heads = static_cast<float*>(drab_accum->data_ptr());
        p.drab_heads_batch_stride = drab_accum->stride(0);
        p.drab_heads_head_stride = drab_accum->stride(1);
      } else {
        drab_accum = torch::stable::new_zeros(r, {r.size(0), r.size(1), r.size(2), r.size(3)}, ScalarType::Float);
        p.drab_accum = static_cast<float*>(drab_accum->data_ptr());
      }
    }
  }
  cudaError_t err;
  if (plan.family == KernelFamily::kSm90) {
    err = half ? dispatch_bwd_sm90<__half>(p, k.size(0), s) : dispatch_bwd_sm90<__nv_bfloat16>(p, k.size(0), s);
  } else {
    err = half ? dispatch_bwd<__half>(p, s) : dispatch_bwd<__nv_bfloat16>(p, s);
  }
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::bwd: CUDA error ", cudaGetErrorString(err));
  // After a violation the kernels saw empty sequences, and some write zeros outside sequences (dq): NaN everywhere.
  HstuPoisonParams poison{};
  poison.status = reinterpret_cast<const int32_t*>(static_cast<char*>(scratch.data_ptr()) +
                                                   (plan.sched_bytes + 255) / 256 * 256);
  poison.ptr[0] = static_cast<uint16_t*>(p.dq);
  poison.numel[0] = q.size(0) * q.size(1) * q.size(2);
  poison.ptr[1] = static_cast<uint16_t*>(p.dk);
  poison.numel[1] = k.size(0) * k.size(1) * k.size(2);
  poison.ptr[2] = static_cast<uint16_t*>(p.dv);
  poison.numel[2] = v.size(0) * v.size(1) * v.size(2);
  poison.ptr[3] = has_drab ? static_cast<uint16_t*>(p.drab) : nullptr;
  poison.numel[3] = has_drab ? p.drab_numel : 0;
  poison.nan_bits = nan_bits(q);
  err = hstu_poison_outputs(poison, s);
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::bwd: CUDA error ", cudaGetErrorString(err));
  return std::make_tuple(dq, dk, dv, drab);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> bwd_cuda(
    Tensor dout, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int64_t max_seqlen_q,
    int64_t max_seqlen_k, std::optional<Tensor> num_contexts, std::optional<Tensor> num_targets,
    int64_t target_group_size, int64_t window_left, int64_t window_right, double alpha, std::optional<Tensor> rab,
    double scaling_seqlen, std::optional<Tensor> seqused_q, std::optional<Tensor> seqused_k, bool has_drab,
    bool deterministic) {
  return bwd_with_options(dout, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts,
                          num_targets, target_group_size, window_left, window_right, alpha, rab, scaling_seqlen,
                          seqused_q, seqused_k, has_drab, deterministic, 0);
}

// FP8 descale factors checked on the device (hstu_validate.h hstu_check_fp8_scales): copies, all NaN after a
// violation, which is recorded like the int32 vectors' (no host synchronization). hstu/_fp8.py checks shapes and
// dtypes first; CPU tensors are checked on the host there.
// The check's inputs, counts and error record (p.out: the caller's).
void scale_check_params(const Tensor& q_descale, const Tensor& k_descale, const Tensor& v_descale,
                        HstuScaleCheckParams& p) {
  const Tensor* in[3] = {&q_descale, &k_descale, &v_descale};
  const char* names[3] = {"q_descale", "k_descale", "v_descale"};
  for (int i = 0; i < 3; ++i) {
    accel::check_dtype(*in[i], names[i], ScalarType::Float);
    accel::check_same_device(*in[i], names[i], q_descale, "q_descale");
    accel::check_contiguous(*in[i], names[i]);
    p.in[i] = static_cast<const float*>(in[i]->data_ptr());
    p.n[i] = in[i]->numel();
  }
  p.errors = error_block_for(stream_of(q_descale));
  p.device = static_cast<int>(q_descale.get_device());
}

std::tuple<Tensor, Tensor, Tensor> fp8_check_scales(Tensor q_descale, Tensor k_descale, Tensor v_descale) {
  torch::stable::accelerator::DeviceGuard guard(q_descale.get_device());
  HstuScaleCheckParams p{};
  scale_check_params(q_descale, k_descale, v_descale, p);
  Tensor outs[3] = {torch::stable::empty_like(q_descale), torch::stable::empty_like(k_descale),
                    torch::stable::empty_like(v_descale)};
  for (int i = 0; i < 3; ++i) p.out[i] = static_cast<float*>(outs[i].data_ptr());
  const cudaError_t err = hstu_check_fp8_scales(p, stream_of(q_descale));
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::fp8_check_scales: CUDA error ", cudaGetErrorString(err));
  return std::make_tuple(outs[0], outs[1], outs[2]);
}

// The three descale factors of an FP8 op: float32, on q's device, contiguous, the mode's count (fp8_descale_shape);
// then the fields the FP8 kernels share (F: HstuFp8FwdParams or HstuFp8BwdParams; out_dtype checked by the caller).
template <class F>
void set_fp8_descales(F& f, const HstuParams& p, const Tensor& q, int64_t total_k, int64_t descale_mode,
                      int64_t out_dtype, const Tensor& q_descale, const Tensor& k_descale, const Tensor& v_descale) {
  ACCEL_CHECK(descale_mode >= kFp8Tensor && descale_mode <= kFp8Block, "descale_mode: expected 0..3, got ",
              descale_mode);
  const int64_t H = q.size(1), B = p.batch;
  const Tensor* sc[3] = {&q_descale, &k_descale, &v_descale};
  const char* names[3] = {"q_descale", "k_descale", "v_descale"};
  for (int i = 0; i < 3; ++i) {
    accel::check_dtype(*sc[i], names[i], ScalarType::Float);
    accel::check_same_device(*sc[i], names[i], q, "q");
    accel::check_contiguous(*sc[i], names[i]);
    const int64_t rows = i == 0 ? p.total_q : total_k;
    const int64_t want = descale_mode == kFp8Tensor ? 1 : descale_mode == kFp8Head ? H
                         : descale_mode == kFp8BatchHead ? B * H : H * (rows / 128 + B);
    ACCEL_CHECK(sc[i]->numel() == want, names[i], ": expected ", want, " factors for descale_mode ", descale_mode,
                ", got ", sc[i]->numel());
  }
  f.q_descale = static_cast<const float*>(q_descale.data_ptr());
  f.k_descale = static_cast<const float*>(k_descale.data_ptr());
  f.v_descale = static_cast<const float*>(v_descale.data_ptr());
  f.descale_mode = static_cast<int>(descale_mode);
  f.out_half = out_dtype == 1 ? 1 : 0;
  f.total_k = total_k;
}

// The Hopper FP8 forward (private: hstu/_fp8.py runs it for hstu_attn::fp8_fwd's CUDA path on sm_90 devices whose
// build holds the unit, without rab; fp8_fwd's schema). The descale factors come checked (fp8_check_scales'
// copies: all NaN after a violation, which the kernel turns into NaN outputs); int32 vectors are validated here.
Tensor fp8_fwd_sm90(Tensor q, Tensor k, Tensor v, Tensor q_descale, Tensor k_descale, Tensor v_descale,
                    int64_t descale_mode, int64_t out_dtype, Tensor cu_seqlens_q, Tensor cu_seqlens_k,
                    int64_t max_seqlen_q, int64_t max_seqlen_k, std::optional<Tensor> num_contexts,
                    std::optional<Tensor> num_targets, int64_t target_group_size, int64_t window_left,
                    int64_t window_right, double alpha, std::optional<Tensor> rab, double scaling_seqlen,
                    std::optional<Tensor> seqused_q, std::optional<Tensor> seqused_k, int64_t options) {
  torch::stable::accelerator::DeviceGuard guard(q.get_device());
  HstuOptions opts;
  HstuParams p = call_params(options, opts, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             num_contexts, num_targets, target_group_size, window_left, window_right, alpha, rab,
                             scaling_seqlen, seqused_q, seqused_k, /*fp8=*/true);
  ACCEL_CHECK(p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 256,
              "q: expected head dim 64, 128 or 256 for the FP8 kernel, got ", p.head_dim);
  ACCEL_CHECK(out_dtype == 0 || out_dtype == 1, "out_dtype: expected 0 (bfloat16) or 1 (float16), got ", out_dtype);
  const int64_t H = q.size(1), B = p.batch, total_k = k.size(0);
  HstuFp8FwdParams f{};
  set_fp8_descales(f, p, q, total_k, descale_mode, out_dtype, q_descale, k_descale, v_descale);
  Tensor out = torch::stable::new_empty(q, {q.size(0), q.size(1), q.size(2)},
                                        out_dtype == 1 ? ScalarType::Half : ScalarType::BFloat16);
  p.out = out.data_ptr();
  p.o_row_stride = out.stride(0);
  p.o_head_stride = out.stride(1);
  f.vt_cols = hstu_fp8_vt_cols(total_k, B);
  ACCEL_CHECK(p.total_q < (int64_t{1} << 31) && f.vt_cols < (int64_t{1} << 31),
              "q/k: expected fewer than 2^31 rows (and total_k + 48 B columns) for the FP8 kernel, got ", p.total_q,
              " and ", total_k);
  Tensor vt = torch::stable::new_empty(q, {H * p.head_dim * f.vt_cols}, ScalarType::Byte);
  f.vt = vt.data_ptr();
  ACCEL_CHECK(kDevBuild || (opts.fp8_fwd_diag == 0 && opts.fp8_fwd_var != 15),
              "kernel_options(fp8_fwd_diag=..., fp8_fwd_var=15): expected a dev build (--define hstu_dev=1) for the "
              "timing-only variants, got fp8_fwd_diag=", opts.fp8_fwd_diag, ", fp8_fwd_var=", opts.fp8_fwd_var);
  f.late_pack = opts.fp8_early_pack ? 0 : 1;
  f.bn192 = opts.fp8_bn192 ? 1 : 0;
  f.diag = opts.fp8_fwd_diag;
  f.silu = opts.fp8_silu;
  f.var = opts.fp8_fwd_var;
  cudaStream_t s = stream_of(q);
  // After an int32-vector violation the kernels see empty sequences and `out` keeps the validation's NaN. The work
  // list's workspace and the persistent CTAs' tile counter go in front of the validation's words (fwd_with_options).
  const FwdPlan plan = plan_fwd_fp8(p, total_k, opts);
  Tensor scratch = validate_on_device(p, q, total_k, plan.sched_bytes + (plan.tile_counter ? 16 : 0), p.out,
                                      q.size(0) * q.size(1) * q.size(2), s);
  use_fwd_plan(p, plan, scratch);
  const cudaError_t err = by_head_dim<64, 128, 256>(
      p.head_dim, [&](auto d) { return run_hstu_fwd_fp8_sm90<decltype(d)::value>(p, f, s); });
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::fp8_fwd_sm90: CUDA error ", cudaGetErrorString(err));
  return out;
}

// The FP8 backward's device pre-pass (private; hstu/_fp8.py `fp8_bwd_prepass`, CPU definition
// `fp8_bwd_prepass_reference`): dO quantized to e4m3 per (head, 128-row block) and the transposed e4m3 copies
// Q^T, dO^T, K^T the Hopper FP8 backward's GEMMs over rows read (hstu_fp8_bwd_prepass.h). Returns uint8 tensors
// (do8 (total_q, H, D), qt / dot (H, D, hstu_fp8_vt_cols(total_q, B)), kt (H, D, hstu_fp8_vt_cols(total_k, B)))
// and do_descale float32 (H, total_q / 128 + B). The int32 vectors must be valid (the forward validated them).
// Checks the pre-pass's inputs and fills every field of p but the five outputs.
void prepass_params(const Tensor& dout, const Tensor& q8, const Tensor& k8, const Tensor& cu_seqlens_q,
                    const Tensor& cu_seqlens_k, const std::optional<Tensor>& seqused_q,
                    const std::optional<Tensor>& seqused_k, HstuFp8BwdPrepassParams& p) {
  ACCEL_CHECK(dout.dim() == 3 && q8.dim() == 3 && k8.dim() == 3, "dout/q/k: expected (rows, H, D) tensors");
  ACCEL_CHECK(dout.scalar_type() == ScalarType::BFloat16 || dout.scalar_type() == ScalarType::Half,
              "dout: expected dtype bfloat16 or float16");
  accel::check_dtype(q8, "q", ScalarType::Float8_e4m3fn);
  accel::check_dtype(k8, "k", ScalarType::Float8_e4m3fn);
  accel::check_contiguous(dout, "dout");
  accel::check_contiguous(q8, "q");
  accel::check_contiguous(k8, "k");
  const int64_t total_q = dout.size(0), H = dout.size(1), D = dout.size(2), total_k = k8.size(0);
  ACCEL_CHECK(q8.size(0) == total_q && q8.size(1) == H && q8.size(2) == D && k8.size(1) == H && k8.size(2) == D,
              "q/k: expected the shape of dout (q) and its heads and head dim (k)");
  ACCEL_CHECK(D % 16 == 0 && D <= 256, "dout: expected a head dim that is a multiple of 16, at most 256, got ", D);
  for (const Tensor* t : {&q8, &k8, &cu_seqlens_q, &cu_seqlens_k}) {
    accel::check_same_device(*t, "q/k/cu_seqlens", dout, "dout");
  }
  accel::check_dtype(cu_seqlens_q, "cu_seqlens_q", ScalarType::Int);
  accel::check_dtype(cu_seqlens_k, "cu_seqlens_k", ScalarType::Int);
  accel::check_contiguous(cu_seqlens_q, "cu_seqlens_q");
  accel::check_contiguous(cu_seqlens_k, "cu_seqlens_k");
  const int64_t B = cu_seqlens_q.numel() - 1;
  ACCEL_CHECK(B >= 1 && cu_seqlens_k.numel() == B + 1, "cu_seqlens_q/k: expected B + 1 >= 2 offsets each");
  p.dout = dout.data_ptr();
  p.dout_half = dout.scalar_type() == ScalarType::Half ? 1 : 0;
  p.do_row_stride = dout.stride(0);
  p.do_head_stride = dout.stride(1);
  p.q8 = static_cast<const uint8_t*>(q8.data_ptr());
  p.q_row_stride = q8.stride(0);
  p.q_head_stride = q8.stride(1);
  p.k8 = static_cast<const uint8_t*>(k8.data_ptr());
  p.k_row_stride = k8.stride(0);
  p.k_head_stride = k8.stride(1);
  p.do_cols = total_q / 128 + B;
  p.q_cols = hstu_fp8_vt_cols(total_q, B);
  p.k_cols = hstu_fp8_vt_cols(total_k, B);
  p.cu_seqlens_q = static_cast<const int*>(cu_seqlens_q.data_ptr());
  p.cu_seqlens_k = static_cast<const int*>(cu_seqlens_k.data_ptr());
  for (const std::optional<Tensor>* u : {&seqused_q, &seqused_k}) {
    if (u->has_value()) {
      accel::check_dtype(**u, "seqused", ScalarType::Int);
      accel::check_same_device(**u, "seqused", dout, "dout");
      accel::check_contiguous(**u, "seqused");
      ACCEL_CHECK((*u)->numel() == B, "seqused_q/k: expected B = ", B, " entries, got ", (*u)->numel());
    }
  }
  p.seqused_q = seqused_q.has_value() ? static_cast<const int*>(seqused_q->data_ptr()) : nullptr;
  p.seqused_k = seqused_k.has_value() ? static_cast<const int*>(seqused_k->data_ptr()) : nullptr;
  p.batch = static_cast<int>(B);
  p.heads = static_cast<int>(H);
  p.head_dim = static_cast<int>(D);
  p.total_q = total_q;
  p.total_k = total_k;
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> fp8_bwd_prepass(Tensor dout, Tensor q8, Tensor k8,
                                                                   Tensor cu_seqlens_q, Tensor cu_seqlens_k,
                                                                   std::optional<Tensor> seqused_q,
                                                                   std::optional<Tensor> seqused_k) {
  torch::stable::accelerator::DeviceGuard guard(dout.get_device());
  HstuFp8BwdPrepassParams p{};
  prepass_params(dout, q8, k8, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, p);
  const int64_t H = p.heads, D = p.head_dim;
  Tensor do8 = torch::stable::new_empty(dout, {p.total_q, H, D}, ScalarType::Byte);
  Tensor do_descale = torch::stable::new_empty(dout, {H, p.do_cols}, ScalarType::Float);
  Tensor qt = torch::stable::new_empty(dout, {H, D, p.q_cols}, ScalarType::Byte);
  Tensor dot = torch::stable::new_empty(dout, {H, D, p.q_cols}, ScalarType::Byte);
  Tensor kt = torch::stable::new_empty(dout, {H, D, p.k_cols}, ScalarType::Byte);
  p.do8 = static_cast<uint8_t*>(do8.data_ptr());
  p.do_descale = static_cast<float*>(do_descale.data_ptr());
  p.qt = static_cast<uint8_t*>(qt.data_ptr());
  p.dot = static_cast<uint8_t*>(dot.data_ptr());
  p.kt = static_cast<uint8_t*>(kt.data_ptr());
  const cudaError_t err = hstu_fp8_bwd_prepass(p, stream_of(dout));
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::fp8_bwd_prepass: CUDA error ", cudaGetErrorString(err));
  return std::make_tuple(do8, do_descale, qt, dot, kt);
}


// The Hopper FP8 backward (private: hstu/_fp8_bwd.py runs it where it applies: sm_90 devices whose build holds the
// unit, D = 64, 128 or 256, no rab), the whole path in one op (one host call: the host time between launches shows in short
// calls): the pre-pass (fp8_bwd_prepass), the descale factors' check (fp8_check_scales), the int32 vectors'
// validation (after a violation the kernel sees empty sequences and the gradients are 0), the kernel, then one pass
// rounding dq_accum to dq and zeroing the dk / dv rows outside every sequence (the kernel writes all others: no
// fills). Returns (dq, dk, dv) in out_dtype.
std::tuple<Tensor, Tensor, Tensor> fp8_bwd_sm90(
    Tensor dout, Tensor q, Tensor k, Tensor v, Tensor q_descale, Tensor k_descale, Tensor v_descale,
    int64_t descale_mode, int64_t out_dtype, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int64_t max_seqlen_q,
    int64_t max_seqlen_k, std::optional<Tensor> num_contexts, std::optional<Tensor> num_targets,
    int64_t target_group_size, int64_t window_left, int64_t window_right, double alpha, std::optional<Tensor> rab,
    double scaling_seqlen, std::optional<Tensor> seqused_q, std::optional<Tensor> seqused_k, int64_t options,
    int64_t diag) {
  torch::stable::accelerator::DeviceGuard guard(q.get_device());
  const bool diag_int = diag >= INT_MIN && diag <= INT_MAX;
  // the kernel variant (Fp8BwdDiagBuilt): the private diag, else the option bits' (fp8_bwd_option_diag)
  const int variant = !diag_int ? 0 : diag != 0 ? static_cast<int>(diag) : fp8_bwd_option_diag(options);
  ACCEL_CHECK(q.dim() == 3 && fp8_bwd_head_dim_built(q.size(2)),
              "q: expected head dim 64, 128 or 256 for the FP8 backward kernel, got ", accel::shape_str(q));
  ACCEL_CHECK(diag_int && fp8_bwd_diag_built(variant, static_cast<int>(q.size(2))),
              "diag: expected 0 or a built variant (Fp8BwdDiagBuilt in hstu_bwd_fp8_sm90.h; other head dims than 128: "
              "Fp8BwdDiagProduct), got ", diag, " with options ", options);
  const bool dq_tiled = ((variant ^ kFp8BwdDefault) & kFp8BwdDqRedV4) != 0;  // (the kernel's features: diag ^ default)
  const bool dq_bf16 = dq_tiled && ((variant ^ kFp8BwdDefault) & kFp8BwdDqBf16) != 0;  // (its workspace in bf16)
  ACCEL_CHECK(out_dtype == 0 || out_dtype == 1, "out_dtype: expected 0 (bfloat16) or 1 (float16), got ", out_dtype);
  HstuFp8BwdPrepassParams pre{};
  prepass_params(dout, q, k, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, pre);
  HstuScaleCheckParams chk{};
  scale_check_params(q_descale, k_descale, v_descale, chk);
  const bool main_path = (options & kOptFp8BwdMainPath) != 0;
  const int64_t H = q.size(1), B = pre.batch, total_k = k.size(0), D = pre.head_dim;
  // One workspace for what the call keeps internal (each allocation costs host time that short calls pay as GPU idle
  // time): dq_accum (fp32, or bf16 with kFp8BwdDqBf16; zeroed by the pre-pass), the pre-pass's outputs, the checked
  // descale copies; 256-byte aligned regions.
  int64_t bytes = 0;
  auto region = [&](int64_t n) {
    const int64_t at = bytes;
    bytes += (n + 255) / 256 * 256;
    return at;
  };
  const int64_t dq_floats = dq_tiled ? hstu_fp8_bwd_dq_tiled_floats(pre.total_q, B, H, D) : pre.total_q * H * D;
  const int64_t o_dq = region(4 * dq_floats), o_do8 = region(pre.total_q * H * D);
  const int64_t o_dos = region(4 * H * pre.do_cols), o_qt = region(H * D * pre.q_cols);
  const int64_t o_dot = region(H * D * pre.q_cols), o_kt = region(H * D * pre.k_cols);
  int64_t o_sc[3];
  for (int i = 0; i < 3; ++i) o_sc[i] = region(4 * chk.n[i]);
  Tensor ws = torch::stable::new_empty(q, {bytes}, ScalarType::Byte);
  uint8_t* w = static_cast<uint8_t*>(ws.data_ptr());
  pre.do8 = w + o_do8;
  pre.do_descale = reinterpret_cast<float*>(w + o_dos);
  pre.qt = w + o_qt;
  pre.dot = w + o_dot;
  pre.kt = w + o_kt;
  for (int i = 0; i < 3; ++i) chk.out[i] = reinterpret_cast<float*>(w + o_sc[i]);
  pre.dq_zero = reinterpret_cast<float*>(w + o_dq);  // zeroed by the pre-pass's quantization blocks (no fill)
  pre.dq_tiled = dq_tiled ? 1 : 0;
  pre.dq_bf16 = dq_bf16 ? 1 : 0;
  cudaStream_t s = stream_of(q);
  // Launch order: the pre-pass first, right after the one allocation it writes (the host's prelude below runs while
  // it does; it reads the raw int32 vectors clamped and bounds every access by the tensors' extents, so it needs no
  // validation's verdict), with the descale factors' check in its first block (a one-block launch would have the GPU
  // to itself; a launch of its own where the claim word is not known yet, e.g. a first call under a graph capture,
  // or with kOptFp8BwdMainPath), then the validation, the kernel and the finishing pass (plain launches: programmatic
  // dependent ones measured no faster, docs/hstu_kernel_notes.md).
  pre.check = chk;
  pre.check_claim = main_path ? nullptr : hstu_error_claim_word(s);
  cudaError_t err = hstu_fp8_bwd_prepass(pre, s);
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::fp8_bwd_sm90: pre-pass: CUDA error ", cudaGetErrorString(err));
  HstuOptions o;
  HstuParams p = call_params(options & ~kOptFp8BwdMainPath, o, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                             max_seqlen_k, num_contexts, num_targets, target_group_size, window_left, window_right,
                             alpha, rab, scaling_seqlen, seqused_q, seqused_k, /*fp8=*/true);
  HstuFp8BwdParams f{};
  set_fp8_descales(f, p, q, total_k, descale_mode, out_dtype, q_descale, k_descale, v_descale);
  f.q_cols = pre.q_cols;
  f.k_cols = pre.k_cols;
  ACCEL_CHECK(f.q_cols < (int64_t{1} << 31) && f.k_cols < (int64_t{1} << 31),
              "q/k: expected fewer than 2^31 rows (and rows + 48 B columns) for the FP8 backward");
  if (pre.check_claim == nullptr) {
    err = hstu_check_fp8_scales(chk, s);
    ACCEL_CHECK(err == cudaSuccess, "hstu_attn::fp8_bwd_sm90: scale check: CUDA error ", cudaGetErrorString(err));
  }
  f.q_descale = chk.out[0];
  f.k_descale = chk.out[1];
  f.v_descale = chk.out[2];
  const ScalarType odt = out_dtype == 1 ? ScalarType::Half : ScalarType::BFloat16;
  Tensor dq = torch::stable::new_empty(q, {p.total_q, H, D}, odt);
  Tensor dk = torch::stable::new_empty(q, {total_k, H, D}, odt);
  Tensor dv = torch::stable::new_empty(q, {total_k, H, D}, odt);
  set_grads(p, dk, dv);
  f.do8 = pre.do8;
  f.do_descale = pre.do_descale;
  f.qt = pre.qt;
  f.dot = pre.dot;
  f.kt = pre.kt;
  f.dq_accum = reinterpret_cast<float*>(w + o_dq);
  f.diag = variant;
  const int nblk_k = static_cast<int>((p.max_seqlen_k + 127) / 128);
  f.lpt_pairs = hstu_fp8_bwd_lpt_pairs(nblk_k, kFp8BwdLptGroupCtas);
  Tensor scratch = validate_on_device(p, q, total_k, 0, nullptr, 0, s);
  err = D == 64    ? run_hstu_bwd_fp8_sm90<64>(p, f, s)
        : D == 128 ? run_hstu_bwd_fp8_sm90<128>(p, f, s)
                   : run_hstu_bwd_fp8_sm90<256>(p, f, s);
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::fp8_bwd_sm90: CUDA error ", cudaGetErrorString(err));
  HstuFp8BwdFinishParams fin{};
  fin.dq_accum = f.dq_accum;
  fin.dq = dq.data_ptr();
  fin.dk = dk.data_ptr();
  fin.dv = dv.data_ptr();
  fin.cu_seqlens_k = p.cu_seqlens_k;  // (the validated copies)
  fin.cu_seqlens_q = p.cu_seqlens_q;
  fin.dq_tiled = dq_tiled ? 1 : 0;
  fin.dq_bf16 = dq_bf16 ? 1 : 0;
  fin.batch = static_cast<int>(B);
  fin.heads = static_cast<int>(H);
  fin.head_dim = static_cast<int>(D);
  fin.out_half = static_cast<int>(out_dtype);
  fin.total_q = p.total_q;
  fin.total_k = total_k;
  fin.main_path = main_path ? 1 : 0;
  err = hstu_fp8_bwd_finish(fin, s);
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::fp8_bwd_sm90: CUDA error ", cudaGetErrorString(err));
  return std::make_tuple(dq, dk, dv);
}

// Bytes of a paged forward's plan (paged_fwd_sm90_plan): the work list's workspace (256-aligned), then the
// validation's words (hstu_validate.h: the status word, the sanitized vectors).
int64_t paged_plan_bytes(const HstuParams& p, int64_t sched_bytes) {
  const HstuScratchLayout l = hstu_scratch_layout(p.batch, false, false, p.num_targets != nullptr,
                                                  p.num_contexts != nullptr);
  return (sched_bytes + 255) / 256 * 256 + 4 * l.words;
}

// Points p's int32 vectors at a plan's validated copies (the layout validate_on_device wrote); returns its status
// word.
const int32_t* use_plan_vectors(HstuParams& p, const Tensor& plan, int64_t sched_bytes) {
  const HstuScratchLayout l = hstu_scratch_layout(p.batch, false, false, p.num_targets != nullptr,
                                                  p.num_contexts != nullptr);
  int32_t* w = reinterpret_cast<int32_t*>(static_cast<char*>(plan.data_ptr()) + (sched_bytes + 255) / 256 * 256);
  p.cu_seqlens_q = w + l.cu_q;
  p.cu_seqlens_k = w + l.cu_k;
  p.num_targets = l.num_targets >= 0 ? w + l.num_targets : nullptr;
  p.num_contexts = l.num_contexts >= 0 ? w + l.num_contexts : nullptr;
  return w;
}

// One plan for every paged forward of an inference step (every layer: the same lengths, page table and masks):
// the device validation of the int32 vectors and the Hopper work list, in one uint8 tensor that paged_fwd_sm90
// takes as `plan` (its other arguments the same as here, by contract: hstu/_paged.py keys its plans on them).
// After a violation the record goes to the device error block here and every forward over the plan fills its
// output with NaN.
Tensor paged_fwd_sm90_plan(Tensor q, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int64_t total_k, int64_t max_seqlen_q,
                           int64_t max_seqlen_k, std::optional<Tensor> num_contexts, std::optional<Tensor> num_targets,
                           int64_t target_group_size, int64_t window_left, int64_t window_right, int64_t options) {
  torch::stable::accelerator::DeviceGuard guard(q.get_device());
  const bool ready_word = (options & kOptPlanReadyWord) != 0;  // (hstu/_paged.py's own bits)
  options &= ~kOptPlanReadyWord;
  HstuOptions o;
  HstuParams p = call_params(options, o, q, q, q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts,
                             num_targets, target_group_size, window_left, window_right, 1.0, std::nullopt, 1.0,
                             std::nullopt, std::nullopt);
  ACCEL_CHECK(total_k >= 1, "total_k: expected >= 1, got ", total_k);
  const bool half = q.scalar_type() == ScalarType::Half;
  const FwdPlan fwd_plan = plan_fwd(p, q.size(0), q.get_device(), half, o);
  PagedPlanSm90Fn* slot = paged_plan_sm90_slot(half, p.head_dim);
  ACCEL_CHECK(fwd_plan.family == KernelFamily::kSm90 && slot != nullptr && *slot != nullptr,
              "hstu_attn::paged_fwd_sm90_plan: expected a compute capability 9.0 device and a build with the Hopper "
              "forward of this dtype and head dim ", p.head_dim);
  cudaStream_t s = stream_of(q);
  // (a Hopper device here) kOptPdl, the serving step's plan: one block that validates and plans, launched
  // programmatically behind begin_step (hstu_paged_step_plan.h), where it applies; else the validation (under
  // kOptPdl also behind begin_step) and the planner.
  const bool pdl = (options & kOptPdl) != 0;
  HstuValidateParams v{};
  HstuParams inputs = p;  // (the one block plans from the inputs; validation_scratch points p at the copies)
  Tensor scratch = validation_scratch(p, q, total_k, fwd_plan.sched_bytes, nullptr, 0, s, pdl, &v);
  if (fwd_plan.sched_bytes > 0) {
    p.fwd_sched = inputs.fwd_sched = scratch.data_ptr();
    p.fwd_sched_bytes = inputs.fwd_sched_bytes = fwd_plan.sched_bytes;
  }
  // (kOptPlanReadyWord: the ready word follows cu_seqlens_k's B + 1 int32, begin_step's output; _paged.py checks
  // its storage)
  const int32_t* ready =
      ready_word ? static_cast<const int32_t*>(cu_seqlens_k.data_ptr()) + cu_seqlens_k.numel() : nullptr;
  cudaError_t err = pdl && fwd_plan.sched_bytes > 0 ? hstu_paged_step_plan(v, inputs, s, ready)
                                                    : cudaErrorNotSupported;
  if (err != cudaErrorNotSupported) {
    ACCEL_CHECK(err == cudaSuccess, "hstu_attn::paged_fwd_sm90_plan: CUDA error ", cudaGetErrorString(err));
    return scratch;
  }
  err = hstu_validate(v, s);
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn: input validation kernel: CUDA error ", cudaGetErrorString(err));
  if (fwd_plan.sched_bytes > 0) {
    err = (*slot)(p, s);
    ACCEL_CHECK(err == cudaSuccess, "hstu_attn::paged_fwd_sm90_plan: CUDA error ", cudaGetErrorString(err));
  }
  return scratch;
}

// The phase stamps of the paged forward's CTAs (kernel_options(fwd_trace=True), diagnostics): one buffer of
// kFwdTraceCtas x kFwdTraceSlots words per device, allocated on first use and zeroed before each traced launch.
unsigned long long* paged_trace_buffer(int device) {
  static unsigned long long* bufs[64] = {};
  ACCEL_CHECK(device >= 0 && device < 64, "device: expected 0 to 63, got ", device);
  if (bufs[device] == nullptr) {
    void* ptr = nullptr;
    const cudaError_t err = cudaMalloc(&ptr, sizeof(unsigned long long) * kFwdTraceCtas * kFwdTraceSlots);
    ACCEL_CHECK(err == cudaSuccess, "hstu_attn::paged_fwd_trace: CUDA error ", cudaGetErrorString(err));
    bufs[device] = static_cast<unsigned long long*>(ptr);
  }
  return bufs[device];
}

// A copy of that buffer, (kFwdTraceCtas, kFwdTraceSlots) int64 on q's device (stream-ordered after the launches).
Tensor paged_fwd_trace(Tensor q) {
  torch::stable::accelerator::DeviceGuard guard(q.get_device());
  Tensor out = torch::stable::new_empty(q, {kFwdTraceCtas, kFwdTraceSlots}, ScalarType::Long);
  const cudaError_t err = cudaMemcpyAsync(out.data_ptr(), paged_trace_buffer(q.get_device()),
                                          sizeof(unsigned long long) * kFwdTraceCtas * kFwdTraceSlots,
                                          cudaMemcpyDeviceToDevice, stream_of(q));
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::paged_fwd_trace: CUDA error ", cudaGetErrorString(err));
  return out;
}

// The Hopper forward over a paged KV cache (hstu/_paged.py; hstu_fwd_sm90_paged.h): q, k_new, v_new the step's new
// tokens (total_q rows), cu_seqlens_k the cached + new lengths (the layout's), total_k their bound (the gather buffer's
// capacity: what the validation checks cu_seqlens_k against). The page table's values are clamped by the kernel;
// the Python side flags them. Only where the Hopper forward applies (paged_fwd_sm90_available); no rab here.
Tensor paged_fwd_sm90(Tensor q, Tensor k_new, Tensor v_new, Tensor cu_seqlens_q, Tensor cu_seqlens_k, Tensor kv_cache,
                      Tensor page_offsets, Tensor page_ids, Tensor cached_lens, int64_t total_k, int64_t max_seqlen_q,
                      int64_t max_seqlen_k, std::optional<Tensor> num_contexts, std::optional<Tensor> num_targets,
                      int64_t target_group_size, int64_t window_left, int64_t window_right, double alpha,
                      double scaling_seqlen, int64_t options, std::optional<Tensor> plan) {
  torch::stable::accelerator::DeviceGuard guard(q.get_device());
  const bool split_arrive = (options & kOptPagedSplitArrive) != 0;  // (hstu/_paged.py's own bit)
  // hstu/_paged.py's bit for a serving step's layers after the first under pdl (Sm90PagedKV::pdl = 2): the work
  // item and the lengths read before the wait.
  constexpr int64_t kOptPagedPreWait = int64_t{1} << 44;
  const int pre_wait = (options & kOptPagedPreWait) != 0 ? 2 : 1;
  options &= ~(kOptPagedSplitArrive | kOptPagedPreWait);
  HstuOptions o;
  HstuParams p = call_params(options, o, q, k_new, v_new, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             num_contexts, num_targets, target_group_size, window_left, window_right, alpha,
                             std::nullopt, scaling_seqlen, std::nullopt, std::nullopt);
  ACCEL_CHECK(k_new.size(0) == q.size(0), "k_new: expected ", q.size(0), " rows like q, got ", k_new.size(0));
  ACCEL_CHECK(total_k >= 1, "total_k: expected >= 1, got ", total_k);
  accel::check_same_device(kv_cache, "kv_cache", q, "q");
  ACCEL_CHECK(kv_cache.scalar_type() == q.scalar_type(), "kv_cache: expected the dtype of q, got ",
              accel::dtype_name(kv_cache.scalar_type()));
  accel::check_dim(kv_cache, "kv_cache", 5);
  accel::check_contiguous(kv_cache, "kv_cache");
  const int64_t ps = kv_cache.size(2);
  ACCEL_CHECK(kv_cache.size(0) >= 1 && kv_cache.size(1) == 2 && ps >= 1 && (ps & (ps - 1)) == 0 && ps <= 65536 &&
                  kv_cache.size(3) == q.size(1) && kv_cache.size(4) == q.size(2),
              "kv_cache: expected (num_pages >= 1, 2, page_size (a power of 2), ", q.size(1), ", ", q.size(2),
              "), got ", accel::shape_str(kv_cache));
  ACCEL_CHECK(reinterpret_cast<uintptr_t>(kv_cache.data_ptr()) % 16 == 0, "kv_cache: expected a 16-byte aligned "
              "data pointer");
  const int64_t batch = cu_seqlens_q.size(0) - 1;
  for (const auto& [t, name, n] : {std::make_tuple(&page_offsets, "page_offsets", batch + 1),
                                   std::make_tuple(&page_ids, "page_ids", int64_t{-1}),
                                   std::make_tuple(&cached_lens, "cached_lens", batch)}) {
    accel::check_same_device(*t, name, q, "q");
    accel::check_dtype(*t, name, ScalarType::Int);
    accel::check_dim(*t, name, 1);
    accel::check_contiguous(*t, name);
    ACCEL_CHECK(n < 0 || t->size(0) == n, name, ": expected ", n, " entries, got ", t->size(0));
  }
  ACCEL_CHECK(page_ids.size(0) >= 1 && page_ids.size(0) < (int64_t{1} << 31) && kv_cache.size(0) < (int64_t{1} << 31),
              "page_ids: expected 1 to 2^31 - 1 entries (and fewer than 2^31 pages), got ", page_ids.size(0));
  Tensor out = torch::stable::new_empty(q, {q.size(0), q.size(1), q.size(2)});
  p.out = out.data_ptr();
  p.o_row_stride = out.stride(0);
  p.o_head_stride = out.stride(1);
  const bool half = q.scalar_type() == ScalarType::Half;
  const int64_t plan_k = q.size(0);  // the launcher's total_k (run_paged_fwd): the plan must see the same
  const FwdPlan fwd_plan = plan_fwd(p, plan_k, q.get_device(), half, o);
  PagedFwdSm90Fn* slot = paged_fwd_sm90_slot(half, p.head_dim);
  ACCEL_CHECK(fwd_plan.family == KernelFamily::kSm90 && slot != nullptr && *slot != nullptr,
              "hstu_attn::paged_fwd_sm90: expected a compute capability 9.0 device and a build with the Hopper "
              "forward of this dtype and head dim ", p.head_dim, " (hstu_attn_paged_func gathers otherwise)");
  cudaStream_t s = stream_of(q);
  Sm90PagedKV pk;
  if (plan.has_value()) {  // paged_fwd_sm90_plan's: validated vectors and work list (same arguments, by contract)
    accel::check_same_device(*plan, "plan", q, "q");
    accel::check_dtype(*plan, "plan", ScalarType::Byte);
    accel::check_dim(*plan, "plan", 1);
    const int64_t want = paged_plan_bytes(p, fwd_plan.sched_bytes);
    ACCEL_CHECK(plan->size(0) == want, "plan: expected the ", want, "-byte plan of these lengths and masks ",
                "(hstu_attn::paged_fwd_sm90_plan), got ", plan->size(0), " bytes");
    pk.status = use_plan_vectors(p, *plan, fwd_plan.sched_bytes);
    pk.planned = 1;
  }
  Tensor scratch = plan.has_value() ? *plan
                                    : validate_on_device(p, q, total_k, fwd_plan.sched_bytes, p.out,
                                                         q.size(0) * q.size(1) * q.size(2), s,
                                                         (options & kOptPdl) != 0);
  if (fwd_plan.sched_bytes > 0) {
    p.fwd_sched = scratch.data_ptr();
    p.fwd_sched_bytes = fwd_plan.sched_bytes;
  }
  pk.pool = kv_cache.data_ptr();
  pk.page_offsets = static_cast<const int32_t*>(page_offsets.data_ptr());
  pk.page_ids = static_cast<const int32_t*>(page_ids.data_ptr());
  pk.cached_lens = static_cast<const int32_t*>(cached_lens.data_ptr());
  pk.n_entries = static_cast<int>(page_ids.size(0));
  pk.num_pages = static_cast<int>(kv_cache.size(0));
  while ((int64_t{1} << pk.page_shift) < ps) ++pk.page_shift;
  pk.pdl = o.pdl ? pre_wait : 0;
  pk.split_arrive = split_arrive ? 1 : 0;
  if (o.fwd_trace) {
    pk.trace = paged_trace_buffer(q.get_device());
    const cudaError_t e0 =
        cudaMemsetAsync(pk.trace, 0, sizeof(unsigned long long) * kFwdTraceCtas * kFwdTraceSlots, s);
    ACCEL_CHECK(e0 == cudaSuccess, "hstu_attn::paged_fwd_sm90: CUDA error ", cudaGetErrorString(e0));
  }
  const cudaError_t err = (*slot)(p, pk, s);
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::paged_fwd_sm90: CUDA error ", cudaGetErrorString(err));
  return out;
}

// 1 if paged_fwd_sm90 runs for this device, dtype (fp16 else bf16) and head dim (a build with its unit), else 0.
int64_t paged_fwd_sm90_available(int64_t device, bool half, int64_t head_dim) {
  PagedFwdSm90Fn* slot = paged_fwd_sm90_slot(half, static_cast<int>(head_dim));
  return slot != nullptr && *slot != nullptr && device_is_sm90(static_cast<int>(device)) &&
         sm90_unit_compiled(/*fwd=*/true, half, static_cast<int>(head_dim));
}

// The address of the package's pinned device error block (allocated here, once), or 0 without a usable CUDA device.
int64_t device_error_block() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(accel::device_error_block<HstuErrorTag>()));
}

// Resets the claim word of `device` on its current stream, after the host read and cleared its record. Nothing to
// do while the block was never allocated (no CUDA, or nothing can have been recorded).
void clear_device_error(int64_t device) {
  if (accel::device_error_block_if_allocated<HstuErrorTag>() == nullptr) return;
  ACCEL_CHECK(device >= 0 && device < accel::kMaxErrorDevices, "device: expected a CUDA device index, got ", device);
  torch::stable::accelerator::DeviceGuard guard(static_cast<int32_t>(device));
  const cudaError_t err =
      hstu_clear_device_error_claim(static_cast<cudaStream_t>(accel::current_cuda_stream(static_cast<int32_t>(device))));
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::clear_device_error: CUDA error ", cudaGetErrorString(err));
}

// {"instances": [names], "archs": archs of the sm80-class units, "instance_archs": {name: archs}, "dev": a dev
// build (the timing-only variants built)}; the Hopper units (name contains "_sm90_") register only in builds that
// target sm_90a.
std::string compiled_kernels() {
  std::ostringstream names, per;
  std::string archs = "unknown";
  bool first = true;
  for (const InstanceRecord& r : compiled_instances()) {
    names << (first ? "" : ", ") << "\"" << r.name << "\"";
    per << (first ? "" : ", ") << "\"" << r.name << "\": \"" << r.archs << "\"";
    first = false;
    if (r.name.find("_sm90_") == std::string::npos) archs = r.archs;
  }
  std::ostringstream os;
  os << "{\"instances\": [" << names.str() << "], \"archs\": \"" << archs << "\", \"instance_archs\": {"
     << per.str() << "}, \"dev\": " << (kDevBuild ? "true" : "false") << "}";
  return os.str();
}

}  // namespace
}  // namespace hstu

STABLE_TORCH_LIBRARY(hstu_attn, m) {
  m.def(
      "fwd(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
      "int max_seqlen_k, Tensor? num_contexts, Tensor? num_targets, int target_group_size, int window_left, "
      "int window_right, float alpha, Tensor? rab, float scaling_seqlen, Tensor? seqused_q, Tensor? seqused_k) "
      "-> Tensor");
  m.def(
      "bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
      "int max_seqlen_k, Tensor? num_contexts, Tensor? num_targets, int target_group_size, int window_left, "
      "int window_right, float alpha, Tensor? rab, float scaling_seqlen, Tensor? seqused_q, Tensor? seqused_k, "
      "bool has_drab, bool deterministic) -> (Tensor, Tensor, Tensor, Tensor)");
  // Private: the same ops with comparison switches (hstu_plan.h HstuOptionBits; tests and benchmarks only).
  m.def(
      "fwd_with_options(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
      "int max_seqlen_k, Tensor? num_contexts, Tensor? num_targets, int target_group_size, int window_left, "
      "int window_right, float alpha, Tensor? rab, float scaling_seqlen, Tensor? seqused_q, Tensor? seqused_k, "
      "int options) -> Tensor");
  m.def(
      "bwd_with_options(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
      "int max_seqlen_q, int max_seqlen_k, Tensor? num_contexts, Tensor? num_targets, int target_group_size, "
      "int window_left, int window_right, float alpha, Tensor? rab, float scaling_seqlen, Tensor? seqused_q, "
      "Tensor? seqused_k, bool has_drab, bool deterministic, int options) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("fp8_check_scales(Tensor q_descale, Tensor k_descale, Tensor v_descale) -> (Tensor, Tensor, Tensor)");
  // Private: the Hopper FP8 forward (hstu/_fp8.py routes hstu_attn::fp8_fwd to it; same schema).
  m.def(
      "fp8_fwd_sm90(Tensor q, Tensor k, Tensor v, Tensor q_descale, Tensor k_descale, Tensor v_descale, "
      "int descale_mode, int out_dtype, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
      "int max_seqlen_k, Tensor? num_contexts, Tensor? num_targets, int target_group_size, int window_left, "
      "int window_right, float alpha, Tensor? rab, float scaling_seqlen, Tensor? seqused_q, Tensor? seqused_k, "
      "int options) -> Tensor");
  // Private: the FP8 backward's device pre-pass (hstu/_fp8.py fp8_bwd_prepass; hstu_fp8_bwd_prepass.h).
  m.def(
      "fp8_bwd_prepass(Tensor dout, Tensor q, Tensor k, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
      "Tensor? seqused_q, Tensor? seqused_k) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
  // Private: the Hopper FP8 backward's whole path (hstu/_fp8_bwd.py): fp8_bwd's arguments -> (dq, dk, dv).
  m.def(
      "fp8_bwd_sm90(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor q_descale, Tensor k_descale, Tensor v_descale, "
      "int descale_mode, int out_dtype, "
      "Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, Tensor? num_contexts, "
      "Tensor? num_targets, int target_group_size, int window_left, int window_right, float alpha, Tensor? rab, "
      "float scaling_seqlen, Tensor? seqused_q, Tensor? seqused_k, int options, int diag=0) -> (Tensor, Tensor, "
      "Tensor)");
  // Private: the Hopper forward over a paged KV cache (hstu/_paged.py routes hstu_attn_paged_func to it).
  m.def(
      "paged_fwd_sm90(Tensor q, Tensor k_new, Tensor v_new, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
      "Tensor kv_cache, Tensor page_offsets, Tensor page_ids, Tensor cached_lens, int total_k, int max_seqlen_q, "
      "int max_seqlen_k, Tensor? num_contexts, Tensor? num_targets, int target_group_size, int window_left, "
      "int window_right, float alpha, float scaling_seqlen, int options, Tensor? plan=None) -> Tensor");
  // Private: one plan (validation + work list) for the paged forwards of every layer of a step (hstu/_paged.py).
  m.def(
      "paged_fwd_sm90_plan(Tensor q, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int total_k, int max_seqlen_q, "
      "int max_seqlen_k, Tensor? num_contexts, Tensor? num_targets, int target_group_size, int window_left, "
      "int window_right, int options) -> Tensor");
  m.def("paged_fwd_sm90_available(int device, bool half, int head_dim) -> int");
  // Private diagnostics: the paged forward's phase stamps (kernel_options(fwd_trace=True)).
  m.def("paged_fwd_trace(Tensor q) -> Tensor");
  m.def("compiled_kernels() -> str");
  m.def("device_error_block() -> int");
  m.def("clear_device_error(int device) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(hstu_attn, CUDA, m) {
  m.impl("fwd", TORCH_BOX(&hstu::fwd_cuda));
  m.impl("bwd", TORCH_BOX(&hstu::bwd_cuda));
  m.impl("fwd_with_options", TORCH_BOX(&hstu::fwd_with_options));
  m.impl("bwd_with_options", TORCH_BOX(&hstu::bwd_with_options));
  m.impl("fp8_check_scales", TORCH_BOX(&hstu::fp8_check_scales));
  m.impl("fp8_fwd_sm90", TORCH_BOX(&hstu::fp8_fwd_sm90));
  m.impl("fp8_bwd_prepass", TORCH_BOX(&hstu::fp8_bwd_prepass));
  m.impl("fp8_bwd_sm90", TORCH_BOX(&hstu::fp8_bwd_sm90));
  m.impl("paged_fwd_sm90", TORCH_BOX(&hstu::paged_fwd_sm90));
  m.impl("paged_fwd_sm90_plan", TORCH_BOX(&hstu::paged_fwd_sm90_plan));
  m.impl("paged_fwd_trace", TORCH_BOX(&hstu::paged_fwd_trace));
}

STABLE_TORCH_LIBRARY_IMPL(hstu_attn, CompositeExplicitAutograd, m) {
  m.impl("compiled_kernels", TORCH_BOX(&hstu::compiled_kernels));
  m.impl("paged_fwd_sm90_available", TORCH_BOX(&hstu::paged_fwd_sm90_available));
  m.impl("device_error_block", TORCH_BOX(&hstu::device_error_block));
  m.impl("clear_device_error", TORCH_BOX(&hstu::clear_device_error));
}
