"""The live timeline: the timeline figure as a widget that asks the kernel for detail.

A static figure of a big profile is merged to pixel resolution once (``analysis.timeline``) and
stays merged when zoomed: the browser has only those rectangles. With a kernel behind it, the
browser can ask again. This widget (an ``anywidget``: ipywidgets' comm, with its front-end code
in ``live_timeline.js`` loaded at run time, no JupyterLab extension to build) answers:

- zoom / pan (plotly's relayout): the visible window's rectangles, prepared again for that window
  at the plot's pixel width (in full detail when it holds fewer events than ``max_rects``), on the
  whole profile's lanes and rows so nothing moves; the counter tracks follow the window;
- a selected span (the toolbar's "Select span", then a drag): that window's operators and kernels
  (``analysis.timeline_window``), a table under the timeline;
- hover on a launch or on device work: an arrow to its partner (``analysis.timeline_tracks.flows``,
  by correlation id, both ways);
- find: rectangles whose names match stay colored, the others fade; the count and total time of
  the matching events.

plotly.js comes from the installed plotly package, sent once per page over the comm (gzipped):
JupyterLab's own plotly.js (its mimetype renderer) is private to it.

Without a kernel (nbconvert, nbviewer, GitHub, a notebook reopened later) the widget's output
falls back to the figure's static drawing (its ``text/html``), as the static figure does.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.timeline import TimelineData, timeline_rects
from ..analysis.timeline_tracks import flows
from ..analysis.timeline_window import find_events, window_summary
from ..format import esc_plotly, fmt_us, plural
from .figure import DEFAULT_CONFIG
from .timeline import _events_and_meta, _row_y, describe, figure_spec, prepare_timeline, static_html

__all__ = ["live_available", "live_timeline", "live_widget", "LiveTimelineState", "FADED"]

FADED = "#eceef1"  # a rectangle that does not match the search
SUMMARY_ROWS = 12  # rows of each table under a selected span


def live_available() -> bool:
    """A kernel with comms is running and ``anywidget`` is installed: the live timeline can work."""
    if importlib.util.find_spec("anywidget") is None:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


@lru_cache(maxsize=1)
def _plotly_source() -> str:
    """plotly.js of the installed plotly, gzipped and base64 (1.9 MB, not 4.8)."""
    import base64
    import gzip

    import plotly.offline

    packed = gzip.compress(plotly.offline.get_plotlyjs().encode("utf-8"), compresslevel=6, mtime=0)
    return base64.b64encode(packed).decode("ascii")


def _spec_json(spec: dict) -> dict:
    """A figure spec as plain JSON (numpy arrays as plotly's base64 typed arrays)."""
    import plotly.io as pio

    return json.loads(pio.to_json(spec, validate=False, remove_uids=True))


class LiveTimelineState:
    """What the widget's kernel side keeps and computes: the profile, the full view, the current
    window and search; each method answers one browser message (the widget only routes them)."""

    def __init__(self, profile: Any, full: TimelineData, *, python: bool, max_rects: int, height: int | None):
        self.profile = profile
        self.full = full
        self.python = python
        self.max_rects = max_rects
        self.height = height
        self.current = full
        self.query = ""
        self._flows: Any = None

    @property
    def events(self) -> Any:
        return self.full.events

    # ---- zoom
    def window(self, x0_us: float | None, x1_us: float | None, width_px: int) -> TimelineData:
        """The rectangles of [x0_us, x1_us] (None: the whole profile) at ``width_px``."""
        full = self.full
        if x0_us is not None and x1_us is not None and x1_us < x0_us:
            x0_us, x1_us = x1_us, x0_us
        if x0_us is None or x1_us is None or (x0_us <= full.t0_us and x1_us >= full.t1_us):
            self.current = full
        else:
            events, meta = _events_and_meta(self.profile)
            data = timeline_rects(events, meta, python=self.python, width_px=max(int(width_px), 100),
                                  max_rects=self.max_rects, window=(float(x0_us), float(x1_us)), layout=full)
            self.current = prepare_timeline(data)
        return self.current

    def spec(self, data: TimelineData | None = None) -> dict:
        """The figure for ``data`` (the current view), matching rectangles kept and others faded
        when a search is on."""
        data = self.current if data is None else data
        if self.query:
            data = dataclasses.replace(data, rects=data.rects.copy())
            data.rects["color"] = np.where(self._matching(data), data.rects["color"].to_numpy(), FADED)
        spec = figure_spec(data, self.python, self.height, live=True)
        spec["layout"]["xaxis"]["range"] = [data.t0_us / 1000.0, data.t1_us / 1000.0]
        return _spec_json(spec)

    # ---- find
    def _matching(self, data: TimelineData) -> np.ndarray:
        """Which rectangles hold a match: an event's name, or one of a merged rectangle's names."""
        needle = self.query.lower()
        r = data.rects
        # a copy (np.array): pandas' copy-on-write hands np.asarray a read-only view, written below
        hit = np.array(r["name"].astype(str).str.lower().str.contains(needle, regex=False), dtype=bool)
        names = r["names"].to_numpy()
        for i in np.flatnonzero(~hit & (r["event"].to_numpy() < 0)).tolist():
            hit[i] = any(needle in str(n).lower() for n, _ in (names[i] or []))
        return hit

    def find(self, text: str) -> str:
        """Set the search; the status line: matching events, their total time, rects on screen."""
        self.query = str(text).strip()
        if not self.query:
            return ""
        hits = find_events(self.events, self.query)
        total = float(self.events["dur_us"].to_numpy()[hits].sum())
        names = len(set(self.events["name"].cat.codes.to_numpy()[hits].tolist()))
        shown = int(self._matching(self.current).sum())
        return (f"{plural(len(hits), 'event')} match{'es' if len(hits) == 1 else ''} “{self.query}” "
                f"({plural(names, 'name')}), total {fmt_us(total)} · {plural(shown, 'rect')} on screen")

    # ---- select
    def select(self, x0_us: float, x1_us: float) -> dict:
        """A selected span: its head line and its ops' and kernels' tables (by time inside it), as
        data: the browser builds the tables with the names as text."""
        s = window_summary(self.events, x0_us, x1_us)
        head = f"{s.t0_us / 1000:.3f} – {s.t1_us / 1000:.3f} ms · {fmt_us(s.span_us)}"
        if len(s.kernels):
            head += f" · device busy {fmt_us(s.device_busy_us)} ({100 * s.device_busy_us / max(s.span_us, 1e-9):.0f} %)"
        tables = [dict(title=title, more=max(len(t) - SUMMARY_ROWS, 0),
                       rows=[[str(n), f"{c:,}", fmt_us(w), fmt_us(tt)]
                             for n, c, w, tt in t.head(SUMMARY_ROWS).itertuples(index=False, name=None)])
                  for title, t in (("Operators and ranges", s.ops), ("Kernels", s.kernels)) if len(t)]
        return dict(head=head, tables=tables)

    # ---- hover
    def flow(self, trace: int, x_ms: float) -> dict | None:
        """The arrow between the hovered rectangle's event and its launch / device work: ``{x0,
        y0, x1, y1}`` in the figure's coordinates (ms, row position), or None."""
        data = self.current
        r = data.rects
        if data.empty or self.events is None or data.event_row is None:
            return None
        j = rect_at(data, trace, x_ms)
        if j is None:
            return None
        ev = int(r["event"].iat[j])
        if ev < 0:
            return None
        if self._flows is None:
            self._flows = flows(self.events)
        f = self._flows
        launches, works = f["launch"].to_numpy(), f["work"].to_numpy()
        if (launches == ev).any():  # a launch (one call may queue several: its first)
            launch, work = ev, int(works[launches == ev][0])
        elif (works == ev).any():
            launch, work = int(launches[works == ev][0]), ev
        else:
            return None
        y = _row_y(data)
        start = self.events["start_us"].to_numpy()
        row_of = data.event_row
        if row_of[launch] < 0 or row_of[work] < 0:
            return None
        name = str(self.events["name"].iat[work])
        return dict(x0=float(start[launch]) / 1000.0, y0=float(y[row_of[launch]]), x1=float(start[work]) / 1000.0,
                    y1=float(y[row_of[work]]), text=esc_plotly(name[:60]), delay_us=float(start[work] - start[launch]))

    # ---- the browser's messages
    def answer(self, content: dict) -> dict | None:
        """The reply to one message of the browser (``live_timeline.js``): a zoom ("window"), a
        search ("find"), a selected span ("select"), a hover ("hover"), plotly.js ("plotly")."""
        kind = content.get("type")
        if kind == "plotly":
            return {"type": "plotly", "source": _plotly_source()}
        if kind == "window":
            x0, x1 = content.get("x0"), content.get("x1")
            self.window(None if x0 is None else float(x0) * 1000.0, None if x1 is None else float(x1) * 1000.0,
                        int(content.get("width_px") or 1000))
            reply = {"type": "spec", "seq": content.get("seq"), "spec": self.spec(), "status": describe(self.current)}
            if self.query:  # the search's line counts the rects on screen: they changed
                reply["find"] = self.find(self.query)
            return reply
        if kind == "find":
            status = self.find(str(content.get("text", "")))
            return {"type": "spec", "seq": content.get("seq"), "spec": self.spec(), "find": status}
        if kind == "select":
            return {"type": "selection", "selection": self.select(float(content["x0"]) * 1000.0,
                                                                  float(content["x1"]) * 1000.0)}
        if kind == "hover":
            return {"type": "flow", "flow": self.flow(int(content["trace"]), float(content["x"]))}
        return None



@lru_cache(maxsize=None)
def _widget_class() -> type:
    """The anywidget class, made on first use (importing anywidget and ipywidgets costs time)."""
    import anywidget
    import traitlets

    class LiveTimeline(anywidget.AnyWidget):
        """The timeline figure, live: zoom re-renders the window from the kernel, a selected span
        shows its ops and kernels, hover shows launch -> kernel arrows, find highlights names."""

        _esm = Path(__file__).with_name("live_timeline.js")
        spec = traitlets.Dict().tag(sync=True)
        config = traitlets.Dict().tag(sync=True)

        def __init__(self, state: LiveTimelineState, static_html: Any, text: str):
            super().__init__(spec=state.spec(), config=dict(DEFAULT_CONFIG, modeBarButtonsToRemove=["lasso2d", "select2d", "autoScale2d"]))
            self._state = state
            self._static_html = static_html
            self._text = text
            self.on_msg(self._message)

        @property
        def state(self) -> LiveTimelineState:
            return self._state

        def _message(self, _widget: Any, content: dict, _buffers: Any) -> None:
            try:
                reply = self._state.answer(content)
            except Exception as e:  # the browser shows it in the status line; the kernel stays up
                reply = {"type": "error", "text": f"{type(e).__name__}: {e}"}
            if reply is not None:
                self.send(reply)

        def _repr_mimebundle_(self, include: Any = None, exclude: Any = None, **kwargs: Any) -> Any:
            bundle: Any = super()._repr_mimebundle_(include=include, exclude=exclude, **kwargs)
            data = bundle[0] if isinstance(bundle, tuple) else bundle
            if data is not None:
                data["text/plain"] = self._text
                data["text/html"] = self._static_html()
            return bundle

    LiveTimeline.__module__ = __name__
    return LiveTimeline


def live_timeline(profile: Any, data: TimelineData, *, python: bool = False, max_rects: int, height: int | None = None) -> Any:
    """The live timeline widget of ``profile`` whose full view is ``data`` (prepared)."""
    state = LiveTimelineState(profile, data, python=python, max_rects=max_rects, height=height)
    return live_widget(state, lambda: static_html(data, python), describe(data))


def live_widget(state: LiveTimelineState, static: Any, text: str) -> Any:
    """The widget around a state that answers its messages (``LiveTimelineState``, or one with the
    same methods: a folder of ranks' asks its workers); ``static()``: the output's HTML without a
    kernel; ``text``: its text/plain."""
    return _widget_class()(state, static, text)


def rect_at(data: Any, trace: int, x_ms: float) -> int | None:
    """The row of ``data.rects`` under the pointer: plotly's ``trace`` (one per lane, in row order)
    at ``x_ms``; None where no rectangle is."""
    r = data.rects
    rows = np.unique(r["row"].to_numpy())
    if not 0 <= trace < len(rows):
        return None
    sel = np.flatnonzero(r["row"].to_numpy() == rows[trace])
    x_us = float(x_ms) * 1000.0
    j = sel[np.searchsorted(r["x0_us"].to_numpy()[sel], x_us, side="right") - 1] if len(sel) else -1
    if j < 0 or not (r["x0_us"].iat[j] <= x_us <= r["x1_us"].iat[j]):
        return None
    return int(j)
