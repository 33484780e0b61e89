import sys

from inline import Inline

proc = Inline()
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 30):
    print(proc.render(f"a **bold{i}** word and _em{i % 4}_ and **x**"))
