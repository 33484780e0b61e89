"""Keep sorted collections with sortedcontainers (methods that change their object's lists in place)."""
import random
import sys

from sortedcontainers import SortedDict, SortedList

rng = random.Random(0)
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 30):
    sl = SortedList()
    sd = SortedDict()
    for _ in range(3000):
        v = rng.randint(0, 10**6)
        sl.add(v)
        sd[v] = i
        if rng.random() < 0.2 and sl:
            sl.discard(sl[rng.randrange(len(sl))])
    print(i, len(sl), sl.bisect_left(500000), len(sd))
