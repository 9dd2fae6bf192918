"""The timeline: CPU threads and device streams over time, as a plotly figure or a static SVG.

Two steps, as HTA splits them: ``prepare_timeline`` turns the events table into rectangles (lane,
level, x0, x1, name, hover text, color; merged to pixel resolution on big profiles, see
``nbprof.analysis.timeline``), then ``timeline_figure`` / ``timeline_svg`` draw them. The figure
renders itself (``views.figure.rendering_figure``) with the SVG as its static drawing; what a
rectangle says on hover is ``views/timeline_hover.py``.

The figure draws each (lane, level) row as one ``heatmap`` trace whose cells are the row's
rectangles and the gaps between them (bin edges = the rectangles' start and end times). So:

- one trace per row, not one shape per event (plotly shapes are slow), and no DOM node per event:
  a heatmap paints into one canvas image, so zoom and pan redraw fast;
- hover works anywhere inside a rectangle (a heatmap finds the cell under the cursor), and not in
  the gaps (``hoverongaps=False``);
- numbers stay numpy arrays, which plotly serializes as base64 typed arrays; colors are indexes
  into one discrete color axis shared by all rows.

Colors: a stable hash of the name picks a color from the family's palette (CPU ops, kernels,
annotations, runtime calls, Python frames), so an op has the same color in every run; kernels use
a darker, saturated palette than CPU ops; memcpy, memset and synchronizing calls have fixed, loud
colors. A merged rectangle takes its main event's color, lightened.
"""

from __future__ import annotations

import dataclasses
import html as _html
import math
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.memory import memory_curve
from ..analysis.timeline import TimelineData, remerge, timeline_rects
from ..analysis.timeline_tracks import gpu_busy_track, memory_track
from ..meta import TraceMeta
from ..events import KIND_CODE
from .figure import drawing_html, rendering_figure
from .timeline_hover import detailed_hover_texts, hover_texts, short_name
from ..format import BYTE_UNITS, esc, esc_plotly, fmt_bytes, fmt_us, plural

__all__ = [
    "prepare_timeline",
    "timeline_figure",
    "timeline_svg",
    "DEFAULT_MAX_RECTS",
    "STATIC_SELECTION_JS",
    "SELECT_CONFIG",
]

DEFAULT_MAX_RECTS = 20_000
FULL_WIDTH_PX = 2000  # the width of the full span the figure's merging assumes
SVG_MAX_RECTS = 8_000

# ------------------------------------------------------------------------------------------ colors

PALETTES: dict[str, tuple[str, ...]] = {
    # CPU operators: light, varied hues (dark text reads on them)
    "op": ("#8fb8de", "#f4a582", "#a6d96a", "#c2a5cf", "#fdd49e", "#80cdc1", "#f1b6da", "#d9c89e",
           "#9ecae1", "#bcbddc", "#fdae6b", "#b8e186"),
    # kernels: darker and saturated (white text)
    "kernel": ("#2e6f9e", "#2f8f7f", "#4f7f3a", "#6a5aa8", "#8c4f8f", "#2f86b3", "#4466c4", "#3a8f57",
               "#7a6a2a", "#a0522d"),
    "memcpy": ("#d7263d",),
    "memset": ("#e8a202",),
    "runtime": ("#c5cad3", "#b7bfcb", "#cfd3da"),
    "sync": ("#ff6f59",),
    "annotation": ("#7d8fb3", "#8a9bc4", "#6f86aa", "#97a3c4"),
    "step": ("#4a5568",),
    "gpu_annotation": ("#b4bfd6",),
    "overhead": ("#e2e2e2",),
    "other": ("#d0d0d0",),
    "python": ("#f3e3a1", "#dcebb0", "#f2d3a0", "#d4e8bf", "#ecdfbb", "#e6ee9f"),
    # a DataLoader worker's batches: alternating greens (hue = the batch's index), so neighbours differ
    "batch": ("#4f9d69", "#7fbf7f", "#3f8a5a", "#9ccc8c"),
    # the main process waiting for data: loud; starting the workers: a lighter shade of it
    "data_wait": ("#c2410c",),
    "data_start": ("#f5a26b",),
}

FAMILY_LABELS = {
    "step": "ProfilerStep",
    "annotation": "record_function",
    "op": "CPU op",
    "runtime": "CUDA runtime",
    "sync": "synchronize",
    "python": "Python",
    "kernel": "kernel",
    "memcpy": "memcpy",
    "memset": "memset",
    "gpu_annotation": "GPU annotation",
    "overhead": "profiler overhead",
    "other": "other",
    "batch": "DataLoader batch",
    "data_wait": "waiting for data",
    "data_start": "starting workers",
}

_MERGED_LIGHTEN = 0.3


def _lighten(color: str, amount: float) -> str:
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    r, g, b = (round(c + (255 - c) * amount) for c in (r, g, b))
    return f"#{r:02x}{g:02x}{b:02x}"


