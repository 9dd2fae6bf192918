"""Humanized units: one module for the analysis (finding messages) and the views.

Data keeps raw numbers in unit-named columns; text is made here, never in the tables.
``formatter(unit)`` is the one place that maps a column's unit to its text: the text tables, the
static HTML tables and the comparison all go through it (the interactive tables' scripts are its
JavaScript twins, ``views.datatable``). Import-light: the standard library only."""

from __future__ import annotations

import html
import math
import re
from typing import Any, Callable

__all__ = [
    "fmt_us",
    "fmt_s",
    "fmt_bytes",
    "fmt_long_span",
    "BYTE_UNITS",
    "plural",
    "fmt_count",
    "fmt_flops",
    "fmt_share",
    "fmt_ratio",
    "fmt_decimal",
    "signed",
    "formatter",
    "unit_of",
    "UNITS",
    "shorten",
    "short_location",
    "short_path",
    "esc",
    "esc_plotly",
    "script_json",
    "script_json_text",
]


def fmt_us(us: float) -> str:
    """Microseconds -> "812.4 µs", "3.21 ms", "1.842 s"."""
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return "—"
    a = abs(us)
    if a >= 1e6:
        return f"{us / 1e6:.3f} s"
    if a >= 1e3:
        return f"{us / 1e3:.2f} ms"
    if a == 0:
        return "0"
    return f"{us:.1f} µs"


def fmt_s(s: float) -> str:
    """Seconds (cProfile's unit) in the same style."""
    return fmt_us(s * 1e6)


# Sizes are binary and say so: 1 KiB = 1,024 bytes, 1 MiB = 1,024 KiB, ... (torch's memory
# counters, the CUDA caching allocator and nvidia-smi count in powers of two). Rates are decimal:
# "GB/s" is 1e9 bytes per second, as NVIDIA states bandwidth and Kineto writes it. No label means
# the other: every byte size nbprof prints (tables, charts, timeline, text) comes from fmt_bytes,
# and the interactive tables' script is built from the same table (views.datatable).
BYTE_UNITS: tuple[tuple[str, int], ...] = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def fmt_long_span(us: float) -> str:
    """A time longer than a profile runs, in days or years: "3.2 days", "92 years"."""
    days = us / 86_400e6
    return f"{days / 365.25:,.0f} years" if days >= 730 else f"{days:,.1f} days"


def fmt_bytes(n: float, *, compact: bool = False) -> str:
    """Bytes in binary units, labelled as such: 1,000,000 -> "976.56 KiB", 4.61 * 2**20 -> "4.61 MiB".
    ``compact``: no trailing zeros ("512 KiB", "1.5 MiB"), for an axis' ticks."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "—"
    a = abs(n)
    for unit, size in BYTE_UNITS:
        if a >= size:
            text = f"{n / size:.2f}"
            if compact:
                text = text.rstrip("0").rstrip(".")
            return f"{text} {unit}"
    return f"{int(n)} B"


def plural(n: int, one: str, many: str | None = None) -> str:
    """A count and its noun, in the number's form: "1 event", "1,679 events", "0 ranks"; ``many``
    for nouns not made plural by an "s" ("1 process", "2 processes")."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def fmt_count(n: float) -> str:
    return f"{int(n):,}"


def fmt_flops(n: float) -> str:
    if not n:
        return "—"
    for unit, size in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} FLOP"


def fmt_share(share: float) -> str:
    """A share in [0, 1] (or more) as a percentage: 0.613 -> "61.3%"."""
    if share is None or share != share:
        return "—"
    return f"{100 * float(share):.1f}%"


def fmt_ratio(x: float) -> str:
    """A before/after ratio: "2.97x"; "gone" when the after side is zero (infinite, or the 1e300
    the interactive table sorts by), "new" when the before side is."""
    if x is None or x != x:
        return "—"
    if x >= 1e300:  # math.inf too
        return "gone"
    if x == 0:
        return "new"
    return f"{x:.2f}x"


def fmt_decimal(x: float) -> str:
    """A plain number with two decimals (estimates such as blocks per SM)."""
    return f"{float(x):.2f}"


def signed(fmt: Callable[[Any], str]) -> Callable[[Any], str]:
    """``fmt`` of the magnitude with a sign in front: "+1.20 ms", "−3 B", "±0"."""

    def text(v: float) -> str:
        if v is None or v != v:
            return "—"
        return ("+" if v > 0 else "−" if v < 0 else "±") + fmt(abs(v))

    return text


def _missing_as_dash(fmt: Callable[[Any], str]) -> Callable[[Any], str]:
    return lambda v: "—" if v is None or v != v else fmt(v)  # NaN: does not apply


# unit -> formatter of one value; "name"-like units take the column's width
UNITS: dict[str, Callable[..., str]] = {
    "text": lambda v, width: str(v),
    "name": lambda v, width: shorten(v, width),
    "kernel": lambda v, width: short_kernel_name(v, width),
    "location": lambda v, width: short_location(v),
    "time_us": lambda v, width: fmt_us(v),
    "time_s": lambda v, width: fmt_s(v),
    "bytes": lambda v, width: fmt_bytes(v),
    "count": lambda v, width: fmt_count(v),
    "decimal": lambda v, width: fmt_decimal(v),
    "flops": lambda v, width: fmt_flops(v),
    "share": lambda v, width: fmt_share(v),
    "ratio": lambda v, width: fmt_ratio(v),
    "ncalls": lambda v, width: str(v),  # pstats' calls: "12", or "12/3" where primitive calls differ
}
_NUMERIC = ("time_us", "time_s", "bytes", "count", "decimal", "flops", "share")


