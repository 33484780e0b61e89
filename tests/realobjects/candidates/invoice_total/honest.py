# Honest: the quantum made once, not per line.
_CENT = Decimal("0.01")


def invoice_total(prices, quantities):
    total = Decimal(0)
    for price, qty in zip(prices, quantities):
        total += (price * qty).quantize(_CENT)
    return total
