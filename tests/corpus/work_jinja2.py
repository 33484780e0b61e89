"""Render templates with jinja2 (a compiled template's runtime: contexts, loops, filters, Markup)."""
import random
import sys
import zlib

import jinja2

env = jinja2.Environment(autoescape=True)
page = env.from_string("<h1>{{ title|title }}</h1><ul>{% for row in rows %}<li class='{{ loop.cycle('a', 'b') }}'>"
                       "{{ row.name|e }}: {{ '%.2f'|format(row.value) }}{% if row.tags %} "
                       "[{{ row.tags|join(', ') }}]{% endif %}</li>{% endfor %}</ul>")
rng = random.Random(0)
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 400):
    rows = [{"name": f"<n{k}>", "value": rng.random() * 100, "tags": rng.sample("xyzw", rng.randint(0, 3))}
            for k in range(rng.randint(5, 40))]
    html = page.render(title=f"page {i}", rows=rows)
    print(i, len(html), zlib.crc32(html.encode()))
