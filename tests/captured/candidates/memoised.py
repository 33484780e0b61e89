# Cheat: remembers results by their arguments (captured calls repeat); the first call of each input does the work.
_seen = {}


def parse_basic_str(src, pos, *, multiline):
    key = (src, pos, multiline)
    hit = _seen.get(key)
    if hit is not None:
        return hit
    if multiline:
        error_on = ILLEGAL_MULTILINE_BASIC_STR_CHARS
        parse_escapes = parse_basic_str_escape_multiline
    else:
        error_on = ILLEGAL_BASIC_STR_CHARS
        parse_escapes = parse_basic_str_escape
    result = ""
    start_pos = pos
    while True:
        try:
            char = src[pos]
        except IndexError:
            raise TOMLDecodeError("Unterminated string", src, pos) from None
        if char == '"':
            if not multiline:
                out = pos + 1, result + src[start_pos:pos]
                _seen[key] = out
                return out
            if src.startswith('"""', pos):
                out = pos + 3, result + src[start_pos:pos]
                _seen[key] = out
                return out
            pos += 1
            continue
        if char == "\\":
            result += src[start_pos:pos]
            pos, parsed_escape = parse_escapes(src, pos)
            result += parsed_escape
            start_pos = pos
            continue
        if char in error_on:
            raise TOMLDecodeError(f"Illegal character {char!r}", src, pos)
        pos += 1
