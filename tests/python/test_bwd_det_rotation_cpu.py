"""CPU model check of the deterministic backward's rotated walk (src/kernels/attention_common/
bwd_cta.cuh: rot_shift, m_block_rot, dq_turn_rot; used by the Hopper column-split kernel's
deterministic instantiation and by the D 256 key-split kernel's deterministic mode when there is
no mask, p.dq_rotate).

The formulas are quoted from the C++ (integer semantics, all operands non-negative). Checked on
all small (M row blocks, N key blocks), including M < N (S_q < S_k):
- each CTA's walk visits every row block exactly once;
- the turns of a row block are exactly 0..N-1 (the counter reaches every threshold once);
- simulated with all CTAs of the group resident (the launcher's condition), one row block per
  step, each add's turn released one step after the add (the kernel releases earlier: after its
  next softmax, before its next send):
  no deadlock, and with M >= N nobody ever waits (the previous turn is floor(M / N) >= 1 steps
  ahead), so the group ends at step M + 1 whatever N is.
"""
import itertools

import pytest


def rot_shift(n_block, per_head, n_blocks):
    return n_block * per_head // n_blocks


def m_block_rot(it, shift, per_head, m_begin=0):
    m = it % per_head + shift
    if m >= per_head:
        m -= per_head
    return m_begin + m


