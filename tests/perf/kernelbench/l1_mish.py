"""Level 1: Mish written out (fp32, 8192x8192)."""
import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x * torch.tanh(F.softplus(x))


def get_inputs():
    return [torch.randn(8192, 8192)]


def get_init_inputs():
    return []
