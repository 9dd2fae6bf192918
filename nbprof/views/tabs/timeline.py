"""The Timeline tab: a static overview (SVG) of the timeline; the zoomable plotly timeline is an
output of its own under the report (``result.timeline()``), since plotly.js cannot live inside
the persistent HTML report without megabytes of script."""

from __future__ import annotations

from typing import Any

from ..figure import drawing_html
from .base import Tab, empty

__all__ = ["TIMELINE"]


def render(report: Any) -> str:
    try:
        svg = report.profile.timeline_view().svg()
    except Exception as e:  # a timeline problem must not hide the tables
        return empty(f"The timeline could not be drawn: {type(e).__name__}: {e}")
    return drawing_html(svg, "the timeline's overview", style=False) + empty("An overview; the zoomable timeline is shown under this report, live while the kernel runs "
                 "(p.timeline_view().live(); p.timeline() is the plotly figure).")


TIMELINE = Tab("Timeline", render)
