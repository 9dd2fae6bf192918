"""A CUDA memory snapshot's view: the whole report of a ``SnapshotProfile`` and the "Memory
snapshot" tab of a ``%%torchprof --snapshot`` report (the same panels).

- Over time: active memory, stacked by the line of the user's code that allocated it (the top
  lines at the peak, each a layer; the rest one), the reserved memory over it, the peak named,
  OOMs marked in red. memory_viz draws one polygon per allocation and every one of them, which
  stops a browser past some 100 k entries; this chart draws at most ~2 points per pixel of each
  device's curve (``analysis.snapshot.drawn``: each bucket's first and highest entry, so the peak
  survives), exact at every point drawn, whatever the history's length. A static SVG in the
  report (it renders everywhere, no script); a plotly figure (``memory_curve()``, the standalone
  page) to zoom; in a kernel, a live chart that asks the kernel for the zoomed window again, in
  full detail once it holds fewer entries than pixels (the live timeline's widget,
  ``views.live_timeline.live_widget``, with this module's state).
- At the peak / At the end: the blocks alive then, biggest first, with the line that allocated
  each and its stack.
- Segments: reserved vs allocated per segment, as bars (requested, rounding, free) and a table:
  where reserved memory is not allocated memory (fragmentation).
- OOMs: each out-of-memory error, what it asked for, what CUDA had free, what the allocator held.

Everything from the file is text wherever it lands (``format.esc`` in HTML and SVG, ``esc_plotly``
in the figure's names and hovers; the tables' cells through ``views.datatable``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..analysis.snapshot import BEFORE_HISTORY, NO_STACK, OTHER_LINES, DrawnDevice, drawn, x_axis
from ..format import esc, esc_plotly, fmt_bytes, fmt_count, fmt_us, plural
from .datatable import datatable_html
from .figure import drawing_html, rendering_figure
from .table import Column, render_text

__all__ = ["SnapshotReport", "snapshot_panels", "snapshot_svg", "snapshot_figure", "snapshot_spec", "live_chart",
           "SnapshotChartState", "segments_svg", "describe", "BUCKETS", "TOP_LINES"]

_WIDTH, _LEFT, _RIGHT = 760, 72, 16
BUCKETS = _WIDTH - _LEFT - _RIGHT  # one bucket per pixel of the static chart's plot
TOP_LINES = 8  # layers of their own; the other lines are one
_PALETTE = ["#4e79a7", "#f28e2c", "#59a14f", "#af7aa1", "#76b7b2", "#edc949", "#ff9da7", "#9c755f"]
_GREY = {OTHER_LINES: "#bab0ab", BEFORE_HISTORY: "#d9d4d0"}
_OOM = "#d62728"


def _colors(labels: list[str]) -> list[str]:
    out, i = [], 0
    for label in labels:
        if label in _GREY:
            out.append(_GREY[label])
        else:
            out.append(_PALETTE[i % len(_PALETTE)])
            i += 1
    return out


def _x_text(x: float, is_time: bool) -> str:
    return fmt_us(x) if is_time else f"entry {int(x):,}"


def describe(profile: Any) -> str:
    """The snapshot in one line: each device's peak, what holds most of it, the reserved memory."""
    parts = []
    for pk in profile._summary["peaks"]:
        parts.append(f"cuda:{pk.device} peak {fmt_bytes(pk.active_bytes)} active, {fmt_bytes(pk.reserved_bytes)} "
                     "reserved")
    seg = profile._segments
    if len(seg):
        reserved = int(seg["total_size_bytes"].sum())
        free = int(seg["free_bytes"].sum())
        parts.append(f"now {fmt_bytes(reserved)} reserved in {plural(len(seg), 'segment')}, {fmt_bytes(free)} of it "
                     f"free ({100 * free / max(reserved, 1):.0f} %)")
    n = len(profile._replay.memory)
    parts.append(plural(n, "history entry", "history entries"))
    ooms = len(profile._summary["ooms"])
    if ooms:
        parts.append(plural(ooms, "OOM"))
    return "CUDA memory snapshot: " + " · ".join(parts)


# ------------------------------------------------------------------------------ the static chart


def _ticks(lo: float, hi: float, count: int = 5) -> np.ndarray:
    from .memory import _nice_ticks

    return _nice_ticks(lo, hi, count)


