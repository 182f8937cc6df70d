"""FlashKit: attention kernels for LLM training and inference.

Python API (a thin layer over the C++ API; see ``flashkit.ops`` for details)::

    out = flashkit.attention(q, k, v, causal=False, softmax_scale=None)
    out, lse = flashkit.attention(q, k, v, return_lse=True)
    out = flashkit.attention(q, k, v, causal=True, window=(4096, -1), softcap=30.0)
                                       # sliding window (left, right; -1: unbounded),
                                       # logit softcap (0: off); varlen and backward too
    out = flashkit.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k,
                                    max_seqlen_q, max_seqlen_k, causal=False)
    out.backward(dout)                 # torch autograd: FlashKit's fused backward
    dq, dk, dv = flashkit.attention_backward(dout, q, k, v, out, lse, causal=False)
                                       # the same without autograd (+ attention_varlen_backward)
    flashkit.compiled_fwd_variants()   # e.g. ['float16/128', 'bfloat16/128', ...]
    flashkit.fwd_kernel_family(torch.bfloat16, 128)   # 'sm90' on H100/H200, else 'sm80'
    flashkit.check_device_errors()     # RuntimeError if a kernel found bad cu_seqlens
    flashkit.device_errors()           # the bits (flashkit.DeviceError), cleared
    flashkit.__version__
    m = flashkit.KVCacheManager(num_blocks, block_size, max_batch, max_blocks_per_seq)
                                       # paged KV-cache manager (see flashkit.kvcache)

Layout: q [B, S_q, H_q, D], k/v [B, S_k, H_kv, D] (any strides, last dim contiguous),
out [B, S_q, H_q, D_v], lse float32 [B, H_q, S_q]; varlen q [total_q, H_q, D],
lse [H_q, total_q]. Works on torch tensors (as the custom ops
``torch.ops.flashkit.attention_fwd`` / ``attention_varlen_fwd`` and their backward ops
``attention_bwd`` / ``attention_varlen_bwd``: torch.compile and CUDA graphs friendly) and
on cupy arrays; torch is imported only when needed.
"""

try:
    from . import _C
except ImportError:
    import importlib.util as _util

    if _util.find_spec(__name__ + "._C") is not None:
        raise  # the extension is there but does not load (e.g. libflashkit.so.0 missing)
    # A source checkout without the built extension: importable, every op raises.
    _C = None
    _C_IMPORT_ERROR = f"no compiled extension _C next to {__file__}"
else:
    _C_IMPORT_ERROR = None

from .errors import DeviceError, check_device_errors, describe_device_errors, device_errors
from .ops import (attention, attention_backward, attention_varlen, attention_varlen_backward,
                  bwd_kernel_family, compiled_fwd_kernels, compiled_fwd_variants,
                  fwd_kernel_family)
from .decode import DecodePlan, append_kv, decode
from .kvcache import KVCacheExhaustedError, KVCacheManager
from . import mla  # flashkit.mla: FlashMLA-compatible MLA decode

__version__ = _C.version() if _C is not None else "0.1.0"

__all__ = ["attention", "attention_varlen", "attention_backward", "attention_varlen_backward",
           "compiled_fwd_variants", "compiled_fwd_kernels", "fwd_kernel_family",
           "bwd_kernel_family", "decode", "DecodePlan", "append_kv", "DeviceError",
           "device_errors", "check_device_errors", "describe_device_errors", "KVCacheManager",
           "KVCacheExhaustedError", "mla", "__version__"]
