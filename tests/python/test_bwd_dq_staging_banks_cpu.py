"""CPU model of the Hopper backward's dQ staging stores (the boxes its TMA reduce-adds read).

A box holds 16 rows x 32 fp32 columns of a warp with the 128-byte swizzle of the dq_accum map:
the 16-byte unit u of row r sits at u ^ (r % 8). A thread of the m64nN accumulator layout holds
rows g and g + 8 (g = lane / 4) and columns 8 j + 2 t, + 1 (t = lane % 4) of each 8-column
group j, and writes them as 8-byte stores. The address formulas below are quoted from the C++
(kernel_ks.cuh, the key-split D 256 kernel; kernel_pp.cuh, the ping-pong D 64/128 kernel); the
checks: every element lands where the swizzled layout puts it, and each store takes the minimum
of two shared-memory wavefronts (8-byte stores are served per half-warp; a half-warp's 16 lanes
must hit 32 distinct banks). ncu found the key-split kernel's first form at twice that
(2026-11-27, docs/kernels/bwd.md).
"""
import pytest


def swizzled(r, c):
    """Byte offset of (row r, fp32 column c) in a 32-column box with the 128-byte swizzle."""
    return r * 128 + (((4 * c) // 16) ^ (r % 8)) * 16 + (4 * c) % 16


def ks_store(lane, jj, half, swap):
    """kernel_ks.cuh, access jj of a round: (byte offset, (row, first column))."""
    g, t = lane // 4, lane % 4
    odd = swap and (g & 1) != 0
    gx = g ^ 4 if odd else g
    group = jj ^ 2 if odd else jj  # the value written: dq[..][4 h + (jj ^ 2)] when odd
    addr = (g + 8 * half) * 128 + (((2 * jj + t // 2) ^ gx) * 16) + (t % 2) * 8
    return addr, (g + 8 * half, 8 * group + 2 * t)


def pp_store(lane, k, half):
    """kernel_pp.cuh (split and hand-off staging), access k, within the first 32-column box
    (k < 4; the second box, j / 4 = 1, repeats the pattern 64 x 128 bytes further)."""
    g, t = lane // 4, lane % 4
    jx = 2 * (g & 1)
    j = k ^ jx
    r = g + half * 8  # (warp 0)
    unit = (j % 4) * 2 + t // 2
    addr = r * 128 + ((unit ^ g) * 16) + (t % 2) * 8
    return addr, (r, 8 * j + 2 * t)


def wavefronts(addrs):
    """8-byte stores of one warp: per half-warp, the most distinct 4-byte words on one bank."""
    total = 0
    for hw in (addrs[:16], addrs[16:]):
        banks = {}
        for a in hw:
            for w in (a // 4, a // 4 + 1):
                banks.setdefault(w % 32, set()).add(w)
        total += max(len(v) for v in banks.values())
    return total


@pytest.mark.parametrize("swap", [False, True], ids=["plain", "swapped"])
def test_key_split_staging(swap):
    seen = set()
    worst = 0
    for jj in range(4):
        for half in range(2):
            stores = [ks_store(lane, jj, half, swap) for lane in range(32)]
            for addr, (r, c) in stores:
                assert addr == swizzled(r, c), (jj, half, addr, r, c)
                seen.add((r, c))
            worst = max(worst, wavefronts([a for a, _ in stores]))
    assert len(seen) == 16 * 16  # each thread's pairs: every (row, even column) of the box once
    # the plain order (main before 2026-11-27) takes 4 wavefronts a store; the swapped one the minimum
    assert worst == (2 if swap else 4)


def test_ping_pong_staging():
    worst = 0
    seen = set()
    for k in range(4):
        for half in range(2):
            stores = [pp_store(lane, k, half) for lane in range(32)]
            for addr, (r, c) in stores:
                assert addr == swizzled(r, c), (k, half, addr, r, c)
                seen.add((r, c))
            worst = max(worst, wavefronts([a for a, _ in stores]))
    assert len(seen) == 16 * 16
    assert worst == 2
