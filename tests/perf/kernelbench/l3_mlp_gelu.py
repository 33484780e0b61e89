"""Level 3: a two-layer MLP with tanh-GELU written out (bf16, 4096 tokens, 4096 wide, 4x hidden)."""
import math

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(4 * d, d, dtype=torch.bfloat16) / math.sqrt(d))
        self.b1 = nn.Parameter(torch.zeros(4 * d, dtype=torch.bfloat16))
        self.w2 = nn.Parameter(torch.randn(d, 4 * d, dtype=torch.bfloat16) / math.sqrt(4 * d))

    def forward(self, x):
        h = x @ self.w1.t() + self.b1
        h = 0.5 * h * (1.0 + torch.tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)))
        return h @ self.w2.t()


def get_inputs():
    return [torch.randn(4096, 4096, dtype=torch.bfloat16)]


def get_init_inputs():
    return [4096]