def snapshot_svg(devices: list[DrawnDevice], width: int = _WIDTH, panel_height: int = 170) -> str:
    """Active memory over time, one panel per device: the layers stacked (steps), the reserved
    memory dotted, the peak marked and named, OOMs as red lines; a legend of the layers."""
    from .memory import _byte_ticks

    if not devices:
        return ""
    left, right = _LEFT, _RIGHT
    pw = width - left - right
    head, title_h, axis_h, legend_row = 18, 30, 24, 16
    legends = [d.layers for d in devices]
    legend_rows = sum((len(layers) + 1) // 2 for layers in legends)
    height = head + len(devices) * (title_h + panel_height + axis_h) + legend_rows * legend_row + 6
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             'style="font:11px sans-serif;background:#fff">',
             f'<text x="{left}" y="13" font-weight="bold">Active memory over time</text>',
             f'<text x="{left + pw}" y="13" text-anchor="end" fill="#666">stacked by the line that allocated it'
             " · dotted: reserved</text>"]
    y0 = head
    for d in devices:
        x = d.x.astype(float)
        x1 = float(max(x.max(initial=0.0), 1e-9))
        x_of = lambda v: left + v / x1 * pw  # noqa: E731
        hi = float(max(d.reserved.max(initial=0), d.active.max(initial=0), 1)) * 1.06
        top = y0 + title_h
        y_of = lambda v: top + panel_height - v / hi * panel_height  # noqa: E731
        label = (f"{d.device}: peak {fmt_bytes(d.peak_bytes)} at {_x_text(d.peak_x, d.x_is_time)}"
                 + (f" · most of it from {d.peak_label}" if d.peak_label else ""))
        parts.append(f'<text x="{left}" y="{y0 + 20}" font-weight="600">{esc(label)}</text>')
        for tick in _byte_ticks(0, hi, 3):
            if tick <= hi:
                y = y_of(tick)
                parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
                parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#555">'
                             f"{esc(fmt_bytes(tick, compact=True))}</text>")
        xs = np.r_[np.repeat(x_of(x), 2)[1:], x_of(x1)]  # steps: each value holds until the next point
        base = np.zeros(len(x))
        for (name, values), color in zip(d.layers, _colors([n for n, _ in d.layers])):
            upper = base + values
            ys_top = np.repeat(y_of(upper), 2)
            ys_bot = np.repeat(y_of(base), 2)
            pts = [f"{a:.1f},{b:.1f}" for a, b in zip(xs, ys_top)] + \
                  [f"{a:.1f},{b:.1f}" for a, b in zip(xs[::-1], ys_bot[::-1])]
            parts.append(f'<polygon fill="{color}" stroke="none" points="{" ".join(pts)}"><title>{esc(name)}</title>'
                         "</polygon>")
            base = upper
        res = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(xs, np.repeat(y_of(d.reserved.astype(float)), 2)))
        parts.append(f'<polyline fill="none" stroke="#555" stroke-dasharray="3,2" stroke-width="1.2" points="{res}"/>')
        for ox, req, free in d.ooms.itertuples(index=False, name=None):
            px = x_of(float(ox))
            text = f"OOM at {_x_text(float(ox), d.x_is_time)}: asked for {fmt_bytes(req)}, CUDA had {fmt_bytes(free)} free"
            parts.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top}" y2="{top + panel_height}" stroke="{_OOM}" '
                         f'stroke-width="1.5"><title>{esc(text)}</title></line>')
            parts.append(f'<path d="M{px - 5:.1f},{top - 2} L{px + 5:.1f},{top - 2} L{px:.1f},{top + 6} Z" '
                         f'fill="{_OOM}"><title>{esc(text)}</title></path>')
        px, py = x_of(d.peak_x), y_of(d.peak_bytes)
        parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="#222"><title>{esc(label)}</title></circle>')
        bottom = top + panel_height
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{bottom}" y2="{bottom}" stroke="#bbb"/>')
        scale = 1000.0 if d.x_is_time else 1.0
        for tick in _ticks(0, x1 / scale, 6):
            tx = x_of(tick * scale)
            parts.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{bottom}" y2="{bottom + 4}" stroke="#999"/>')
            text = f"{tick:g} ms" if d.x_is_time else f"{tick:,.0f}"
            parts.append(f'<text x="{tx:.1f}" y="{bottom + 16}" text-anchor="middle" fill="#555">{esc(text)}</text>')
        y0 = bottom + axis_h
        half = pw // 2
        for i, ((name, values), color) in enumerate(zip(d.layers, _colors([n for n, _ in d.layers]))):
            lx, ly = left + (i % 2) * half, y0 + (i // 2) * legend_row + 10
            at_peak = _value_at(d, values)
            parts.append(f'<rect x="{lx}" y="{ly - 8}" width="10" height="10" fill="{color}"/>')
            parts.append(f'<text x="{lx + 14}" y="{ly + 1}">{esc(_cut(name, 58))} · {esc(fmt_bytes(at_peak))}'
                         f'<title>{esc(name)}</title></text>')
        y0 += ((len(d.layers) + 1) // 2) * legend_row
    parts.append("</svg>")
    return "".join(parts)


def _value_at(d: DrawnDevice, values: np.ndarray) -> int:
    """A layer's bytes at the device's peak (the drawn point there; the layer's most if the peak
    is outside the window drawn)."""
    if not len(values):
        return 0
    hit = np.flatnonzero(d.x == d.peak_x)
    i = int(hit[np.argmax(d.active[hit])]) if len(hit) else int(np.argmax(values))
    return int(values[i])


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1):]


