"""benchmarks/hash_table.py with the CUDA upsert's private kernel options (ScoredHashTable._upsert_options, the
bits of table_kernels.cuh's kUpsertOpt*), once per option value, in one process:

    python tools/dynamicemb_dev/hash_table_opts.py 0,1,5 --dims 32 --capacity 67108864 --reps 3 --fill hkv \
        --lambdas 1.0

Each value's tables print under a line "upsert options N".
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import hash_table  # noqa: E402
from dynamicemb._table import ScoredHashTable  # noqa: E402


def main(argv):
    rc = 0
    for o in (int(x) for x in argv[0].split(",")):
        ScoredHashTable._upsert_options = o
        print(f"upsert options {o}", flush=True)
        rc |= hash_table.main(argv[1:])
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
