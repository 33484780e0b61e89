"""Before and after a known change: `parse` splits each line character by character (the slow
version); `total` sums the parsed rows. `redline diff`'s test rewrites parse to use str.split and
compares the two profiles; the editor's end-to-end test captures and optimises it while it prints.
Usage: python orders_work.py ROUNDS"""

import sys

LINES = [f"order-{i},{i % 97},{(i * 7) % 13}.{i % 100:02d},{'EU' if i % 3 else 'US'}" for i in range(2000)]


def parse(lines):
    rows = []
    for line in lines:
        fields, field = [], ""
        for ch in line:
            if ch == ",":
                fields.append(field)
                field = ""
            else:
                field += ch
        fields.append(field)
        rows.append(fields)
    return rows


def total(rows):
    amount = 0.0
    for _ in range(6):
        for name, qty, price, region in rows:
            if region == "EU" and name:
                amount += int(qty) * float(price)
    return amount


def main(rounds):
    result = 0.0
    for r in range(rounds):  # a line to stdout and one to stderr per round, as services and jobs log
        result += total(parse(LINES))
        print(f"round {r}: {round(result, 2)}")
        print(f"round {r}: {len(LINES)} lines parsed", file=sys.stderr)
    print(round(result, 2))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
