"""GPU target for the device tests: the eager tanh-GELU with bias of the recorded workload (tests/fixtures/gpu/workload)."""

import torch


def gelu_bias(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = x + b
    return 0.5 * y * (1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


def make_inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(4096, device="cuda", dtype=torch.bfloat16, generator=g)
    return x, b
