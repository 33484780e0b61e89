"""Functions that take, change and return the objects real libraries pass: results kept in
`__slots__`, enum members, Decimals, an object holding a compiled regex and a logger, byte buffers
changed in place, classes, and trees whose nodes hold their parents. Each has its inputs function
(`--inputs objects_app.py::NAME_inputs`); tests/realobjects/candidates/NAME/ holds a rewrite that is
wrong on a few inputs and an honest faster rewrite (tests/test_real_objects.py takes the identical copy
from this file)."""

import enum
import logging
import random
import re
from decimal import Decimal


class Clock:
    """A parsed time of day, as a date parser's result object: its fields live in slots."""

    __slots__ = ("hour", "minute")

    def __init__(self, hour, minute):
        self.hour = hour
        self.minute = minute


def parse_times(texts):
    out = []
    for text in texts:
        m = re.match(r"(\d+):(\d+) (am|pm)$", text)
        hour = int(m.group(1)) % 12 + (12 if m.group(3) == "pm" else 0)
        out.append(Clock(hour, int(m.group(2))))
    return out


def parse_times_inputs(seed):
    rng = random.Random(seed)
    return ([f"{rng.randint(1, 12)}:{rng.randint(0, 59):02d} {rng.choice(('am', 'pm'))}" for _ in range(300)]
            + ["12:35 pm", "12:05 am"],)


class Level(enum.Enum):
    LOW = 1
    MID = 2
    HIGH = 3


def levels(values):
    out = []
    for v in values:
        for limit, level in ((10, Level.LOW), (100, Level.MID)):
            if v < limit:
                out.append(level)
                break
        else:
            out.append(Level.HIGH)
    return out


def levels_inputs(seed):
    rng = random.Random(seed)
    return ([rng.randint(0, 200) for _ in range(2000)] + [10, 100],)


def invoice_total(prices, quantities):
    total = Decimal(0)
    for price, qty in zip(prices, quantities):
        total += (price * qty).quantize(Decimal("0.01"))
    return total


def invoice_total_inputs(seed):
    rng = random.Random(seed)
    n = 400
    return ([Decimal(rng.randint(1, 99999)) / Decimal(1000) for _ in range(n)], [rng.randint(1, 9) for _ in range(n)])


class Lexer:
    """Holds its compiled pattern and its logger, as parsers do."""

    def __init__(self):
        self.pattern = re.compile(r"\s*(?:(\d+)|([A-Za-z_]\w*)|(\S))")
        self.log = logging.getLogger("objects_app.lexer")
        self.count = 0

    def tokens(self, text):
        out = []
        pos = 0
        end = len(text.rstrip())
        while pos < end:
            m = self.pattern.match(text, pos)
            self.log.debug("token %r at %d", m.group(0), pos)
            number, name, op = m.groups()
            if number is not None:
                out.append(("number", number))
            elif name is not None:
                out.append(("name", name))
            else:
                out.append(("op", op))
            pos = m.end()
        self.count += len(out)
        return out


def lexer_inputs(seed):
    rng = random.Random(seed)
    words = ["x", "total", "3", "42", "+", "*", "(", ")", "value_2", "=", "17"]
    return Lexer(), " ".join(rng.choice(words) for _ in range(600))


def mask(buf, key):
    for i in range(len(buf)):
        buf[i] ^= key[i % len(key)]


def mask_inputs(seed):
    rng = random.Random(seed)
    return bytearray(rng.randbytes(4000)), rng.randbytes(7)


class JsonHandler:
    pass


class CsvHandler:
    pass


class TextHandler:
    pass


HANDLERS = [("json", JsonHandler), ("csv", CsvHandler), ("txt", TextHandler)]


def handlers_for(names):
    out = []
    for name in names:
        for key, cls in HANDLERS:
            if name.endswith("." + key):
                out.append(cls)
                break
        else:
            out.append(TextHandler)
    return out


def handlers_for_inputs(seed):
    rng = random.Random(seed)
    return ([f"file{i}.{rng.choice(('json', 'csv', 'txt', 'md'))}" for i in range(3000)],)


class Node:
    """An outline entry: it holds its parent and its children."""

    def __init__(self, label, parent=None):
        self.label = label
        self.parent = parent
        self.children = []


def nest(outline):
    """A tree from (depth, label) pairs, each entry under the nearest earlier entry one level up."""
    root = Node("root")
    placed = [(0, root)]
    for depth, label in outline:
        for d, node in reversed(placed):
            if d == depth - 1:
                parent = node
                break
        child = Node(label, parent)
        parent.children.append(child)
        placed.append((depth, child))
    return root


def nest_inputs(seed):
    rng = random.Random(seed)
    outline, depth = [], 0
    for i in range(400):
        depth = rng.randint(1, min(depth + 1, 6))
        outline.append((depth, f"item {i}"))
    return (outline,)


class Link:
    __slots__ = ("next", "value")

    def __init__(self, value, next=None):
        self.value = value
        self.next = next


def relink(head):
    """Reverse a linked list in place; returns the new head."""
    prev = None
    node = head
    while node is not None:
        nxt = node.next
        node.next = prev
        prev = node
        node = nxt
    return prev


def relink_inputs(seed):
    head = None
    for v in random.Random(seed).sample(range(100000), 10000):
        head = Link(v, head)
    return (head,)