# ------------------------------------------------------------------------------- the figure


def snapshot_spec(devices: list[DrawnDevice], *, height_per_device: int = 300) -> dict[str, Any]:
    """The plotly spec of the chart (plain dicts): a stacked area per layer (steps), the reserved
    memory dotted, OOMs as red markers with their numbers, the peak annotated; one panel per
    device, x shared."""
    from .memory import _byte_ticks

    data: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    n = max(len(devices), 1)
    gap = 0.08 if n > 1 else 0.0
    layout: dict[str, Any] = {}
    is_time = devices[0].x_is_time if devices else True
    scale = 1000.0 if is_time else 1.0
    for k, d in enumerate(devices):
        axis = "" if k == 0 else str(k + 1)
        ya = f"y{axis}"
        lo = 1.0 - (k + 1) / n + (gap / 2 if k < n - 1 else 0.0)
        hi = 1.0 - k / n - (gap / 2 if k > 0 else 0.0)
        top = float(max(d.reserved.max(initial=0), d.active.max(initial=0), 1))
        ticks = _byte_ticks(0.0, top, 4)
        layout[f"yaxis{axis}"] = dict(domain=[lo, hi], title=dict(text=esc_plotly(d.device)), rangemode="tozero",
                                      tickvals=ticks.tolist(), ticktext=[fmt_bytes(t, compact=True) for t in ticks])
        x = d.x / scale
        names = [n for n, _ in d.layers]
        for (name, values), color in zip(d.layers, _colors(names)):
            data.append(dict(type="scatter", x=x, y=values, yaxis=ya, mode="lines", line=dict(shape="hv", width=0.5,
                             color=color), fillcolor=color, stackgroup=f"active{k}", name=esc_plotly(_cut(name, 70)),
                             legendgroup=esc_plotly(name), showlegend=k == 0 or name not in _first_names(devices, k),
                             hovertemplate="%{y:,} B<extra>" + esc_plotly(_cut(name, 90)) + "</extra>"))
        data.append(dict(type="scatter", x=x, y=d.reserved, yaxis=ya, mode="lines", name=f"{esc_plotly(d.device)} reserved",
                         line=dict(shape="hv", dash="dot", color="#555", width=1.2),
                         hovertemplate="%{y:,} B reserved<extra></extra>"))
        if len(d.ooms):
            texts = [esc_plotly(f"OOM: asked for {fmt_bytes(r)}, CUDA had {fmt_bytes(f)} free")
                     for r, f in zip(d.ooms["requested_bytes"], d.ooms["device_free_bytes"])]
            data.append(dict(type="scatter", x=d.ooms["x"].to_numpy() / scale,
                             y=np.full(len(d.ooms), float(max(d.reserved.max(initial=0), d.active.max(initial=0)))),
                             yaxis=ya, mode="markers", name="OOM", marker=dict(symbol="triangle-down", size=11,
                                                                                color=_OOM),
                             text=texts, hovertemplate="%{text}<extra></extra>"))
        label = f"peak {fmt_bytes(d.peak_bytes)}" + (f" · {_cut(d.peak_label, 50)}" if d.peak_label else "")
        annotations.append(dict(x=d.peak_x / scale, y=d.peak_bytes, xref="x", yref=ya, text=esc_plotly(label),
                                showarrow=True, arrowhead=2))
    layout.update(
        title=dict(text="Active memory over time, stacked by the line that allocated it"),
        xaxis=dict(title=dict(text="time since the first entry (ms)" if is_time else "history entry")),
        height=80 + height_per_device * n, margin=dict(l=70, r=20, t=50, b=40), annotations=annotations,
        template="plotly_white", hovermode="x", legend=dict(orientation="h", y=-0.15))
    return dict(data=data, layout=layout)


