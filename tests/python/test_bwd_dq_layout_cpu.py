"""CPU model check of the Hopper backward's dQ staging layout (src/kernels/bwd_sm90/kernel_pp.cuh,
kDqTma: the hand-off at D 64 and `send_dq_split` at D 128).

A warpgroup's m64n64 dQ accumulator is spread over its 128 threads as wgmma lays it out:
warp w, lane (g = lane / 4, t = lane % 4) holds dq[j][e] = dQ[16 w + g + 8 (e / 2)][8 j + 2 t + e % 2].
The kernel stores it into two TMA boxes of 64 rows x 32 fp32 columns with the 128-byte swizzle
(the layout `cp.reduce.async.bulk.tensor` reads), one 8-byte store per (access k, half); in
access k the lanes of odd g take column group j = k ^ 2 (so a half-warp's stores meet distinct
16-byte units). Checked here, with the kernel's formulas quoted:

- every element lands where the TMA box layout wants it, exactly once;
- each warp's 16 rows form a 16-row box at a 1024-byte boundary (the per-warp reduce-adds);
- no bank conflicts: each half-warp's 8-byte accesses cover 32 distinct banks; without the
  k ^ 2 exchange they would not (the layout the first version had, 2x the wavefronts).
"""
import itertools

BOX_BYTES = 64 * 128  # 64 rows x 32 fp32


def tma_box_offset(row, col):
    """Byte offset of fp32 element (row, col) of a 64 x 64 chunk staged as two boxes of 32
    columns, 128-byte swizzle: the 16-byte unit u of row r sits at u ^ (r % 8)."""
    box, c = divmod(col, 32)
    unit, within = divmod(c * 4, 16)
    return box * BOX_BYTES + row * 128 + ((unit ^ (row % 8)) * 16) + within


def kernel_store(warp, lane, k, half, exchange=True):
    """(byte offset, [(row, col), (row, col + 1)]) of the thread's 8-byte store (k, half), as
    kernel_pp.cuh computes it (elem / send_dq_split)."""
    g, t = lane // 4, lane % 4
    jx = 2 * (g & 1) if exchange else 0
    j = k ^ jx
    r = warp * 16 + g + half * 8
    unit = (j % 4) * 2 + t // 2
    off = (j // 4) * BOX_BYTES + r * 128 + ((unit ^ g) * 16) + (t % 2) * 8
    # the values stored: dq[k ^ jx][2 half], dq[k ^ jx][2 half + 1] = dQ[r][8 j + 2 t (+ 1)]
    col = 8 * j + 2 * t
    return off, [(r, col), (r, col + 1)]


def test_every_element_lands_in_the_tma_box_layout_once():
    seen = {}
    for warp, lane, k, half in itertools.product(range(4), range(32), range(8), range(2)):
        off, elems = kernel_store(warp, lane, k, half)
        for i, (r, c) in enumerate(elems):
            assert tma_box_offset(r, c) == off + 4 * i, (warp, lane, k, half, r, c)
            assert (r, c) not in seen
            seen[(r, c)] = off + 4 * i
    assert len(seen) == 64 * 64
    assert sorted(seen.values()) == list(range(0, 2 * BOX_BYTES, 4))


def test_each_warp_owns_a_16_row_box():
    for warp in range(4):
        for r, c in itertools.product(range(16), range(64)):
            row = warp * 16 + r
            box, cc = divmod(c, 32)
            unit, within = divmod(cc * 4, 16)
            standalone = r * 128 + ((unit ^ (r % 8)) * 16) + within  # a 16-row box's own layout
            assert tma_box_offset(row, c) == box * BOX_BYTES + warp * 16 * 128 + standalone
    assert (16 * 128) % 1024 == 0  # each warp's rows start on a swizzle period


def banks_of_half_warps(exchange):
    worst = 0
    for warp, k, half in itertools.product(range(4), range(8), range(2)):
        for lanes in (range(0, 16), range(16, 32)):
            banks = []
            for lane in lanes:
                off, _ = kernel_store(warp, lane, k, half, exchange)
                banks += [(off // 4) % 32, (off // 4 + 1) % 32]
            worst = max(worst, max(banks.count(b) for b in set(banks)))
    return worst


def test_half_warp_stores_are_conflict_free():
    assert banks_of_half_warps(exchange=True) == 1


def test_without_the_exchange_two_lanes_share_a_unit():
    assert banks_of_half_warps(exchange=False) == 2
