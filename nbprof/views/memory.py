"""The allocated-memory curve over time: a small inline SVG (renders everywhere, no scripts) for
the Memory tab, and a zoomable plotly figure (``result.memory_curve()``) that renders itself with
that SVG as its static drawing (``views.figure``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..analysis.memory import MemoryPeak, downsample_max, memory_peaks
from ..format import esc, esc_plotly, fmt_bytes, fmt_us
from .figure import drawing_html, rendering_figure

__all__ = ["memory_curve_svg", "memory_curve_figure", "describe", "CHART_BUCKETS"]

_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"]


def _nice_ticks(lo: float, hi: float, count: int = 5) -> np.ndarray:
    if hi <= lo:
        return np.array([lo])
    raw = (hi - lo) / count
    mag = 10 ** np.floor(np.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    return np.arange(np.ceil(lo / step) * step, hi + step * 0.5, step)


def _byte_ticks(lo: float, hi: float, count: int) -> np.ndarray:
    """Nice ticks in the binary unit ``fmt_bytes`` labels them in (KiB = 1024 B, MiB = 1024 KiB, ...):
    20 / 40 MiB rather than 23.84 / 47.68 MiB (decimal steps of 25,000,000 B read in MiB)."""
    unit = 1024.0 ** max(int(np.floor(np.log(max(hi, 1.0)) / np.log(1024.0))), 0)
    ticks = _nice_ticks(lo / unit, hi / unit, count) * unit
    if unit == 1.0 and len(ticks) > 1 and not np.all(ticks == np.round(ticks)):
        # a few bytes: halves and quarters of a byte would read "0 B, 0 B, 1 B"; whole bytes only,
        # the next step of 1, 2, 5 times a power of ten
        raw = float(ticks[1] - ticks[0])
        ten = 10.0 ** np.floor(np.log10(raw))
        step = max(min(m * ten for m in (1, 2, 5, 10) if m * ten >= raw), 1.0)
        ticks = np.arange(np.ceil(lo / step) * step, hi + step * 1e-9, step)
    return ticks


# the chart's default width and margins: its plot is CHART_BUCKETS pixels wide, one bucket each
_WIDTH, _LEFT, _RIGHT = 760, 72, 16
CHART_BUCKETS = _WIDTH - _LEFT - _RIGHT


def memory_curve_svg(curve: pd.DataFrame, end_us: float, width: int = _WIDTH, panel_height: int = 130,
                     peaks: list[MemoryPeak] | None = None) -> str:
    """Allocated bytes over time (``analysis.memory.memory_curve``'s frame), one small chart per
    device (each on its own scale, since CPU and GPU totals differ by orders of magnitude); the
    peak marked and named with its op. ``end_us``: where the time axis ends (the profile's last
    event). ``peaks``: the curve's peaks when ``curve`` holds only the points drawn
    (``analysis.memory.drawn_curve``); default: the curve's own."""
    if curve.empty:
        return ""
    left, right = _LEFT, _RIGHT
    pw = width - left - right
    t0 = 0.0  # start_us counts from the profile's start, like every other view
    t1 = max(float(end_us), t0 + 1e-3)
    x_of = lambda t: left + (t - t0) / (t1 - t0) * pw  # noqa: E731
    devices = list(curve.groupby("device", sort=True))
    by_device = {p.device: p for p in (memory_peaks(curve) if peaks is None else peaks)}
    head, axis_h, title_h = 18, 22, 30
    height = head + len(devices) * (panel_height + title_h) + axis_h
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" style="font:11px sans-serif;background:#fff">',
        f'<text x="{left}" y="13" font-weight="bold">Allocated memory over time</text>',
        f'<text x="{left + pw}" y="13" text-anchor="end" fill="#666">'
        "the allocator's total after each allocation or free</text>",
    ]
    y0 = head
    for i, (device, d) in enumerate(devices):
        color = _COLORS[i % len(_COLORS)]
        p = by_device[device]
        top = y0 + title_h
        label = f"{device}: peak {fmt_bytes(p.peak_allocated_bytes)} at {fmt_us(p.peak_time_us - t0)}"
        if p.peak_op:
            label += f" in {p.peak_op}"
        if not str(device).endswith("cpu") and p.peak_reserved_bytes >= 0:  # "cpu", "rank 1 · cpu": none
            label += f" · reserved up to {fmt_bytes(p.peak_reserved_bytes)}"
        parts.append(f'<text x="{left}" y="{y0 + 20}" fill="{color}" font-weight="600">{esc(label)}</text>')
        t = d["time_us"].to_numpy()
        b = d["allocated_bytes"].to_numpy().astype(float)
        lo, hi = float(min(b.min(), p.start_allocated_bytes)), float(b.max())
        lo, hi, ticks = _y_axis(lo, hi)
        y_of = lambda v: top + panel_height - (v - lo) / (hi - lo) * panel_height  # noqa: E731
        for tick, text in ticks:
            y = y_of(tick)
            parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
            parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#555">{esc(text)}</text>')
        t, b = downsample_max(t, b, pw)
        # a step curve from the profile's start: the total holds until the next event
        xs = np.r_[x_of(t0), np.repeat(x_of(t), 2), x_of(t1)]
        ys = np.r_[y_of(p.start_allocated_bytes), y_of(p.start_allocated_bytes), np.repeat(y_of(b), 2)[:-1],
                   y_of(b[-1]), y_of(b[-1])][: len(xs)]
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{points}"/>')
        px, py = x_of(p.peak_time_us), y_of(p.peak_allocated_bytes)
        parts.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top}" y2="{top + panel_height}" '
                     f'stroke="{color}" stroke-dasharray="3,3" opacity="0.6"/>')
        parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{color}"><title>{esc(label)}</title></circle>')
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + panel_height}" y2="{top + panel_height}" stroke="#bbb"/>')
        y0 = top + panel_height
    span_ms = (t1 - t0) / 1000.0
    for tick in _nice_ticks(0, span_ms, 6):
        if tick > span_ms * (1 + 1e-9):  # the nice ticks run up to half a step past the axis' end
            break
        x = x_of(t0 + tick * 1000.0)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y0}" y2="{y0 + 4}" stroke="#999"/>')
        parts.append(f'<text x="{x:.1f}" y="{y0 + 16}" text-anchor="middle" fill="#555">{tick:g} ms</text>')
    parts.append("</svg>")
    return "".join(parts)


