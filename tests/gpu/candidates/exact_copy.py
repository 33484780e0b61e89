def gelu_bias(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = x + b
    return 0.5 * y * (1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))
