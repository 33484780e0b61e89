# Correct only at rows of 1000: the row length is written into the kernel (the mask is the
# tested shape's, not the argument's).
import torch
import triton
import triton.language as tl


@triton.jit
def _gelu_bias_rows(x_ptr, b_ptr, out_ptr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < 1000
    x = tl.load(x_ptr + row * 1000 + cols, mask=m).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=m).to(tl.float32)
    y = x + b
    inner = 0.7978845608 * (y + 0.044715 * y * y * y)
    t = 2.0 * tl.sigmoid(2.0 * inner) - 1.0
    tl.store(out_ptr + row * 1000 + cols, (0.5 * y * (1.0 + t)).to(out_ptr.dtype.element_ty), mask=m)


def gelu_bias(x, b):
    out = torch.empty_like(x)
    _gelu_bias_rows[(x.shape[0],)](x, b, out, BLOCK=1024)
    return out
