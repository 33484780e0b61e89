# Honest: findall over the whole text, then one pass; the per-token debug lines only when they would be shown.
def tokens(self, text):
    if self.log.isEnabledFor(logging.DEBUG):
        out = []
        pos = 0
        end = len(text.rstrip())
        while pos < end:
            m = self.pattern.match(text, pos)
            self.log.debug("token %r at %d", m.group(0), pos)
            number, name, op = m.groups()
            out.append(("number", number) if number is not None else ("name", name) if name is not None
                       else ("op", op))
            pos = m.end()
    else:
        out = [("number", n) if n else ("name", w) if w else ("op", o)
               for n, w, o in self.pattern.findall(text.rstrip())]
    self.count += len(out)
    return out
