"""Render FlashInfer's own JIT templates for the kernels the FlashKit decode bench calls.

FlashInfer (flashinfer-python) compiles its attention kernels at first use: its Python
package renders Jinja templates shipped in ``flashinfer/data/csrc`` into a config header
(``*_config.inc``) and kernel-instantiation files, then builds them with nvcc.  The GPU
machine has no internet and FlashInfer's Python package drags in heavy dependencies, so the
bench compiles the SAME templates ahead of time here (see build.sh) and calls the kernels
through a small C ABI (fi_peer_*.cu) instead of FlashInfer's tvm-ffi bindings.

The values below are the ones FlashInfer 0.7.2.post1's ``flashinfer/jit/attention/modules.py``
passes for bf16 q/kv/o, int32 indices, head_dim 128, no RoPE / sliding window / soft-cap:
- ``gen_batch_decode_module``      -> BatchDecodeWithPagedKVCacheWrapper (CUDA-core decode)
- ``_gen_batch_prefill_module(fa2, paged_kv_stride_mode="equal")`` -> the FA2 paged prefill
  module used by the decode wrapper with ``use_tensor_cores=True`` and by
  BatchPrefillWithPagedKVCacheWrapper(backend="fa2")
- ``_gen_batch_prefill_module(fa3)`` -> BatchPrefillWithPagedKVCacheWrapper(backend="auto")
  on sm90 (Hopper)
Only mask modes 0 (none) and 1 (causal) are rendered: the bench uses no other.

usage: python render_templates.py <flashinfer package dir (the one holding data/csrc)> <out dir>
needs: jinja2
"""

from __future__ import annotations

import sys
from pathlib import Path

import jinja2

MASK_MODE_LITERAL = {0: "MaskMode::kNone", 1: "MaskMode::kCausal"}


def additional_params(tensor_names, tensor_dtypes, scalar_names, scalar_dtypes, sm90=False):
    """The three strings FlashInfer's jit/attention/utils.py:generate_additional_params makes.

    Only the declaration matters for the harness (it sets the fields itself); the function
    parameter list and setter are rendered for completeness of the config header."""
    decl = "".join(f"{d}* {n};\n" for d, n in zip(tensor_dtypes, tensor_names)) + "".join(
        f"{d} {n};\n" for d, n in zip(scalar_dtypes, scalar_names))
    func = "".join(f", Optional<ffi::Tensor> {n}" if n.startswith("maybe") else
                   f", ffi::Tensor {n}" for n in tensor_names) + "".join(
        f", {d} {n}" for d, n in zip(scalar_dtypes, scalar_names))
    prefix = "params.additional_params." if sm90 else "params."
    setter = " \\\n".join(
        [(f"{prefix}{n} = {n} ? static_cast<{d}*>({n}.value().data_ptr()): nullptr;"
          if n.startswith("maybe") else f"{prefix}{n} = static_cast<{d}*>({n}.data_ptr());")
         for d, n in zip(tensor_dtypes, tensor_names)]
        + [f"{prefix}{n} = {n};" for n in scalar_names])
    return decl, func, setter


COMMON = {
    "dtype_q": "nv_bfloat16", "dtype_kv": "nv_bfloat16", "dtype_o": "nv_bfloat16",
    "idtype": "int32_t", "head_dim_qk": 128, "head_dim_vo": 128,
    "pos_encoding_mode": "PosEncodingMode::kNone", "use_sliding_window": "false",
    "use_logits_soft_cap": "false",
}


def render(template: Path, out: Path, **kw) -> None:
    text = jinja2.Template(template.read_text()).render(**kw)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"rendered {out}")


def main(pkg: Path, out: Path) -> None:
    csrc = pkg / "data" / "csrc"

    # --- batch decode (CUDA cores) -------------------------------------------------------
    decl, func, setter = additional_params(
        ["maybe_alibi_slopes"], ["float"],
        ["logits_soft_cap", "sm_scale", "rope_rcp_scale", "rope_rcp_theta"], ["double"] * 4)
    kw = dict(COMMON, additional_params_decl=decl, additional_func_params=func,
              additional_params_setter=setter,
              variant_name="DefaultAttention<false, false, false, false>",
              variant_decl="#include<flashinfer/attention/variants.cuh>")
    render(csrc / "batch_decode_customize_config.jinja", out / "decode" / "batch_decode_config.inc", **kw)
    render(csrc / "batch_decode_kernel_inst.jinja", out / "decode" / "batch_decode_kernel.cu", **kw)

    # --- FA2 paged prefill (tensor cores), equal K/V strides --------------------------------
    names = ["maybe_custom_mask", "maybe_mask_indptr", "maybe_alibi_slopes", "maybe_prefix_len_ptr",
             "maybe_token_pos_in_items_ptr", "maybe_max_item_len_ptr", "maybe_k_cache_sf",
             "maybe_v_cache_sf"]
    dtypes = ["uint8_t", "int32_t", "float", "uint32_t", "uint16_t", "uint16_t", "uint8_t",
              "uint8_t"]
    decl, func, setter = additional_params(
        names, dtypes,
        ["logits_soft_cap", "sm_scale", "rope_rcp_scale", "rope_rcp_theta", "token_pos_in_items_len"],
        ["double", "double", "double", "double", "int64_t"])
    kw = dict(COMMON, additional_params_decl=decl, additional_func_params=func,
              additional_params_setter=setter,
              variant_name="DefaultAttention<use_custom_mask, false, false, false>",
              variant_decl="#include<flashinfer/attention/variants.cuh>",
              use_fp16_qk_reduction="false", require_fp4_kv_cache=False,
              paged_kv_stride_mode="equal", same_kv_strides_values=["true"])
    render(csrc / "batch_prefill_customize_config.jinja", out / "fa2" / "batch_prefill_config.inc", **kw)
    for m, lit in MASK_MODE_LITERAL.items():
        render(csrc / "batch_prefill_paged_kernel_inst.jinja",
               out / "fa2" / f"batch_prefill_paged_kernel_mask_{m}.cu", mask_mode=lit, **kw)

    # --- FA3 paged prefill (sm90) ----------------------------------------------------------
    decl, func, setter = additional_params(
        ["maybe_prefix_len_ptr", "maybe_token_pos_in_items_ptr", "maybe_max_item_len_ptr",
         "maybe_scale_v"], ["uint32_t", "uint16_t", "uint16_t", "float"],
        ["logits_soft_cap", "sm_scale", "scale_v_scalar", "token_pos_in_items_len"],
        ["double", "double", "double", "int64_t"], sm90=True)
    kw = dict(COMMON, additional_params_decl=decl, additional_func_params=func,
              additional_params_setter=setter, variant_name="DefaultAttention<false>",
              variant_decl="#include<flashinfer/attention/hopper/variants.cuh>")
    # (the sm90 config template wraps these in cutlass_dtype_t<...> itself)
    render(csrc / "batch_prefill_sm90_customize_config.jinja",
           out / "fa3" / "batch_prefill_sm90_config.inc", **kw)
    for m, lit in MASK_MODE_LITERAL.items():
        render(csrc / "batch_prefill_paged_sm90_kernel_inst.jinja",
               out / "fa3" / f"batch_prefill_paged_sm90_kernel_mask_{m}.cu", mask_mode=lit, **kw)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
