"""Before and after a known change: `parse` splits each line character by character (the slow
version); `total` sums the parsed rows. `redline diff`'s test rewrites parse to use str.split and
compares the two profiles. Usage: python orders_work.py ROUNDS"""

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
    for _ in range(rounds):
        result += total(parse(LINES))
    print(round(result, 2))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
