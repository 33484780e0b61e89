"""Installed into the program's venv by the test; redline's own environment does not have it."""

RATE = 0.2


def with_tax(amount):
    return round(amount * (1 + RATE), 2)
