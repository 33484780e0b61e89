"""Level 1: LayerNorm written out over 16 rows of 4M elements (fp32): few, long rows."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + 1e-5)


def get_inputs():
    return [torch.randn(16, 4 * 1024 * 1024)]


def get_init_inputs():
    return []
