"""Humanized units: one module for the analysis (finding messages) and the views.

Data keeps raw numbers in unit-named columns; text is made here, never in the tables."""

from __future__ import annotations

import html
import math
import os
import re

__all__ = [
    "fmt_us",
    "fmt_s",
    "fmt_bytes",
    "fmt_count",
    "fmt_flops",
    "fmt_pct",
    "shorten",
    "short_path",
    "esc",
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


def fmt_bytes(n: float) -> str:
    """Bytes in binary units, as torch prints them: "4.61 MB" is 4.61 * 2**20 bytes."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "—"
    a = abs(n)
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if a >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def fmt_count(n: float) -> str:
    return f"{int(n):,}"


def fmt_flops(n: float) -> str:
    if not n:
        return "—"
    for unit, size in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} FLOP"


def fmt_pct(part: float, whole: float) -> str:
    if not whole:
        return "—"
    return f"{100.0 * part / whole:.1f}%"


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


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def basename(path: str) -> str:
    return os.path.basename(path)
