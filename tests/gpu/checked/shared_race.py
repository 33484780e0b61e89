from torch.utils.cpp_extension import load_inline

# A planted race no output shows: each thread reads a slot of shared memory that a thread of another
# warp writes, with no barrier between, and uses the value only where it equals one exact float that no
# input makes (whatever the slot holds, stale or fresh, the output is the same).
_SRC = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>

__global__ void gelu_bias_kernel(const __nv_bfloat16* x, const __nv_bfloat16* b, __nv_bfloat16* out,
                                 long n, long cols) {
    __shared__ float buf[256];
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    float y = 0.f;
    if (i < n) y = __bfloat162float(x[i]) + __bfloat162float(b[i % cols]);
    buf[threadIdx.x] = y;
    float w = buf[(threadIdx.x + 32) % 256];
    if (i < n) {
        float inner = 0.7978845608f * (y + 0.044715f * y * y * y);
        float r = 0.5f * y * (1.f + tanhf(inner));
        if (w == 1234.5678f) r = -r;
        out[i] = __float2bfloat16(r);
    }
}

torch::Tensor gelu_bias(torch::Tensor x, torch::Tensor b) {
    auto out = torch::empty_like(x);
    long n = x.numel();
    if (n == 0) return out;
    gelu_bias_kernel<<<(n + 255) / 256, 256>>>((const __nv_bfloat16*)x.data_ptr(), (const __nv_bfloat16*)b.data_ptr(),
                                               (__nv_bfloat16*)out.data_ptr(), n, x.size(-1));
    return out;
}
"""

_ext = load_inline("redline_shared_race", cpp_sources="torch::Tensor gelu_bias(torch::Tensor x, torch::Tensor b);",
                   cuda_sources=_SRC, functions=["gelu_bias"], verbose=False)


def gelu_bias(x, b):
    return _ext.gelu_bias(x.contiguous(), b.contiguous())