def _first_names(devices: list[DrawnDevice], k: int) -> set[str]:
    return {name for d in devices[:k] for name, _ in d.layers}


def snapshot_figure(profile: Any, *, window_us: tuple[float, float] | None = None) -> Any:
    """The chart as a plotly figure that renders itself (its static drawing: the SVG)."""
    devices = _drawn(profile, window_us)

    def svg() -> str | None:
        drawn_svg = snapshot_svg(devices)
        return drawing_html(drawn_svg, "the memory chart") if drawn_svg else None

    return rendering_figure(snapshot_spec(devices), html=svg, text=describe(profile))


def _drawn(profile: Any, window: tuple[float, float] | None = None, buckets: int = BUCKETS) -> list[DrawnDevice]:
    r = profile._replay
    if not len(r.memory) and not len(profile._data.segments):
        return []
    return drawn(r, profile._data, profile._labels, buckets, window=window, top=TOP_LINES)


class SnapshotChartState:
    """The live chart's kernel side (``views.live_timeline.live_widget``'s messages): a zoom draws
    the window again at the plot's width, exactly once it holds fewer entries than pixels; a
    selected span lists the allocations made and freed in it."""

    def __init__(self, profile: Any) -> None:
        self.profile = profile
        self.window: tuple[float, float] | None = None
        self.width_px = BUCKETS
        self.query = ""

    def devices(self) -> list[DrawnDevice]:
        return _drawn(self.profile, self.window, max(self.width_px, 100))

    def spec(self) -> dict:
        from .live_timeline import _spec_json

        devices = self.devices()
        spec = snapshot_spec(devices)
        if self.window is not None and devices:
            scale = 1000.0 if devices[0].x_is_time else 1.0
            spec["layout"]["xaxis"]["range"] = [self.window[0] / scale, self.window[1] / scale]
        return _spec_json(spec)

    def status(self) -> str:
        devices = self.devices()
        drawn_n = sum(len(d.x) for d in devices)
        total = sum(d.points for d in devices)
        if drawn_n >= total:
            return f"every one of the {plural(total, 'entry', 'entries')} in this window drawn"
        return f"{drawn_n:,} of {total:,} entries drawn (each pixel's first and highest); zoom in for every one"

    def answer(self, content: dict) -> dict | None:
        kind = content.get("type")
        if kind == "plotly":
            from .live_timeline import _plotly_source

            return {"type": "plotly", "source": _plotly_source()}
        if kind == "window":
            x0, x1 = content.get("x0"), content.get("x1")
            scale = 1000.0 if self._is_time() else 1.0
            self.window = None if x0 is None or x1 is None else (float(x0) * scale, float(x1) * scale)
            self.width_px = int(content.get("width_px") or BUCKETS)
            return {"type": "spec", "seq": content.get("seq"), "spec": self.spec(), "status": self.status()}
        if kind == "find":
            return {"type": "spec", "seq": content.get("seq"), "spec": self.spec(),
                    "find": "find: the layers are named in the legend (click one to hide it)"}
        if kind == "select":
            scale = 1000.0 if self._is_time() else 1.0
            return {"type": "selection", "selection": self.select(float(content["x0"]) * scale,
                                                                  float(content["x1"]) * scale)}
        return None

    def _is_time(self) -> bool:
        return x_axis(self.profile._data, self.profile._replay.memory)[1]

    def select(self, x0: float, x1: float) -> dict:
        """The span's allocations, by the line that made them: bytes allocated in it, bytes of
        them freed in it, what the span ends holding of them."""
        p = self.profile
        r = p._replay
        x, is_time, _ = x_axis(p._data, r.memory)
        a = r.allocations
        ar, fr = a["alloc_row"].to_numpy(), a["free_row"].to_numpy()
        xa = np.where(ar >= 0, x[np.maximum(ar, 0)] if len(x) else 0.0, -np.inf)
        xf = np.where(fr >= 0, x[np.maximum(fr, 0)] if len(x) else 0.0, np.inf)
        made = (xa >= x0) & (xa <= x1)
        freed = made & (xf <= x1)
        frame = pd.DataFrame({"line": p._labels.to_numpy(), "made": np.where(made, a["requested_bytes"], 0),
                              "freed": np.where(freed, a["requested_bytes"], 0), "n": made.astype(int)})
        g = frame[made].groupby("line", sort=False).sum().sort_values("made", ascending=False)
        rows = [[str(line), f"{int(n):,}", fmt_bytes(int(m)), fmt_bytes(int(m - f))]
                for line, m, f, n in g[["made", "freed", "n"]].itertuples(name=None)][:12]
        head = f"{_x_text(x0, is_time)} – {_x_text(x1, is_time)}: {plural(int(made.sum()), 'allocation')}"
        return dict(head=head, tables=[dict(title="Allocated in the span, by line", rows=rows,
                                            columns=["line", "allocations", "bytes", "still held at its end"],
                                            more=max(len(g) - 12, 0))])


