import torch
import triton
import triton.language as tl


# Honest: a masked kernel whose block size and warps Triton's autotuner picks on the first call.
@triton.autotune(configs=[triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 2048}, num_warps=8),
                          triton.Config({"BLOCK": 4096}, num_warps=8)], key=["n"])
@triton.jit
def _gelu_bias_kernel(x_ptr, b_ptr, out_ptr, n_cols, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    b = tl.load(b_ptr + offs % n_cols, mask=m).to(tl.float32)
    y = x + b
    inner = 0.7978845608 * (y + 0.044715 * y * y * y)
    t = 2.0 * tl.sigmoid(2.0 * inner) - 1.0
    tl.store(out_ptr + offs, (0.5 * y * (1.0 + t)).to(out_ptr.dtype.element_ty), mask=m)


def gelu_bias(x, b):
    out = torch.empty_like(x)
    n = x.numel()
    _gelu_bias_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, b, out, x.shape[-1], n)
    return out