def _y_axis(lo: float, hi: float) -> tuple[float, float, list[tuple[float, str]]]:
    """A panel's byte range (the curve's, 8 % of it around) and its ticks (value, label): at least
    two, their labels told apart. A nearly flat curve (100 MiB give or take a few bytes) would get
    one tick, or three reading "100 MiB": its range is widened (half again each time) until its
    labels differ, so the wobble is drawn at a scale its axis can name."""
    pad = max((hi - lo) * 0.08, 1.0)
    lo, hi = max(lo - pad, 0.0), hi + pad
    for _ in range(80):  # the range grows by half each time: from 2 B past any byte count in 80
        ticks = [(float(t), fmt_bytes(t, compact=True)) for t in _byte_ticks(lo, hi, 3) if lo <= t <= hi]
        if len(ticks) >= 2 and len({text for _, text in ticks}) == len(ticks):
            break
        half = (hi - lo) / 2
        lo, hi = max(lo - half, 0.0), hi + half
    return lo, hi, ticks


def describe(curve: pd.DataFrame, peaks: list[MemoryPeak] | None = None) -> str:
    """The curve in one line: each device's peak, when, and in which op."""
    if curve.empty:
        return "Allocated memory: none recorded (profile with --memory)"
    parts = []
    for p in memory_peaks(curve) if peaks is None else peaks:
        part = f"{p.device} peak {fmt_bytes(p.peak_allocated_bytes)} at {fmt_us(p.peak_time_us)}"
        parts.append(part + (f" in {p.peak_op}" if p.peak_op else ""))
    return "Allocated memory: " + " · ".join(parts)


def memory_curve_figure(curve: pd.DataFrame, end_us: float, peaks: list[MemoryPeak] | None = None) -> Any:
    """The same curve as a zoomable plotly figure (``result.memory_curve()``); ``end_us`` and
    ``peaks`` as for :func:`memory_curve_svg`, which draws its static rendering."""
    if peaks is None:
        peaks = memory_peaks(curve)

    def svg() -> str | None:  # no curve: the figure's note
        drawn = memory_curve_svg(curve, end_us, peaks=peaks)
        return drawing_html(drawn, "the memory chart") if drawn else None

    # plain dicts, as plotly's JSON has them (validated once by the tests, not at every call)
    data: list[dict[str, Any]] = []
    t0 = 0.0  # ms since the profile's start
    for device, d in curve.groupby("device", sort=True):
        x = (d["time_us"].to_numpy() - t0) / 1000.0
        data.append(dict(
            type="scatter", x=x, y=d["allocated_bytes"].to_numpy(), mode="lines", line=dict(shape="hv"),
            name=f"{esc_plotly(device)} allocated",
            # the op's name goes into plotly's markup: escaped once per distinct name
            customdata=np.stack([_plotly_names(d["op"]), d["delta_bytes"].to_numpy()], axis=1),
            hovertemplate="%{y:,} B allocated<br>%{customdata[1]:+,} B in %{customdata[0]}<extra>%{fullData.name}</extra>",
        ))
        data.append(dict(type="scatter", x=x, y=d["reserved_bytes"].to_numpy(), mode="lines",
                         line=dict(shape="hv", dash="dot"), name=f"{esc_plotly(device)} reserved"))
    annotations = [dict(x=(p.peak_time_us - t0) / 1000.0, y=p.peak_allocated_bytes,
                        text=f"peak {fmt_bytes(p.peak_allocated_bytes)}" + (f" · {esc_plotly(p.peak_op)}" if p.peak_op else ""),
                        showarrow=True, arrowhead=2)
                   for p in peaks]
    yaxis: dict[str, Any] = dict(title=dict(text="bytes"))
    if not curve.empty:  # the same binary-unit ticks as the static chart
        top = float(max(curve["allocated_bytes"].max(), curve["reserved_bytes"].max(), 1))
        ticks = _byte_ticks(0.0, top, 4)
        yaxis.update(tickvals=ticks.tolist(), ticktext=[fmt_bytes(t, compact=True) for t in ticks])
    layout = dict(title=dict(text="Allocated memory"), xaxis=dict(title=dict(text="time (ms)")), yaxis=yaxis,
                  height=320, margin=dict(l=60, r=20, t=40, b=40), annotations=annotations, template="plotly_white")
    return rendering_figure(dict(data=data, layout=layout), html=svg, text=describe(curve, peaks))


def _plotly_names(names: pd.Series) -> np.ndarray:
    """Each name escaped for plotly's markup (``format.esc_plotly``), once per distinct name."""
    codes, uniques = pd.factorize(names.astype(object), use_na_sentinel=False)
    return np.asarray([esc_plotly(u) for u in uniques], dtype=object)[codes]
