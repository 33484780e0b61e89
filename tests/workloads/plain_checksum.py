"""Plain Python that Cython speeds up unchanged: a character loop over dict lookups (in the function, or
in a module function it calls), and a method that keeps private (name-mangled) state."""

import random
from abc import ABC, abstractmethod

WEIGHTS = {c: i % 7 for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}


def score(words):
    """A checksum of the words' letters."""
    total = 0
    for w in words:
        for ch in w:
            total += WEIGHTS.get(ch, 1) * 31 % 7
    return total


def weigh(ch):
    return WEIGHTS.get(ch, 1) * 31 % 7


def checksum(words):
    """score, its letter's weight a function of the module."""
    total = 0
    for w in words:
        for ch in w:
            total += weigh(ch)
    return total


class Marked(str):
    """A str subclass, as markup libraries pass (markdown's AtomicString)."""


def vowels(text: str) -> int:
    """Annotated str, called with a subclass of str."""
    count = 0
    for ch in text:
        if ch in "aeiou":
            count += 1
    return count


def scaled(x, factor):
    """`x` times `factor`; no factor is 1 (the typed variant cannot hold None in a double)."""
    if factor < 0:
        factor = None
    return x * (1.0 if factor is None else factor)


def spread(values):
    """The last gap between neighbours and the mean gap: the last read after the loop, so fewer than two values
    raise UnboundLocalError."""
    total = 0.0
    for i in range(1, len(values)):
        gap = (values[i] - values[i - 1]) * 1.0
        total += gap
    return gap, total / (len(values) - 1)


def initials(words):
    """Each word's first letter, or 0 for an empty word (which no call here passes)."""
    out = []
    for w in words:
        first = w[:1]
        if not first:
            first = 0
        out.append(first)
    return out


MARKS = {"plain": ("", ""), "bold": ("**", "**")}


def render(words, style):
    """The words in the style's marks: `style` is a name on every call, then the marks it names."""
    style = MARKS[style]
    out = []
    for w in words:
        out.append(style[0] + w + style[1])
    return out


class Tokeniser:
    def __init__(self):
        self.__words = 0

    def split(self, text):
        out = []
        word = []
        for ch in text:
            if ch.isalnum():
                word.append(ch)
            elif word:
                self.__emit(out, word)
                word = []
        if word:
            self.__emit(out, word)
        return out

    def __emit(self, out, word):
        out.append("".join(word))
        self.__words += 1


class Cursor:
    """A position in a text: made and read by `words_of`, which uses the class by name."""

    def __init__(self, text):
        self.text = text
        self.pos = 0

    @classmethod
    def over(cls, text):
        return cls(text)

    def word(self):
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isalnum():
            self.pos += 1
        end = self.pos
        while self.pos < len(self.text) and not self.text[self.pos].isalnum():
            self.pos += 1
        return self.text[start:end]


def words_of(text):
    cursor = Cursor.over(text)
    out = []
    while cursor.pos < len(cursor.text):
        out.append(cursor.word())
    return out


class Tally(list):
    """Words kept as they are added; `append` counts what others append, `add` counts its own."""

    def __init__(self):
        super().__init__()
        self.total = 0

    def append(self, word):
        self.total += 1000
        super().append(word)

    def add(self, words):
        for w in words:
            if w:
                super().append(w.lower())  # list's own append: Tally's is not this class's super
                self.total += len(w)
        return self.total


class Shouting(Tally):
    def append(self, word):
        super().append(word.upper())


class Rule(ABC):
    @abstractmethod
    def __call__(self, words): ...


class Longer(Rule):
    """A method that an ABC reads while its class is made, before the module has named the class."""

    def __init__(self, n):
        self.n = n

    def __call__(self, words):
        out = []
        for w in words:
            if len(w) > self.n:
                out.append(w)
        return out


def make_inputs(seed):
    rnd = random.Random(seed)
    return (["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(1, 12)))
             for _ in range(3000)],)


def make_split_inputs(seed):
    rnd = random.Random(seed)
    text = " ".join("".join(rnd.choice("abcdefg1,.") for _ in range(rnd.randint(1, 9))) for _ in range(800))
    return Tokeniser(), text


def make_words_of_inputs(seed):
    return make_split_inputs(seed)[1:]


def make_emit_inputs(seed):
    rnd = random.Random(seed)
    return Tokeniser(), [], [rnd.choice("abc") for _ in range(rnd.randint(1, 9))]


def make_vowels_inputs(seed):
    rnd = random.Random(seed)
    return (Marked("".join(rnd.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(20000))),)


def make_scaled_inputs(seed):
    rnd = random.Random(seed)
    return rnd.uniform(-5, 5), rnd.choice([2.5, -1.0, 0.5])


def make_spread_inputs(seed):
    rnd = random.Random(seed)
    return ([rnd.uniform(0, 100) for _ in range(rnd.randint(2000, 3000))],)


def make_initials_inputs(seed):
    rnd = random.Random(seed)
    return (["".join(rnd.choice("abcdefgh") for _ in range(rnd.randint(1, 8))) for _ in range(3000)],)


def make_render_inputs(seed):
    rnd = random.Random(seed)
    return ["".join(rnd.choice("abcdefgh") for _ in range(rnd.randint(1, 8))) for _ in range(3000)], \
        rnd.choice(["plain", "bold"])


def make_add_inputs(seed):
    rnd = random.Random(seed)
    return (Shouting() if seed % 2 else Tally()), ["".join(rnd.choice("abcDEF") for _ in range(rnd.randint(0, 6)))
                                                     for _ in range(2000)]


def make_longer_inputs(seed):
    rnd = random.Random(seed)
    return Longer(rnd.randint(1, 5)), ["".join(rnd.choice("abc") for _ in range(rnd.randint(0, 8))) for _ in range(3000)]
