"""Detect the encodings of byte strings with chardet (byte buffers, probers holding loggers)."""
import random
import sys

import chardet

rng = random.Random(0)
samples = ["Grüße aus München, schöne Straße", "Привет, как дела? Это тест кодировки", "こんにちは、世界。テストです",
           "Ceci est un été très agréable à Noël", "plain ascii text with nothing special"]
encodings = ["utf-8", "cp1251", "shift_jis", "latin-1", "utf-16"]
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 60):
    j = rng.randrange(len(samples))
    text = " ".join([samples[j]] * rng.randint(1, 4))
    enc = encodings[j] if j < 4 else rng.choice(["ascii", "utf-8"])
    try:
        data = text.encode(enc)
    except UnicodeEncodeError:
        data = text.encode("utf-8")
    print(i, chardet.detect(data)["encoding"])
