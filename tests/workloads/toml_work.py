"""A real workload for the captured-inputs tests: parse TOML documents with tomli's pure-Python parser.

Run from a workspace holding tomli's sources (tomli/), as a user would run their own program. The
documents vary (string lengths, escapes, multi-line strings with quotes in them, arrays of tables),
so the parser's functions see calls of many signatures.
"""

import random
import sys

import tomli


def document(rng: random.Random, i: int) -> str:
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    lines = [f'title = "document {i}"', "[owner]", f'name = "{" ".join(rng.choices(words, k=rng.randint(1, 30)))}"']
    for t in range(rng.randint(1, 6)):
        lines.append("[[servers]]")
        lines.append(f'host = "10.0.{t}.{rng.randint(1, 254)}"')
        text = " ".join(rng.choices(words, k=rng.randint(0, 60)))
        if rng.random() < 0.3:
            text += r" with \"escaped\" quotes\tand a tab"
        lines.append(f'motd = "{text}"')
        if rng.random() < 0.4:
            body = "\n".join(" ".join(rng.choices(words, k=rng.randint(1, 12))) for _ in range(rng.randint(1, 5)))
            lines.append(f'notes = """\n{body} "quoted" and ""twice"" \n"""')
        lines.append(f"ports = [{', '.join(str(rng.randint(1, 65535)) for _ in range(rng.randint(1, 5)))}]")
        lines.append(f"enabled = {rng.choice(['true', 'false'])}")
    return "\n".join(lines) + "\n"


def main(rounds: int) -> None:
    rng = random.Random(7)
    docs = [document(rng, i) for i in range(200)]
    servers = 0
    for _ in range(rounds):
        for doc in docs:
            servers += len(tomli.loads(doc).get("servers", []))
    print(f"parsed {rounds * len(docs)} documents, {servers} servers")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
