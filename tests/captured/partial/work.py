import sys

from results import collect

for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 30):
    print(len(collect(["alpha", "", "beta", "gamma"][: i % 4 + 1] * (i + 1)).items))
