# Wrong on self: forgets to count the tokens (the output is right).
def tokens(self, text):
    return [("number", n) if n else ("name", w) if w else ("op", o)
            for n, w, o in self.pattern.findall(text.rstrip())]
