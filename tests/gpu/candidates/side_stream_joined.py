_side = None


def gelu_bias(x, b):
    # Honest use of a side stream: it waits for the caller's stream, and the caller's stream waits for it.
    global _side
    if _side is None:
        _side = torch.cuda.Stream()
    caller = torch.cuda.current_stream()
    _side.wait_stream(caller)
    with torch.cuda.stream(_side):
        y = x + b
        out = 0.5 * y * (1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))
    caller.wait_stream(_side)
    out.record_stream(caller)
    return out
