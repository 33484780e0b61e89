def mask(buf, key):
    for i in range(len(buf)):
        buf[i] ^= key[i % len(key)]
