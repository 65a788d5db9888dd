// A row dtype's ValueKind (table_types.h: the codes the table and row ops take and check) and back, for the op
// registrations (host side, torch stable headers).
#pragma once

#include <cstdint>

#include "common/stable_utils.h"
#include "dynamicemb/csrc/table/table_types.h"

namespace dynamicemb {

// fp16 / bf16 / fp32 -> their ValueKind; any other dtype -> -1.
inline int value_kind_of(accel::ScalarType t) {
  switch (t) {
    case accel::ScalarType::Half: return table::kValueFp16;
    case accel::ScalarType::BFloat16: return table::kValueBf16;
    case accel::ScalarType::Float: return table::kValueFp32;
    default: return -1;
  }
}

// A ValueKind's dtype (fp32 for any other code: callers check the code first).
inline accel::ScalarType dtype_of_kind(int64_t k) {
  return k == table::kValueFp16 ? accel::ScalarType::Half
         : k == table::kValueBf16 ? accel::ScalarType::BFloat16 : accel::ScalarType::Float;
}

}  // namespace dynamicemb
