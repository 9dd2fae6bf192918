"""A profile's timeline for display, prepared once: the report's static overview (``svg()``), the
plotly figure (``figure``) and, in a kernel, the live widget (``live()``) share its rectangles.
"""

from __future__ import annotations

from typing import Any

from ..analysis.timeline import TimelineData
from .live_timeline import live_available, live_timeline
from .timeline import DEFAULT_MAX_RECTS, describe, prepare_timeline, timeline_figure, timeline_svg

__all__ = ["TimelineView"]


class TimelineView:
    """A profile's timeline, prepared once (``TorchProfile.timeline_view()``): the report's
    overview (``svg()``) and the zoomable figure under it (``figure``) share its rectangles."""

    def __init__(self, profile: Any, *, python: bool = False, max_rects: int = DEFAULT_MAX_RECTS,
                 window_us: tuple[float, float] | None = None, height: int | None = None):
        self.profile = profile
        self.python = python
        self.max_rects = max_rects
        self.window_us = window_us
        self.height = height
        self._data: TimelineData | None = None

    @property
    def data(self) -> TimelineData:
        if self._data is None:
            self._data = prepare_timeline(self.profile, python=self.python, max_rects=self.max_rects,
                                          window_us=self.window_us)
        return self._data

    @property
    def figure(self) -> Any:
        """The plotly figure; it renders itself (plotly mimetype, the SVG, a line of text)."""
        return timeline_figure(self.data, python=self.python, height=self.height)

    def svg(self, width: int = 1000, height: int | None = None) -> str:
        return timeline_svg(self.data, width=width, height=height, python=self.python)

    def live(self) -> Any:
        """The live timeline widget (``views.live_timeline``): zoom re-renders the window from the
        kernel, a selected span lists its ops and kernels, hover shows launch -> kernel arrows,
        find highlights names. Needs ``anywidget`` and a running kernel."""
        return live_timeline(self.profile, self.data, python=self.python, max_rects=self.max_rects, height=self.height)

    def display_object(self) -> Any:
        """What a notebook shows: the live widget in a kernel that can run it, else the figure."""
        return self.live() if live_available() else self.figure

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        """As a cell's value: the live timeline in a kernel (its static drawing where no kernel
        answers), else the zoomable figure (not a line of text)."""
        return self.display_object()._repr_mimebundle_(include=include, exclude=exclude)

    def __repr__(self) -> str:
        return f"<{describe(self.data)}>"
