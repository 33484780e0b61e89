"""A method the class calls through an alias made in its body (pyparsing's `_parse = _parseNoCache`)."""


class Parser:
    def _parse_no_cache(self, text, loc):
        word = text[loc:].split(" ", 1)[0]
        return loc + len(word), word

    _parse = _parse_no_cache

    def words(self, text):
        loc, out = 0, []
        while loc < len(text):
            loc, word = self._parse(text, loc)
            out.append(word)
            loc += 1
        return out


for i in range(10):
    Parser().words(f"alpha{i} beta gamma")
