// The one runtime -> compile-time dispatch of a row kind (table_types.h's ValueKind) for the table, lookup and row
// ops' launchers (host code; no CUDA and no torch headers).
#pragma once

#include <cstdint>
#include <type_traits>

#include "dynamicemb/csrc/table/table_types.h"

namespace dynamicemb {
namespace table {

// Calls f(std::integral_constant<int, K>{}) for a row kind K (fp16, bf16, fp32) and returns true; returns false
// without calling f for any other code (the caller reports it in its own words).
template <typename F>
inline bool with_value_kind(int64_t kind, F&& f) {
  switch (kind) {
    case kValueFp16: f(std::integral_constant<int, kValueFp16>{}); return true;
    case kValueBf16: f(std::integral_constant<int, kValueBf16>{}); return true;
    case kValueFp32: f(std::integral_constant<int, kValueFp32>{}); return true;
    default: return false;
  }
}

}  // namespace table
}  // namespace dynamicemb
