"""The device error word from Python, without a GPU: the bits, their descriptions and
the argument checks of flashkit.device_errors (the GPU side is in
test_index_hardening_gpu.py)."""

import pytest


def test_bits_match_the_cpp_enum(flashkit_ext):
    bits = flashkit_ext._C.device_error_bits()
    assert {m.name: int(m) for m in flashkit_ext.DeviceError} == dict(bits)
    assert [int(m) for m in flashkit_ext.DeviceError] == [1, 2, 4, 8, 16, 32, 64]


def test_describe_no_bits(flashkit_ext):
    assert flashkit_ext.describe_device_errors(0) == "no device errors"


@pytest.mark.parametrize("bit, words", [
    ("CU_SEQLENS", ["cu_seqlens invalid (bit 0x1)", "out of order", "past the end",
                    "out = 0 and lse = -inf"]),
    ("SEQLEN_ABOVE_MAX", ["longer than max_seqlen (bit 0x2)", "max_seqlen_q", "max_seqlen_k"]),
    ("BLOCK_ID", ["block id out of range (bit 0x4)", "[0, num_pages)"]),
    ("SEQLENS_K", ["seqlens_k out of range (bit 0x8)", "max_pages * page_size"]),
    ("APPEND_SLOT", ["append slot invalid (bit 0x10)", "not written"]),
    ("DECODE_PLAN", ["decode plan mismatch (bit 0x20)", "decode_plan"]),
    ("DET_ORDER", ["deterministic order given up (bit 0x40)", "resident", "FLASHKIT_BWD_DET_ROTATE=0"]),
])
def test_describe_each_bit(flashkit_ext, bit, words):
    text = flashkit_ext.describe_device_errors(flashkit_ext.DeviceError[bit])
    for w in words:
        assert w in text, text
    assert text.count("(bit 0x") == 1, text


def test_describe_several_and_unknown_bits(flashkit_ext):
    E = flashkit_ext.DeviceError
    text = flashkit_ext.describe_device_errors(E.CU_SEQLENS | E.SEQLEN_ABOVE_MAX | 0x100)
    assert text.index("bit 0x1") < text.index("bit 0x2") < text.index("unknown bits 0x100"), text
    assert flashkit_ext.describe_device_errors(1 << 31) == "unknown bits 0x80000000"


@pytest.mark.parametrize("device, exc", [("cuda:0", TypeError), (True, TypeError),
                                         (1.5, TypeError), (-2, ValueError)])
def test_device_argument_is_checked(flashkit_ext, device, exc):
    with pytest.raises(exc, match="device"):
        flashkit_ext.device_errors(device=device)


def _gpu_usable(flashkit):
    variants = flashkit.compiled_fwd_variants()
    dt, d = variants[0].split("/")
    return flashkit.fwd_kernel_family(dt, int(d)) != ""


def test_without_a_gpu_reading_raises(flashkit_ext):
    if _gpu_usable(flashkit_ext):
        pytest.skip("a GPU is usable here (the GPU tests read the word)")
    with pytest.raises(RuntimeError, match="no usable CUDA device"):
        flashkit_ext.device_errors()
    with pytest.raises(RuntimeError, match="no usable CUDA device"):
        flashkit_ext.check_device_errors()
