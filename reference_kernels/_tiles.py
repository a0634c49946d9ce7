"""Device helpers shared by the format kernels."""

import triton
import triton.language as tl

__all__ = ["dot_w", "row_tile"]


@triton.jit
def dot_w(acc, xt, w, FP16_W: tl.constexpr):
    """acc + x_tile @ w_tile for float16 x and float32 W values (QF-4.6): W rounded once to float16 for
    tensor cores when every |W| fits float16, else float32 operands with IEEE products (no TF32)."""
    if FP16_W:
        return acc + tl.dot(xt, w.to(tl.float16), out_dtype=tl.float32)
    return acc + tl.dot(xt.to(tl.float32), w, input_precision="ieee", out_dtype=tl.float32)


def row_tile(group_rows: int) -> int:
    """Rows per tile: the largest of 128, 64, 32, 16 dividing a group, so a tile lies in one group and loads
    its scale once; 0 when none does (the kernel then gathers a group per row)."""
    return next((bk for bk in (128, 64, 32, 16) if group_rows % bk == 0), 0)
