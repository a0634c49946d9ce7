"""The closed set of qformats error codes and the one error type that carries them.

Every rejection of input raises :class:`QFormatsError` with a stable ``code`` from
:data:`CODES`. The code, the tensor or field concerned, the constraint and the actual value
are kept as attributes, so callers (the validator, the conformance runner, other libraries'
CI) never parse message text. Messages read like attrs' validators::

    'scales' must be finite float16 (got NaN at [3, 17])

Codes are stable strings, listed in the spec beside the clause they enforce. Adding a code
means adding it here *and* to its spec chapter; ``tests/test_errors.py`` checks both
directions.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["CODES", "QFormatsError", "brief", "brief_ascii", "fail", "fail_validation", "format_actual"]

# code -> (clause, one-line meaning). Sections are owned by one area each.
CODES: dict[str, tuple[str, str]] = {
    # -- generic tensor and argument checks (spec/README.md) -------------------------------
    "tensor.missing": ("QF-2.1", "a required tensor is absent"),
    "tensor.dtype": ("QF-2.2", "a tensor has the wrong dtype"),
    "tensor.shape": ("QF-2.3", "a tensor has the wrong shape or rank"),
    "tensor.nonfinite": ("QF-2.4", "a floating-point tensor holds NaN or infinity"),
    "tensor.unexpected": ("QF-2.5", "a tensor that the layout does not define"),
    "argument.invalid": ("QF-2.6", "a function argument is outside its documented domain"),
    # -- bit packing (spec/README.md, QF-3) ------------------------------------------------
    "bits.unsupported": ("QF-3.1", "field width outside the supported set"),
    "bits.value_range": ("QF-3.2", "a value does not fit in its b-bit field"),
    "bits.length": ("QF-3.3", "the packed axis does not fill whole 32-bit words"),
    # -- AWQ GEMM (spec/awq.md) ------------------------------------------------------------
    "awq.config.invalid": ("AWQ-5.1", "AWQ quantization config value outside its domain"),
    "awq.config.unknown_key": ("AWQ-5.1", "AWQ config key the spec does not define (warning)"),
    "awq.config.legacy_only": ("AWQ-5.1", "the AWQ config is only in AutoAWQ 0.1's quant_config.json, which "
                               "AutoAWQ 0.2 and transformers do not read (warning)"),
    "awq.config.other_layout": ("AWQ-1.2", "version names an AutoAWQ layout other than GEMM"),
    "awq.config.tensor_mismatch": ("AWQ-5.2", "modules_to_not_convert names a module that holds AWQ tensors"),
    "awq.codes.range": ("AWQ-3.2", "a code handed to the AWQ packer is outside [0, 15]"),
    "awq.zero.range": ("AWQ-3.2", "a zero point handed to the AWQ packer is outside [0, 15]"),
    "awq.scales.nonfinite": ("AWQ-3.3", "an AWQ scale is NaN or infinite"),
    "awq.group.shape": ("AWQ-2.2", "group size does not divide in_features"),
    "awq.label.mismatch": ("AWQ-6.2", "version gemm, but qweight is packed along the input axis"),
    "awq.convert.unrepresentable": ("AWQ-4.2", "a layer AWQ GEMM cannot express (bits, act-order, short group)"),
    # -- compressed-tensors pack-quantized (spec/compressed_tensors.md) --------------------
    "ctensors.config.invalid": ("CT-5.1", "compressed-tensors quantization_config value outside its domain"),
    "ctensors.config.tensor_mismatch": ("CT-5.4", "a module's tensors contradict the config group that covers it"),
    "ctensors.config.ignore_unmatched": ("CT-5.2", "an ignore entry names no module of the checkpoint (warning)"),
    "ctensors.config.target_unmatched": ("CT-5.2", "a config group's name or re: target matches no module (warning)"),
    "ctensors.value.range": ("CT-2.3", "a code or zero point handed to the packer is outside the signed range"),
    "ctensors.scales.nonfinite": ("CT-3.3", "a weight_scale is NaN or infinite"),
    "ctensors.group.shape": ("CT-2.2", "group size does not divide in_features"),
    "ctensors.g_idx.range": ("CT-2.4", "a weight_g_idx value is outside [0, G)"),
    "ctensors.padding.nonzero": ("CT-2.3", "bits after the last value of a packed row are not zero (warning)"),
    "ctensors.scheme.uncovered": ("CT-2.2", "a module's config group uses a strategy qformats does not decode: "
                                  "not checked (warning)"),
    "ctensors.layout.word": ("CT-2.6", "packed in compressed-tensors <= 0.17's per-word layout, which 0.18 and "
                             "later misread (warning)"),
    "ctensors.layout.ambiguous": ("CT-2.6", "both bit layouts fit the widths and the config names no version "
                                  "(warning)"),
    "ctensors.convert.unrepresentable": ("CT-4.1", "a layer the target format cannot express"),
    # -- bitsandbytes NF4 / FP4 / LLM.int8 (spec/bnb.md) -----------------------------------
    "bnb.state.invalid": ("BNB-5.1", "a bitsandbytes quant_state is not the UTF-8 JSON object of its keys"),
    "bnb.state.duplicate": ("BNB-5.1", "a bitsandbytes module holds more than one quant_state entry"),
    "bnb.quant_type": ("BNB-5.2", "quant_type is neither nf4 nor fp4, or disagrees with the quant_state's name"),
    "bnb.dtype": ("BNB-5.2", "the quant_state's dtype is not float16, bfloat16 or float32"),
    "bnb.blocksize": ("BNB-3.3", "a blocksize bitsandbytes does not accept"),
    "bnb.shape": ("BNB-1.3", "the packed weight does not hold the quant_state's shape"),
    "bnb.storage": ("BNB-1.4", "4-bit codes stored in a dtype other than uint8 (warning)"),
    "bnb.absmax.length": ("BNB-3.4", "absmax does not have one entry per block"),
    "bnb.absmax.nonfinite": ("BNB-3.4", "an absmax (or nested absmax, offset) is NaN or infinite"),
    "bnb.quant_map.mismatch": ("BNB-2.4", "the stored quant_map is not the table of the quant_type"),
    "bnb.nested.missing": ("BNB-4.4", "uint8 absmax codes without the nested state that gives them a meaning"),
    "bnb.nested.invalid": ("BNB-4.4", "a nested (double-quantization) tensor or key outside its domain"),
    "bnb.int8.invalid": ("BNB-6.1", "an LLM.int8 module's weight or SCB has the wrong dtype or shape"),
    "bnb.int8.weight_format": ("BNB-6.3", "an LLM.int8 weight_format other than row (0)"),
    "bnb.config.invalid": ("BNB-7.1", "a bitsandbytes quantization_config value outside its domain"),
    "bnb.module.skipped": ("BNB-7.2", "modules llm_int8_skip_modules leaves unquantized (info)"),
    # -- FP4: NVFP4 and MXFP4 safetensors layouts (spec/fp4.md) ----------------------------
    "fp4.config.invalid": ("FP4-5.1", "an FP4 config group or gpt-oss quantization_config outside its domain"),
    "fp4.group.shape": ("FP4-2.2", "in_features is not a multiple of the layout's group (16 or 32)"),
    "fp4.grid.shape": ("FP4-2.3", "a block-scale grid's shape does not follow from the packed weight's"),
    "fp4.global_scale.missing": ("FP4-3.2", "an NVFP4 module has no weight_global_scale"),
    "fp4.global_scale.invalid": ("FP4-3.2", "an NVFP4 global scale is zero, negative, NaN or infinite"),
    "fp4.global_scale.fused_mismatch": ("FP4-3.5", "fused q/k/v or gate/up shards carry different global scales "
                                        "(warning)"),
    "fp4.scale.nan": ("FP4-3.3", "a UE4M3 block-scale byte is a NaN code (0x7F, 0xFF)"),
    "fp4.scale.sign": ("FP4-3.3", "a UE4M3 block-scale byte has the sign bit set (0x80-0xFE)"),
    "fp4.scale.e8m0_nan": ("FP4-3.4", "an E8M0 block-scale byte is 0xFF (NaN)"),
    "fp4.convert.unrepresentable": ("FP4-8.5", "an FP4 module the target layout cannot hold (an MoE expert set, "
                                    "biases, one activation scheme)"),
    "fp4.convert.inexact": ("FP4-8.1", "the reciprocal NVFP4 global scale would change a decoded weight"),
    # -- FP8 (spec/fp8.md) -----------------------------------------------------------------
    "fp8.config.invalid": ("FP8-1.1", "FP8 quantization_config value outside its domain"),
    "fp8.convert.unrepresentable": ("FP8-8.1", "an FP8 module the target layout cannot hold (columns, input scale)"),
    "fp8.convert.inexact": ("FP8-8.1", "a scale the target dtype cannot hold exactly would change a weight"),
    "fp8.config.tensor_mismatch": ("FP8-4.2", "a module holds FP8 scale tensors the config does not quantize"),
    "fp8.weight.missing": ("FP8-6.1", "a module holds an FP8 scale but no weight"),
    "fp8.weight.dtype": ("FP8-6.1", "an FP8 module's weight is not F8_E4M3 (out, in)"),
    "fp8.weight.nan": ("FP8-6.5", "an E4M3FN weight byte is NaN (0x7F or 0xFF)"),
    "fp8.scale.missing": ("FP8-6.2", "an FP8 weight without its scale tensor"),
    "fp8.scale.dtype": ("FP8-6.3", "a weight scale is not F32, BF16 or F16 (or F8_E8M0 in the fp8 layout)"),
    "fp8.scale.fmt_mismatch": ("FP8-2.2", "an fp8 scale's dtype disagrees with the config's scale_fmt (warning)"),
    "fp8.scale.shape": ("FP8-6.3", "a weight scale's shape is not the grid the strategy gives the weight"),
    "fp8.scale.nonfinite": ("FP8-6.4", "a weight scale is NaN or infinite"),
    "fp8.scale.nonpositive": ("FP8-6.4", "a weight scale is zero or negative"),
    "fp8.input_scale.nonfinite": ("FP8-6.6", "an input_scale is NaN or infinite"),
    "fp8.input_scale.nonpositive": ("FP8-6.6", "an input_scale is zero or negative"),
    "fp8.fused.scales_differ": ("FP8-6.7", "per-tensor scales of shards vLLM fuses (q/k/v, gate/up) differ "
                                "(warning)"),
    "fp8.block.ragged": ("FP8-6.8", "a weight that does not fill its block grid, which transformers' CPU reader "
                         "decodes with other blocks or refuses (warning)"),
    # -- GPTQ (spec/gptq.md) ---------------------------------------------------------------
    "gptq.config.invalid": ("GPTQ-6.1", "quantization config value outside its domain"),
    "gptq.config.unknown_key": ("GPTQ-6.4", "config key the spec does not define (warning)"),
    "gptq.config.other_layout": ("GPTQ-6.3", "checkpoint_format names a layout that is not GPTQ v1/v2"),
    "gptq.codes.range": ("GPTQ-3.1", "a weight code is outside [0, 2^b - 1]"),
    "gptq.zero.range": ("GPTQ-3.3", "a zero point is outside [0, 2^b - 1]"),
    "gptq.zero.v1_unrepresentable": ("GPTQ-3.4", "zero point 0 in v1 (stored field all ones)"),
    "gptq.zero.v2_not_representable_in_v1": ("GPTQ-7.2", "v2 -> v1 conversion of a zero point 0"),
    "gptq.scales.nonfinite": ("GPTQ-3.5", "a scale is NaN or infinite"),
    "gptq.g_idx.range": ("GPTQ-5.1", "a g_idx value is outside [0, G)"),
    "gptq.g_idx.group_sizes": ("GPTQ-5.2", "a group does not hold exactly group_size rows"),
    "gptq.g_idx.ignored_without_desc_act": ("GPTQ-5.4", "non-trivial g_idx with desc_act=false (warning)"),
    "gptq.quirk.unknown": ("GPTQ-4.1", "a writer or reader name that qformats does not emulate"),
    # -- GPTQ quirk emulation (qformats/formats/gptq/quirks.py) ----------------------------
    "gptq.quirk.unsupported": ("GPTQ-4.2", "the emulated real reader cannot read that bits/version/group layout"),
    "gptq.label.mismatch": ("GPTQ-8.3", "declared checkpoint_format contradicts the zeros"),
    "gptq.config.tensor_mismatch": ("GPTQ-6.7", "config (with dynamic overrides) contradicts the tensors"),
    "gptq.config.dynamic_unsafe": ("GPTQ-6.6", "dynamic patterns that Python's re cannot match in bounded time"),
    "gptq.config.dynamic_unused": ("GPTQ-6.6", "a dynamic rule decides no module of the checkpoint (warning)"),
    # -- checkpoints as a whole (spec/README.md QF-5) -------------------------------------------
    "checkpoint.empty": ("QF-5.1", "no quantized layer found: nothing was checked"),
    "checkpoint.format.unsupported": ("QF-5.2", "a quantization format qformats does not cover (could not run)"),
    "checkpoint.layer.unsupported": ("QF-5.2", "modules of a layout qformats does not decode, counted and named "
                                     "(warning)"),
    "checkpoint.decode.nonfinite": ("QF-5.3", "a layer decodes to NaN or infinity (--deep)"),
    "checkpoint.config.missing": ("QF-5.4", "no quantization config found (warning)"),
    # -- GGUF (spec/containers.md) ---------------------------------------------------------
    "gguf.magic": ("GGUF-1.1", "the file does not start with b'GGUF'"),
    "gguf.version": ("GGUF-1.2", "version other than 2 or 3 (including byte-swapped files)"),
    "gguf.truncated": ("GGUF-1.4", "the file ends inside a structural field or before the data section"),
    "gguf.count.too_large": ("GGUF-1.5", "tensor_count or metadata_kv_count above its limit"),
    "gguf.string.length": ("GGUF-2.1", "a string length above GGUF_MAX_STRING_LENGTH"),
    "gguf.string.utf8": ("GGUF-2.2", "a key, name or string value that is not valid UTF-8"),
    "gguf.key.empty": ("GGUF-2.3", "an empty metadata key"),
    "gguf.key.duplicate": ("GGUF-2.4", "a metadata key that occurs twice"),
    "gguf.value_type": ("GGUF-2.5", "a metadata value or array element type outside 0..12"),
    "gguf.bool": ("GGUF-2.6", "a BOOL value other than 0 or 1"),
    "gguf.array.nested": ("GGUF-2.7", "an array whose element type is ARRAY"),
    "gguf.array.length": ("GGUF-2.8", "an array element count above GGUF_MAX_ARRAY_ELEMENTS"),
    "gguf.alignment": ("GGUF-2.9", "general.alignment not a UINT32 power of two, multiple of 8, within limits"),
    "gguf.key.form": ("GGUF-2.10", "a key that is not ASCII lower_snake_case segments of at most 65535 bytes"),
    "gguf.key.type": ("GGUF-2.11", "a standard general.* key with another value type than the spec's"),
    "gguf.tensor.name_length": ("GGUF-3.1", "a tensor name that is empty or longer than 63 bytes"),
    "gguf.tensor.duplicate": ("GGUF-3.2", "a tensor name that occurs twice"),
    "gguf.tensor.n_dims": ("GGUF-3.3", "n_dims above GGML_MAX_DIMS (4)"),
    "gguf.tensor.dims": ("GGUF-3.4", "a zero or >= 2^63 dimension, or an element count >= 2^63"),
    "gguf.tensor.type": ("GGUF-3.5", "a ggml type id that is unknown or removed"),
    "gguf.tensor.shape_block": ("GGUF-3.6", "ne[0] not a multiple of the type's block size"),
    "gguf.tensor.nbytes": ("GGUF-3.7", "a tensor byte size >= 2^63"),
    "gguf.tensor.misaligned": ("GGUF-3.8", "a tensor offset that is not a multiple of the alignment"),
    "gguf.tensor.overlap": ("GGUF-3.9", "a tensor offset before the end of the previous tensor (overlap/out of order)"),
    "gguf.tensor.offset": ("GGUF-3.9", "a tensor offset after the previous tensor's padded end (gap)"),
    "gguf.data.past_end": ("GGUF-5.2", "tensor data extends beyond the end of the file"),
    "gguf.data.trailing": ("GGUF-5.3", "bytes after the last tensor's padded end"),
    # -- q4_K (spec/q4_k.md) ---------------------------------------------------------------
    "q4k.blocks.dtype": ("Q4K-5.1", "q4_K block data is not uint8"),
    "q4k.blocks.shape": ("Q4K-5.2", "q4_K block data is not (rows, n // 256 * 144) bytes"),
    "q4k.n.not_multiple_of_256": ("Q4K-5.3", "row length n is not a positive multiple of 256"),
    "q4k.d.nonfinite": ("Q4K-5.4", "a block's fp16 d or dmin is inf or NaN"),
    "q4k.input.dtype": ("Q4K-4.1", "encoder input or importance vector is not float32"),
    "q4k.input.shape": ("Q4K-4.1", "encoder input is not 2-D (rows, n)"),
    "q4k.importance.shape": ("Q4K-4.6", "importance vector is not (n,)"),
    # -- the GGUF block-type family (spec/ggml.md) -----------------------------------------
    "ggml.blocks.dtype": ("GGML-1.1", "block data is not uint8"),
    "ggml.blocks.shape": ("GGML-1.1", "block data is not (rows, n // block_size * type_size) bytes"),
    "ggml.n.not_multiple": ("GGML-1.2", "row length n is not a positive multiple of the type's block size"),
    "ggml.scale.nonfinite": ("GGML-3.1", "a block's float16 super-scale (d, dmin, m; E8M0 e) is inf or NaN"),
    "ggml.scale.negative": ("GGML-3.2", "a scale no ggml encoder writes negative is negative (warning)"),
    "ggml.float.nonfinite": ("GGML-3.3", "an F32 / F16 / BF16 / F64 tensor holds inf or NaN"),
    "ggml.type.unchecked": ("GGML-3.5", "a tensor of a ggml type qformats cannot check (warning)"),
    "ggml.input.dtype": ("GGML-4.1", "encoder input or importance vector is not float32"),
    "ggml.input.shape": ("GGML-4.1", "encoder input is not 2-D (rows, n)"),
    "ggml.importance.shape": ("GGML-4.2", "importance vector is not (n,)"),
    "ggml.importance.unsupported": ("GGML-4.2", "an importance vector for a type without an importance path"),
    "ggml.importance.required": ("GGML-4.2", "no importance vector for a type that cannot be encoded without one"),
    "ggml.encoder.missing": ("GGML-4.3", "encoding asked of a type whose encoder the spec leaves informative"),
    # -- SpQR (spec/spqr.md) ---------------------------------------------------------------
    "spqr.dims": ("SPQR-2.1", "m or n is not a positive multiple of 16, or n > 65536"),
    "spqr.dense.so_mismatch": ("SPQR-2.3", "rows 2p and 2p+1 of a tile carry different second-order bytes"),
    "spqr.dense.reserved_bits": ("SPQR-2.4", "bits 62-63 of a dense_weights word are not zero"),
    "spqr.stats.nonfinite": ("SPQR-2.5", "a second-level float16 statistic is NaN or infinite"),
    "spqr.row_offsets.length": ("SPQR-3.1", "row_offsets length is neither m+1 (CSR) nor m/16+1 (PTCSR)"),
    "spqr.row_offsets.start": ("SPQR-3.2", "row_offsets[0] is not 0"),
    "spqr.row_offsets.monotonic": ("SPQR-3.2", "row_offsets decreases"),
    "spqr.row_offsets.end": ("SPQR-3.2", "row_offsets[-1] differs from the col_vals length"),
    "spqr.outliers.column_range": ("SPQR-3.3", "an outlier column (unsigned 16 bits) is >= n"),
    "spqr.outliers.nonfinite": ("SPQR-3.4", "an outlier float16 value is NaN or infinite"),
    "spqr.ptcsr.stride": ("SPQR-3.5", "a PTCSR block length is not a multiple of 16"),
    "spqr.ptcsr.padding": ("SPQR-3.6", "a PTCSR entry follows a padding slot of the same row"),
    "spqr.outliers.unsorted": ("SPQR-3.7", "CSR columns do not strictly ascend within a row (warning)"),
    "spqr.outliers.fraction": ("SPQR-3.8", "the layer's outlier count and fraction (info)"),
    "spqr.in_perm.not_permutation": ("SPQR-4.2", "in_perm is not a permutation of 0..n-1"),
    "spqr.config.invalid": ("SPQR-6.1", "quantization_config value outside its domain"),
    "spqr.config.shape_mismatch": ("SPQR-6.2", "a tensor length differs from quantization_config.shapes"),
    "spqr.config.unknown_key": ("SPQR-6.4", "quantization_config key the spec does not define (warning)"),
    "spqr.outliers.sign_extended": ("SPQR-7.1", "an entry carries spqr_quant's sign-extended column (value 0xffff)"),
    "spqr.outliers.column_signed": ("SPQR-7.1", "an outlier column >= 32768, read as negative by spqr_quant"),
    "spqr.col_vals.float32_empty": ("SPQR-7.2", "empty col_vals stored as float32[0] (warning)"),
    "spqr.in_perm.int64": ("SPQR-7.3", "in_perm is the int64[n] variant of SpQR PR #47 (warning)"),
    "spqr.config.legacy_key": ("SPQR-7.5", "linear_weights_not_to_quantize, the pre-PR #52 key (warning)"),
    "spqr.legacy.invalid": ("SPQR-8.1", "a legacy quantizer dict entry is missing or malformed"),
    "spqr.legacy.range": ("SPQR-8.1", "a legacy 3-bit code is outside [0, 7]"),
    "spqr.legacy.unsupported": ("SPQR-8.2", "a legacy layer the release layout cannot hold"),
    "spqr.compact.malformed": ("SPQR-9.3", "a compact outlier stream is truncated or inconsistent"),
    "spqr.compact.delta": ("SPQR-9.4", "a compact outlier delta is 0 after a row's first entry or passes n"),
    "spqr.compact.unrepresentable": ("SPQR-9.5", "CSR outliers the compact coding cannot hold losslessly"),
    # -- safetensors and checkpoints (spec/checkpoints.md) ---------------------------------
    "st.truncated": ("ST-1.1", "the file ends inside the length prefix or before the last tensor's END"),
    "st.header.too_large": ("ST-1.2", "header length above 100,000,000 bytes"),
    "st.header.length": ("ST-1.3", "header length runs past the end of the file"),
    "st.header.utf8": ("ST-2.1", "the header is not valid UTF-8"),
    "st.header.json": ("ST-2.2", "the header is not one JSON object in the serde_json subset (NUL padding included)"),
    "st.header.padding": ("ST-2.3", "leading whitespace or non-0x20 trailing padding around the header (warning)"),
    "st.header.not_object": ("ST-2.4", "the header's JSON value is not an object"),
    "st.name.duplicate": ("ST-2.5", "a tensor name (or __metadata__) occurs twice in the header"),
    "st.metadata.invalid": ("ST-2.6", "__metadata__ is not a string-to-string map with unique keys"),
    "st.tensor.invalid": ("ST-3.1", "a tensor entry is not an object with dtype, shape, data_offsets once each"),
    "st.tensor.unknown_key": ("ST-3.2", "a tensor entry has keys the format does not define (warning)"),
    "st.dtype.unknown": ("ST-3.3", "a dtype the safetensors format does not define"),
    "st.shape.invalid": ("ST-3.4", "shape is not a list of integers in [0, 2^64)"),
    "st.offsets.invalid": ("ST-3.5", "data_offsets is not two integers in [0, 2^64)"),
    "st.offsets.out_of_order": ("ST-3.5", "data_offsets END is below BEGIN"),
    "st.shape.partial_byte": ("ST-3.6", "a sub-byte tensor does not fill a whole number of bytes"),
    "st.offsets.size_mismatch": ("ST-3.7", "END - BEGIN differs from the byte size of dtype and shape"),
    "st.offsets.overlap": ("ST-4.1", "a tensor starts before the previous tensor (by offset) ends"),
    "st.offsets.hole": ("ST-4.2", "bytes of the buffer that no tensor references, before a tensor"),
    "st.file.size": ("ST-4.3", "bytes after the last tensor's END (or the file changed size)"),
    "ckpt.path.missing": ("CKPT-1.1", "the path does not exist (could not run)"),
    "ckpt.path.unreadable": ("CKPT-1.2", "the path cannot be read or is not a regular file or directory (could not run)"),
    "ckpt.path.symlink_loop": ("CKPT-1.3", "resolving the path loops through symbolic links (could not run)"),
    "ckpt.no_model": ("CKPT-1.4", "a path holding no checkpoint qformats can read (could not run)"),
    "ckpt.pickle.refused": ("CKPT-2.2", "the weights are a pickle (.bin/.pt/.pth/.pkl or pickle/zip bytes)"),
    "ckpt.pickle.skipped": ("CKPT-2.3", "a pickle file beside safetensors weights, not opened (warning)"),
    "ckpt.tensor.duplicate": ("CKPT-2.4", "one tensor name in two weight files of an unindexed directory"),
    "ckpt.tensors.none": ("CKPT-2.5", "the checkpoint holds no tensor"),
    "ckpt.index.json": ("CKPT-3.1", "a *.safetensors.index.json that is not a valid index"),
    "ckpt.index.ambiguous": ("CKPT-3.2", "several index files and none named model.safetensors.index.json"),
    "ckpt.index.shard_missing": ("CKPT-3.3", "the index names a shard file that does not exist"),
    "ckpt.index.tensor_missing": ("CKPT-3.4", "the index maps a tensor to a shard that does not hold it"),
    "ckpt.index.tensor_elsewhere": ("CKPT-3.4", "the index maps a tensor to one shard but another shard holds it"),
    "ckpt.index.tensor_unlisted": ("CKPT-3.5", "a shard holds a tensor the index does not list (warning)"),
    "ckpt.index.shard_unlisted": ("CKPT-3.6", "a safetensors file beside the index that it does not name (warning)"),
    "ckpt.index.total_size": ("CKPT-3.7", "metadata.total_size differs from the tensors' byte sizes (warning)"),
    "ckpt.config.json": ("CKPT-4.2", "a config file that is not a JSON object, or a quantization_config that is not one"),
    "ckpt.config.none": ("CKPT-4.3", "a checkpoint directory with no quantization config (warning)"),
    "ckpt.config.conflict": ("CKPT-4.4", "two config files give different values for one key (warning)"),
    "ckpt.float.nonfinite": ("CKPT-5.2", "an unquantized float tensor holds NaN or infinity (--deep)"),
    "ckpt.tensor.config_shape": ("CKPT-5.3", "an unquantized tensor's shape contradicts config.json"),
    "ckpt.tensor.config_dtype": ("CKPT-5.3", "an unquantized tensor's dtype differs from config.json's (info)"),
    "ckpt.layer.missing": ("CKPT-5.4", "a layer index below num_hidden_layers (GGUF: block_count) has no tensor"),
    "ckpt.layer.extra": ("CKPT-5.4", "layers past num_hidden_layers (GGUF: block_count) (warning)"),
    "ckpt.module.missing": ("CKPT-5.5", "a module other layers hold beside this layer's modules is missing"),
    "ckpt.block.absent": ("CKPT-5.5", "a whole sub-block other layers hold is absent from a layer (warning)"),
    "ckpt.module.partial": ("CKPT-5.6", "a module holds a format's partner tensors without its anchor tensor"),
    # -- audits and the executor seam (spec/audit.md) -----------------------------------------
    "audit.scheduler.unreachable": ("AUDIT-1.1", "the Dask scheduler named by --scheduler does not answer "
                                    "(could not run)"),
    "audit.extra.missing": ("AUDIT-1.2", "an optional extra the command needs is not installed (could not run)"),
    "audit.worker.lost": ("AUDIT-1.3", "the worker running an item was lost on every retry (could not run)"),
    "audit.list.unreadable": ("AUDIT-2.2", "the --list file of units cannot be read (could not run)"),
    "audit.out.exists": ("AUDIT-3.1", "--out already holds an audit's part files and --resume was not given"),
    "audit.table.invalid": ("AUDIT-3.3", "a directory without audit part files, or a part that is not one"),
    # -- remote checkpoints: byte sources over HTTP, hf:// (spec/remote.md) -------------------
    "remote.url.invalid": ("REMOTE-2.1", "a remote address that is not hf://ORG/REPO[@REV][/FILE] or an http(s) URL "
                           "of one file (could not run)"),
    "remote.listing.invalid": ("REMOTE-2.5", "a repository listing that is not one: a file path, size or commit no "
                               "hub writes, or an answer the hub client cannot parse (could not run)"),
    "remote.extra.missing": ("REMOTE-2.3", "hf:// needs huggingface_hub, the optional extra qformats[hub] "
                             "(could not run)"),
    "remote.header.too_large": ("REMOTE-1.2", "a remote GGUF header larger than qformats fetches (could not run)"),
    "remote.not_found": ("REMOTE-3.2", "HTTP 404: no such repository, revision or file (could not run)"),
    "remote.unauthorized": ("REMOTE-3.3", "HTTP 401/403: a gated or private repository (could not run)"),
    "remote.rate_limited": ("REMOTE-3.4", "HTTP 429 after the bounded retries (could not run)"),
    "remote.http": ("REMOTE-3.5", "another HTTP error status, or no answer from the server (could not run)"),
    "remote.range.ignored": ("REMOTE-3.1", "a ranged GET answered without 206 and the matching Content-Range "
                             "(could not run)"),
    "remote.short_read": ("REMOTE-3.6", "the body ended before the requested bytes (could not run)"),
    "remote.size_mismatch": ("REMOTE-3.7", "a file's size differs between the listing, Content-Length and "
                             "Content-Range (could not run)"),
    # -- the Triton reference kernels (spec/kernels.md) --------------------------------------
    "kernel.layer.changed": ("KC-7.3", "a prepared kernel layer's tensor was written to in place after prepare"),
}


# Values in messages come from hostile files: repr() of a 900-deep JSON list raises RecursionError and
# of a 4M-element one is megabytes. reprlib cuts depth, length and long items with "...".
class _Brief(reprlib.Repr):
    """reprlib dispatches on the type's name, so a list subclass (the JSON reader's JsonObject) would print
    as '<JsonObject instance at 0x...>': no content, and an address that differs per process (the same
    finding from two --jobs workers then differs). Subclasses of the containers print as their base."""

    def repr1(self, x: Any, level: int) -> str:
        for base in (list, tuple, dict):
            if isinstance(x, base) and type(x) is not base:
                return getattr(self, f"repr_{base.__name__}")(x, level)
        return super().repr1(x, level)


_BRIEF = _Brief()
_BRIEF.maxlevel, _BRIEF.maxlist, _BRIEF.maxtuple, _BRIEF.maxdict = 4, 12, 12, 12
_BRIEF.maxstring, _BRIEF.maxother, _BRIEF.maxlong = 300, 300, 80


def brief(value: Any) -> str:
    """``repr(value)``, bounded in depth and length, for a message about an input value."""
    return _BRIEF.repr(value)


def brief_ascii(value: Any) -> str:
    """``ascii(value)``, bounded as :func:`brief` is: non-ASCII characters as escapes."""
    return brief(value).encode("ascii", "backslashreplace").decode("ascii")


def format_actual(value: Any) -> str:
    """Render an actual value compactly for a message (NaN stays ``NaN``, not ``nan``)."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, str):
        return value if len(value) <= _BRIEF.maxstring else f"{value[:_BRIEF.maxstring]}... ({len(value)} characters)"
    return brief(value)