def live_chart(profile: Any) -> Any:
    """The chart as the live widget: zoom asks the kernel for the window, drawn exactly."""
    from .live_timeline import live_widget

    state = SnapshotChartState(profile)

    def static() -> str:
        return drawing_html(snapshot_svg(_drawn(profile)), "the memory chart")

    return live_widget(state, static, describe(profile))


# ------------------------------------------------------------------------------- the tables


_BLOCK_COLS = [Column("requested_bytes", "Size", "bytes"), Column("where", "Allocated by", "name", 56),
               Column("function", "In", "name", 32), Column("alloc_us", "At", "time_us"),
               Column("device", "Device", "text"), Column("stack", "Stack (innermost first)", "name", 90)]


def _blocks_frame(blocks: pd.DataFrame, t0_us: float) -> pd.DataFrame:
    frame = blocks.copy(deep=False)
    where = []
    for cell, file, line, t in zip(frame["cell"], frame["file"], frame["line"], frame["alloc_us"]):
        if not isinstance(file, str):  # no stack: allocated before the history, or torch recorded none
            where.append(BEFORE_HISTORY if np.isnan(t) else NO_STACK)
        elif cell:
            where.append(f"{cell} line {line}")
        else:
            where.append(f"{file}:{line}")
    frame["where"] = where
    frame["function"] = [f if isinstance(f, str) else "" for f in frame["function"]]
    frame["stack"] = [" ← ".join(f"{n} ({f.rsplit('/', 1)[-1]}:{ln})" for f, ln, n in fr[:8]) for fr in frame["frames"]]
    frame["alloc_us"] = frame["alloc_us"] - t0_us
    return frame


def _peak_html(profile: Any) -> str:
    from ..analysis.snapshot import alive_after, blocks_at

    out = []
    p = profile
    t0 = _t0(profile)
    for pk in p._summary["peaks"]:
        which = alive_after(p._replay, pk.device, pk.entry)
        blocks = blocks_at(p._replay, p._data, which, p._user, at_end=False)
        when = "before the history's first entry" if pk.entry < 0 else \
            f"after entry {pk.entry:,}" + (f" ({fmt_us(pk.time_us - t0)} in)" if not np.isnan(pk.time_us) else "")
        head = (f"cuda:{pk.device} at its peak, {when}: {fmt_bytes(pk.active_bytes)} active in "
                f"{plural(len(blocks), 'allocation')}, {fmt_bytes(pk.reserved_bytes)} reserved")
        out.append(f'<div class="nbprof-sub" style="margin-top:8px"><b>{esc(head)}</b></div>')
        if len(blocks):
            out.append(_by_line_html(blocks))
            out.append(datatable_html(_blocks_frame(blocks, t0), _BLOCK_COLS, order=[("requested_bytes", "desc")],
                                      page_length=10, caption="the allocations alive at the peak, biggest first "
                                      "(At: since the first entry); p.blocks(at=\"peak\")"))
    return "".join(out) or '<div class="nbprof-empty">No allocation recorded.</div>'


