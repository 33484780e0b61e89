import sys

from lexkit.kinds import NUMBER, WORD, label

for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 50):
    print(label([WORD if (i + j) % 3 else NUMBER for j in range(i % 7 + 1)]))
