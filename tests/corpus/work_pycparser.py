"""Parse C source with pycparser (AST nodes kept in slots, a lexer and coordinates)."""
import random
import sys

from pycparser import c_parser

rng = random.Random(0)
parser = c_parser.CParser()
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 40):
    body = "\n".join(f"    x{k} = x{k - 1 if k else 0} * {rng.randint(1, 9)} + {rng.randint(0, 99)};" for k in range(rng.randint(5, 40)))
    decls = "\n".join(f"    int x{k};" for k in range(41))
    src = f"int f{i}(int a, int b) {{\n{decls}\n{body}\n    if (a > b) {{ return a; }} else {{ return b; }}\n}}\n"
    ast = parser.parse(src)
    print(i, len(ast.ext[0].body.block_items))