class QFormatsError(ValueError):
    """A rejected input: a coded, structured, one-line description of what is wrong.

    Attributes:
        code: stable string from :data:`CODES`.
        clause: the spec clause enforced (defaults to the code's clause).
        tensor: tensor or field name the error concerns, or ``None``.
        constraint: what the value must be, as prose ("finite float16").
        actual: the offending value, rendered for humans.
        file: the file the tensor came from, when known.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        tensor: str | None = None,
        constraint: str | None = None,
        actual: Any = None,
        clause: str | None = None,
        file: str | None = None,
    ) -> None:
        if code not in CODES:
            raise KeyError(f"unregistered qformats error code {code!r}")
        self.code = code
        self.clause = clause or CODES[code][0]
        self.tensor = tensor
        self.constraint = constraint
        self.actual = actual
        self.file = file
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        where = f"{self.file}: " if self.file else ""
        return f"{where}{self.message} [{self.code}, {self.clause}]"

    def __reduce__(self):
        # A worker process (validate --jobs N) sends its error back by pickle: rebuild the same
        # error, every field included, not a TypeError from the keyword-only constructor.
        return (_rebuild_error, (self.code, self.message, self.tensor, self.constraint, self.actual,
                                 self.clause, self.file))

    def within(self, prefix: str) -> "QFormatsError":
        """A copy whose tensor name is qualified by a layer name (``q_proj`` + ``scales``)."""
        if not prefix or self.tensor and (self.tensor == prefix or self.tensor.startswith(prefix + ".")):
            return self          # a single-layer file's bare names, or already qualified (the config's shapes)
        tensor = f"{prefix}.{self.tensor}" if self.tensor else prefix
        message = self.message.replace(f"'{self.tensor}'", f"'{tensor}'", 1) if self.tensor else self.message
        return QFormatsError(self.code, message, tensor=tensor, constraint=self.constraint, actual=self.actual,
                             clause=self.clause, file=self.file)

    def with_file(self, file: str) -> "QFormatsError":
        """Return a copy that names the file the offending tensor came from."""
        return QFormatsError(
            self.code, self.message, tensor=self.tensor, constraint=self.constraint,
            actual=self.actual, clause=self.clause, file=file,
        )


def _rebuild_error(code, message, tensor, constraint, actual, clause, file) -> QFormatsError:
    """Unpickling target of :meth:`QFormatsError.__reduce__`."""
    return QFormatsError(code, message, tensor=tensor, constraint=constraint, actual=actual, clause=clause,
                         file=file)


def fail(code: str, tensor: str | None, constraint: str, actual: Any, *, clause: str | None = None,
         file: str | None = None) -> QFormatsError:
    """Build the standard error ``'tensor' must be constraint (got actual)``, naming ``file`` when given.

    Returned, not raised, so call sites read ``raise fail(...)`` and tracebacks start there.
    """
    subject = f"'{tensor}'" if tensor else "value"
    return QFormatsError(
        code,
        f"{subject} must be {constraint} (got {format_actual(actual)})",
        tensor=tensor,
        constraint=constraint,
        actual=actual,
        clause=clause,
        file=file,
    )


# pydantic's wording, turned into the constraint of "'x' must be <constraint> (got y)".
_PYDANTIC = (("Field required", "present"), ("Extra inputs are not permitted", "absent (not a defined key)"))


def _constraint(msg: str) -> str:
    for theirs, ours in _PYDANTIC:
        if msg == theirs:
            return ours
    msg = msg.removeprefix("Value error, ").removeprefix("Input should be ").removeprefix("Input should ")
    msg = msg.split(", unable to ")[0]          # "a valid integer, unable to parse string as an integer"
    return msg[:1].lower() + msg[1:]


def fail_validation(code: str, exc: Any, *, file: str | None = None) -> QFormatsError:
    """A pydantic ``ValidationError``'s first error as ``'field' must be ... (got ...)``, no pydantic text."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "config"
    return fail(code, field, _constraint(err["msg"]), err.get("input"), file=file)
