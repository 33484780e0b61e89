"""The highest-priority event, where many share a priority: `sorted(...)[-1]` returns the last of
them. ruff's unsafe fix (FURB192) writes `max(...)`, which returns the first: faster, and wrong here."""

import random


def latest(events):
    """The event with the highest priority; of several with it, the one listed last."""
    return sorted(events, key=lambda e: e[0])[-1]


class Timeline:
    @staticmethod
    def latest(events):
        """As `latest`, kept on a class (a static method: not compiled with Cython, which skips decorated code)."""
        return sorted(events, key=lambda e: e[0])[-1]


def make_inputs(seed):
    rnd = random.Random(seed)
    return ([(rnd.randint(0, 5), f"event-{i}") for i in range(3000)],)
