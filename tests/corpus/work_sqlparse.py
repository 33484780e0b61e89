"""Parse and reformat SQL statements with sqlparse (token trees whose nodes hold their parents)."""
import random
import sys
import zlib

import sqlparse

rng = random.Random(0)
tables = ["users", "orders", "items", "payments", "events"]
cols = ["id", "name", "total", "created_at", "status", "user_id", "amount"]
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 150):
    t = rng.choice(tables)
    sql = (f"select {', '.join(rng.sample(cols, 3))} from {t} join {rng.choice(tables)} on {t}.id = x.{rng.choice(cols)} "
           f"where {rng.choice(cols)} > {rng.randint(1, 999)} and status in ('a', 'b') order by {rng.choice(cols)} desc")
    parsed = sqlparse.parse(sql)[0]
    out = sqlparse.format(sql, reindent=True, keyword_case="upper")
    print(i, len(parsed.tokens), zlib.crc32(str(parsed).encode()), zlib.crc32(out.encode()))
