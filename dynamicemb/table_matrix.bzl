"""Instantiation matrix of the scored hash table kernels (ONE definition; Starlark that is also Python).

Read by dynamicemb/BUILD.table.bzl (generates one .cu per entry from csrc/table/table_instance.cu.tpl) and by
tests/dynamicemb/test_table_matrix.py. File stems spell the parameters in a fixed order: key, value, policy.
The epoch policies ride on lru/lfu with the epoch as a runtime value.
"""

TABLE_KEYS = {"int64": "kKeyInt64", "uint64": "kKeyUInt64"}
TABLE_VALUES = {"fp16": "kValueFp16", "bf16": "kValueBf16", "fp32": "kValueFp32"}
TABLE_POLICIES = {"lru": "kPolicyLru", "lfu": "kPolicyLfu", "customized": "kPolicyCustomized"}

def table_instance_name(key, value, policy):
    """File stem of one instantiation, e.g. table_int64_fp32_lru."""
    return "table_%s_%s_%s" % (key, value, policy)

def table_instances():
    """{file_stem: {template KEY: value}} for every (key, value, policy)."""
    out = {}
    for k in sorted(TABLE_KEYS.keys()):
        for v in sorted(TABLE_VALUES.keys()):
            for p in sorted(TABLE_POLICIES.keys()):
                out[table_instance_name(k, v, p)] = {
                    "KEY": TABLE_KEYS[k],
                    "VALUE": TABLE_VALUES[v],
                    "POLICY": TABLE_POLICIES[p],
                }
    return out
