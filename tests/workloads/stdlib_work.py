"""A program that spends its time in the standard library (json encoding and decoding)."""

import json


def roundtrip(rounds: int) -> int:
    data = [{"id": i, "name": f"item-{i}", "tags": ["a", "b", "c"], "score": i * 0.5} for i in range(5000)]
    size = 0
    for _ in range(rounds):
        text = json.dumps(data)
        size += len(json.loads(text))
    return size


if __name__ == "__main__":
    roundtrip(60)
