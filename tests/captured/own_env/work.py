"""A program whose hot function uses a package installed only in the program's own environment
(`onlyhere`, put in its venv by the test), not in redline's."""

import onlyhere


def price(items):
    return [onlyhere.with_tax(amount) for amount in items]


for i in range(20):
    price([float(j) for j in range(i, i + 50)])
