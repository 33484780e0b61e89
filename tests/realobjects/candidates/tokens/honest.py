# Honest: findall over the whole text, then one pass.
def tokens(self, text):
    out = [("number", n) if n else ("name", w) if w else ("op", o)
           for n, w, o in self.pattern.findall(text.rstrip())]
    self.count += len(out)
    return out
