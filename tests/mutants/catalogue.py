"""The mutant catalogue: each wrong kernel, the real bug it imitates, and the case that must catch it.

``MUTANTS`` rows are (entry, format, op, imitates, a regex of a case id that must fail). The README
table (tests/mutants/README.md) is this list; test_mutants.py checks both and the 100 % kill rate.
"""

MUTANTS = [
    ("gptq_bugs:v1_without_plus_one", "gptq_v1", "dequantize",
     "v1 zero fields read without +1 (AutoGPTQ before PR #325, a v2 reader on a v1 file)", r"gptq_v1/read/b4_sym_g32_trivial"),
    ("gptq_bugs:plus_one_without_wrap", "gptq_v1", "dequantize",
     "f + 1 without wrap: AutoGPTQ qlinear_cuda torch path, vLLM gptq_gemm; zero-0 field read as 2^b",
     r"gptq_v1/read/b4_asym_g32_zero0_field0"),
    ("gptq_bugs:autogptq_cuda_kernel_0x0f", "gptq_v1", "dequantize",
     "AutoGPTQ CUDA extension ((f & mask) + 1) & 0x0F: wrong at 8 bits (sym 128 read as 0)", r"gptq_v1/read/b8_sym_g32_trivial"),
    ("gptq_bugs:straddle_fields_lost", "gptq_v1", "dequantize",
     "a 3-bit unpacker that loses the bits of fields 10 and 21 spilling into the next word", r"gptq_v1/read/b3_sym_g32_trivial"),
    ("gptq_bugs:gptqmodel_legacy_int3", "gptq_v1", "dequantize",
     "GPTQModel v0.9-v6.x 3-bit v1->v2 constants (0x24924924 ...) instead of per-field +1", r"gptq_v1/read/b3_asym_g32_trivial"),
    ("gptq_bugs:g_idx_ignored", "gptq_v1", "dequantize",
     "g_idx ignored under act-order: group k // group_size", r"gptq_v1/read/b4_sym_g32_act_order"),
    ("gptq_bugs:autogptq_cuda_old_ignores_g_idx", "gptq_v1", "dequantize",
     "AutoGPTQ qlinear_cuda_old: reshape to [-1, group_size, N], g_idx never read", r"gptq_v1/read/b4_asym_g32_act_order"),
    ("gptq_bugs:exllama_wrap", "gptq_v1", "dequantize",
     "exllama (f + 1) & 0x0F, 4-bit only: decodes v1 zero-0 fields by the field-local wrap, a named reading "
     "(KC-4.5), so it fails only as a validating decoder (claimed in test_mutants.py)",
     r"gptq_v1/read/b4_asym_g32_zero0_field7"),
    ("gptq_bugs:marlin_fixed_zero", "gptq_v1", "dequantize",
     "Marlin: qzeros ignored, zero fixed at 2^(b-1) (asym checkpoints on a sym-only kernel)", r"gptq_v1/read/b4_asym_g32_trivial"),
    ("gptq_bugs:v2_read_as_v1", "gptq_v2", "dequantize",
     "vLLM gptq_gemm with zero_offset 1 on gptq_v2 zeros (vLLM #26343: '!!!!' output)", r"gptq_v2/read/b4_sym_g32_trivial"),
    ("gptq_bugs:matmul_fp16_accumulation", "gptq_v1", "matmul",
     "a GEMV accumulating in float16", r"gptq_v1/read/b4_asym_g128_k4096_nonnegative"),
    ("gptq_bugs:matmul_w_float16", "gptq_v1", "matmul",
     "W dequantized to float16 without a range check (exllama-style fp16 dequant): overflow to inf, then NaN",
     r"gptq_v1/read/b8_asym_g32_scales_max"),
    ("gptq_bugs:v1_positive_zeros", "gptq_v1", "dequantize",
     "-0.0 turned into +0.0 by adding a dense zero matrix (w + 0.0) after a correct decode",
     r"gptq_v1/read/b4_asym_g32_signed_zeros_negative_scales"),
    ("gptq_bugs:v2_positive_zeros", "gptq_v2", "dequantize",
     "-0.0 turned into +0.0 by adding a dense zero matrix (w + 0.0) after a correct decode",
     r"gptq_v2/read/b3_sym_g32_signed_zeros_all_zero_rows"),
    ("gptq_bugs:v2_scale_times_q_minus_scale_times_z", "gptq_v2", "dequantize",
     "s*q - s*z (a precomputed s*z offset): right values, +0.0 where s * (q - z) is -0.0",
     r"gptq_v2/read/b4_asym_g32_signed_zeros_negative_scales"),
    ("gptq_bugs:autogptq_writer_or_bleed", "gptq_v1", "pack",
     "AutoGPTQ 0.7.1 pack: zero 0 written as -1 OR-ed into the neighbouring fields", r"gptq_v1/pack/b4_asym_g32_zero0_field0"),
    ("gptq_bugs:gptqmodel_writer_wraps", "gptq_v1", "pack",
     "GPTQModel v1 save: zero 0 written as an all-ones field instead of refused", r"gptq_v1/pack/b3_asym_g32_zero0_field10"),
    ("gptq_bugs:v2_zeros_labelled_v1", "gptq_v1", "pack",
     "v2 zero fields written under checkpoint_format 'gptq' (vLLM PR #38966 mislabelled checkpoints)",
     r"gptq_v1/pack/b4_sym_g32_trivial"),
    ("gptq_bugs:fields_msb_first", "gptq_v1", "dequantize",
     "2/4/8-bit fields unpacked top field first (shift 32 - b(i + 1)): the field order in each word reversed",
     r"gptq_v1/read/b4_sym_g32_trivial"),
    ("gptq_bugs:transposed_output", "gptq_v1", "dequantize",
     "the weight returned (in, out) as unpacked, without the final transpose to torch.nn.Linear's (out, in)",
     r"gptq_v1/read/third_party/gptqmodel/b4_sym_g128_k128_n128"),
    ("q4k_bugs:nibbles_as_consecutive_pairs", "q4_k", "dequantize",
     "q4_K codes read as consecutive nibble pairs (q4_0 order) instead of 32-byte chunks", r"q4_k/read/random_bits_0"),
    ("q4k_bugs:scales_4_to_7_nibbles_swapped", "q4_k", "dequantize",
     "6-bit scales/mins of sub-blocks 4-7 unpacked from the wrong nibbles", r"q4_k/read/random_bits_0"),
    ("q4k_bugs:plus_min", "q4_k", "dequantize",
     "q*scale + min (torchao prototype 'GGUF Q4_K'): the min's sign flipped", r"q4_k/read/random_bits_0"),
    ("q4k_bugs:nibbles_high_first", "q4_k", "dequantize",
     "q4_K nibble shifts exchanged: sub-block 2c from the high nibbles, 2c + 1 from the low ones, scales in place",
     r"q4_k/read/random_bits_0"),
    ("q4k_bugs:halves_swapped", "q4_k", "dequantize",
     "q4_K 64-weight chunks written with their 32-weight halves (and scales) exchanged", r"q4_k/read/random_bits_0"),
    ("q4k_bugs:scale_min_swapped", "q4_k", "dequantize",
     "q4_K get_scale_min_k4's sc and m used in each other's place", r"q4_k/read/random_bits_0"),
    ("q4k_bugs:positive_zeros", "q4_k", "dequantize",
     "-0.0 turned into +0.0 by adding a dense zero matrix (w + 0.0) after a correct decode", r"q4_k/read/zero_[01]"),
    ("q4k_bugs:matmul_fp16_accumulation", "q4_k", "matmul",
     "a GEMV accumulating in float16", r"q4_k/read/n4096_nonnegative"),
    ("spqr_bugs:outliers_substituted", "spqr", "dequantize",
     "outliers substituted for the dense value (the SpQR repository's legacy decoder)", r"spqr/read/csr_1pct_identity"),
    ("spqr_bugs:permutation_not_applied", "spqr", "dequantize",
     "the input permutation not undone (spqr_quant dequantize() order)", r"spqr/read/csr_0_act_order"),
    ("spqr_bugs:float32_statistics", "spqr", "dequantize",
     "the dense part computed in float32 and rounded once, not the float16 sequence (SpQR #48)", r"spqr/read/csr_0_identity"),
    ("spqr_bugs:outliers_added_as_dense_matrix", "spqr", "dequantize",
     "outliers materialised as a dense matrix and added (to_dense(), torch.sparse add): untouched -0.0 become +0.0",
     r"spqr/read/csr_signed_zeros_degenerate_stats"),
    ("spqr_bugs:ptcsr_padding_skipped", "spqr", "dequantize",
     "PTCSR rows stopped at their first padding slot (spqr_quant's CUDA kernel): -0.0 + padding stays -0.0",
     r"spqr/read/ptcsr_signed_zeros_padding_onto_negative_zero"),
    ("spqr_bugs:matmul_fp16_accumulation", "spqr", "matmul",
     "a GEMV accumulating in float16", r"spqr/read/csr_16x1024_nonnegative"),
]