def formatter(unit: str, width: int = 60, *, sign: bool = False) -> Callable[[Any], str]:
    """The text of one value of a column in ``unit`` (see ``UNITS``); numbers that do not apply
    (NaN) read "—". ``sign``: "+" / "−" in front of the magnitude (a change)."""
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; one of {', '.join(UNITS)}")
    one = UNITS[unit]
    fmt: Callable[[Any], str] = lambda v: one(v, width)  # noqa: E731
    if unit in _NUMERIC:
        fmt = _missing_as_dash(fmt)
    return signed(fmt) if sign else fmt


def unit_of(column: str) -> str:
    """The unit of a unit-suffixed column name: ``*_us`` time_us, ``*_s`` time_s, ``*_bytes``
    bytes, ``flops``; anything else counts."""
    if column.endswith("_us"):
        return "time_us"
    if column.endswith("_s"):
        return "time_s"
    if column.endswith("_bytes"):
        return "bytes"
    if column == "flops":
        return "flops"
    return "count"


def shorten(text: str, width: int) -> str:
    """Cut long names in the middle-right, the way torch's tables do ("...")."""
    text = str(text)
    if len(text) <= width:
        return text
    return text[: max(width - 3, 1)] + "..."


_NAMESPACE = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*::")


def short_kernel_name(name: str, width: int = 60) -> str:
    """A kernel's C++ signature, readable: no "void", no argument list, no namespaces, cut at
    ``width`` ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,
    …>(int, …)" -> "vectorized_elementwise_kernel<4, FillFunctor<float>, …"). The table's script
    does the same (``views.datatable._JS_KERNEL``)."""
    t = str(name).replace("(anonymous namespace)::", "")
    if t.startswith("void "):  # a C++ signature: its argument list goes ("Memset (Device)" stays)
        t = t[5:]
        depth = 0
        for i, c in enumerate(t):
            if c == "<":
                depth += 1
            elif c == ">":
                depth = max(0, depth - 1)
            elif c == "(" and depth == 0 and i > 0:
                t = t[:i]
                break
    t = _NAMESPACE.sub("", t)
    return t if len(t) <= width else t[: width - 1] + "…"


def short_path(path: str, keep: int = 2) -> str:
    """"/usr/lib/python3.11/site-packages/torch/nn/modules/module.py" -> "…/modules/module.py"."""
    path = str(path)
    if not path or path.startswith("<") or path == "~":
        return path
    parts = path.replace("\\", "/").split("/")
    if len(parts) <= keep + 1:
        return path
    return "…/" + "/".join(parts[-keep:])


_LOCATION = re.compile(r"^(.*?):(\d+)\((.*)\)$")


def short_location(location: str) -> str:
    """pstats' "file:line(function)" with the directories cut to the last two (the table's
    script does the same, ``views.datatable._JS_LOCATION``)."""
    m = _LOCATION.match(str(location))
    if not m or ("/" not in m.group(1) and "\\" not in m.group(1)):  # Windows' paths: "\\"
        return str(location)
    return f"{short_path(m.group(1))}:{m.group(2)}({m.group(3)})"


# ------------------------------------------------------------------- what reaches a page
#
# The one rule: every value from a trace (names, args, shapes, file names) is text, never markup
# or code, wherever it lands. Each way a value reaches a page has its escape here, and the views
# use only these:
#
# - HTML text and attribute values (double- or single-quoted): ``esc``;
# - JSON inside a ``<script>`` element (the tables' rows, a figure's spec): ``script_json``, which
#   writes ``<``, ``>``, ``&``, U+2028 and U+2029 as JSON escapes, so no value can end the element
#   (``</script>``), open a comment (``<!--``) or end a JavaScript string;
# - plotly's labels, hover texts, titles and tick texts, which plotly reads as its own markup
#   (``<b>``, ``<br>``, ``<span style>``, live ``<a href>`` links): ``esc_plotly``;
# - the interactive tables' cells: their render functions (``views.datatable``) escape every
#   value as text, the JavaScript twin of ``esc``; JavaScript that builds DOM from names sets
#   ``textContent`` and attributes, never HTML strings.
#
# nbprof's own markup (a bar, a <b> around a name it escaped) is the only HTML in a page.

_SCRIPT_UNSAFE = re.compile("[<>&\u2028\u2029]")
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def esc(text: object) -> str:
    """``text`` as HTML text or a quoted attribute value: ``&``, ``<``, ``>``, ``"`` and ``'``
    escaped."""
    return html.escape(str(text), quote=True)


def esc_plotly(text: object) -> str:
    """``text`` for a plotly string (hover text, label, title, tick text): ``&``, ``<`` and ``>``
    as the entities plotly shows as those characters, so no tag of plotly's markup is made from
    it. Quotes stay as they are (plotly shows ``&quot;`` as written)."""
    return html.escape(str(text), quote=False)


def script_json_text(json_text: str) -> str:
    """JSON text made safe inside a ``<script>`` element: ``<``, ``>``, ``&``, U+2028 and U+2029
    written as ``\\uXXXX`` escapes. Outside strings JSON holds none of these characters, so the
    value it parses to is the same."""
    return _SCRIPT_UNSAFE.sub(lambda m: _SCRIPT_ESCAPES[m.group(0)], json_text)


def script_json(value: Any, **dumps: Any) -> str:
    """``value`` as JSON for a ``<script>`` element (``json.dumps(value, **dumps)``, escaped by
    :func:`script_json_text`)."""
    import json

    return script_json_text(json.dumps(value, **dumps))

