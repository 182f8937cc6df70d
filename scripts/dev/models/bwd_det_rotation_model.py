"""CPU model of a rotated deterministic dQ order for the backward (a plan, not in a kernel yet:
docs/kernels/bwd.md, "Deterministic mode: the plan").

Non-causal, no window: every key block n (of N) visits every row block m (of M). Today each CTA
walks m = 0, 1, ... and the turn of (m, n) is n, so key block n waits at every step for key
block n - 1: a chain. Rotated: CTA n starts at shift(n) = floor(n M / N) and walks
m = shift(n) + s (mod M) at step s; the turn of (m, n) is the rank of its step among the key
blocks visiting m, which is turn(m, n) = (nstar(m) - n) mod N with nstar(m) = the last key
block whose start is <= m. Checked here for many (M, N):

- the turns of each row block are exactly 0..N-1 (one add at a time, nobody waits forever);
- the previous turn on a row block was visited at an earlier step, by at least
  floor(M / N) steps (the slack a one-step deferred release needs: >= 1 when M >= N);
- simulated with all CTAs co-resident and each add released L + 1 steps after it was issued:
  while L + 1 <= M / N (the gap between consecutive turns) nobody waits and the last add lands
  at step M + L, against about M + N (L + 1) for the ascending order's chain; with a longer
  release lag the rotated order waits too (the printout shows both). With kBlockM = 64,
  kBlockN = 128 and S_q = S_k, M / N = 2: a release deferred by one step (L = 0 or 1) fits.

    python3 scripts/dev/models/bwd_det_rotation_model.py
"""
import itertools


def shift(n, M, N):
    return n * M // N


def nstar(m, M, N):
    # max{n : shift(n) <= m}
    return max(n for n in range(N) if shift(n, M, N) <= m)


def turn_rotated(m, n, M, N):
    return (nstar(m, M, N) - n) % N


def step_rotated(m, n, M, N):
    return (m - shift(n, M, N)) % M


def check(M, N):
    for m in range(M):
        turns = sorted(turn_rotated(m, n, M, N) for n in range(N))
        assert turns == list(range(N)), (M, N, m, turns)
        by_turn = sorted(range(N), key=lambda n: turn_rotated(m, n, M, N))
        steps = [step_rotated(m, n, M, N) for n in by_turn]
        assert all(a < b for a, b in zip(steps, steps[1:])), (M, N, m, steps)  # turn order = step order
        gaps = [b - a for a, b in zip(steps, steps[1:])]
        if N > 1:
            assert min(gaps) >= M // N, (M, N, m, gaps)


def simulate(M, N, L, order):
    """Finish step of the last add: each CTA does one row block per step unless it waits for
    the previous turn's add, which lands L steps after it was issued (released 1 step later)."""
    done = {}  # (m, turn) -> step at which that add is released
    t = [0] * N  # next free step of each CTA
    pending = [[((m + (shift(n, M, N) if order == "rot" else 0)) % M) for m in range(M)] for n in range(N)]
    turn = (lambda m, n: turn_rotated(m, n, M, N)) if order == "rot" else (lambda m, n: n)
    last = 0
    progress = True
    while progress:
        progress = False
        for n in range(N):
            while pending[n]:
                m = pending[n][0]
                k = turn(m, n)
                if k > 0 and (m, k - 1) not in done:
                    break
                start = max(t[n], done[(m, k - 1)] if k > 0 else 0)
                done[(m, k)] = start + L + 1
                t[n] = start + 1
                last = max(last, done[(m, k)])
                pending[n].pop(0)
                progress = True
    assert all(not p for p in pending), "deadlock"
    return last


def main():
    for M, N in itertools.product(range(1, 40), range(1, 40)):
        if M >= N:
            check(M, N)
    print("turn checks: ok for 1 <= N <= M < 40")
    for M, N in ((64, 32), (256, 128), (128, 128)):
        for L in (1, 2):
            print(f"M {M} N {N} latency {L}: ascending ends at step {simulate(M, N, L, 'asc')}, "
                  f"rotated at {simulate(M, N, L, 'rot')} (no waiting: {M - 1 + L + 1})")


if __name__ == "__main__":
    main()
