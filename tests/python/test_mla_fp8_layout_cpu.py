"""CPU model of the Hopper MLA kernel's in-place FP8 dequantization (docs/kernels/mla.md "FP8 cache on the
Hopper kernel", src/kernels/mla/sm90_kernel.cuh: Piece::load_chunks' kFp8 copies, fp8_convert_loop).

Per block half h and chunk pair cp = 4h + 2k (k = 0 / 1, converter warp (h, k)) the TMA copies land
  - the e4m3 bytes of chunks cp, cp + 1 (128 bytes per token) as a 128-byte x 64-token box at chunk cp + 1,
  - the tokens' 16 scale bytes as a 16-byte x 64-token box at chunk cp (rows 0-7),
and the warp's lane l converts tokens l and l + 32: it reads its tokens' scales, syncs the warp, then per
chunk (cp out of place, cp + 1 in place) reads a token's 64 raw bytes and writes its 128-byte row of the
128-byte-swizzled bf16 tile (16-byte unit u of a row at position u ^ (row % 8)).

Checked with the kernel's constants quoted from the source:
- no lane writes a byte that another lane of its warp reads or writes between the same warp syncs, no
  converter warp touches a byte another converter warp touches (they never sync with each other), and
  no lane reads a byte after it has overwritten it itself;
- the tile then holds every (token, column) of chunks 0-7 where the wgmmas read it (the swizzled layout
  of tiles::Swizzle128Tile), converted with the scale of its 128-column group.
"""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
KERNEL = ROOT / "src" / "kernels" / "mla" / "sm90_kernel.cuh"
PARAMS = ROOT / "src" / "kernels" / "mla_params.h"

CHUNK = 8192  # 64 rows x 128 bytes
ROWS = 64


def source():
    return KERNEL.read_text()


def test_quoted_layout_matches_the_source():
    """The model below is the source's: copy destinations, scale address, row mapping, swizzle."""
    s = source()
    # copies: the raw box in chunk cp + 1, the scales box in chunk cp
    assert "dst + (cp + 1) * Tr::kChunkBytes), &p.kv_tmap_run" in s
    assert "dst + cp * Tr::kChunkBytes), &p.kv_tmap_scales" in s
    assert "const int cp = 4 * h + 2 * k;" in s
    # converter: lane -> tokens lane, lane + 32; scale of group 2h + k; raw row of token t; swizzled units
    assert "16 * (lane + 32 * i) + 4 * (2 * h + k)" in s
    assert "raw + 128 * t + 64 * cc" in s
    assert "kb + c * Tr::kChunkBytes + t * 128" in s
    assert "(((2 * q + v) ^ x) << 4)" in s and "const uint32_t x = uint32_t(t & 7);" in s
    assert "const uint32_t q = uint32_t((jj + lane) & 3);" in s
    # the byte offsets of the FP8 token layout
    p = PARAMS.read_text()
    assert re.search(r"kMlaFp8ScaleOffset = 512;", p) and re.search(r"kMlaFp8RopeOffset = 528;", p)
    # the landed bytes per (buffer, half, warp): 64 x 128 raw + 64 x 16 scales
    assert "static constexpr int kLandBytes = 8192 + 1024;" in s


def landings(h, k):
    """{buffer byte: ('raw', token, byte of the token's 512 e4m3 bytes) or ('scale', token, group)}."""
    cp = 4 * h + 2 * k
    out = {}
    for t in range(ROWS):
        for b in range(128):
            out[(cp + 1) * CHUNK + 128 * t + b] = ("raw", t, cp * 64 + b)
        for g in range(4):
            for j in range(4):
                out[cp * CHUNK + 16 * t + 4 * g + j] = ("scale", t, g)
    return out


def program(h, k, lane):
    """The lane's memory operations in program order, in phases split by __syncwarp:
    [(phase, 'r' | 'w', byte set, payload)]."""
    cp = 4 * h + 2 * k
    ops = []
    for i in range(2):
        t = lane + 32 * i
        a = cp * CHUNK + 16 * t + 4 * (2 * h + k)
        ops.append((0, "r", set(range(a, a + 4)), ("scale", t)))
    raw = (cp + 1) * CHUNK
    for cc in range(2):
        c = cp + cc
        for i in range(2):
            t = lane + 32 * i
            src = raw + 128 * t + 64 * cc
            ops.append((1, "r", set(range(src, src + 64)), ("row", t, cc)))
            dst = c * CHUNK + t * 128
            x = t & 7
            for jj in range(4):
                q = (jj + lane) & 3
                for v in range(2):
                    u = 2 * q + v  # columns 8u .. 8u + 7 of the chunk
                    a = dst + (((2 * q + v) ^ x) << 4)
                    ops.append((1, "w", set(range(a, a + 16)), ("unit", t, c, u)))
    return ops


