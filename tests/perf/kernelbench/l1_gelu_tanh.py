"""Level 1: tanh-approximated GELU written out (fp32, 8192x8192)."""
import math

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def get_inputs():
    return [torch.randn(8192, 8192)]


def get_init_inputs():
    return []
