"""A CUDA memory snapshot's chart: active memory over time, stacked by the line of the user's code
that allocated it (the top lines at the peak, each a layer; the rest one), the reserved memory over
it, the peak named, OOMs marked in red.

memory_viz draws one polygon per allocation and every one of them, which stops a browser past
some 100 k entries; this chart draws at most ~2 points per pixel of each device's curve
(``analysis.snapshot.drawn``: each bucket's first and highest entry, so the peak survives), exact
at every point drawn, whatever the history's length: a static SVG (``snapshot_svg``: the report's,
it renders everywhere, no script), a plotly figure (``snapshot_figure``: ``memory_curve()``, the
standalone page) to zoom, and in a kernel a live chart that asks the kernel for the zoomed window
again, in full detail once it holds fewer entries than pixels (the live timeline's widget,
``views.live_timeline.live_widget``, with :class:`SnapshotChartState`).

Names from the file are text: ``format.esc`` in the SVG, ``esc_plotly`` in the figure.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pandas as pd

from ..analysis.snapshot import BEFORE_HISTORY, OTHER_LINES, DrawnDevice, drawn, x_axis
from ..format import esc, esc_plotly, fmt_bytes, fmt_us, plural
from .figure import drawing_html, rendering_figure

__all__ = ["snapshot_svg", "snapshot_figure", "snapshot_spec", "live_chart", "SnapshotChartState", "describe",
           "drawn_devices", "BUCKETS", "TOP_LINES"]

_WIDTH, _LEFT, _RIGHT = 760, 72, 16
BUCKETS = _WIDTH - _LEFT - _RIGHT  # one bucket per pixel of the static chart's plot
TOP_LINES = 8  # layers of their own; the other lines are one
# the first TOP_LINES colours a device's lines take; the lighter eight after them for the lines
# only another device's panel has (two devices: every line its own colour)
_PALETTE = ["#4e79a7", "#f28e2c", "#59a14f", "#af7aa1", "#76b7b2", "#edc949", "#ff9da7", "#9c755f",
            "#a0cbe8", "#ffbe7d", "#8cd17d", "#d4a6c8", "#86bcb6", "#f1ce63", "#fabfd2", "#d7b5a6"]
_GREY = {OTHER_LINES: "#bab0ab", BEFORE_HISTORY: "#d9d4d0"}
_OOM = "#d62728"


def _colors(devices: list[DrawnDevice]) -> dict[str, str]:
    """Each layer's colour, by its line: the same on every device's panel (the legend names a line
    once), the lines in the order the panels first draw them."""
    out: dict[str, str] = {}
    named = 0
    for d in devices:
        for name, _ in d.layers:
            if name in out:
                continue
            if name in _GREY:
                out[name] = _GREY[name]
            else:
                out[name] = _PALETTE[named % len(_PALETTE)]
                named += 1
    return out


def _x_text(x: float, is_time: bool) -> str:
    return fmt_us(x) if is_time else f"entry {int(x):,}"


def _x_end(x: np.ndarray) -> float:
    """Where the chart's x axis ends: a little past the last entry (an entry's width, or 2 % of
    the span when that is wider), so that what the last entry leaves (a final free down to 0) is
    drawn as a step of its own instead of on the axis' edge."""
    last = float(x.max(initial=0.0))
    return last + max(1.0, 0.02 * (last - float(x.min(initial=0.0))))


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
    colors = _colors(devices)
    for d in devices:
        x = d.x.astype(float)
        x_last, x1 = float(x.max(initial=0.0)), _x_end(x)
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
        for name, values in d.layers:
            color = colors[name]
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
        for tick in _ticks(0, x_last / scale, 6):  # the entries' span, not the room after
            if tick * scale > x1:  # the nice ticks run up to half a step past the span: not past the axis
                break
            tx = x_of(tick * scale)
            parts.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{bottom}" y2="{bottom + 4}" stroke="#999"/>')
            text = f"{tick:g} ms" if d.x_is_time else f"{tick:,.0f}"
            parts.append(f'<text x="{tx:.1f}" y="{bottom + 16}" text-anchor="middle" fill="#555">{esc(text)}</text>')
        y0 = bottom + axis_h
        half = pw // 2
        for i, (name, values) in enumerate(d.layers):
            color = colors[name]
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


