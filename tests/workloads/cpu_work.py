"""A CPU-bound program for profiler tests: two hot functions with a known ratio of work."""


class Grid:
    def relax(self, n: int) -> float:
        acc = 0.0
        for i in range(n):
            acc += (i % 7) * 0.5
        return acc


def checksum(n: int) -> int:
    total = 0
    for i in range(n):
        total = (total * 31 + i) % 1000003
    return total


def main() -> None:
    grid = Grid()
    for _ in range(30):
        grid.relax(300_000)
        checksum(80_000)


if __name__ == "__main__":
    main()
