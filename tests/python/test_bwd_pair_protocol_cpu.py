"""CPU model of the synchronization of the D 256 pair kernel (src/kernels/bwd_sm90/kernel_ks_pair.cuh):
two CTAs of a cluster, two warpgroups each, the mbarriers of the kernel with their PTX semantics
(arrival counts, transaction bytes that may arrive before they are expected, phases waited for by
parity), the CTA barriers, and the asynchronous operations (TMA loads, the bulk copy of dS into the
partner, wgmma groups completing in order) finishing after random delays. Over many random
schedules it checks that nothing deadlocks, that no barrier runs two phases ahead of a waiter (a
parity wait would then alias), and that no shared-memory buffer is overwritten while a read of it
is pending: our dS tile (read by our dQ / dK and by the copy), the partner's copy of it, P, each
half of the single dO stage (read by both warpgroups' dP and by one warpgroup's dV), the Q stages.
The event order of each warpgroup is the kernel's program order (its comments name the steps).
"""
import random

import pytest


class MBar:
    def __init__(self, name, count):
        self.name, self.count, self.pending, self.tx, self.phase = name, count, count, 0, 0

    def _check(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def arrive(self, expect_tx=0):
        self.tx += expect_tx
        self.pending -= 1
        assert self.pending >= 0, self.name
        self._check()

    def complete_tx(self, n):
        self.tx -= n
        self._check()

    def done(self, k):
        """Whether phase k completed (what a parity wait for k sees), asserting no aliasing."""
        assert self.phase <= k + 1, f"{self.name}: phase {self.phase} ran past a waiter of phase {k}"
        return self.phase == k + 1


class Buf:
    """A shared-memory buffer: readers pending (tags) and a write that must not overlap them."""

    def __init__(self, name):
        self.name, self.readers = name, set()

    def read_begin(self, tag):
        self.readers.add(tag)

    def read_end(self, tag):
        self.readers.discard(tag)

    def write(self, who):
        assert not self.readers, f"{who} overwrites {self.name} while {sorted(self.readers)} read it"


def simulate(iters, seed):
    rng = random.Random(seed)
    pending = []  # asynchronous completions: [time, action]
    now = [0]

    def later(action):
        pending.append([now[0] + rng.randint(1, 6), action])

    cta = []
    for r in range(2):
        c = {
            "q_full": [MBar(f"q_full{s}.{r}", 2) for s in range(2)],  # 1 lse/delta group + thread 0
            "do_full": MBar(f"do_full.{r}", 2),
            "in_full": MBar(f"in_full.{r}", 1),
            "out_free": MBar(f"out_free.{r}", 2),
            "sQ": [Buf(f"Q{s}.{r}") for s in range(2)], "sdO": [Buf(f"dO_half{w}.{r}") for w in range(2)],
            "sP": Buf(f"P.{r}"), "sdS": Buf(f"dS.{r}"), "rdS": Buf(f"rdS.{r}"),
            "bar": {},  # CTA barrier generation -> arrivals
        }
        cta.append(c)

    def load_q(r, it):
        c = cta[r]
        st = it & 1
        c["sQ"][st].write(f"cta{r} load Q({it})")
        c["q_full"][st].arrive(expect_tx=1)  # thread 0: expect the bytes
        later(lambda: c["q_full"][st].complete_tx(1))
        later(lambda: c["q_full"][st].arrive())  # the lse/delta cp.async group's arrivals

    def load_do_half(r, w, it):
        c = cta[r]
        c["sdO"][w].write(f"cta{r} wg{w} load dO({it})")
        c["do_full"].arrive(expect_tx=1)
        later(lambda: c["do_full"].complete_tx(1))

    def wg_program(r, w):
        c, peer = cta[r], cta[r ^ 1]

        def cta_barrier(gen):
            c["bar"][gen] = c["bar"].get(gen, 0) + 1
            return lambda: c["bar"].get(gen, 0) == 2

        def wgmma(reads, tag):
            """Issue: the reads begin; returns the completion flag (completions in issue order)."""
            for b in reads:
                b.read_begin(tag)
            flag = {"done": False}
            queue.append((reads, tag, flag))
            return flag

        queue = []  # this warpgroup's wgmma groups, completing in order

        def retire_one():
            reads, tag, flag = queue.pop(0)
            for b in reads:
                b.read_end(tag)
            flag["done"] = True

        def wait_groups(n_left):  # wgmma.wait_group n: complete all but the last n
            while len(queue) > n_left:
                if rng.random() < 0.5:
                    yield lambda: True
                retire_one()

        if w == 0:
            load_q(r, 0)
        load_do_half(r, w, 0)
        gen = 0
        yield cta_barrier(gen)  # the prologue's __syncthreads
        gen += 1
        for it in range(iters):
            st = it & 1
            yield lambda: c["q_full"][st].done(it >> 1)
            yield lambda: c["do_full"].done(it)
            yield cta_barrier(gen)  # top of the step
            gen += 1
            if w == 0 and it + 1 < iters:
                load_q(r, it + 1)
            if w == 0:
                c["in_full"].arrive(expect_tx=1)  # thread 0 arms it
            # S, dP read Q(st) and the whole dO
            f_sdp = wgmma([c["sQ"][st], c["sdO"][0], c["sdO"][1]], f"cta{r} wg{w} S/dP({it})")
            yield from wait_groups(0)
            if it > 0:
                yield lambda: c["out_free"].done(it - 1)
            c["sP"].write(f"cta{r} wg{w} P({it})")
            c["sdS"].write(f"cta{r} wg{w} dS({it})")
            yield cta_barrier(gen)  # mid-step
            gen += 1
            if w == 0:  # thread 0: the bulk copy of our dS into the partner's buffer
                c["sdS"].read_begin(f"copy({it})")
                peer["rdS"].write(f"cta{r} copy({it})")

                def land(it=it):
                    c["sdS"].read_end(f"copy({it})")
                    peer["in_full"].complete_tx(1)
                later(land)
            f_dv = wgmma([c["sP"], c["sdO"][w]], f"cta{r} wg{w} dV({it})")
            own = wgmma([c["sdS"]], f"cta{r} wg{w} dQ own({it})")
            yield lambda: c["in_full"].done(it)
            rem = wgmma([c["rdS"]], f"cta{r} wg{w} dQ partner({it})")
            f_dk = wgmma([c["sdS"], c["sQ"][st]], f"cta{r} wg{w} dK({it})")
            yield from wait_groups(3)  # dV done (dQ own, dQ partner, dK may run on)
            if it + 1 < iters:
                load_do_half(r, w, it + 1)
            yield from wait_groups(1)  # dQ done
            peer["out_free"].arrive()
            yield from wait_groups(0)  # dK done
            del f_sdp, f_dv, own, rem, f_dk
        yield cta_barrier(gen)  # the final cluster barrier (both CTAs below)
        gen += 1

    progs = {(r, w): wg_program(r, w) for r in range(2) for w in range(2)}
    waits = {k: None for k in progs}
    finished = set()
    stalled_rounds = 0
    while len(finished) < 4:
        moved = False
        for k in rng.sample(list(progs), 4):
            if k in finished:
                continue
            cond = waits[k]
            if cond is not None and not cond():
                continue
            try:
                waits[k] = next(progs[k])
                moved = True
            except StopIteration:
                finished.add(k)
                moved = True
        now[0] += 1
        due = [e for e in pending if e[0] <= now[0]]
        for e in due:
            pending.remove(e)
            e[1]()
            moved = True
        if not moved and not pending:
            stalled_rounds += 1
            assert stalled_rounds < 3, f"deadlock at iters {iters} seed {seed}: " + \
                ", ".join(f"cta{r} wg{w}" for (r, w) in progs if (r, w) not in finished)
        else:
            stalled_rounds = 0
    # every async operation drained; nothing left pending
    while pending:
        now[0] += 1
        for e in [e for e in pending if e[0] <= now[0]]:
            pending.remove(e)
            e[1]()
    for c in cta:
        for b in [*c["sQ"], *c["sdO"], c["sP"], c["sdS"], c["rdS"]]:
            assert not b.readers, (b.name, b.readers)
    return now[0]


@pytest.mark.parametrize("iters", [1, 2, 3, 5, 8])
def test_pair_protocol_random_schedules(iters):
    for seed in range(150):
        simulate(iters, seed)


def test_pair_protocol_catches_a_missing_wait():
    """The model is not vacuous: without the wait for out_free (the partner done with our dS),
    some schedule overwrites dS while the partner's copy or dQ still reads it."""
    import inspect
    import textwrap

    src = textwrap.dedent(inspect.getsource(simulate)).replace(
        "            if it > 0:\n                yield lambda: c[\"out_free\"].done(it - 1)\n", "")
    ns = dict(globals())
    exec(compile(src, "simulate_without_out_free", "exec"), ns)
    failures = 0
    for seed in range(300):
        try:
            ns["simulate"](6, seed)
        except AssertionError:
            failures += 1
    assert failures > 0