def _by_line_html(blocks: pd.DataFrame) -> str:
    """The bytes held per line that allocated them: the question a peak asks."""
    frame = _blocks_frame(blocks, 0.0)
    g = frame.groupby("where", sort=False).agg(bytes=("requested_bytes", "sum"), blocks=("requested_bytes", "size"))
    g = g.sort_values("bytes", ascending=False).reset_index()
    cols = [Column("where", "Line", "name", 70), Column("bytes", "Held", "bytes"), Column("blocks", "Blocks", "count")]
    return datatable_html(g, cols, order=[("bytes", "desc")], page_length=10, caption="held per line that allocated it")


def _end_html(profile: Any) -> str:
    blocks = profile.blocks("end")
    if not len(blocks):
        return '<div class="nbprof-empty">No block in use at the end.</div>'
    total = int(blocks["requested_bytes"].sum())
    pending = int((blocks["state"] == "active_pending_free").sum())
    head = f"{plural(len(blocks), 'block')} in use when the snapshot was taken: {fmt_bytes(total)} requested"
    if pending:
        head += f"; {plural(pending, 'block')} freed and waiting for another stream"
    cols = _BLOCK_COLS[:5] + [Column("state", "State", "text"), _BLOCK_COLS[5]]
    return (f'<div class="nbprof-sub"><b>{esc(head)}</b></div>' + _by_line_html(blocks)
            + datatable_html(_blocks_frame(blocks, _t0(profile)), cols, order=[("requested_bytes", "desc")],
                             page_length=10, caption='blocks alive at the end, biggest first; p.blocks(at="end")'))


def segments_svg(segments: pd.DataFrame, width: int = _WIDTH, limit: int = 40) -> str:
    """One bar per segment (the largest ``limit``), to one scale: requested (blue), rounding
    (orange), free (grey)."""
    if not len(segments):
        return ""
    seg = segments.head(limit)
    left, right, row = 150, 16, 14
    pw = width - left - right
    biggest = float(max(seg["total_size_bytes"].max(), 1))
    height = 28 + row * len(seg) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             'style="font:11px sans-serif;background:#fff">',
             f'<text x="{left}" y="13" font-weight="bold">Reserved vs allocated, per segment</text>',
             f'<text x="{left + pw}" y="13" text-anchor="end" fill="#666">requested · rounding · free</text>']
    for i, s in enumerate(seg.itertuples(index=False)):
        y = 22 + i * row
        x = float(left)
        for value, color in ((s.requested_bytes, "#4e79a7"), (s.rounding_bytes, "#f28e2c"), (s.free_bytes, "#d9d4d0")):
            w = float(value) / biggest * pw
            if w > 0:
                parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 3}" fill="{color}"/>')
            x += w
        text = (f"{s.device} {fmt_bytes(s.total_size_bytes)} {s.segment_type}: {fmt_bytes(s.requested_bytes)} "
                f"requested, {fmt_bytes(s.free_bytes)} free (largest piece {fmt_bytes(s.largest_free_bytes)})")
        parts.append(f'<text x="{left - 6}" y="{y + row - 5}" text-anchor="end" fill="#555">'
                     f"{esc(fmt_bytes(s.total_size_bytes))}<title>{esc(text)}</title></text>")
    parts.append("</svg>")
    return "".join(parts)


