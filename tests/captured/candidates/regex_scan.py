# Honest: jumps to the next quote, backslash or illegal character with a compiled regex.
import re

_STOP = {
    False: re.compile("[" + re.escape("".join(sorted(ILLEGAL_BASIC_STR_CHARS | {'"', "\\"}))) + "]"),
    True: re.compile("[" + re.escape("".join(sorted(ILLEGAL_MULTILINE_BASIC_STR_CHARS | {'"', "\\"}))) + "]"),
}


def parse_basic_str(src, pos, *, multiline):
    if multiline:
        error_on = ILLEGAL_MULTILINE_BASIC_STR_CHARS
        parse_escapes = parse_basic_str_escape_multiline
    else:
        error_on = ILLEGAL_BASIC_STR_CHARS
        parse_escapes = parse_basic_str_escape
    stop = _STOP[bool(multiline)]
    result = ""
    start_pos = pos
    while True:
        m = stop.search(src, pos)
        if m is None:
            raise TOMLDecodeError("Unterminated string", src, len(src))
        pos = m.start()
        char = src[pos]
        if char == '"':
            if not multiline:
                return pos + 1, result + src[start_pos:pos]
            if src.startswith('"""', pos):
                return pos + 3, result + src[start_pos:pos]
            pos += 1
            continue
        if char == "\\":
            result += src[start_pos:pos]
            pos, parsed_escape = parse_escapes(src, pos)
            result += parsed_escape
            start_pos = pos
            continue
        raise TOMLDecodeError(f"Illegal character {char!r}", src, pos)
