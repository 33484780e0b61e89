"""A hand-written scanner as backend code has them: CSV text read a character at a time by its
position, quotes honoured."""

import random


def rows(text, sep=","):
    """The rows of CSV text, each a list of its fields ("a,b" is one field, "" inside quotes a quote)."""
    out = []
    row = []
    field = []
    quoted = False
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if quoted:
            if ch == '"':
                if i + 1 < n and text[i + 1] == '"':
                    field.append('"')
                    i += 1
                else:
                    quoted = False
            else:
                field.append(ch)
        elif ch == '"':
            quoted = True
        elif ch == sep:
            row.append("".join(field))
            field = []
        elif ch == "\n":
            row.append("".join(field))
            out.append(row)
            row, field = [], []
        else:
            field.append(ch)
        i += 1
    if field or row:
        row.append("".join(field))
        out.append(row)
    return out


def make_inputs(seed):
    rnd = random.Random(seed)
    words = ["alpha", "beta", "gamma", 'say "hi"', "a, b", "x" * 12, ""]
    lines = []
    for _ in range(rnd.randint(150, 250)):
        cells = [rnd.choice(words) for _ in range(6)]
        lines.append(",".join(f'"{c.replace(chr(34), chr(34) * 2)}"' if '"' in c or "," in c else c for c in cells))
    return ("\n".join(lines) + "\n",)


if __name__ == "__main__":
    text = make_inputs(0)[0]
    print(sum(len(r) for _ in range(200) for r in rows(text)))
