"""Level 1: SwiGLU's gate, silu(a) * b written out (bf16, 16384x4096 each)."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, a, b):
        return a * torch.sigmoid(a) * b


def get_inputs():
    return [torch.randn(16384, 4096, dtype=torch.bfloat16), torch.randn(16384, 4096, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
