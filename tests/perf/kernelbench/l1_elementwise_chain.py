"""Level 1: a chain of elementwise ops over three tensors (fp32, 8192x8192 each)."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x, y, z):
        return torch.relu(x * 2.0 + 1.0) * y - torch.sigmoid(z) * 0.5


def get_inputs():
    return [torch.randn(8192, 8192) for _ in range(3)]


def get_init_inputs():
    return []
