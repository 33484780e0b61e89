"""Level 2: matmul with the weight transposed, plus bias, then tanh-GELU written out (bf16)."""
import math

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_out, d_in, dtype=torch.bfloat16) / math.sqrt(d_in))
        self.bias = nn.Parameter(torch.randn(d_out, dtype=torch.bfloat16))

    def forward(self, x):
        h = x @ self.weight.t() + self.bias
        return 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))


def get_inputs():
    return [torch.randn(8192, 4096, dtype=torch.bfloat16)]


def get_init_inputs():
    return [4096, 4096]
