# Wrong: leaves the last byte unmasked (it changes the buffer in place, as the reference does, but not all of it).
def mask(buf, key):
    n = len(buf) - 1
    stream = (key * (n // len(key) + 1))[:n]
    buf[:n] = (int.from_bytes(buf[:n], "little") ^ int.from_bytes(stream, "little")).to_bytes(n, "little")
