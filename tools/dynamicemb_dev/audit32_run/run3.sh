#!/bin/bash
# audit32 run 3 (issue 32), on nvidia-h200-x2 (2 GPUs; a world of 4 too where 4 are there): the sharded path in
# every storage mode over NCCL with the disk store (nccl_storage.py), never run on NCCL since 330445b added it.
B=47
source "$(dirname "$0")/setup.sh"
nvidia-smi -L
timeout $(( $(left) - 1 )) python3 -P $C/nccl_storage.py $TD 2 4 2>&1 | tail -40
echo "################ DIGEST ($GPU; done at $(( $(date +%s) - t0 )) s)"