WARPS = [(h, k) for h in range(2) for k in range(2)]


def test_no_lane_or_warp_races():
    by_warp = {}
    for h, k in WARPS:
        lanes = {lane: program(h, k, lane) for lane in range(32)}
        # within a lane: no read of a byte it has already overwritten
        for lane, ops in lanes.items():
            written = set()
            for _, kind, bytes_, _ in ops:
                if kind == "r":
                    assert not (bytes_ & written), (h, k, lane)
                else:
                    written |= bytes_
        # across lanes of the warp, within one phase: writes disjoint from other lanes' reads and writes
        for phase in (0, 1):
            rd = {lane: set().union(*[b for p, kd, b, _ in ops if p == phase and kd == "r"] or [set()])
                  for lane, ops in lanes.items()}
            wr = {lane: set().union(*[b for p, kd, b, _ in ops if p == phase and kd == "w"] or [set()])
                  for lane, ops in lanes.items()}
            for a in range(32):
                for b in range(32):
                    if a != b:
                        assert not (wr[a] & (rd[b] | wr[b])), (h, k, phase, a, b)
        touched = set()
        for ops in lanes.values():
            for _, _, bytes_, _ in ops:
                touched |= bytes_
        by_warp[(h, k)] = touched
    # converter warps never sync with one another: their bytes are disjoint
    for a in WARPS:
        for b in WARPS:
            if a < b:
                assert not (by_warp[a] & by_warp[b]), (a, b)
    # and none touches the RoPE chunk, which lands by TMA straight into chunk 8
    for touched in by_warp.values():
        assert not any(x >= 8 * CHUNK for x in touched)


def test_the_tile_holds_every_value_where_the_wgmmas_read_it():
    """Runs each warp's lanes in program order (any order of the lanes is equivalent, by the race test) on
    symbolic bytes and checks the tile against tiles::Swizzle128Tile's layout."""
    tile = {}  # buffer byte offset of a 16-byte unit -> tuple of 8 (token, column, scale group)
    mem = {}
    for h, k in WARPS:
        mem.update(landings(h, k))
    for h, k in WARPS:
        regs_scale = [dict() for _ in range(32)]
        regs_row = [dict() for _ in range(32)]
        # phase by phase (the __syncwarp), lane after lane within one
        for phase, lane in [(p, lane) for p in (0, 1) for lane in range(32)]:
            for ph, kind, bytes_, payload in program(h, k, lane):
                if ph != phase:
                    continue
                if kind == "r" and payload[0] == "scale":
                    t = payload[1]
                    vals = {mem[b] for b in bytes_}
                    assert len(vals) == 1
                    (tag,) = vals
                    assert tag[0] == "scale" and tag[1] == t
                    regs_scale[lane][t] = tag[2]
                elif kind == "r":
                    _, t, cc = payload
                    row = sorted(bytes_)
                    regs_row[lane][(t, cc)] = [mem[b] for b in row]
                else:
                    _, t, c, u = payload
                    cc = c - (4 * h + 2 * k)
                    raw = regs_row[lane][(t, cc)]
                    vals = []
                    for e in range(8):
                        tag = raw[8 * u + e]
                        assert tag[0] == "raw" and tag[1] == t
                        vals.append((t, tag[2], regs_scale[lane][t]))
                    a = min(bytes_)
                    for b in bytes_:
                        mem[b] = ("bf16", a)
                    tile[a] = tuple(vals)
    # Swizzle128Tile: (row, col) of chunk col // 64 at row * 128 + ((col % 64 // 8) ^ (row % 8)) * 16 + (col % 8) * 2
    for t in range(ROWS):
        for col in range(0, 512, 8):
            c = col // 64
            a = c * CHUNK + t * 128 + (((col % 64) // 8) ^ (t % 8)) * 16
            assert tile[a] == tuple((t, col + e, (col + e) // 128) for e in range(8)), (t, col)
