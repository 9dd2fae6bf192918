"""What a reader sees in HTML, read by the standard library's parser (not by nbprof's escaping):
the expected text of a test is written as text, and the HTML is read back to compare."""

from __future__ import annotations

import html.parser


class _Reader(html.parser.HTMLParser):
    def __init__(self, cls: str | None) -> None:
        super().__init__(convert_charrefs=True)
        self.cls = cls
        self.depth = 0  # inside an element with class ``cls``: its nesting depth
        self.skip = 0  # inside <script> or <style>
        self.text: list[str] = []
        self.parts: list[str] = []
        self.current: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in ("script", "style"):
            self.skip += 1
        if self.depth:
            self.depth += 1
        elif self.cls and self.cls in (dict(attrs).get("class") or "").split():
            self.depth = 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self.skip:
            self.skip -= 1
        if self.depth:
            self.depth -= 1
            if self.depth == 0:
                self.parts.append("".join(self.current))
                self.current = []

    def handle_data(self, data):
        if self.skip:
            return
        self.text.append(data)
        if self.depth:
            self.current.append(data)


def read(markup: str, cls: str | None = None) -> _Reader:
    reader = _Reader(cls)
    reader.feed(markup)
    reader.close()
    return reader


def text(markup: str) -> str:
    """The document's text, as a browser shows it (scripts and styles left out)."""
    return "".join(read(markup).text)


def texts_of(markup: str, cls: str) -> list[str]:
    """The text of each element with class ``cls``."""
    return read(markup, cls).parts


def tags(markup: str) -> list[str]:
    """The elements the markup opens, in order."""
    return read(markup).tags
