"""What a timeline's rectangle says when the pointer is on it: an event's name, kind, times,
shapes, launching op, launch configuration; a merged rectangle's count, top names and busy time.

Hover text is most of a figure's JSON (the numbers go as compact typed arrays), so the texts
shorten past :data:`HOVER_BUDGET` characters in all. A rank's worker writes its texts before the
rank's place on the common clock is known: their start times are marked (:data:`AT_MARK`) and
written by :func:`resolve_at` once it is (``nbprof.cluster.timeline``). Every name is text for
plotly (``format.esc_plotly``): plotly reads <, > and & as markup.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from ..analysis.timeline import TimelineData
from ..events import DEVICE_WORK_KINDS, values_at
from ..format import esc_plotly, fmt_bytes, fmt_us

__all__ = ["KIND_LABELS", "AT_MARK", "HOVER_BUDGET", "hover_texts", "detailed_hover_texts", "resolve_at", "short_name"]

KIND_LABELS = {
    "op": "CPU op",
    "annotation": "record_function",
    "runtime": "CUDA runtime",
    "python": "Python",
    "gpu_annotation": "GPU annotation",
    "overhead": "profiler overhead",
}


def _wrap(text: str, width: int = 90, lines: int = 3) -> str:
    """Escape for plotly's hover labels (they read <, > and & as markup) and wrap long names."""
    parts = [text[i : i + width] for i in range(0, len(text), width)][:lines]
    if len(text) > width * lines:
        parts[-1] = parts[-1][: width - 1] + "…"
    return "<br>".join(esc_plotly(p) for p in parts)


@functools.lru_cache(maxsize=8192)
def _esc_name(name: str, width: int = 70, short: bool = False) -> str:
    """A name for a hover line: escaped, cut to ``width`` characters (``short``: a kernel's
    function name without its template arguments)."""
    name = short_name(str(name)) if short else str(name)
    if len(name) > width:
        name = name[: width - 1] + "…"
    return esc_plotly(name)


@functools.lru_cache(maxsize=8192)
def _wrap_cached(text: str, width: int, lines: int) -> str:
    return _wrap(text, width, lines)


def _at(us: float) -> str:
    return f"{us / 1000:.3f} ms"


# A rank's worker writes its events' hover texts before the rank's place on the common clock is
# known (``nbprof.cluster.timeline``): their start times are marked, ``AT_MARK`` + µs + ``AT_MARK``,
# and :func:`resolve_at` writes them once the rank's shift is known.
AT_MARK = "\x1f"
_AT_MARKED = re.compile(AT_MARK + "([^" + AT_MARK + "]*)" + AT_MARK)


def resolve_at(texts: np.ndarray, shift_us: float) -> np.ndarray:
    """Hover texts with their marked start times (``AT_MARK``) written as times, moved by ``shift_us``."""
    out = np.empty(len(texts), dtype=object)

    def write(m: re.Match) -> str:
        return _at(float(m.group(1)) + shift_us)

    for i, t in enumerate(texts.tolist()):
        out[i] = _AT_MARKED.sub(write, t) if isinstance(t, str) and AT_MARK in t else t
    return out


# Hover text is most of a figure's JSON (numbers go as compact typed arrays). Past this many
# characters, hover texts lose detail (shapes, long names, the list of merged names) until they fit.
HOVER_BUDGET = 2_500_000


def hover_texts(data: TimelineData, budget: int = HOVER_BUDGET, mark_at: bool = False) -> np.ndarray:
    """The hover text of each rectangle (plotly's pseudo-HTML: <b>, <br>, entities).

    An event: name, kind, duration, start, input shapes, and for a kernel / memcpy its launching
    op (its ``parent``), for an op its CUDA time. A merged rectangle: how many events, the names
    with the most time, busy time over its extent, start. Over ``budget`` characters in all, the
    texts get shorter (detail 1: long names cut, fewer shapes; detail 2: names and times only).
    ``mark_at``: an event's start marked for :func:`resolve_at`, not written."""
    for detail in (0, 1):
        out = detailed_hover_texts(data, detail, mark_at)
        if sum(len(t) for t in out.tolist() if t is not None) <= budget:
            return out
    return detailed_hover_texts(data, 2, mark_at)


