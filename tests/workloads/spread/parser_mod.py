"""A parser whose time is spread over the functions of its module it calls (tests/test_capture.py)."""


def parse(text):
    out = {}
    for item in text.split(";"):
        key, value = pair(item)
        out[name(key)] = number(value)
    return out


def pair(item):
    for i, ch in enumerate(item):
        if ch == "=":
            return item[:i], item[i + 1:]
    return item, ""


def name(key):
    return "".join([ch.upper() if ch.isalpha() else ch for ch in key])


def number(text):
    value = 0
    for ch in text:
        value = value * 10 + ord(ch) - 48
    return value
