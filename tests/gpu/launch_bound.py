"""A launch-bound GPU target: a small MLP on a batch of 8, about 30 kernels of a few microseconds each."""

import torch


def small_mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor) -> torch.Tensor:
    for w in (w1, w2, w3):
        x = x @ w
        x = x - x.mean(-1, keepdim=True)
        x = x / (x.std(-1, keepdim=True) + 1e-5)
        x = torch.relu(x) * 0.5 + torch.sigmoid(x) * 0.5
    return x


def make_inputs(seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    return tuple(torch.randn(*shape, device="cuda", generator=g) for shape in ((8, 256), (256, 256), (256, 256),
                                                                                (256, 256)))