def detailed_hover_texts(data: TimelineData, detail: int, mark_at: bool = False) -> np.ndarray:
    r = data.rects
    out = np.empty(len(r), dtype=object)
    if len(r) == 0:
        return out
    x0 = r["x0_us"].to_numpy()
    x1 = r["x1_us"].to_numpy()
    busy = r["busy_us"].to_numpy()
    count = r["count"].to_numpy()
    ev_pos = r["event"].to_numpy()
    single = ev_pos >= 0
    rect_name = r["name"].to_numpy()
    family = r["family"].to_numpy()
    name_width = (70, 48, 40)[detail]

    # merged rectangles
    names = r["names"].to_numpy()
    distinct = r["distinct"].to_numpy()
    top = (3, 2, 1)[detail]
    for i in np.flatnonzero(~single).tolist():
        items = (names[i] or [(rect_name[i], count[i])])[:top]
        short = family[i] == "kernel"
        parts = [f"{_esc_name(n, name_width, short)} ×{c:,}" for n, c in items]
        body = " · ".join(parts[:2]) + ("<br>" + " · ".join(parts[2:]) if len(parts) > 2 else "")
        more = distinct[i] - len(items)
        if more > 0:
            body += f" · +{more} more"
        out[i] = (f"<b>{count[i]:,} merged events</b><br>{body}<br>busy {fmt_us(busy[i])} of "
                  f"{fmt_us(x1[i] - x0[i])} · at {_at(x0[i])}")

    # single events: details from the events table
    idx = np.flatnonzero(single)
    ev = data.events
    if len(idx) == 0 or ev is None:
        return out
    pos = ev_pos[idx]
    kind = values_at(ev["kind"], pos)
    dur = ev["dur_us"].to_numpy()[pos]
    start = ev["start_us"].to_numpy()[pos]
    shapes = values_at(ev["input_shapes"], pos) if "input_shapes" in ev.columns else np.full(len(idx), "[]")
    parent = ev["parent"].to_numpy()[pos] if "parent" in ev.columns else np.full(len(idx), -1)
    launcher = np.full(len(idx), None, dtype=object)
    has_parent = parent >= 0
    if has_parent.any():
        launcher[has_parent] = values_at(ev["name"], parent[has_parent])
    device_total = ev["device_total_us"].to_numpy()[pos] if "device_total_us" in ev.columns else np.zeros(len(idx))
    nbytes = ev["bytes"].to_numpy()[pos] if "bytes" in ev.columns else np.zeros(len(idx))
    work = np.isin(kind, DEVICE_WORK_KINDS)
    cpu_side = np.isin(kind, ("op", "annotation", "other"))
    launch = None
    if detail < 2 and "grid" in ev.columns and (kind == "kernel").any():
        launch = (values_at(ev["grid"], pos), values_at(ev["block"], pos),
                  ev["registers_per_thread"].to_numpy()[pos], ev["occupancy_pct"].to_numpy()[pos])
    wrap = ((90, 3), (90, 1), (60, 1))[detail]
    shape_width = (160, 60, 0)[detail]
    for j, i in enumerate(idx.tolist()):
        k = kind[j]
        lines = [f"<b>{_wrap_cached(str(rect_name[i]), *wrap)}</b>",
                 f"{KIND_LABELS.get(k, k)} · {fmt_us(dur[j])} · at "
                 + (f"{AT_MARK}{float(start[j])!r}{AT_MARK}" if mark_at else _at(start[j]))]
        sh = shapes[j]
        if shape_width and sh and sh != "[]":
            lines.append("shapes " + _wrap_cached(sh if len(sh) <= shape_width else sh[: shape_width - 1] + "…",
                                                  80, 2))
        if work[j]:
            if k != "kernel" and nbytes[j] > 0:
                lines.append(f"{fmt_bytes(nbytes[j])} · {nbytes[j] / max(dur[j], 1e-9) / 1e3:.1f} GB/s")
            if launcher[j] is not None:
                lines.append("launched by " + _esc_name(str(launcher[j]), 80))
            if launch is not None and launch[0][j]:
                grid, block, regs, occ = (a[j] for a in launch)
                text = f"grid {_esc_name(str(grid), 40)} · block {_esc_name(str(block), 40)} · {regs} regs/thread"
                lines.append(text + (f" · est. occupancy {occ:g}%" if occ == occ else ""))
        elif cpu_side[j] and device_total[j] > 0:
            lines.append(f"CUDA time {fmt_us(device_total[j])}")
        out[i] = "<br>".join(lines)
    return out


def short_name(name: str) -> str:
    """Kernel names are C++ signatures: keep the function name, drop "void" and templates."""
    s = name
    if s.startswith("void "):
        s = s[5:]
    if "<" in s or "(" in s:
        cut = min(i for i in (s.find("<"), s.find("(")) if i >= 0)
        if cut > 0:
            s = s[:cut]
    return s
