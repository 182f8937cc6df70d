"""The device error flag: what FlashKit kernels found wrong in index data on the GPU.

Index arrays that live on the GPU (``cu_seqlens_q/k`` now; block tables and lengths of
the paged KV cache later) are never trusted by the kernels: they clamp every range they
read to the tensors' real extent, so no index array, however wrong, makes a kernel read or
write outside its tensors. What they found is recorded in one sticky 32-bit word per
device, shared by every FlashKit kernel (:class:`DeviceError` lists the bits). Reading it
synchronizes the device, so check it where a sync is acceptable (after a step, in tests,
when debugging)::

    out = flashkit.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k)
    flashkit.check_device_errors()     # RuntimeError if a kernel found bad indices

For an error at the call itself, naming the argument and the first bad position, pass
``check_inputs=True`` to :func:`flashkit.attention_varlen` (or set
``FLASHKIT_CHECK_INPUTS=1``): it validates the index arrays on the GPU before the launch,
at the cost of a sync per call.
"""

import enum

__all__ = ["DeviceError", "device_errors", "check_device_errors", "describe_device_errors"]


class DeviceError(enum.IntFlag):
    """Bits of the device error word (``flashkit::DeviceError`` in C++)."""

    #: a cu_seqlens entry out of order, negative or past the end of q/k, or the array not
    #: starting at 0 / ending at the rows of q/k: a sequence with a bad q range writes
    #: nothing, one with a bad k range gets out = 0 and lse = -inf
    CU_SEQLENS = 1
    #: a sequence longer than max_seqlen_q (its rows past the grid are not written) or
    #: max_seqlen_k
    SEQLEN_ABOVE_MAX = 2
    #: paged decode: a block id outside [0, num_pages) (its tokens are left out)
    BLOCK_ID = 4
    #: paged decode: a seqlens_k entry negative or beyond the block table (clamped)
    SEQLENS_K = 8
    #: append_kv: a new token without a valid slot (not written)
    APPEND_SLOT = 16
    #: paged decode: the workspace was not planned for the call's sizes (nothing written)
    DECODE_PLAN = 32
    #: deterministic backward: its CTAs could not all be resident (a kernel held SMs, an SM
    #: limit), so some dq adds were made out of turn: dq correct, maybe not bitwise
    #: reproducible (FLASHKIT_BWD_DET_ROTATE=0 avoids it)
    DET_ORDER = 64


def _native():
    from .ops import _native as native

    return native()


def _device_index(device):
    if device is None:
        return -1
    index = getattr(device, "index", device)  # torch.device / cupy Device / int
    if index is None:  # torch.device("cuda"): the current device
        return -1
    if isinstance(index, bool) or not hasattr(index, "__index__"):
        raise TypeError(f"device: expected an int, a torch.device or None, got {device!r}")
    index = int(index)
    if index < 0:
        raise ValueError(f"device: expected a CUDA device index >= 0 or None, got {index}")
    return index


def device_errors(clear=True, device=None):
    """The bits of the device error word of ``device`` (None: the current CUDA device) as
    an int (0: no error; see :class:`DeviceError`). ``clear``: reset the bits that were
    read. Synchronizes the device. Raises RuntimeError without a usable GPU."""
    return int(_native().read_device_errors(_device_index(device), bool(clear)))


def describe_device_errors(bits):
    """A readable description of device error ``bits``."""
    return str(_native().describe_device_errors(int(bits)))


def check_device_errors(device=None):
    """Raises RuntimeError describing the device error bits of ``device`` (None: the
    current device) when any is set, and clears them. Synchronizes the device."""
    bits = device_errors(clear=True, device=device)
    if bits:
        raise RuntimeError(
            f"flashkit: kernels found invalid index data on the GPU (device error bits "
            f"{bits:#x}): {describe_device_errors(bits)}. Call with check_inputs=True (or set "
            f"FLASHKIT_CHECK_INPUTS=1) to get the argument and the first bad position.")
