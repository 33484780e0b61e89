# Wrong in the last cent: rounds the sum once instead of each line.
def invoice_total(prices, quantities):
    return sum((p * q for p, q in zip(prices, quantities)), Decimal(0)).quantize(Decimal("0.01"))