def dq_turn_rot(m_block, n_block, per_head, n_blocks, m_begin=0):
    m = m_block - m_begin
    n_star = min(n_blocks - 1, ((m + 1) * n_blocks + per_head - 1) // per_head - 1)
    turn = n_star - n_block
    return turn + n_blocks if turn < 0 else turn


def simulate(M, N):
    """Returns (last step, total steps spent waiting) or raises on a deadlock."""
    walks = []
    for n in range(N):
        s = rot_shift(n, M, N)
        walk = [m_block_rot(it, s, M) for it in range(M)]
        assert sorted(walk) == list(range(M)), (M, N, n)
        walks.append(walk)
    for m in range(M):
        assert sorted(dq_turn_rot(m, n, M, N) for n in range(N)) == list(range(N)), (M, N, m)
    released = {}  # (m, turn) -> step at which the turn is passed on
    pos = [0] * N
    clock = [0] * N
    waited = 0
    while any(p < M for p in pos):
        moved = False
        for n in range(N):
            if pos[n] == M:
                continue
            m = walks[n][pos[n]]
            k = dq_turn_rot(m, n, M, N)
            if k > 0 and (m, k - 1) not in released:
                continue
            start = max(clock[n], released[(m, k - 1)] if k > 0 else 0)
            waited += start - clock[n]
            released[(m, k)] = start + 1  # released at the CTA's next step
            clock[n] = start + 1
            pos[n] += 1
            moved = True
        if not moved:
            raise AssertionError(f"deadlock at M {M} N {N}")
    return max(clock), waited


@pytest.mark.parametrize("M,N", [(m, n) for m, n in itertools.product(range(1, 33), range(1, 33))])
def test_rotated_walk_and_turns(M, N):
    last, waited = simulate(M, N)
    if M >= N:
        assert waited == 0 and last == M, (M, N, last, waited)


def test_rotation_beats_the_ascending_chain():
    # the ascending order (every CTA walks m = 0, 1, ...; turn = n) waits at every step
    M, N = 64, 32
    last_rot, _ = simulate(M, N)
    clock = [0] * N
    released = {}
    for m in range(M):
        for n in range(N):
            start = max(clock[n], released[(m, n - 1)] if n > 0 else 0)
            released[(m, n)] = start + 1
            clock[n] = start + 1
    assert last_rot == M < max(clock)


def kernel_events(walk, split):
    """The deterministic kernel's turn events of one CTA, in program order (kernel_pp.cuh):
    ('rel', m) releases row block m's turn, ('send', m) waits for it and adds. The split
    schedule (D 128, and D 64 with FLASHKIT_BWD_D64_DQ_ONE, the default): step s sends the
    block visited at s - 1 at its end and releases, after its softmax, the block sent at the
    end of the step before; the hand-off (D 64 with it off) sends the block of step s at its end. The
    tail sends what is left and releases everything."""
    L, ev = len(walk), []
    for s in range(L):
        old = s - 1 - (1 if split else 0)  # the block whose release is due at this softmax
        if old >= 0:
            ev.append(("rel", walk[old]))
        if split and s >= 1:
            ev.append(("send", walk[s - 1]))
        if not split:
            ev.append(("send", walk[s]))
    sent = [walk[i] for i in range(L - 1)] if split else list(walk)
    released = {walk[i] for i in range(L) if i + 1 + (1 if split else 0) < L}
    if split:  # the tail: release L-2, send L-1, release L-1
        for m in sent:
            if m not in released:
                ev.append(("rel", m))
                released.add(m)
        ev.append(("send", walk[L - 1]))
        sent.append(walk[L - 1])
    for m in sent:
        if m not in released:
            ev.append(("rel", m))
            released.add(m)
    return ev


def simulate_events(M, N, split):
    """All CTAs resident, one event per CTA per tick unless its send waits for its turn;
    returns the tick at which the last CTA finishes, or raises on a deadlock."""
    evs = []
    for n in range(N):
        walk = [m_block_rot(it, rot_shift(n, M, N), M) for it in range(M)]
        ev = kernel_events(walk, split)
        assert sorted(m for k, m in ev if k == "send") == list(range(M))
        assert sorted(m for k, m in ev if k == "rel") == list(range(M))
        evs.append(ev)
    done = {m: 0 for m in range(M)}  # turns released per row block
    pos, tick = [0] * N, 0
    while any(p < len(e) for p, e in zip(pos, evs)):
        tick += 1
        moved = False
        releases = []
        for n in range(N):
            if pos[n] == len(evs[n]):
                continue
            kind, m = evs[n][pos[n]]
            if kind == "send" and done[m] < dq_turn_rot(m, n, M, N):
                continue
            if kind == "rel":
                releases.append(m)
            pos[n] += 1
            moved = True
        for m in releases:  # visible from the next tick
            done[m] += 1
        if not moved:
            raise AssertionError(f"deadlock at M {M} N {N} split {split}")
    return tick


@pytest.mark.parametrize("split", [False, True], ids=["handoff", "split"])
def test_kernel_release_schedule_never_deadlocks(split):
    """The kernel's own send / release points for every small (M, N), M < N included: no
    deadlock, and with M >= 2N (the FA3 sweep's S_q = S_k) no CTA ever waits (each finishes in
    exactly its own number of events). (A release one send later deadlocked at M = N = 2 in
    this model; measured slower too, it was removed: bwd.md.)"""
    for M, N in itertools.product(range(1, 21), range(1, 21)):
        tick = simulate_events(M, N, split)
        if M >= 2 * N:
            walk = [m_block_rot(it, rot_shift(0, M, N), M) for it in range(M)]
            assert tick == len(kernel_events(walk, split)), (M, N, split, tick)


def test_key_split_square_walk_never_waits():
    """The D 256 key-split kernel (kernel_ks.cuh) has the hand-off schedule (step s releases,
    after its softmax, the block of step s - 1 and sends the block of step s) on 64 x 64 tiles,
    so S_q = S_k gives M = N: one visitor per row block per step. Rotated, nobody waits (each
    CTA ends after its own events); in the ascending order each key block trails the previous
    one and the group takes about twice as long."""
    for M in range(1, 25):
        walk = [m_block_rot(it, rot_shift(0, M, M), M) for it in range(M)]
        assert simulate_events(M, M, False) == len(kernel_events(walk, False)), M
    M = 16
    evs = [kernel_events(list(range(M)), False) for _ in range(M)]
    done, pos, tick = {m: 0 for m in range(M)}, [0] * M, 0
    while any(p < len(e) for p, e in zip(pos, evs)):
        tick += 1
        rel = []
        for n in range(M):
            if pos[n] == len(evs[n]):
                continue
            kind, m = evs[n][pos[n]]
            if kind == "send" and done[m] < n:  # ascending: turn = n
                continue
            if kind == "rel":
                rel.append(m)
            pos[n] += 1
        for m in rel:
            done[m] += 1
    assert tick > 1.8 * len(evs[0])
