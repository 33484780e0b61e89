# Honest: one XOR of two big integers.
def mask(buf, key):
    n = len(buf)
    stream = (key * (n // len(key) + 1))[:n]
    buf[:] = (int.from_bytes(buf, "little") ^ int.from_bytes(stream, "little")).to_bytes(n, "little")
