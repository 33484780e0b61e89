def invoice_total(prices, quantities):
    total = Decimal(0)
    for price, qty in zip(prices, quantities):
        total += (price * qty).quantize(Decimal("0.01"))
    return total