def _luminance(color: str) -> float:
    r, g, b = (int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b


def rect_colors(rects: pd.DataFrame) -> np.ndarray:
    """The color of each rectangle: its family's palette at hash(name), lightened when merged."""
    fam = rects["family"].to_numpy(dtype=object)
    hue = rects["hue"].to_numpy()
    merged = rects["count"].to_numpy() > 1
    out = np.empty(len(rects), dtype=object)
    for f in pd.unique(fam):
        sel = fam == f
        palette = PALETTES.get(f, PALETTES["other"])
        base = np.asarray(palette, dtype=object)[hue[sel] % len(palette)]
        light = np.asarray([_lighten(c, _MERGED_LIGHTEN) for c in palette], dtype=object)[hue[sel] % len(palette)]
        out[sel] = np.where(merged[sel], light, base)
    return out


# ----------------------------------------------------------------------------------------- prepare


def _events_and_meta(source: Any) -> tuple[pd.DataFrame, TraceMeta]:
    if isinstance(source, pd.DataFrame):
        events = source
        if "parent" not in events.columns:
            from ..analysis.tree import build_tree

            events = build_tree(events)
        return events, TraceMeta()
    events = getattr(source, "_events", None)
    if events is None:
        events = source.events
    return events, source.meta


def prepare_timeline(
    source: Any,
    *,
    python: bool = False,
    max_rects: int = DEFAULT_MAX_RECTS,
    width_px: int = FULL_WIDTH_PX,
    window_us: tuple[float, float] | None = None,
    merge: bool | None = None,
) -> TimelineData:
    """The rectangles to draw, with ``hover`` and ``color`` columns (a TorchProfile or an events
    table in; see :func:`nbprof.analysis.timeline.timeline_rects`). ``window_us``: (start, end)
    in µs since the profile's start."""
    if isinstance(source, TimelineData):
        data = source
    else:
        events, meta = _events_and_meta(source)
        window = None if window_us is None else (float(window_us[0]), float(window_us[1]))
        data = timeline_rects(events, meta, python=python, width_px=width_px, max_rects=max_rects,
                              window=window, merge=merge)
    _decorate(data)
    return data


def _decorate(data: TimelineData) -> TimelineData:
    r = data.rects
    if "color" not in r.columns:
        r["color"] = rect_colors(r)
    if "hover" not in r.columns:
        r["hover"] = hover_texts(data)
    else:  # rectangles merged after their hover was written (several ranks stacked) have none yet
        missing = np.flatnonzero(r["hover"].isna().to_numpy())
        if len(missing):
            part = dataclasses.replace(data, rects=r.iloc[missing].reset_index(drop=True))
            hover = r["hover"].to_numpy(dtype=object).copy()
            hover[missing] = hover_texts(part)
            r["hover"] = hover
    return data


def _row_y(data: TimelineData, lane_gap: float = 0.6, rank_gap: float = 0.8) -> np.ndarray:
    """Vertical position of each row: rows one unit apart, lanes ``lane_gap`` apart, and the lane
    groups of stacked ranks (their ``band``) ``rank_gap`` more."""
    rows = data.rows
    lane = rows["lane"].to_numpy()
    y = rows["row"].to_numpy() + lane * lane_gap
    if "band" in data.lanes.columns and len(rows):
        band = np.zeros(int(data.lanes["lane"].max()) + 1)
        band[data.lanes["lane"].to_numpy()] = data.lanes["band"].to_numpy()
        y = y + band[lane] * rank_gap
    return y


def merge_note(data: TimelineData) -> str:
    """What merging did, in one line."""
    if data.events_drawn == 0:
        return "no events"
    if data.merged_rects == 0:
        return "the one event drawn" if data.events_drawn == 1 else f"all {data.events_drawn:,} events drawn"
    if data.px_us <= 0:  # not merged to pixels: events hidden under an overlapping one on their row
        return (f"all {data.events_drawn:,} events drawn ({data.merged_events:,} overlapping on their rows "
                f"in {data.merged_rects:,} rects)")
    px = data.px_us * data.width_px / max(data.span_us, 1e-9)
    if px <= 1.01:
        what = "below 1 px"
    else:
        what = f"below {px:.0f} px"
    return (f"{plural(data.merged_events, 'event')} {what} ({fmt_us(data.px_us)}) merged into "
            f"{plural(data.merged_rects, 'rect')}")


def _zoom_hint(data: TimelineData, live: bool = False) -> str:
    if not data.merged_rects:
        return ""
    if live:
        return "zoom in: the kernel draws the window in full detail"
    return "window_us=(start_us, end_us) draws a part in full detail"


def describe(data: TimelineData) -> str:
    lanes = len(data.lanes)
    if data.events_drawn == 0:
        return "Timeline: no events"
    text = f"Timeline: {plural(lanes, 'lane')}, {plural(data.events_drawn, 'event')}"
    if data.merged_rects:
        text += f" ({data.merged_events:,} merged into {plural(data.merged_rects, 'rect')})"
    return text


def _hidden_note(data: TimelineData, python: bool) -> str:
    notes = []
    py = data.hidden.get("python", 0)
    if py and not python:
        notes.append(f"{plural(py, 'Python frame')} hidden (python=True shows them)")
    return " · ".join(notes)


# ------------------------------------------------------------------------------------------ figure


def timeline_figure(
    profile: Any,
    *,
    python: bool = False,
    max_rects: int = DEFAULT_MAX_RECTS,
    window_us: tuple[float, float] | None = None,
    height: int | None = None,
) -> Any:
    """The timeline as a plotly ``Figure`` that renders itself (its static drawing: the SVG).

    One lane per CPU thread and per device stream (per rank in a multi-rank profile), nested ops
    as levels, kernels and memcpys on their streams. ``python=True`` adds a lane of Python frames
    per thread. ``max_rects`` bounds the rectangles: a bigger profile is merged to pixel resolution
    (see the subtitle). ``window_us=(start_us, end_us)`` draws only that part, at full resolution.
    ``profile``: a TorchProfile, an events table, or the result of :func:`prepare_timeline`."""

    data = prepare_timeline(profile, python=python, max_rects=max_rects, window_us=window_us)
    return _rendering(figure_spec(data, python, height), data, python)


def figure_spec(data: TimelineData, python: bool = False, height: int | None = None, live: bool = False) -> dict:
    """The figure's ``{"data": [...], "layout": {...}}`` for prepared rectangles: what
    :func:`timeline_figure` draws, and what the live timeline sends its browser on each zoom
    (``live``: its subtitle says that zooming redraws)."""
    tracks = counter_tracks(data)
    layout = _layout(data, python, height, tracks, live)
    if data.empty:
        layout["annotations"] = layout["annotations"] + [dict(text="no events", x=0.5, y=0.5, xref="paper", yref="paper",
                                      showarrow=False, font=dict(size=16, color="#888"))]
        layout["xaxis"].update(visible=False)
        layout["yaxis"].update(visible=False)
        return dict(data=[], layout=layout)
    traces, colors = _heatmap_traces(data)
    lanes_h = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"] - len(tracks) * TRACK_PX
    row_px = lanes_h / (float(_row_y(data).max()) + 1.5)
    if row_px >= 13:  # names inside rectangles only where a level is tall enough for the text
        traces += _label_trace(data)
    traces += _link_traces(data)
    traces += _legend_traces(data)
    traces += [t for track in tracks for t in track["traces"]]
    k = len(colors)
    layout["coloraxis"] = dict(
        colorscale=[[v, c] for i, c in enumerate(colors) for v in (i / k, (i + 1) / k)],
        cmin=0, cmax=k, showscale=False,
    )
    return dict(data=traces, layout=layout)


# ---------------------------------------------------------------------- selection without a kernel

# The figure's config where a span can be selected: plotly's box select stays in the mode bar.
SELECT_CONFIG = {"modeBarButtonsToRemove": ["lasso2d", "autoScale2d"]}

# A selected span in a page without a kernel (the standalone report, ``views.page``): its duration
# and the names drawn in it, from the figure's own rectangles (each row's heatmap cells and their
# hover texts: the name in bold, a merged rectangle's main name first on its second line), time
# clipped to the span. A merged rectangle's time counts under its main name, so these are the
# names drawn there, not exact per-event sums: the live timeline asks the kernel for those.
STATIC_SELECTION_JS = r"""
window.nbprofTimelineSelection = function (gd, out) {
  // a name as format.esc_plotly wrote it (&amp; &lt; &gt;, wrapped with <br>), back to its text
  function plain(html) {
    return html.replace(/<br>/g, '').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
  }
  function nameOf(text) {
    var m = /^<b>([\s\S]*?)<\/b>(?:<br>([^<]*))?/.exec(text || '');
    if (!m) return null;
    if (/^[\d,]+ merged events$/.test(m[1]) && m[2]) return plain(m[2].split(' \u00d7')[0]);
    return plain(m[1]);
  }
  function fmt(ms) { return ms >= 1 ? ms.toFixed(2) + ' ms' : (ms * 1000).toFixed(1) + ' \u00b5s'; }
  gd.on('plotly_selected', function (ev) {
    if (!ev || !ev.range || !ev.range.x) return;
    var a = Math.min(ev.range.x[0], ev.range.x[1]), b = Math.max(ev.range.x[0], ev.range.x[1]);
    var time = Object.create(null), rects = 0;
    gd._fullData.forEach(function (t) {
      if (t.type !== 'heatmap') return;
      var x = t.x, z = t.z[0], h = t.hovertext[0];
      for (var i = 0; i < z.length; i++) {
        if (z[i] === null || z[i] !== z[i] || x[i + 1] < a || x[i] > b) continue;
        var name = nameOf(h[i]);
        if (name === null) continue;
        rects++;
        time[name] = (time[name] || 0) + Math.min(x[i + 1], b) - Math.max(x[i], a);
      }
    });
    var names = Object.keys(time).sort(function (p, q) { return time[q] - time[p] || (p < q ? -1 : 1); });
    // built as DOM with the names as text (never as HTML: a name is the trace's data)
    function el(tag, text, attrs) {
      var e = document.createElement(tag);
      if (text !== undefined) e.textContent = text;
      for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
      return e;
    }
    var head = el('div');
    head.append(el('b', 'Selection'), ' ' + a.toFixed(3) + ' \u2013 ' + b.toFixed(3) + ' ms \u00b7 ' + fmt(b - a) +
                ' \u00b7 ' + rects + ' rects');
    var table = el('table', undefined, {'class': 'nbprof-selection'});
    var tr = el('tr');
    tr.append(el('th', 'name drawn'), el('th', 'time drawn in the span'));
    table.append(el('thead'));
    table.tHead.append(tr);
    var body = el('tbody');
    names.slice(0, 15).forEach(function (n) {
      var row = el('tr');
      row.append(el('td', n.length > 90 ? n.slice(0, 89) + '\u2026' : n, {title: n}),
                 el('td', fmt(time[n]), {style: 'text-align:right'}));
      body.append(row);
    });
    table.append(body);
    out.replaceChildren(head, table);
    if (names.length > 15) out.append(el('div', '+' + (names.length - 15) + ' more names', {style: 'color:#888'}));
  });
};
"""


# ---------------------------------------------------------------------------------- counter tracks

TRACK_PX = 58  # the height of one counter track above the lanes
TRACK_BINS = 400  # GPU busy: bins over the drawn span (a bin is a few pixels of a full-width figure)
_TRACK_COLORS = ("#2e6f9e", "#a0522d", "#3a8f57", "#6a5aa8")


def counter_tracks(data: TimelineData, bins: int = TRACK_BINS) -> list[dict]:
    """The counter tracks over the drawn span: GPU busy (% of each bin, per device) when the
    profile has device work, allocated memory (per device) when it has memory events. Each:
    ``{"name", "axis" ("y2", "y3"), "title", "traces"}`` (line traces on that axis)."""
    ev = data.events
    if ev is None or data.empty:
        return []
    t0, t1 = data.t0_us, data.t1_us
    out: list[dict] = []
    busy = gpu_busy_track(ev, t0, t1, bins)
    if len(busy):
        traces = []
        for i, (device, g) in enumerate(busy.groupby("device", sort=True)):
            mid = (g["t0_us"].to_numpy() + g["t1_us"].to_numpy()) / 2000.0
            traces.append(dict(type="scatter", mode="lines", x=mid, y=g["busy_pct"].to_numpy(), yaxis="y2",
                               fill="tozeroy", line=dict(width=1, shape="hvh", color=_TRACK_COLORS[i % 4]),
                               name=f"{device} busy", showlegend=False,
                               hovertemplate=f"{esc_plotly(device)} busy %{{y:.1f}}%<extra></extra>"))
        out.append(dict(name="gpu_busy", axis="y2", title="GPU busy %", traces=traces))
    codes = ev["kind"].cat.codes.to_numpy()
    if (codes == KIND_CODE["memory"]).any():
        mem = memory_track(memory_curve(ev), t0, t1, bins)
        # the axis in the unit its highest value is at least one of (a CPU model's 13 KiB read
        # "0.005, 0.01" in MiB); every device's line in the same one, as on one axis
        unit, factor = _track_unit(float(mem["allocated_bytes"].abs().max()) if len(mem) else 0.0)
        traces = []
        for i, (device, g) in enumerate(mem.groupby("device", sort=True)):
            b = g["allocated_bytes"].to_numpy()
            traces.append(dict(type="scatter", mode="lines", x=g["time_us"].to_numpy() / 1000.0, y=b / factor,
                               yaxis="y3" if out else "y2", line=dict(width=1.2, shape="hv", color=_TRACK_COLORS[(i + 1) % 4]),
                               name=f"{device} allocated", showlegend=False,
                               text=np.asarray([fmt_bytes(v) for v in b.tolist()], dtype=object),
                               hovertemplate=f"{esc_plotly(device)} allocated %{{text}}<extra></extra>"))
        if traces:
            out.append(dict(name="memory", axis="y3" if out else "y2", title=f"allocated {unit}", traces=traces))
    return out


def _track_unit(most_bytes: float) -> tuple[str, int]:
    """The binary unit ``most_bytes`` is at least one of (bytes below 1 KiB), and its size."""
    return next(((name, size) for name, size in BYTE_UNITS if most_bytes >= size), ("B", 1))


def static_html(data: TimelineData, python: bool = False) -> str:
    """The timeline's static drawing as an output's ``text/html`` (the figure's and the live
    timeline's, for front ends that draw neither)."""
    svg = timeline_svg(data, python=python)
    return drawing_html(f'<div class="nbprof-timeline" style="max-width:100%;overflow-x:auto">{svg}</div>',
                        "the timeline")


def _rendering(spec: dict, data: TimelineData, python: bool) -> Any:
    return rendering_figure(spec, html=lambda: static_html(data, python), text=describe(data))


def _heatmap_traces(data: TimelineData) -> tuple[list, list]:
    r = data.rects
    row = r["row"].to_numpy()
    x0 = r["x0_us"].to_numpy() / 1000.0
    x1 = r["x1_us"].to_numpy() / 1000.0
    colors, color_code = np.unique(r["color"].to_numpy(dtype=str), return_inverse=True)
    color_code = color_code.reshape(-1)
    hover = r["hover"].to_numpy()
    y = _row_y(data)
    bounds = np.flatnonzero(np.r_[True, row[1:] != row[:-1], True])
    traces = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        rx0, rx1 = x0[a:b], x1[a:b]
        m = b - a
        gap = rx0[1:] > rx1[:-1]  # a gap cell between rectangles i and i+1
        # edges: x0[0], x1[0], (x0[1] if gap), x1[1], ...
        edges = np.empty(2 * m, dtype=np.float64)
        edges[0::2] = rx0
        edges[1::2] = rx1
        keep = np.ones(2 * m, dtype=bool)
        keep[2::2] = gap  # x0[i+1] is a new edge only after a gap
        edges = edges[keep]
        cells = len(edges) - 1
        z = np.full(cells, np.nan, dtype=np.float32)
        text = np.full(cells, "", dtype=object)
        # cell index of rectangle i: 2*i minus the gaps missing before it
        missing = np.r_[0, np.cumsum(~gap)]
        cell = 2 * np.arange(m) - missing
        z[cell] = color_code[a:b] + 0.5
        text[cell] = hover[a:b]
        yc = float(y[row[a]])
        traces.append(dict(
            type="heatmap",
            x=edges,
            y=np.array([yc - 0.42, yc + 0.42]),
            z=z.reshape(1, -1),
            hovertext=text.reshape(1, -1),  # an object array: plotly neither copies nor checks each string
            hovertemplate="%{hovertext}<extra></extra>",
            hoverongaps=False,
            coloraxis="coloraxis",
            showlegend=False,
            name=f"row {int(row[a])}",
        ))
    return traces, [str(c) for c in colors]


def _label_trace(data: TimelineData, plot_px: float = 900.0, char_px: float = 6.4, limit: int = 300) -> list:
    """Names written inside the rectangles wide enough for them at the full view."""
    r = data.rects
    span = max(data.span_us, 1e-9)
    w_px = (r["x1_us"].to_numpy() - r["x0_us"].to_numpy()) / span * plot_px
    cand = np.flatnonzero(w_px >= 40)
    if len(cand) == 0:
        return []
    cand = cand[np.argsort(-w_px[cand], kind="stable")[:limit]]
    y = _row_y(data)[r["row"].to_numpy()[cand]]
    xs = (r["x0_us"].to_numpy()[cand] + r["x1_us"].to_numpy()[cand]) / 2000.0
    colors = r["color"].to_numpy()[cand]
    counts = r["count"].to_numpy()[cand]
    names = r["name"].to_numpy()[cand]
    fams = r["family"].to_numpy()[cand]
    text, fonts = [], []
    for name, fam, cnt, w, c in zip(names, fams, counts, w_px[cand], colors):
        label = f"{cnt:,} merged" if cnt > 1 else _label_name(str(name), fam)
        fit = int((w - 8) // char_px)
        if fit < 3:
            label = ""
        elif len(label) > fit:
            label = label[: fit - 1] + "…"
        text.append(esc_plotly(label))
        fonts.append("#ffffff" if _luminance(c) < 0.55 else "#1f2328")
    return [dict(
        type="scatter", mode="text", x=xs, y=y, text=np.asarray(text, dtype=object), hoverinfo="skip",
        showlegend=False, textfont=dict(size=10, color=np.asarray(fonts, dtype=object)), textposition="middle center", cliponaxis=True,
        name="labels",
    )]


def _label_name(name: str, family: str) -> str:
    """The name to write inside a rectangle: short forms of kernel signatures and Python frames."""
    if family == "kernel":
        return short_name(name)
    if family == "python":
        # "torch/nn/modules/module.py(1775): _call_impl" -> "_call_impl (module.py:1775)"
        loc, sep, func = name.partition("): ")
        if sep and "(" in loc:
            path, _, line = loc.rpartition("(")
            file = path.replace("\\", "/").rsplit("/", 1)[-1]  # Windows' paths are written with "\\"
            return f"{func} ({file}:{line})"
    return name


def _legend_traces(data: TimelineData) -> list:
    fams = pd.unique(data.rects["family"].to_numpy(dtype=object))
    order = [f for f in FAMILY_LABELS if f in set(fams)]
    out = []
    for f in order:
        out.append(dict(type="scatter", mode="markers", x=[None], y=[None], name=FAMILY_LABELS[f],
                        marker=dict(symbol="square", size=11, color=PALETTES[f][0]),
                        hoverinfo="skip", showlegend=True))
    return out


def _layout(data: TimelineData, python: bool, height: int | None, tracks: list | None = None,
            live: bool = False) -> dict:
    tracks = tracks or []
    rows = len(data.rows)
    lanes = data.lanes
    y = _row_y(data)
    row_px = 20
    top, bottom = 96, 48
    tracks_px = len(tracks) * TRACK_PX
    natural = top + bottom + int((rows + 0.6 * max(len(lanes) - 1, 0)) * row_px) + 10
    capped = natural > 900
    h = int(height or min(max(natural, 240), 900)) + tracks_px

    ticks, texts, shapes = [], [], []
    rows_lane = data.rows["lane"].to_numpy()
    for lane in lanes.itertuples(index=False):
        sel = np.flatnonzero(rows_lane == lane.lane)
        if len(sel) == 0:
            continue
        y_top, y_bot = float(y[sel].min()) - 0.5, float(y[sel].max()) + 0.5
        ticks.append(float(y[sel].min()))
        texts.append(_lane_label(lane))
        shapes.append(dict(type="rect", xref="paper", x0=0, x1=1, yref="y", y0=y_top - 0.25, y1=y_bot + 0.25,
                           fillcolor="#f4f6f9" if _band(lane) % 2 == 0 else "#ffffff", line=dict(width=0),
                           layer="below"))
    if capped and ticks:
        texts = _thin_labels(ticks, texts, (h - tracks_px - top - bottom) / (float(y.max()) + 1.5))
    longest = max((len(t) for t in texts), default=10)
    x_range = [data.t0_us / 1000.0, data.t1_us / 1000.0] if data.span_us > 0 else [0, 1]
    pad = (x_range[1] - x_range[0]) * 0.005
    subtitle = " · ".join(x for x in (merge_note(data), _hidden_note(data, python), _zoom_hint(data, live)) if x)
    # counter tracks stack above the lanes, each on an axis of its own sharing the time axis
    plot_h = max(h - top - bottom, 1)
    lanes_top = 1.0 - tracks_px / plot_h
    track_axes: dict = {}
    track_labels: list = []
    for i, track in enumerate(tracks):
        hi = 1.0 - i * TRACK_PX / plot_h
        lo = hi - (TRACK_PX - 14) / plot_h
        name = "yaxis" + track["axis"][1:]
        track_axes[name] = dict(domain=[max(lo, 0.0), hi], anchor="x", rangemode="tozero", fixedrange=True,
                                showgrid=True, gridcolor="#eef0f3", zeroline=False, nticks=3, tickfont=dict(size=10),
                                **({"range": [0, 100]} if track["name"] == "gpu_busy" else {}))
        # its name left of its tick labels, level with the lane labels (an axis title would stand
        # upright and collide with the ticks of a 44 px track)
        track_labels.append(dict(text=track["title"], xref="paper", x=0, xanchor="right", xshift=-34,
                                 yref="paper", y=(max(lo, 0.0) + hi) / 2, yanchor="middle", showarrow=False,
                                 font=dict(size=12, color="#1f2328")))
    return dict(**track_axes,
        template=dict(layout=dict()),
        title=dict(text=f"<b>Timeline</b> · {plural(len(lanes), 'lane')} · {plural(data.events_drawn, 'event')} · "
                        f"span {fmt_us(data.span_us)}",
                   subtitle=dict(text=esc_plotly(subtitle), font=dict(size=12, color="#666")),
                   x=0.01, xanchor="left", y=0.985, yanchor="top", font=dict(size=15)),
        height=h,
        margin=dict(l=min(24 + int(longest * 6.8), 320), r=16, t=top, b=bottom),
        paper_bgcolor="#ffffff",
        plot_bgcolor="#ffffff",
        font=dict(family="Inter, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif",
                  size=12, color="#1f2328"),
        hovermode="closest",
        hoverlabel=dict(bgcolor="#ffffff", bordercolor="#c0c4cc", font=dict(size=12, color="#1f2328"),
                        align="left"),
        dragmode="zoom",
        showlegend=True,
        legend=dict(orientation="h", x=1, xanchor="right", y=1.0, yanchor="bottom", font=dict(size=11),
                    itemclick=False, itemdoubleclick=False, bgcolor="rgba(0,0,0,0)"),
        xaxis=dict(
            title=dict(text="time (ms since profile start)", font=dict(size=12, color="#555")),
            range=[x_range[0] - pad, x_range[1] + pad],
            showgrid=True, gridcolor="#e6e8eb", zeroline=False, ticks="outside", ticklen=4,
            tickcolor="#aaa", linecolor="#aaa", showline=True, mirror=False,
            showspikes=True, spikemode="across", spikesnap="cursor", spikethickness=1,
            spikedash="dot", spikecolor="#888",
            tickformat="~r",
        ),
        yaxis=dict(
            tickvals=ticks, ticktext=texts, autorange=False,
            range=[float(y.max()) + 0.75 if len(y) else 1, -0.75],
            showgrid=False, zeroline=False, ticks="", fixedrange=not capped,
            tickfont=dict(size=12), domain=[0.0, max(lanes_top - 0.02, 0.05) if tracks else 1.0],
        ),
        shapes=shapes,
        annotations=track_labels,
        meta=dict(description=describe(data)),
    )


def _lane_label(lane: Any) -> str:
    return esc_plotly(lane.label)


def _band(lane: Any) -> int:
    """Which background band a lane is drawn on (alternating): its rank's, when the lanes are
    several ranks' (``band``: every lane of one rank on one band), else its own."""
    band = getattr(lane, "band", None)
    return int(lane.lane if band is None else band)


# ---------------------------------------------------------------------------------- collective links

LINK_COLOR = "rgba(215,38,61,0.55)"
LAST_COLOR = "#d7263d"


def _link_traces(data: TimelineData) -> list:
    """A collective's calls on every rank joined by a line (``data.links``: one row per call, the
    calls of one collective together, in rank order), and a marker on the call of the rank that
    arrived last (the one the others waited for), with what it says on hover."""
    links = data.links
    if links is None or len(links) == 0:
        return []
    y = _row_y(data)
    group = links["group"].to_numpy()
    x = links["x_us"].to_numpy(dtype=np.float64) / 1000.0
    ly = y[links["row"].to_numpy()]
    # one polyline per collective, None between them
    brk = np.flatnonzero(np.r_[group[1:] != group[:-1], True])
    xs = np.insert(x, brk + 1, np.nan)
    ys = np.insert(ly, brk + 1, np.nan)
    last = links["last"].to_numpy(dtype=bool)
    out = [dict(type="scatter", mode="lines", x=xs, y=ys, line=dict(color=LINK_COLOR, width=1.2, dash="dot"),
                hoverinfo="skip", showlegend=False, name="collective links", connectgaps=False)]
    if last.any():
        out.append(dict(type="scatter", mode="markers", x=x[last], y=ly[last] - 0.5,
                        marker=dict(symbol="triangle-down", size=9, color=LAST_COLOR, line=dict(width=0)),
                        text=links["text"].to_numpy(dtype=object)[last],
                        hovertemplate="%{text}<extra></extra>", showlegend=True, name="arrived last",
                        legendgroup="links"))
    return out


def _thin_labels(ticks: list, texts: list, px_per_unit: float, min_px: float = 14.0) -> list:
    """Blank the lane labels that would overlap the one above them (a squeezed, capped figure)."""
    out, last = [], None
    for t, text in zip(ticks, texts):
        if last is None or (t - last) * px_per_unit >= min_px:
            out.append(text)
            last = t
        else:
            out.append("")
    return out


# --------------------------------------------------------------------------------------------- SVG


def _nice_step(span: float, target: int) -> float:
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def _fmt_tick(v: float, step: float) -> str:
    decimals = max(0, -int(math.floor(math.log10(step))) if step > 0 else 0)
    if step * 10 ** decimals % 1:  # 2.5-style steps need one more digit
        decimals += 1
    return f"{v:,.{decimals}f}"


def timeline_svg(
    source: Any,
    width: int = 1000,
    height: int | None = None,
    *,
    python: bool = False,
    window_us: tuple[float, float] | None = None,
    max_rects: int = SVG_MAX_RECTS,
    tooltips: int = 300,
) -> str:
    """The timeline as a static SVG (no JavaScript): what nbconvert, nbviewer and GitHub show.

    Same lanes, levels and colors as the figure, merged to the pixels of this image, so it stays
    small at any profile size; the ``tooltips`` widest rectangles get a ``<title>`` and a label.
    ``source``: a TorchProfile, an events table, or :func:`prepare_timeline`'s result."""
    right = 14
    if isinstance(source, TimelineData):
        lane_labels = source.lanes["label"].tolist()
    else:
        events, meta = _events_and_meta(source)
        lane_labels = None
    # the labels' column: fitted to the longest label when the lanes are known
    label_w = 250 if lane_labels is None and "rank" in events.columns else 200
    if lane_labels is not None:
        label_w = int(min(max(max((len(x) for x in lane_labels), default=10) * 6.4 + 18, 120), 280))
    plot_w = max(width - label_w - right, 100)
    if isinstance(source, TimelineData):
        data = remerge(source, plot_w, max_rects)
    else:
        window = None if window_us is None else (float(window_us[0]), float(window_us[1]))
        data = timeline_rects(events, meta, python=python, width_px=plot_w, max_rects=max_rects,
                              window=window, merge=True)
    if "color" not in data.rects.columns:
        data.rects["color"] = rect_colors(data.rects)

    head_h, axis_h = 46, 34
    font = "font-family=\"Inter,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif\""
    n_lanes = len(data.lanes)
    title = (f"Timeline · {plural(n_lanes, 'lane')} · {plural(data.events_drawn, 'event')} · "
             f"span {fmt_us(data.span_us)}"
             if not data.empty else "Timeline")
    note = merge_note(data)
    hidden = _hidden_note(data, python)
    if hidden:
        note += " · " + hidden
    if data.empty:
        h = height or 120
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" viewBox="0 0 {width} {h}" '
                f'{font} font-size="12" role="img"><title>{esc(describe(data))}</title>'
                f'<rect width="{width}" height="{h}" fill="#fff"/>'
                f'<text x="12" y="22" font-size="14" font-weight="600" fill="#1f2328">Timeline</text>'
                f'<text x="{width / 2:.0f}" y="{h / 2 + 10:.0f}" text-anchor="middle" fill="#888" '
                f'font-size="15">no events</text></svg>')

    # legend: right of the title if there is room, else a line of its own under the note
    fams = set(data.rects["family"].to_numpy(dtype=object).tolist())
    legend = [f for f in FAMILY_LABELS if f in fams]
    legend_w = sum(len(FAMILY_LABELS[f]) * 6.0 + 22 for f in legend)
    title_w = 10 + len(title) * 7.4
    legend_y = 9
    if title_w + legend_w + 24 > width:
        legend_y = head_h - 4
        head_h += 20

    ys = _row_y(data)
    n_units = float(ys.max()) + 1.0
    if height is not None:
        row_px = max((height - head_h - axis_h) / n_units, 2.0)
    else:  # 16 px a level, smaller for a tall profile so the image stays under about 1000 px
        row_px = min(16.0, max((1000 - head_h - axis_h) / n_units, 4.0))
    h = int(height or math.ceil(head_h + axis_h + n_units * row_px))
    plot_h = n_units * row_px
    t0, span = data.t0_us, max(data.span_us, 1e-9)
    sx = plot_w / span

    def X(us):
        return label_w + (us - t0) * sx

    def Y(yv):
        return head_h + (yv + 0.5) * row_px

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" viewBox="0 0 {width} {h}" '
           f'{font} font-size="11" role="img">',
           f"<title>{esc(describe(data))}</title>",
           f'<rect width="{width}" height="{h}" fill="#fff"/>',
           f'<text x="10" y="18" font-size="14" fill="#1f2328"><tspan font-weight="600">Timeline</tspan>'
           f"{esc(title[len('Timeline'):])}</text>",
           f'<text x="10" y="36" font-size="11.5" fill="#666">{esc(note)}</text>']

    # lane bands and labels
    rows_lane = data.rows["lane"].to_numpy()
    last_label = -1e9
    for lane in data.lanes.itertuples(index=False):
        sel = np.flatnonzero(rows_lane == lane.lane)
        if len(sel) == 0:
            continue
        # never above the header's bottom: a band is opaque and drawn after the title and note, and
        # its margin (a quarter row) grows with the rows of a tall fixed height
        top = max(Y(float(ys[sel].min()) - 0.5) - 0.25 * row_px, head_h - 4.0)
        bot = Y(float(ys[sel].max()) + 0.5) + 0.25 * row_px
        fill = "#f4f6f9" if _band(lane) % 2 == 0 else "#fff"
        out.append(f'<rect x="0" y="{top:.1f}" width="{width}" height="{bot - top:.1f}" fill="{fill}"/>')
        fit = max(int((label_w - 14) / 6.4), 8)
        label = lane.label if len(lane.label) <= fit else lane.label[: fit - 1] + "…"
        ty = Y(float(ys[sel].min())) + 4
        if ty - last_label >= 13:  # skip labels that would overlap (a squeezed image)
            out.append(f'<text x="{label_w - 8}" y="{ty:.1f}" text-anchor="end" font-size="11.5" '
                       f'fill="#1f2328"><title>{esc(lane.label)}</title>{esc(label)}</text>')
            last_label = ty

    # grid and ticks
    step = _nice_step(span / 1000.0, 8)
    first = math.ceil((t0 / 1000.0) / step) * step
    axis_y = head_h + plot_h + 4
    grid = []
    # the ticks by count, never by adding the step until the end: far from zero (a view starting
    # 1e12 ms in, from a trace's odd times) t + step == t in floating point, and that loop never
    # ended (it filled the memory: the fuzz test's OOM)
    count = min(int(((t0 + span) / 1000.0 + 1e-12 - first) // step) + 1, 64) if step > 0 else 0
    for tick in dict.fromkeys(first + i * step for i in range(max(count, 0))):
        x = X(tick * 1000.0)
        grid.append(f'<line x1="{x:.1f}" y1="{head_h:.0f}" x2="{x:.1f}" y2="{axis_y:.1f}" stroke="#e3e5e9"/>'
                    f'<text x="{x:.1f}" y="{axis_y + 14:.1f}" text-anchor="middle" fill="#555">'
                    f"{_fmt_tick(tick, step)}</text>")
    out.extend(grid)
    out.append(f'<line x1="{label_w}" y1="{axis_y:.1f}" x2="{label_w + plot_w}" y2="{axis_y:.1f}" stroke="#aaa"/>')
    out.append(f'<text x="{label_w + plot_w}" y="{axis_y + 28:.1f}" text-anchor="end" fill="#555">'
               f"time (ms since profile start)</text>")

    # rectangles: one path per color, the widest ones as <rect> with a tooltip and a label
    r = data.rects
    rx0 = X(r["x0_us"].to_numpy())
    rx1 = X(r["x1_us"].to_numpy())
    rw = np.maximum(rx1 - rx0, 0.8)
    ry = Y(ys[r["row"].to_numpy()] - 0.42)
    rh = 0.84 * row_px
    colors = r["color"].to_numpy()
    widest = np.argsort(-(rx1 - rx0), kind="stable")[:tooltips]
    widest = widest[(rx1 - rx0)[widest] >= 3]
    special = np.zeros(len(r), dtype=bool)
    special[widest] = True
    plain = np.flatnonzero(~special)
    for c in pd.unique(colors[plain]):
        sel = plain[colors[plain] == c]
        d = "".join(f"M{a:.1f} {b:.1f}h{w:.1f}v{rh:.1f}h-{w:.1f}z"
                    for a, b, w in zip(rx0[sel].tolist(), ry[sel].tolist(), rw[sel].tolist()))
        out.append(f'<path fill="{c}" d="{d}"/>')
    names = r["name"].to_numpy()
    fams_r = r["family"].to_numpy()
    counts = r["count"].to_numpy()
    widest = np.sort(widest)
    # hover text for the tooltips only (the figure needs one per rectangle, the SVG a few hundred)
    hover = r["hover"].to_numpy(dtype=object)[widest] if "hover" in r.columns else np.full(len(widest), None)
    missing = np.flatnonzero(pd.isna(hover))  # none yet, or merged here after it was written
    if len(missing):
        hover[missing] = detailed_hover_texts(dataclasses.replace(data, rects=r.iloc[widest[missing]].reset_index(drop=True)), 0)
    for tip_i, i in enumerate(widest.tolist()):
        c = colors[i]
        tip = _svg_tooltip(hover[tip_i])
        out.append(f'<rect x="{rx0[i]:.1f}" y="{ry[i]:.1f}" width="{rw[i]:.1f}" height="{rh:.1f}" fill="{c}">'
                   f"<title>{esc(tip)}</title></rect>")
        fit = int((rw[i] - 6) // 6.2)
        if fit >= 3 and row_px >= 11:
            label = f"{counts[i]:,} merged" if counts[i] > 1 else _label_name(str(names[i]), fams_r[i])
            if len(label) > fit:
                label = label[: fit - 1] + "…"
            tc = "#fff" if _luminance(c) < 0.55 else "#1f2328"
            out.append(f'<text x="{rx0[i] + 3:.1f}" y="{ry[i] + rh / 2 + 3.5:.1f}" fill="{tc}" font-size="10" '
                       f'pointer-events="none">{esc(label)}</text>')

    # collective links: a dotted line through a collective's calls, a triangle over the last arrival
    if data.links is not None and len(data.links):
        lk = data.links
        lxs = X(lk["x_us"].to_numpy(dtype=np.float64))
        lys = Y(ys[lk["row"].to_numpy()])
        g = lk["group"].to_numpy()
        for a, b in zip(*(lambda e: (e[:-1], e[1:]))(np.flatnonzero(np.r_[True, g[1:] != g[:-1], True]))):
            if b - a > 1:
                pts = " ".join(f"{px:.1f},{py:.1f}" for px, py in zip(lxs[a:b].tolist(), lys[a:b].tolist()))
                out.append(f'<polyline points="{pts}" fill="none" stroke="{LINK_COLOR}" stroke-width="1" '
                           f'stroke-dasharray="2 2"/>')
        texts = lk["text"].to_numpy(dtype=object)
        for i in np.flatnonzero(lk["last"].to_numpy(dtype=bool)).tolist():
            tx, ty = lxs[i], lys[i] - 0.5 * row_px
            out.append(f'<path d="M{tx - 4:.1f} {ty - 6:.1f}h8l-4 6z" fill="{LAST_COLOR}">'
                       f"<title>{esc(_svg_tooltip(str(texts[i])))}</title></path>")

    # legend
    lx = width - right if legend_y == 9 else 10 + legend_w
    for f in legend[::-1]:
        text = FAMILY_LABELS[f]
        lx -= len(text) * 6.0 + 22
        out.append(f'<rect x="{lx:.0f}" y="{legend_y}" width="10" height="10" fill="{PALETTES[f][0]}"/>'
                   f'<text x="{lx + 14:.0f}" y="{legend_y + 9}" fill="#444" font-size="11">{esc(text)}</text>')
    out.append("</svg>")
    return "".join(out)


def _svg_tooltip(hover: str) -> str:
    """Plotly's hover markup as plain text for an SVG <title>."""
    text = hover.replace("<br>", "\n").replace("<b>", "").replace("</b>", "")
    return _html.unescape(text)