LEGEND_BELOW_PX = 62  # the interactive chart's legend: this far below the plot area, under the x axis' title


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
    colors = _colors(devices)
    for k, d in enumerate(devices):
        axis = "" if k == 0 else str(k + 1)
        ya = f"y{axis}"
        lo = 1.0 - (k + 1) / n + (gap / 2 if k < n - 1 else 0.0)
        hi = 1.0 - k / n - (gap / 2 if k > 0 else 0.0)
        top = float(max(d.reserved.max(initial=0), d.active.max(initial=0), 1))
        ticks = _byte_ticks(0.0, top, 4)
        layout[f"yaxis{axis}"] = dict(domain=[lo, hi], title=dict(text=esc_plotly(d.device)), rangemode="tozero",
                                      tickvals=ticks.tolist(), ticktext=[fmt_bytes(t, compact=True) for t in ticks])
        # each value holds until the next entry; the last one until the axis' end
        x = np.r_[d.x, _x_end(d.x)] / scale if len(d.x) else d.x
        held = lambda v: np.r_[v, v[-1:]] if len(d.x) else v  # noqa: E731
        for name, values in d.layers:
            data.append(dict(type="scatter", x=x, y=held(values), yaxis=ya, mode="lines",
                             line=dict(shape="hv", width=0.5, color=colors[name]), fillcolor=colors[name],
                             stackgroup=f"active{k}", name=esc_plotly(_cut(name, 70)),
                             legendgroup=esc_plotly(name), showlegend=k == 0 or name not in _first_names(devices, k),
                             hovertemplate="%{y:,} B<extra>" + esc_plotly(_cut(name, 90)) + "</extra>"))
        data.append(dict(type="scatter", x=x, y=held(d.reserved), yaxis=ya, mode="lines",
                         name=f"{esc_plotly(d.device)} reserved",
                         line=dict(shape="hv", dash="dot", color="#555", width=1.2),
                         hovertemplate="%{y:,} B reserved<extra></extra>"))
        if len(d.ooms):
            texts = [esc_plotly(f"OOM: asked for {fmt_bytes(r)}, CUDA had {fmt_bytes(f)} free")
                     for r, f in zip(d.ooms["requested_bytes"], d.ooms["device_free_bytes"])]
            data.append(dict(type="scatter", x=d.ooms["x"].to_numpy() / scale,
                             y=np.full(len(d.ooms), float(max(d.reserved.max(initial=0), d.active.max(initial=0)))),
                             yaxis=ya, mode="markers", name="OOM", marker=dict(symbol="triangle-down", size=11,
                                                                                color=_OOM),
                             # one legend entry for every panel's OOMs (a click hides them all)
                             legendgroup="OOM", showlegend=not any(t.get("name") == "OOM" for t in data),
                             text=texts, hovertemplate="%{text}<extra></extra>"))
        label = f"peak {fmt_bytes(d.peak_bytes)}" + (f" · {_cut(d.peak_label, 50)}" if d.peak_label else "")
        annotations.append(dict(x=d.peak_x / scale, y=d.peak_bytes, xref="x", yref=ya, text=esc_plotly(label),
                                showarrow=True, arrowhead=2))
    height, margin = 130 + height_per_device * n, dict(l=70, r=20, t=50, b=100)
    layout.update(
        title=dict(text="Active memory over time, stacked by the line that allocated it"),
        # under the lowest panel (plotly lays an x axis on its first y axis by default: between the
        # panels, over the second's title, the lowest without ticks)
        xaxis=dict(title=dict(text="time since the first entry (ms)" if is_time else "history entry"),
                   anchor=f"y{n if n > 1 else ''}"),
        height=height, margin=margin, annotations=annotations, template="plotly_white", hovermode="x",
        # under the axis' title, not over it: a fixed distance below the plot area in pixels (its
        # y is a share of that area's height, which grows with the devices)
        legend=dict(orientation="h", yanchor="top", y=-LEGEND_BELOW_PX / (height - margin["t"] - margin["b"]),
                    xanchor="left", x=0))
    return dict(data=data, layout=layout)


def _first_names(devices: list[DrawnDevice], k: int) -> set[str]:
    return {name for d in devices[:k] for name, _ in d.layers}


def snapshot_figure(profile: Any, *, window_us: tuple[float, float] | None = None) -> Any:
    """The chart as a plotly figure that renders itself (its static drawing: the SVG)."""
    devices = drawn_devices(profile, window_us)

    def svg() -> str | None:
        drawn_svg = snapshot_svg(devices)
        return drawing_html(drawn_svg, "the memory chart") if drawn_svg else None

    return rendering_figure(snapshot_spec(devices), html=svg, text=describe(profile))


def drawn_devices(profile: Any, window: tuple[float, float] | None = None, buckets: int = BUCKETS) -> list[DrawnDevice]:
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
        return drawn_devices(self.profile, self.window, max(self.width_px, 100))

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
        if len(x):  # a span wider than the history (a drag past its ends): the history's
            x0, x1 = max(x0, float(x.min())), min(x1, float(x.max()))
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
        return drawing_html(snapshot_svg(drawn_devices(profile)), "the memory chart")

    return live_widget(cast(Any, state), static, describe(profile))  # a state with the timeline's methods