def _segments_html(profile: Any) -> str:
    seg = profile.segments()
    if not len(seg):
        return '<div class="nbprof-empty">No segment: the allocator held no memory when the snapshot was taken.</div>'
    total, free = int(seg["total_size_bytes"].sum()), int(seg["free_bytes"].sum())
    head = (f"{fmt_bytes(total)} reserved in {plural(len(seg), 'segment')}: {fmt_bytes(int(seg['requested_bytes'].sum()))} "
            f"requested, {fmt_bytes(int(seg['rounding_bytes'].sum()))} rounding, {fmt_bytes(free)} free "
            f"({100 * free / max(total, 1):.0f} %; the largest free piece {fmt_bytes(int(seg['largest_free_bytes'].max()))})")
    cols = [Column("device", "Device", "text"), Column("total_size_bytes", "Reserved", "bytes"),
            Column("allocated_bytes", "Allocated", "bytes"), Column("requested_bytes", "Requested", "bytes"),
            Column("free_bytes", "Free", "bytes"), Column("largest_free_bytes", "Largest free", "bytes"),
            Column("blocks", "Blocks", "count"), Column("segment_type", "Pool", "text"),
            Column("stream", "Stream", "text")]
    bars = segments_svg(seg)
    return (f'<div class="nbprof-sub"><b>{esc(head)}</b></div>'
            + (drawing_html(bars, "the segments' bars", style=False) if bars else "")
            + datatable_html(seg, cols, order=[("total_size_bytes", "desc")], page_length=10,
                             caption="reserved = allocated + free; allocated = requested + rounding; p.segments()"))


def _ooms_html(profile: Any) -> str:
    ooms = profile._summary["ooms"].copy()
    if not len(ooms):
        return '<div class="nbprof-empty">No out-of-memory error in the history.</div>'
    ooms["time_us"] = ooms["time_us"] - _t0(profile)
    cols = [Column("device", "Device", "text"), Column("time_us", "At", "time_us"),
            Column("requested_bytes", "Asked for", "bytes"), Column("device_free_bytes", "CUDA free", "bytes"),
            Column("active_bytes", "Active", "bytes"), Column("reserved_bytes", "Reserved", "bytes")]
    return datatable_html(ooms, cols, page_length=10, caption="each out-of-memory error the allocator raised")


def _t0(profile: Any) -> float:
    t = profile._replay.memory["time_us"].to_numpy()
    return float(np.nanmin(t)) if len(t) and not np.isnan(t).all() else 0.0


def snapshot_panels(profile: Any) -> list[tuple[str, str]]:
    """The report's panels (title, html): Over time, At the peak, At the end, Segments, OOMs (when any)."""
    chart = snapshot_svg(_drawn(profile))
    over = (drawing_html(chart, "the memory chart", style=False) if chart
            else '<div class="nbprof-empty">The snapshot has no history (record it with _record_memory_history).</div>')
    panels = [("Over time", over), ("At the peak", _peak_html(profile)), ("At the end", _end_html(profile)),
              ("Segments", _segments_html(profile))]
    if len(profile._summary["ooms"]):
        panels.append(("OOMs", _ooms_html(profile)))
    return panels


class SnapshotReport:
    """The report of a :class:`~nbprof.snapshot.SnapshotProfile`."""

    def __init__(self, profile: Any, limit: int | None = None) -> None:
        self.profile = profile
        self.notes: list[str] = list(profile.meta.notes)
        self.limit = limit
        self.uid = 0

    def text(self) -> str:
        p = self.profile
        lines = [describe(p)]
        blocks = p.blocks("peak")
        if len(blocks):
            frame = _blocks_frame(blocks, _t0(p)).head(self.limit or 10)
            lines.append("alive at the peak, biggest first:")
            lines.append(render_text(frame, _BLOCK_COLS[:4]))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def html(self, include_library: bool | None = None, panels: dict[str, str] | None = None) -> str:
        from .report import _notes_html, _report_html
        from .tabs.base import Tab

        p = self.profile
        head = [f'<div class="nbprof-summary"><b>CUDA memory snapshot</b> · {esc(describe(p).split(": ", 1)[1])}</div>',
                f'<div class="nbprof-sub">{esc(_source_line(p))}</div>', _notes_html(self.notes)]
        bodies = snapshot_panels(p)
        tabs = [Tab(title, (lambda report, body=body: body)) for title, body in bodies]
        return _report_html(self, tabs, head, include_library, panels)

    @property
    def empty_message(self) -> str | None:
        return None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.text(), "text/html": self.html()}

    def __repr__(self) -> str:
        return self.text()


def _source_line(p: Any) -> str:
    src = p.meta.source
    where = "recorded around the run (--snapshot)" if src == "--snapshot" else f"from {src}"
    settings = p.meta.allocator_settings.get("PYTORCH_CUDA_ALLOC_CONF")
    extra = f" · PYTORCH_CUDA_ALLOC_CONF={settings}" if settings else ""
    return where + extra + f" · {fmt_count(len(p._data.stacks))} distinct stacks"
