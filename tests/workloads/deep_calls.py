"""Stacks that change depth all the time: a recursive walk over random trees, whose leaves are
costed by a function only the walk calls. A sampler that reads a stack while the program changes it
would put time under a caller that never called it."""

import random
import sys


def leaf_cost(value):
    total = 0
    for i in range(value % 50 + 20):
        total += (i * value) % 7
    return total


def walk(node, depth):
    if not isinstance(node, list):
        return leaf_cost(node)
    return sum(walk(child, depth + 1) for child in node)


def tree(rnd, depth):
    if depth > 7 or rnd.random() < 0.25:
        return rnd.randint(0, 1000)
    return [tree(rnd, depth + 1) for _ in range(rnd.randint(1, 4))]


def main(rounds):
    rnd = random.Random(7)
    trees = [tree(rnd, 0) for _ in range(60)]
    result = 0
    for _ in range(rounds):
        for t in trees:
            result += walk(t, 0)
    print(result)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
