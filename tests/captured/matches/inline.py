"""An inline processor, as Markdown's are: a private method handed each regex match."""

import re


class Inline:
    PATTERN = re.compile(r"\*\*(\w+)\*\*|_(\w+)_")

    def __init__(self):
        self.seen = 0

    def __apply(self, m):
        self.seen += 1
        strong, em = m.groups()
        return f"<b>{strong}</b>" if strong else f"<i>{em}</i>"

    def render(self, text):
        return self.PATTERN.sub(self.__apply, text)
