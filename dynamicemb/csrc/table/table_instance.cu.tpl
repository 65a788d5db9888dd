// One instantiation of the scored hash table kernels: key {{KEY}}, value {{VALUE}}, policy family {{POLICY}}.
#include "dynamicemb/csrc/table/table_kernels.cuh"

using namespace dynamicemb::table;  // NOLINT: the enumerators below
DYNAMICEMB_TABLE_INSTANTIATE({{KEY}}, {{VALUE}}, {{POLICY}})
