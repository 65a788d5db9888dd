"""CPU model of the repeats-only CSR (lab op _lookup_lab_step 2; docs/dynamicemb.md, "The repeats-only CSR"): from a
batch's (table, id) values, the dedup's numbering (uniques in first-occurrence order), the default CSR (every id
sorted by unique, stable) and the repeats-only construction as the kernels do it (per-chunk counts of repeating
claimers and ids, the claimers' rank words, the compacted (rank, position) pairs, their stable sort, the run starts,
the singles' rows); checks that both give the same CSR and prints N, R and the 8-bit passes the ranks need.

    python tools/dynamicemb_dev/rep_csr_model.py [--preset] [--n 5000 --vocab 300]
"""

import argparse

import numpy as np

CHUNK = 1024


def rep_passes(r):
    bits = 0
    while bits < 31 and (1 << bits) < r:
        bits += 1
    return (bits + 7) // 8


def model(vals):
    n = vals.size
    _, first, inv_sorted, counts = np.unique(vals, return_index=True, return_inverse=True, return_counts=True)
    order = np.argsort(first, kind="stable")  # uniques numbered by their first occurrence
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(order.size)
    u = rank_of[inv_sorted]  # unique of every id
    claimer = np.zeros(n, bool)
    claimer[first] = True
    reps = counts[inv_sorted] > 1  # the id's unique repeats
    # default CSR: every id, stable by unique
    ref = np.argsort(u, kind="stable")
    ref_start = np.zeros(order.size, np.int64)
    ref_start[u[ref][::-1]] = np.arange(n)[::-1]
    # repeats-only: the count pass's chunk counts, the number pass's rank words
    chunks = (n + CHUNK - 1) // CHUNK
    rclaim = claimer & reps
    rc = np.add.reduceat(rclaim.astype(np.int64), np.arange(0, n, CHUNK)) if n else np.zeros(0, np.int64)
    ro = np.add.reduceat(reps.astype(np.int64), np.arange(0, n, CHUNK)) if n else np.zeros(0, np.int64)
    rbefore = np.concatenate([[0], np.cumsum(rc)])[:chunks]
    obefore = np.concatenate([[0], np.cumsum(ro)])[:chunks]
    kprev = np.cumsum(rclaim) - rclaim  # repeating claimers before each position (the number pass's scan)
    assert np.array_equal(kprev[np.arange(0, n, CHUNK)], rbefore)
    R, N = int(rclaim.sum()), int(reps.sum())
    word = np.full(n, -1, np.int64)
    word[claimer] = 2 * kprev[claimer] + rclaim[claimer]
    claim_pos = first[np.argsort(first)]  # claimer position of every unique, by unique
    key = np.where(reps, word[claim_pos[u]] >> 1, -1)  # the claimer's rank
    comp = np.cumsum(reps) - reps  # compacted index (the resolve's chunk base + block prefix)
    assert np.array_equal(comp[np.arange(0, n, CHUNK)], obefore)
    keys, pos = np.empty(N, np.int64), np.empty(N, np.int64)
    keys[comp[reps]] = key[reps]
    pos[comp[reps]] = np.nonzero(reps)[0]
    srt = np.argsort(keys, kind="stable")
    keys, pos = keys[srt], pos[srt]
    occ = np.full(n, -1, np.int64)
    start = np.full(order.size, -1, np.int64)
    runs = np.zeros(max(R, 1), np.int64)
    for r in range(N):  # bounds over the sorted entries
        uu = u[pos[r]]
        row = uu - keys[r] + r
        if r == 0 or keys[r - 1] != keys[r]:
            start[uu] = row
            runs[keys[r]] = r
        occ[row] = pos[r]
    for i in np.nonzero(claimer & ~reps)[0]:  # the singles
        k = word[i] >> 1
        row = u[i] - k + (N if k >= R else runs[k])
        start[u[i]] = row
        occ[row] = i
    assert np.array_equal(occ, ref), "CSR entries differ"
    assert np.array_equal(start, ref_start), "segment starts differ"
    return n, order.size, N, R


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--preset", action="store_true")
    p.add_argument("--n", type=int, default=5000)
    p.add_argument("--vocab", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.preset:
        from dedup_count import preset_ids

        vals = preset_ids(a.seed)
    else:
        vals = np.random.default_rng(a.seed).integers(0, a.vocab, a.n)
    n, U, N, R = model(vals)
    print(f"ids {n:,}, uniques {U:,}, repeating ids N = {N:,}, repeating uniques R = {R:,}, passes {rep_passes(R)}: "
          "the repeats-only CSR equals the default")


if __name__ == "__main__":
    main()
