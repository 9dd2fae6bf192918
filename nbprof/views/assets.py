"""Script libraries embedded in outputs and pages, gzipped: DataTables (itables' offline bundle) and
plotly.js (the standalone page).

A notebook output or an offline page cannot fetch a library from the network (none may be there),
so the library travels inside it. Embedded as plain base64 text, itables' bundle is 968 KB, so the
first report of a session made a 1 MB notebook whatever the profile; plotly.js is 4.8 MB of the
standalone page. Gzipped before base64 they are 4-5x smaller (256 KB, 1.9 MB), and the browser
unpacks them with its own ``DecompressionStream`` (Chromium 80, Firefox 113, Safari 16.4) in a few
milliseconds, before the scripts that wait for them run.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Iterator

__all__ = ["gzip_base64", "UNZIP_JS", "script_open", "with_nonce", "script_nonce"]

# The standalone page's Content-Security-Policy (views.page) runs only the scripts that carry its
# nonce, a random value drawn for each page. While a page is written, every script element nbprof
# writes takes it; a script made from a trace's data (were any escape to fail) would not.
_NONCE: ContextVar[str | None] = ContextVar("nbprof_script_nonce", default=None)
_SCRIPT_TAG = re.compile(r"<script\b")


@contextmanager
def script_nonce(nonce: str) -> Iterator[None]:
    """Within: the scripts nbprof writes carry ``nonce`` (the page being written's)."""
    token = _NONCE.set(nonce)
    try:
        yield
    finally:
        _NONCE.reset(token)


def script_open(kind: str = "") -> str:
    """An opening ``<script>`` tag (``kind="module"``: a module script), with the nonce of the
    page being written, if any."""
    nonce = _NONCE.get()
    return "<script" + (f' type="{kind}"' if kind else "") + (f' nonce="{nonce}"' if nonce else "") + ">"


def with_nonce(html: str) -> str:
    """``html``'s script elements with the nonce of the page being written (none: as it is). Only
    for markup nbprof wrote itself, with no value from a trace in it (a template, a library)."""
    nonce = _NONCE.get()
    return _SCRIPT_TAG.sub(f'<script nonce="{nonce}"', html) if nonce else html

# ``nbprofUnzip(b64)``: a promise of the text packed by :func:`gzip_base64`
UNZIP_JS = """window.nbprofUnzip = window.nbprofUnzip || function (b64) {
  var bytes = Uint8Array.from(atob(b64), function (c) { return c.charCodeAt(0); });
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Response(stream).text();
};"""


@lru_cache(maxsize=8)
def gzip_base64(text: str) -> str:
    """``text`` gzipped (level 9, no timestamp: the same bytes every run) as base64, as a JSON
    string literal to put in a script."""
    packed = gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)
    return json.dumps(base64.b64encode(packed).decode("ascii"))