# The GGUF block-type families keep their mutants beside their bugs (one room per family).
from iq4_bugs import MUTANTS as _IQ4  # noqa: E402
from iqgrid_bugs import MUTANTS as _IQGRID  # noqa: E402
from kquants_qkx_bugs import MUTANTS as _KQKX  # noqa: E402
from kquants_qx_bugs import MUTANTS as _KQX  # noqa: E402
from legacy_bugs import MUTANTS as _LEGACY  # noqa: E402
from ternary_fp4_bugs import MUTANTS as _TQMX  # noqa: E402
from awq_ctensors_bugs import MUTANTS as _AWQCT  # noqa: E402
from bnb_bugs import MUTANTS as _BNB  # noqa: E402
from fp8_bugs import MUTANTS as _FP8  # noqa: E402
from fp4_bugs import MUTANTS as _FP4  # noqa: E402

MUTANTS += _LEGACY + _KQKX + _KQX + _IQ4 + _IQGRID + _TQMX + _AWQCT + _BNB + _FP8 + _FP4

# The misreading the runner must name for a mutant (spec/kernels.md KC-5.1 to KC-5.5), or None where no
# known misreading explains its answers; test_diagnoses.py checks each on the cases of the pattern given.
DIAGNOSED = {
    "gptq_bugs:fields_msb_first": ("field order reversed within each byte or word", r"gptq_v1/read/b[248]_(?!.*zero0).*"),
    "gptq_bugs:transposed_output": ("transposed output", r"gptq_v1/read/(b4_sym_g32_trivial|third_party/gptqmodel/b4_sym_g128_k128_n128)"),
    "awq_ctensors_bugs:awq_fields_reversed": ("field order reversed within each byte or word", r"awq_gemm/read/g(32|64)"),
    "q4k_bugs:nibbles_high_first": ("field order reversed within each byte or word", r"q4_k/read/random_bits_[01]"),
    "q4k_bugs:halves_swapped": ("low and high halves of the block swapped", r"q4_k/read/random_bits_[01]"),
    "q4k_bugs:scale_min_swapped": ("scale and min swapped", r"q4_k/read/random_bits_[01]"),
    "legacy_bugs:q4_1_d_m_swapped": ("scale and min swapped", r"q4_1/read/random_bits_[01]"),
    "legacy_bugs:q5_0_nibbles_high_first": ("field order reversed within each byte or word", r"q5_0/read/random_bits_[01]"),
    "kquants_qkx_bugs:q2k_scale_min_nibbles_swapped": ("scale and min swapped", r"q2_k/read/random_bits_[01]"),
    "iq4_bugs:iq4_xs_scales_l_nibbles_swapped": ("field order reversed within each byte or word", r"iq4_xs/read/random_bits_[01]"),
    "legacy_bugs:q8_0_codes_unsigned": (None, r"q8_0/read/random_bits_[01]"),
    "legacy_bugs:q4_0_nibbles_as_consecutive_pairs": (None, r"q4_0/read/random_bits_[01]"),
    "awq_ctensors_bugs:awq_order_sequential": (None, r"awq_gemm/read/.*"),
    "bnb_bugs:nibbles_low_first": ("field order reversed within each byte or word", r"bnb_4bit/read/(nf4|fp4)_b(64|128)(_dq)?"),
    "fp8_bugs:scale_dropped": ("scale dropped", r"fp8_block/read/random_.*"),
    "fp8_bugs:fn_read_as_fnuz": ("FN read as FNUZ", r"fp8_tensor/read/(every_code|random)_.*"),
    "fp8_bugs:block_from_grid": ("block size from the grid", r"fp8_block/read/random_(130x200|3x100)_.*"),
    "fp8_bugs:scale_inverted": ("scale inverted", r"fp8_channel/read/random_.*"),
    "fp4_bugs:global_scale_not_inverted": ("global scale multiplied", r"nvfp4_packed/read/n\d+_k\d+"),
    "fp4_bugs:nibbles_split_order": ("split nibble order", r"mxfp4_packed/read/n\d+_k\d+(_e\d)?"),
    "fp4_bugs:gguf_table_full_scale": ("GGUF doubled table, full scale", r"mxfp4_packed/read/n\d+_k\d+(_e\d)?"),
    "fp4_bugs:e8m0_ff_as_inf": ("E8M0 0xFF read as 2^128 (inf)", r"mxfp4_packed/read/invalid/e8m0_nan"),
}
