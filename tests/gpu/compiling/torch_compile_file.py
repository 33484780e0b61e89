import torch


# Honest: the original expression compiled with torch.compile, as an LLM or a person writes it.
def _gelu_bias(x, b):
    y = x + b
    return 0.5 * y * (1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


_compiled = torch.compile(_gelu_bias)


def gelu_bias(x, b):
    return _compiled(x, b)
