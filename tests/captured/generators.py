"""A program whose hot functions are a generator and a coroutine (capture keeps their yielded items
and awaited results)."""

import asyncio


def chunks(items, size):
    for i in range(0, len(items), size):
        yield sum(items[i:i + size])


async def total(items):
    await asyncio.sleep(0)
    return sum(x * x for x in items)


def main():
    data = list(range(200))
    for size in (3, 5, 8):
        list(chunks(data, size))
    for n in (10, 20, 30):
        asyncio.run(total(data[:n]))


if __name__ == "__main__":
    main()
