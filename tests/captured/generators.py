"""A program whose hot functions are a generator and a coroutine (capture keeps their yielded items
and awaited results), and a function fed a generator (capture keeps the items it took)."""

import asyncio


def chunks(items, size):
    for i in range(0, len(items), size):
        yield sum(items[i:i + size])


async def total(items):
    await asyncio.sleep(0)
    return sum(x * x for x in items)


def longest(words):
    best = ""
    for w in words:
        if len(w) > len(best):
            best = w
    return best


def main():
    data = list(range(200))
    for size in (3, 5, 8):
        list(chunks(data, size))
    for n in (10, 20, 30):
        asyncio.run(total(data[:n]))
    lines = [f"  word{'x' * (i % 7)}{i} " for i in range(60)]
    for k in range(1, 6):
        longest(w.strip() for w in lines[::k])


if __name__ == "__main__":
    main()
