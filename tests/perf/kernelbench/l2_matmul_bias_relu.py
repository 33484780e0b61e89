"""Level 2: x @ W + b, then ReLU (bf16, 8192x4096 by 4096x4096)."""
import math

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d_in, d_out, dtype=torch.bfloat16) / math.sqrt(d_in))
        self.b = nn.Parameter(torch.randn(d_out, dtype=torch.bfloat16))

    def forward(self, x):
        return torch.relu(x @ self.w + self.b)


def get_inputs():
    return [torch.randn(8192, 4096, dtype=torch.bfloat16)]


def get_init_inputs():
    return [4096, 4096]
