"""A host model of the Hopper FP8 backward's synchronization (hstu/csrc/sm90/hstu_bwd_fp8_sm90_kernel.cuh): the
producer and the two consumer warpgroups as op sequences, run under random interleavings, with named barriers
(bar.arrive / bar.sync counting threads: a barrier completes when 2 x 128 have come, whoever they are), mbarriers
(phase parity) and the shared buffers they guard. A run fails on a deadlock, on a barrier generation completed by
two events that are not the two warpgroups' for the same tile (a warpgroup arriving twice pairs with itself), or on
a hazard: a tile reading a ring slot, a dS8 buffer or the amax words that hold another tile, or a write into a buffer
another tile still reads. test_fp8_bwd.py runs it for several tile counts."""

import random


class SyncError(Exception):
    pass


def _consumer(wg, n, seeds, late_fence=False, stages=2, ds8_early=False):
    """Warpgroup wg's ops in the kernel's order (the loop over n tiles, then the last tile's late part and dQ).
    late_fence (kFp8BwdLateFence): the dS8 arrive of tile i - 1 moves from the late part of iteration i to iteration
    i + 1, after its GEMMs' issue (tile -2's by iteration 0: no seed for it); the last one stays in place. stages:
    the rings' stages (kFp8BwdStages3: 3). ds8_early (kFp8BwdDs8Early): the late part's dS8 stores of tile i - 1 and
    its dQ of tile i - 2 before its amax barrier."""
    o = 1 - wg
    amax = lambda g, j: 1 + 4 * g + (j & 3)  # noqa: E731 (the kernel's bar_amax / bar_ds8)
    ds8 = lambda g, j: 9 + 3 * g + (j + 3) % 3  # noqa: E731
    yield ("sync", 15, (wg, "init"))
    if n > 0:
        for kind, t in seeds:
            yield ("arrive", ds8(wg, t) if kind == "ds8" else amax(wg, t), (wg, kind, t))

    def late(i, release_a):  # quantize tile i - 1, dQ of tile i - 2, dK of tile i - 1
        if ds8_early:
            yield ("write_ds8", i - 1)
            yield ("sync", ds8(o, i - 2), (wg, "ds8", i - 2))
            yield ("read_ds8", i - 2)
        yield ("sync", amax(o, i - 1), (wg, "amax", i - 1))
        yield ("read_words", i - 1)
        if not ds8_early:
            yield ("write_ds8", i - 1)
        if not late_fence or not release_a:
            yield ("arrive", ds8(wg, i - 1), (wg, "ds8", i - 1))
        if not ds8_early:
            yield ("sync", ds8(o, i - 2), (wg, "ds8", i - 2))
            yield ("read_ds8", i - 2)
        if i > 0:
            yield ("mbwait", ("full_b", (i - 1) % stages), ((i - 1) // stages) & 1)
            yield ("read_b", i - 1)
        yield ("end_ds8", i - 2)  # wait<1>: dQ done
        if release_a:
            yield ("end_a", i)
            yield ("mbarrive", ("empty_a", i % stages))
        if i > 0:
            yield ("end_b", i - 1)  # wait<0>: dK done
            yield ("mbarrive", ("empty_b", (i - 1) % stages))

    for i in range(n):
        if i == 0:
            yield ("mbwait", "kv", 0)
        yield ("mbwait", ("full_a", i % stages), (i // stages) & 1)
        yield ("read_a", i)
        if late_fence:
            yield ("arrive", ds8(wg, i - 2), (wg, "ds8", i - 2))
        yield ("write_words", i)
        yield ("arrive", amax(wg, i), (wg, "amax", i))
        yield from late(i, True)
    if n > 0:
        if late_fence:
            yield ("arrive", ds8(wg, n - 2), (wg, "ds8", n - 2))
        yield from late(n, False)
        yield ("sync", ds8(o, n - 1), (wg, "ds8", n - 1))
        yield ("read_ds8", n - 1)
        yield ("end_ds8", n - 1)
    yield ("done",)


def _producer(n, stages=2):
    if n > 0:
        yield ("load", "kv", None)
        for j in range(n):
            s, ph = j % stages, (j // stages) & 1
            yield ("mbwait", ("empty_a", s), ph ^ 1)
            yield ("load", ("full_a", s), ("a", j))
            yield ("mbwait", ("empty_b", s), ph ^ 1)
            yield ("load", ("full_b", s), ("b", j))
    yield ("done",)


def run(n, seed, seeds=(("ds8", -2), ("amax", -1)), late_fence=False, stages=2, ds8_early=False, ds8_bufs=3):
    """One random interleaving of a CTA with n query tiles; raises SyncError on a fault. seeds: the arrivals each
    warpgroup makes before its loop (the kernel's; with late_fence the kernel seeds only ("amax", -1)). ds8_early: as
    _consumer's; ds8_bufs: the dS8 buffers (kFp8BwdDs8Early: 4)."""
    rnd = random.Random(seed)
    bars = {}  # named barrier -> [units, generation, events]
    mbar = {"kv": [0, 0, 1]}  # mbarrier -> [arrivals, completed phases, arrivals per phase]
    for s in range(stages):
        mbar.update({("full_a", s): [0, 0, 1], ("empty_a", s): [0, 0, 2], ("full_b", s): [0, 0, 1],
                     ("empty_b", s): [0, 0, 2]})
    ring = {"a": {}, "b": {}}  # slot -> tile loaded
    reading = {"a": set(), "b": set(), "ds8": set()}  # (slot or buffer, tile, wg)
    ds8_tile, words = {}, {}  # (buffer, wg) -> tile written; (slot, wg) -> tile

    def mb_arrive(name):
        m = mbar[name]
        m[0] += 1
        if m[0] == m[2]:
            m[0], m[1] = 0, m[1] + 1

    agents = {0: _consumer(0, n, seeds, late_fence, stages, ds8_early),
              1: _consumer(1, n, seeds, late_fence, stages, ds8_early),
              "p": _producer(n, stages)}
    cur = {k: next(g) for k, g in agents.items()}
    waiting, done, loads = {}, set(), []
    while len(done) < 3 or loads:
        ready = []
        for k, op in cur.items():
            if k in done:
                continue
            if k in waiting:
                if bars[waiting[k][0]][1] > waiting[k][1]:
                    ready.append(k)
            elif op[0] != "mbwait" or (mbar[op[1]][1] & 1) != op[2]:
                ready.append(k)
        if not ready and not loads:
            raise SyncError(f"deadlock (n {n}, seed {seed}): {cur}")
        k = rnd.choice(ready + (["tma"] if loads else []))
        if k == "tma":  # a load lands
            name, what = loads.pop(rnd.randrange(len(loads)))
            if what is not None:
                r, j = what
                if any(x[0] == j % stages for x in reading[r]):
                    raise SyncError(f"load of tile {j} into ring {r} while {reading[r]} read it")
                ring[r][j % stages] = j
            mb_arrive(name)
            continue
        if k in waiting:
            del waiting[k]
            cur[k] = next(agents[k])
            continue
        op, wg = cur[k], k
        if op[0] == "done":
            done.add(k)
            continue
        if op[0] in ("arrive", "sync"):
            b = bars.setdefault(op[1], [0, 0, []])
            b[0] += 1
            b[2].append(op[2])
            gen = b[1]
            if b[0] == 2:
                (w0, *e0), (w1, *e1) = b[2]
                if w0 == w1 or e0 != e1:
                    raise SyncError(f"barrier {op[1]} completed by {b[2]}")
                b[:] = [0, gen + 1, []]
            if op[0] == "sync" and b[1] == gen:
                waiting[k] = (op[1], gen)
                continue
        elif op[0] == "mbarrive":
            mb_arrive(op[1])
        elif op[0] == "load":
            loads.append((op[1], op[2]))
        elif op[0] == "write_words":
            words[(op[1] & 3, wg)] = op[1]
        elif op[0] == "read_words" and op[1] >= 0:
            if any(words.get((op[1] & 3, g)) != op[1] for g in (0, 1)):
                raise SyncError(f"warpgroup {wg} reads the amax words of tile {op[1]}: {words}")
        elif op[0] == "write_ds8":
            buf = (op[1] + ds8_bufs) % ds8_bufs
            if any(x[0] == buf for x in reading["ds8"]):
                raise SyncError(f"dS8 of tile {op[1]} written into buffer {buf} while {reading['ds8']} read it")
            ds8_tile[(buf, wg)] = op[1]
        elif op[0] in ("read_ds8", "read_a", "read_b"):
            r = op[0][5:]
            slot = (op[1] + ds8_bufs) % ds8_bufs if r == "ds8" else op[1] % stages
            held = [ds8_tile.get((slot, g)) for g in (0, 1)] if r == "ds8" else [ring[r].get(slot)]
            if op[1] >= 0 and any(t != op[1] for t in held):
                raise SyncError(f"warpgroup {wg} reads tile {op[1]} from {r} slot {slot}, which holds {held}")
            reading[r].add((slot, op[1], wg))
        elif op[0] in ("end_ds8", "end_a", "end_b"):
            r = op[0][4:]
            reading[r].discard(((op[1] + ds8_bufs) % ds8_bufs if r == "ds8" else op[1] % stages, op[1], wg))
        cur[k] = next(agents[k])
    if any(b[0] for b in bars.values()):
        raise SyncError(f"barriers left half-arrived: {bars}")
