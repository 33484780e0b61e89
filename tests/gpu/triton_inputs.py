"""Inputs for the shared workload's Triton launch wrapper (the Triton configuration search)."""

import torch


def make_inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(4096, device="cuda", dtype=torch.bfloat16, generator=g)
    return x, b
