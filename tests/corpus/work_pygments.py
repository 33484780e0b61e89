"""Highlight Python source with pygments (regex lexers yielding tokens from generators, token types, formatters)."""
import random
import sys
import zlib

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

rng = random.Random(0)
lines = ["def f{i}(x, y=3):", "    return [v * {i} for v in range(x) if v % 2]", "class C{i}(object):",
         "    '''doc {i}'''", "    z = {{'a': {i}, 'b': \"s\"}}  # comment", "    async def g(self): await h({i})",
         "x = 0x{i:x} + 1.5e3 - f{i}(2)", "@decorator({i})", "    yield from (a for a in 'abc')"]
lexer, formatter = PythonLexer(), HtmlFormatter()
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 60):
    src = "\n".join(rng.choice(lines).format(i=k) for k in range(rng.randint(20, 80)))
    html = highlight(src, lexer, formatter)
    print(i, len(html), zlib.crc32(html.encode()))
