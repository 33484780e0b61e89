def tokens(self, text):
    out = []
    pos = 0
    end = len(text.rstrip())
    while pos < end:
        m = self.pattern.match(text, pos)
        self.log.debug("token %r at %d", m.group(0), pos)
        number, name, op = m.groups()
        if number is not None:
            out.append(("number", number))
        elif name is not None:
            out.append(("name", name))
        else:
            out.append(("op", op))
        pos = m.end()
    self.count += len(out)
    return out
