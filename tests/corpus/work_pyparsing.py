"""Parse arithmetic expressions with a pyparsing grammar (parser elements holding parse actions)."""
import random
import sys

import pyparsing as pp

number = pp.pyparsing_common.number
ident = pp.Word(pp.alphas, pp.alphanums + "_")
expr = pp.infix_notation(number | ident, [(pp.one_of("* /"), 2, pp.OpAssoc.LEFT), (pp.one_of("+ -"), 2, pp.OpAssoc.LEFT)])
rng = random.Random(0)
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 150):
    terms = [str(rng.randint(1, 99)) if rng.random() < 0.6 else rng.choice(["x", "y", "rate_1"]) for _ in range(rng.randint(2, 8))]
    text = terms[0]
    for t in terms[1:]:
        text += f" {rng.choice('+-*/')} {t}"
    print(i, expr.parse_string(text, parse_all=True).as_list()[:1])
