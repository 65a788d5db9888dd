"""The per-step id dedup op (torch.ops.dynamicemb.lookup_dedup, csrc/lookup/dedup_kernels.cu) on a CUDA device
against a CPU reference (torch.unique over (table, id), torch.searchsorted for the bags): exact uniques, inverse,
count and bags for repeats, uniques numbered in the order of their first occurrences (repeatable), all-distinct
ids in a full set, one id repeated everywhere, the same id in several tables, ids crafted to share one home slot,
the ids one rank owns under the hash routing spread over the set, reserved ids, ids outside the offsets, many
empty bags, one huge bag, a set reused with leftovers of another step, and power-law hot ids over many blocks with
keys sharing one slot of the insert's shared-memory pre-dedup."""

import pytest
import torch

from dynamicemb._load import load_library

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available() or not load_library(),
                                                  reason="needs CUDA and dynamicemb/_C.so")]

M64 = (1 << 64) - 1
EMPTY = -(1 << 63)  # reserved keys 0x8000000000000000 .. 0x8000000000000002 as int64


def reference(ids, offsets, ftable, batch):
    """(bag, table) of every id and the set of (table, key) pairs, on the CPU."""
    n, nb, F = ids.numel(), offsets.numel() - 1, ftable.numel()
    starts = offsets[:-1].clamp(0, n)
    pos = torch.arange(n, dtype=torch.int64)
    bag = (torch.searchsorted(starts, pos, right=True) - 1).clamp(0, nb - 1)
    table = ftable.long()[(bag // batch).clamp(max=F - 1)]
    return bag, table


def dedup(ids, offsets, ftable, batch, set_entries=None, set_tensor=None):
    n = ids.numel()
    if set_tensor is None:
        entries = set_entries or torch.ops.dynamicemb.lookup_dedup_set_size(n)
        set_tensor = torch.randint(-(2**31), 2**31 - 1, (entries,), dtype=torch.int32,
                                   device="cuda")  # garbage: the op must not depend on the set's content
    out = torch.ops.dynamicemb.lookup_dedup(ids.cuda(), offsets.cuda(), ftable.cuda(), batch, set_tensor)
    return [t.cpu() for t in out]


def check(ids, offsets, ftable, batch, **kw):
    inverse, bag, ukeys, utables, count = dedup(ids, offsets, ftable, batch, **kw)
    rbag, rtable = reference(ids, offsets, ftable, batch)
    assert torch.equal(bag.long(), rbag)
    k = ids.view(torch.int64)
    reserved = (k >= EMPTY) & (k <= EMPTY + 2)
    assert torch.equal(inverse < 0, reserved) and bool((inverse[reserved] == -1).all())
    live = ~reserved
    pairs = torch.stack([rtable[live], k[live]], 1)
    expect = torch.unique(pairs, dim=0).shape[0] if pairs.numel() else 0
    c = int(count[0])
    assert c == expect
    u = inverse[live].long()
    assert bool((u < c).all())
    assert torch.equal(ukeys[u], k[live]) and torch.equal(utables[u].long(), rtable[live])
    upairs = torch.stack([utables[:c].long(), ukeys[:c]], 1)
    assert torch.unique(upairs, dim=0).shape[0] == c  # every unique once
    # numbered in the order of first occurrences (the same in every run, whatever the scheduling)
    first = torch.full((c,), ids.numel(), dtype=torch.int64)
    first.scatter_reduce_(0, u, torch.arange(ids.numel())[live], "amin")
    assert bool((first[1:] > first[:-1]).all())
    return inverse, c


def uniform_offsets(n, bags, gen):
    cuts = torch.sort(torch.randint(0, n + 1, (bags - 1,), generator=gen)).values
    return torch.cat([torch.tensor([0]), cuts, torch.tensor([n])])


@pytest.mark.parametrize("n", [1, 777, 200_000])
def test_dedup_repeats_shared_table(n):
    """Features 0, 1, 2 on tables 0, 1, 1: a key in features 1 and 2 is one unique, in features 0 and 1 two."""
    gen = torch.Generator().manual_seed(n)
    ids = torch.randint(0, max(n // 5, 2), (n,), generator=gen)
    F, B = 3, 64
    check(ids, uniform_offsets(n, F * B, gen), torch.tensor([0, 1, 1], dtype=torch.int32), B)


def test_dedup_all_distinct_full_set():
    """Every id distinct in a set of exactly n slots: the set ends 100% full (long probe runs, wrap-around)."""
    n = 100_000
    gen = torch.Generator().manual_seed(1)
    ids = torch.unique(torch.randint(0, 1 << 62, (n,), generator=gen))
    ids = ids[torch.randperm(ids.numel(), generator=gen)]
    n = ids.numel()
    inverse, c = check(ids, uniform_offsets(n, 100, gen), torch.tensor([0], dtype=torch.int32), 100, set_entries=n)
    assert c == n and torch.equal(torch.sort(inverse).values, torch.arange(n, dtype=torch.int32))


def test_dedup_all_equal_and_two_tables():
    """One key everywhere: one unique per table."""
    n = 300_000
    ids = torch.full((n,), 123456789, dtype=torch.int64)
    offsets = torch.linspace(0, n, 2 * 50 + 1).long()
    _, c = check(ids, offsets, torch.tensor([0, 1], dtype=torch.int32), 50)
    assert c == 2
    _, c = check(ids, offsets, torch.tensor([3, 3], dtype=torch.int32), 50)
    assert c == 1


def _inv_mul(c):
    return pow(c, -1, 1 << 64)


def _inv_mix64(h):
    """Inverse of table::mix64 (dynamicemb/csrc/table/table_types.h: murmur3's 64-bit finalizer)."""
    x = h ^ (h >> 33)
    x = (x * _inv_mul(0xC4CEB9FE1A85EC53)) & M64
    x ^= x >> 33
    x = (x * _inv_mul(0xFF51AFD7ED558CCD)) & M64
    return x ^ (x >> 33)


def test_dedup_adversarial_same_home_slot():
    """Keys crafted so that (table, key) hashes to tiny values: all share home slot 0 (the set maps the 64-bit
    hash to [0, capacity) by its high bits), in two tables, each repeated, mixed with ordinary ids."""
    gen = torch.Generator().manual_seed(3)
    m = 3000
    keys = []
    for t in range(2):
        salt = (0xD6E8FEB86659FD93 * (t + 1)) & M64  # dedup_kernels.cu kSetSalt
        for j in range(m):
            k = _inv_mix64(j) ^ salt
            keys.append(k - (1 << 64) if k >= 1 << 63 else k)
    crafted = torch.tensor(keys, dtype=torch.int64)
    n = 60_000
    ids = torch.randint(0, 5000, (n,), generator=gen)
    pick = torch.randint(0, crafted.numel(), (n // 2,), generator=gen)
    ids[torch.randperm(n, generator=gen)[: n // 2]] = crafted[pick]
    # the crafted keys of table t only collide in table t: feature 0 -> table 0, feature 1 -> table 1
    check(ids, uniform_offsets(n, 2 * 100, gen), torch.tensor([0, 1], dtype=torch.int32), 100)
    # and the same keys with a set exactly as large as the id count
    check(ids, uniform_offsets(n, 2 * 100, gen), torch.tensor([1, 0], dtype=torch.int32), 100, set_entries=n)


def test_dedup_hot_ids_across_blocks_and_one_local_slot():
    """Power-law ids (a top id in ~17 % of its table's ids, like the NVIDIA preset's hot ids) over ~590 insert blocks
    of 1,024 ids, so each block's ids of one (table, id) elect one prober of the set in shared memory; mixed with
    keys crafted to share one slot of that shared-memory set (hash low 11 bits zero), each repeated."""
    gen = torch.Generator().manual_seed(5)
    T, B = 3, 200_000
    n = T * B
    ids = (1_000_000 * torch.rand(n, generator=gen) ** 8).long()
    salt = 0xD6E8FEB86659FD93  # table 0: kSetSalt * (0 + 1)
    crafted = [_inv_mix64(j << 11) ^ salt for j in range(1500)]
    crafted = torch.tensor([k - (1 << 64) if k >= 1 << 63 else k for k in crafted], dtype=torch.int64)
    where = torch.randperm(B, generator=gen)[: B // 5]  # in feature 0 (table 0)
    ids[where] = crafted[torch.randint(0, crafted.numel(), (where.numel(),), generator=gen)]
    inverse, c = check(ids, torch.arange(n + 1), torch.tensor([0, 1, 2], dtype=torch.int32), B)
    assert c < n // 2  # many repeats


@pytest.mark.parametrize("table", [0, 3])
def test_dedup_set_spreads_the_ids_of_one_rank(table):
    """The ids that rank 0 of 8 owns under the "hash" routing (dynamicemb.route_keys, the sharded module's owner
    rule) spread over the whole set: the set's table salt is not the routing's. With the same salt those ids share
    the top bits of the set's hash, pile into one eighth of the set and form one probe run about as long as the
    uniques (the sharded step's lookup ran 200x slower at 2 ranks)."""
    import dynamicemb as de

    gen = torch.Generator().manual_seed(11)
    ids = torch.randint(0, 1 << 40, (400_000,), generator=gen)
    ids = torch.unique(ids[de.route_keys(ids, 8, "hash", table=table) == 0])
    ids = ids[torch.randperm(ids.numel(), generator=gen)]
    n = ids.numel()
    set_tensor = torch.empty(torch.ops.dynamicemb.lookup_dedup_set_size(n), dtype=torch.int32, device="cuda")
    _, c = check(ids, torch.tensor([0, n]), torch.tensor([table], dtype=torch.int32), 1, set_tensor=set_tensor)
    assert c == n
    claimed = torch.cat([torch.zeros(1, dtype=torch.int8), (set_tensor != -1).to(torch.int8).cpu(),
                         torch.zeros(1, dtype=torch.int8)])  # FREE slots read -1 (0xffffffff)
    edges = torch.nonzero(torch.diff(claimed)).flatten()
    longest = int((edges[1::2] - edges[0::2]).max())
    # spread: the longest run of claimed slots is a few hundred at this load (0.8); piled up: about n
    assert longest < n // 10, (longest, n)


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint64])
def test_dedup_reserved_ids_and_ids_outside_offsets(dtype):
    """Reserved ids get -1 and no unique; ids before offsets[0] are bag 0, ids past offsets[-1] the last bag;
    uint64 ids over the full range."""
    gen = torch.Generator().manual_seed(4)
    n = 50_000
    ids = torch.randint(-(2**62), 2**62, (n // 3,), generator=gen)
    ids = ids[torch.randint(0, ids.numel(), (n,), generator=gen)]
    ids[torch.randint(0, n, (500,), generator=gen)] = EMPTY
    ids[torch.randint(0, n, (500,), generator=gen)] = EMPTY + 1
    ids[torch.randint(0, n, (500,), generator=gen)] = EMPTY + 2
    ids[:7] = EMPTY + 3  # the first non-reserved key above them
    offsets = uniform_offsets(n - 3000, 4 * 30, gen) + 1000
    check(ids.view(dtype) if dtype == torch.uint64 else ids, offsets, torch.tensor([0, 1, 2, 0], dtype=torch.int32), 30)


def test_dedup_empty_bags_huge_bag_and_few_bags():
    """Hundreds of empty bags between single ids (bag search past the shared-memory window), one bag holding most
    ids, and fewer bags than features (batch 1)."""
    gen = torch.Generator().manual_seed(5)
    lengths = torch.zeros(600 * 400, dtype=torch.int64)
    lengths[::600] = 1
    lengths[-1] = 250_000
    offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    n = int(offsets[-1])
    ids = torch.randint(0, 20_000, (n,), generator=gen)
    check(ids, offsets, torch.tensor([0, 1, 0, 1], dtype=torch.int32), lengths.numel() // 4)
    check(ids[:5000], torch.tensor([0, 10, 4000]), torch.tensor([0, 1, 2, 3], dtype=torch.int32), 1)


def test_dedup_set_reused_and_no_ids():
    """The same set tensor serves several steps of different sizes (no cleaning between them); no ids at all."""
    gen = torch.Generator().manual_seed(6)
    s = torch.empty(300_000, dtype=torch.int32, device="cuda")
    for n in (200_000, 1000, 150_000):
        ids = torch.randint(0, n // 3 + 1, (n,), generator=gen)
        check(ids, uniform_offsets(n, 2 * 77, gen), torch.tensor([0, 1], dtype=torch.int32), 77, set_tensor=s)
    inverse, bag, ukeys, utables, count = dedup(torch.zeros(0, dtype=torch.int64), torch.zeros(3, dtype=torch.int64),
                                                torch.tensor([0], dtype=torch.int32), 2)
    assert int(count[0]) == 0 and inverse.numel() == 0


def test_dedup_set_too_small_is_refused():
    ids = torch.arange(100, device="cuda")
    with pytest.raises(RuntimeError, match="set"):
        torch.ops.dynamicemb.lookup_dedup(ids, torch.tensor([0, 100], device="cuda"),
                                          torch.tensor([0], dtype=torch.int32, device="cuda"), 1,
                                          torch.empty(99, dtype=torch.int32, device="cuda"))


def test_dedup_many_features_shared_tables():
    """More features than the insert kernel keeps in shared memory (300): bounds read from offsets."""
    gen = torch.Generator().manual_seed(7)
    F, B = 300, 8
    lengths = torch.randint(0, 6, (F * B,), generator=gen)
    offsets = torch.zeros(F * B + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    n = int(offsets[-1])
    ids = torch.randint(0, 50, (n,), generator=gen)
    check(ids, offsets, (torch.arange(F) % 7).to(torch.int32), B)


@pytest.mark.parametrize("F", [3, 300])
def test_dedup_non_monotone_offsets_terminate_consistently(F):
    """Offsets that are not monotone (unvalidated input): the dedup still ends, every id's unique holds its key,
    no unique is listed twice and every bag is in range."""
    gen = torch.Generator().manual_seed(8)
    n, B = 20_000, 10
    ids = torch.randint(0, 300, (n,), generator=gen)
    offsets = torch.randint(-50, n + 50, (F * B + 1,), generator=gen)
    ftable = (torch.arange(F) % 2).to(torch.int32)
    inverse, bag, ukeys, utables, count = dedup(ids, offsets, ftable, B)
    c = int(count[0])
    assert 0 < c <= n and bool((inverse >= 0).all()) and bool((inverse < c).all())
    assert torch.equal(ukeys[inverse.long()], ids)
    assert torch.unique(torch.stack([utables[:c].long(), ukeys[:c]], 1), dim=0).shape[0] == c
    assert bool((bag >= 0).all()) and bool((bag < F * B).all())
