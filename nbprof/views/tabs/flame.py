"""The Flame tab of a cProfile report: a static overview (SVG) of the flame view; the zoomable
icicle is an output of its own under the report (``result.flame()``)."""

from __future__ import annotations

from typing import Any

from ..figure import drawing_html
from .base import Tab, empty

__all__ = ["FLAME"]


def render(report: Any) -> str:
    try:
        from ..flame import flame_svg

        svg = flame_svg(report.profile.call_tree())
    except Exception as e:  # a flame problem must not hide the tables
        return empty(f"The flame view could not be drawn: {type(e).__name__}: {e}")
    return drawing_html(svg, "the flame view's overview", style=False) + empty("An overview; the zoomable flame view is shown under this report (p.flame()).")


FLAME = Tab("Flame", render)
