"""A host model of the FP8 backward's dQ pair protocol (hstu_bwd_fp8_sm90_kernel.cuh, kFp8BwdDqPair): two CTAs of a
cluster (ranks 0, 1), each with its two consumer warpgroups (one warp of each stands for its four: the warps of a
warpgroup run the same ops, and a warp pairs only with the same warp of the partner), run as op sequences under
random interleavings. Modelled: the named barriers that couple a CTA's warpgroups (amax of tile j, dS8 of tile j:
arrived at by one, waited for by the other), and per warp the partner protocol: the k-th shared tile (a query tile
both CTAs walk; k in tile order) is summed in rank k % 2's inbox, which that rank frees (pair_free, one iteration
before its stage) with an arrival on the sender's free mbarrier; the sender waits for it (parity (k >> 1) & 1),
writes the inbox and arrives on the receiver's full mbarrier; the receiver waits for that and reads. A run fails on
a deadlock, on a write into an inbox not freed for it (or a stage of the receiver's own into its inbox while the
partner may write it), or on a read of an inbox that does not hold the tile. test_fp8_bwd.py runs it for tile sets
of the causal, context and target shapes."""

import random


class PairError(Exception):
    pass


def _warp(c, wg, tiles, partner, free_ahead, seeds=(("ds8", -2), ("amax", -1))):
    """CTA c's warpgroup wg (one warp): the kernel's op order over its query tiles `tiles` (ascending). free_ahead:
    pair_free(t) in iteration t + free_ahead (the kernel's 2; 3 frees the inbox before the previous stage)."""
    o = 1 - wg
    n = len(tiles)
    amax = lambda g, j: ("amax", g, j & 3)  # noqa: E731
    ds8 = lambda g, j: ("ds8", g, (j + 3) % 3)  # noqa: E731
    pset = set(partner)
    st = {"k": 0}
    shared = lambda t: t >= 0 and tiles[t] in pset  # noqa: E731

    def pair_free(t):
        if shared(t) and (st["k"] & 1) == c:
            yield ("free", tiles[t])

    def stage(t):
        if shared(t):
            k = st["k"]
            st["k"] += 1
            if (k & 1) == c:
                yield ("mbwait", ("full", c, wg), k >> 1)  # (the kernel's parity: (k >> 1) & 1)
                yield ("recv", tiles[t])
            else:
                yield ("mbwait", ("free", c, wg), k >> 1)
                yield ("send", tiles[t])
        else:
            yield ("solo", tiles[t])

    def late(i):
        yield ("sync", amax(o, i - 1), (wg, "amax", i - 1))
        yield ("arrive", ds8(wg, i - 1), (wg, "ds8", i - 1))
        yield ("sync", ds8(o, i - 2), (wg, "ds8", i - 2))
        if i > 1:
            yield from stage(i - 2)

    yield ("sync", ("init",), (wg, "init"))
    if n > 0:
        for kind, t in seeds:
            yield ("arrive", ds8(wg, t) if kind == "ds8" else amax(wg, t), (wg, kind, t))
    for i in range(n):
        yield from pair_free(i - free_ahead)
        yield ("arrive", amax(wg, i), (wg, "amax", i))
        yield from late(i)
    if n > 0:
        if free_ahead == 2:
            yield from pair_free(n - 2)
        yield from late(n)
        yield ("sync", ds8(o, n - 1), (wg, "ds8", n - 1))
        yield from pair_free(n - 1)
        yield from stage(n - 1)
    yield ("done",)


def run(tiles0, tiles1, seed, free_ahead=2):
    """One random interleaving of the pair (rank 0 walks the query tiles tiles0, rank 1 tiles1); raises PairError.
    The kernel pairs only CTAs that both have tiles; others never touch the partner."""
    rnd = random.Random(seed)
    active = bool(tiles0) and bool(tiles1)
    tiles = (tiles0, tiles1)
    agents = {(c, wg): _warp(c, wg, tiles[c], tiles[1 - c] if active else [], free_ahead) for c in (0, 1)
              for wg in (0, 1)}
    cur = {k: next(g) for k, g in agents.items()}
    bars = {}  # (c, name) -> [arrivals, generation, events]
    mbar = {}  # ("full" | "free", c, wg) -> [arrivals, completed phases]
    inbox = {(c, wg): ("idle", None) for c in (0, 1) for wg in (0, 1)}
    waiting, done = {}, set()

    def mb(name):
        return mbar.setdefault(name, [0, 0])

    while len(done) < 4:
        ready = []
        for k, op in cur.items():
            if k in done:
                continue
            if k in waiting:
                if bars[waiting[k][0]][1] > waiting[k][1]:
                    ready.append(k)
            elif op[0] != "mbwait" or (mb(op[1])[1] & 1) != (op[2] & 1):  # try_wait.parity's rule
                ready.append(k)
        if not ready:
            raise PairError(f"deadlock ({tiles0}, {tiles1}, seed {seed}): {cur}")
        k = rnd.choice(ready)
        if k in waiting:
            del waiting[k]
            cur[k] = next(agents[k])
            continue
        (c, wg), op = k, cur[k]
        p = 1 - c
        if op[0] == "done":
            done.add(k)
            continue
        if op[0] in ("arrive", "sync"):
            name = (c,) + op[1]
            b = bars.setdefault(name, [0, 0, []])
            b[0] += 1
            b[2].append(op[2])
            gen = b[1]
            if b[0] == 2:
                (w0, *e0), (w1, *e1) = b[2]
                if w0 == w1 or e0 != e1:
                    raise PairError(f"CTA {c} barrier {op[1]} completed by {b[2]}")
                b[:] = [0, gen + 1, []]
            if op[0] == "sync" and b[1] == gen:
                waiting[k] = (name, gen)
                continue
        elif op[0] == "mbwait":
            if mb(op[1])[1] != op[2] + 1:
                raise PairError(f"CTA {c} waits for phase {op[2]} of {op[1]}, which has completed {mb(op[1])[1]}")
        elif op[0] == "free":
            if inbox[(c, wg)][0] != "idle":
                raise PairError(f"CTA {c} frees its inbox for tile {op[1]} while it is {inbox[(c, wg)]}")
            inbox[(c, wg)] = ("free", op[1])
            m = mb(("free", p, wg))
            m[1] += 1  # count 1: one arrival completes the phase
        elif op[0] == "send":
            if inbox[(p, wg)] != ("free", op[1]):
                raise PairError(f"CTA {c} writes tile {op[1]} into CTA {p}'s inbox, which is {inbox[(p, wg)]}")
            inbox[(p, wg)] = ("full", op[1])
            mb(("full", p, wg))[1] += 1
        elif op[0] == "recv":
            if inbox[(c, wg)] != ("full", op[1]):
                raise PairError(f"CTA {c} reads tile {op[1]} from its inbox, which is {inbox[(c, wg)]}")
            inbox[(c, wg)] = ("idle", None)
        elif op[0] == "solo":
            if inbox[(c, wg)][0] != "idle":
                raise PairError(f"CTA {c} stages tile {op[1]} alone in its inbox, which is {inbox[(c, wg)]}")
        cur[k] = next(agents[k])
    if any(v[0] != "idle" for v in inbox.values()):
        raise PairError(f"inboxes left in use: {inbox}")
