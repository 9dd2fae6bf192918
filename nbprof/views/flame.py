"""The flame view of a cProfile profile: an icicle of the call tree (``nbprof.analysis.flame``).

``flame_figure(tree)`` is the interactive plotly icicle (click a box to zoom into it, click the
bar on top to zoom out), with buttons that draw the same tree as a sunburst (snakeviz's other
style: the rings are the icicle's rows, around the centre); ``flame_svg(tree)`` draws the same
icicle as a small inline SVG for places without plotly.js (nbconvert, nbviewer, GitHub). Boxes
are coloured by where the code lives: the notebook's cells stand out (orange) from the user's own
files (blue), the standard library (teal), builtins (grey) and each installed package (its own hue).

The figure renders itself (``views.figure.rendering_figure``): the plotly mimetype for front ends
that draw it, the SVG as ``text/html`` for the rest. It does not depend on ``plotly.io.renderers``.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import pandas as pd

from ..format import esc, esc_plotly, fmt_s, plural
from .figure import drawing_html, rendering_figure

__all__ = ["flame_figure", "flame_svg", "flame_colors", "FAMILY_COLORS", "FAMILY_LABELS"]

FAMILY_COLORS = {
    "root": "#d9dde3",
    "cell": "#f28e2b",
    "user": "#4e79a7",
    "stdlib": "#76b7b2",
    "builtin": "#bab0ac",
    "other": "#e6e6e6",
}
FAMILY_LABELS = {"cell": "this notebook", "user": "your files", "stdlib": "standard library",
                 "builtin": "builtins", "package": "packages"}
_PACKAGE_COLORS = ("#59a14f", "#b07aa1", "#edc948", "#e15759", "#9c755f", "#ff9da7", "#8cd17d", "#a0cbe8")
SUNBURST_HEIGHT = 620  # px: the sunburst is a disc as wide as this, less the margins
_FONT = "-apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"


# ------------------------------------------------------------------------------ colours


def _rgb(hex_color: str) -> tuple[int, int, int]:
    h = hex_color.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def _mix(hex_color: str, towards: str, amount: float) -> str:
    a, b = _rgb(hex_color), _rgb(towards)
    return "#%02x%02x%02x" % tuple(round(x + (y - x) * amount) for x, y in zip(a, b))


def _text_color(hex_color: str) -> str:
    r, g, b = (c / 255 for c in _rgb(hex_color))
    return "#ffffff" if 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.5 else "#1f1f1f"


def _family_color(family: str, package: str) -> str:
    if family == "package":
        return _PACKAGE_COLORS[zlib.crc32(package.encode()) % len(_PACKAGE_COLORS)]
    return FAMILY_COLORS.get(family, FAMILY_COLORS["other"])


def flame_colors(tree: pd.DataFrame) -> list[str]:
    """A fill colour per node: its family's hue, a little lighter or darker per function so that
    neighbouring boxes stay apart; recursive markers are paler."""
    out = []
    for fam, pkg, label, rec in zip(tree["family"].tolist(), tree["package"].tolist(), tree["label"].tolist(),
                                    tree["recursive"].tolist()):
        base = _family_color(fam, pkg)
        if fam not in ("root", "other"):
            shade = (zlib.crc32(label.encode()) % 7 - 3) / 3  # -1 .. 1
            base = _mix(base, "#ffffff", 0.22 * shade) if shade > 0 else _mix(base, "#000000", -0.12 * shade)
        if rec:
            base = _mix(base, "#ffffff", 0.5)
        out.append(base)
    return out


def _legend(tree: pd.DataFrame) -> list[tuple[str, str]]:
    """(colour, text) for the families present, in a fixed order; packages by name."""
    present = set(tree["family"].tolist())
    items = [(FAMILY_COLORS[f], FAMILY_LABELS[f]) for f in ("cell", "user", "stdlib", "builtin") if f in present]
    pkgs = tree.loc[tree["family"] == "package", ["package", "value_s"]]
    if len(pkgs):
        order = pkgs.groupby("package")["value_s"].sum().sort_values(ascending=False).index.tolist()
        items += [(_family_color("package", p), p) for p in order[:6]]
        if len(order) > 6:
            items.append((FAMILY_COLORS["other"], f"{plural(len(order) - 6, 'more package')}"))
    return items


# ------------------------------------------------------------------------------ hover text


def _hover_texts(tree: pd.DataFrame) -> list[str]:
    root = float(tree["value_s"].iloc[0]) if len(tree) else 0.0
    whole = _whole(tree)
    values = tree["value_s"].tolist()
    parents = tree["parent"].tolist()
    out = []
    for i, (kind, label, fn, line, func, v, s, n) in enumerate(zip(
            tree["kind"].tolist(), tree["label"].tolist(), tree["filename"].tolist(), tree["lineno"].tolist(),
            tree["function"].tolist(), values, tree["self_s"].tolist(), tree["ncalls"].tolist())):
        pct = f"{100 * v / root:.1f}% of {whole}" if root > 0 else ""
        p = parents[i]
        if p >= 0 and values[p] > 0 and kind != "root":
            pct += f", {100 * v / values[p]:.1f}% of its caller"
        if kind == "root":
            head = f"<b>{esc_plotly(label)}</b><br>time inside profiled functions"
            lines = [head, f"cumtime {fmt_s(v)}"]
        elif kind == "other":
            lines = [f"<b>{esc_plotly(label)}</b><br>small calls merged", f"cumtime {fmt_s(v)} ({pct})",
                     f"tottime {fmt_s(s)}", f"ncalls {_calls(n)}"]
        else:
            where = label if fn in ("", "~") or fn.startswith("<") else f"{fn}:{line}({func})"
            lines = [f"<b>{esc_plotly(label)}</b>"]
            if where != label:
                lines.append(f"<span style='font-size:10px'>{esc_plotly(where)}</span>")
            if kind == "recursive":
                lines.append("<i>recursive call: deeper levels not expanded</i>")
            lines += [f"cumtime {fmt_s(v)} ({pct})", f"tottime {fmt_s(s)}", f"ncalls {_calls(n)}"]
        out.append("<br>".join(lines))
    return out


def _whole(tree: pd.DataFrame) -> str:
    """What the root stands for, in a sentence: "the cell" (a run), or the file's name."""
    name = str(tree["name"].iloc[0]) if len(tree) else "cell"
    return "the cell" if name == "cell" else name


def _calls(n: float) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "—"
    r = round(n)
    return f"{r:,}" if abs(n - r) < 0.05 else f"≈{n:,.1f}"


# ------------------------------------------------------------------------------ plotly


def flame_figure(tree: pd.DataFrame, *, maxdepth: int = 6, height: int | None = None,
                 title: str | None = None) -> Any:
    """The call tree as a plotly icicle, sized by cumulative time (``branchvalues="total"``).

    ``maxdepth``: levels shown at once (click a box to zoom in); ``height`` in pixels.
    """
    colors = flame_colors(tree)
    values = tree["value_s"].tolist()
    icicle = dict(
        type="icicle",
        ids=[str(i) for i in tree["id"].tolist()],
        parents=["" if p < 0 else str(p) for p in tree["parent"].tolist()],
        labels=[esc_plotly(n) for n in tree["name"].tolist()],  # plotly reads labels as its markup
        values=values,
        text=[fmt_s(v) for v in values],
        branchvalues="total",
        sort=False,  # the tree's order: biggest first, "other" last
        maxdepth=maxdepth,
        marker=dict(colors=colors, line=dict(color="#ffffff", width=1)),
        tiling=dict(orientation="v", pad=0),
        pathbar=dict(visible=True, side="top", thickness=20, textfont=dict(size=12)),
        texttemplate="<b>%{label}</b><br>%{text}",
        textposition="middle center",
        insidetextfont=dict(color=[_text_color(c) for c in colors], size=12),
        hovertext=_hover_texts(tree),
        hoverinfo="text",
        hovertemplate="%{hovertext}<extra></extra>",
        hoverlabel=dict(bgcolor="#ffffff", bordercolor="#999999", align="left", font=dict(color="#1f1f1f", size=12)),
        root=dict(color=FAMILY_COLORS["root"]),
    )
    legend = _legend(tree)
    legend_html = "   ".join(f"<span style='color:{c}'>■</span> {esc_plotly(t)}" for c, t in legend)
    rows = min(maxdepth, int(tree["depth"].max()) + 1 if len(tree) else 1)
    annotations = [dict(text=legend_html, showarrow=False, xref="paper", yref="paper", x=0, y=0, yshift=-20,
                        xanchor="left", yanchor="bottom", font=dict(size=11, color="#555555"))] if legend else []
    if len(tree) <= 1 or not tree["value_s"].iloc[0] > 0:
        annotations.append(dict(text="no Python function calls were recorded", showarrow=False, xref="paper",
                                yref="paper", x=0.5, y=0.5, font=dict(size=13, color="#777777")))
    height = height or max(260, 70 + 56 * rows)
    layout = dict(
        template=dict(layout=dict()),  # plotly's "none", already resolved (no validation here)
        height=height,
        margin=dict(l=4, r=4, t=(54 if title else 30), b=30),
        font=dict(family=_FONT, size=12, color="#1f1f1f"),
        paper_bgcolor="#ffffff",
        annotations=annotations,
        uniformtext=dict(minsize=9, mode="hide"),
    )
    if title:
        layout["title"] = dict(text=esc_plotly(title), x=0.01, y=0.98, font=dict(size=14))
    if len(tree) > 1:
        layout["updatemenus"] = [_style_toggle(height)]
    return rendering_figure(dict(data=[icicle], layout=layout), html=lambda: drawing_html(flame_svg(tree), "the flame view"),
                            text=_describe(tree))


def _style_toggle(height: int) -> dict[str, Any]:
    """Buttons under the figure that draw the same tree as an icicle or as a sunburst (snakeviz's
    two styles): plotly restyles the one trace's type; the sunburst, a disc, gets a taller figure."""
    def button(label: str, kind: str, h: int) -> dict[str, Any]:
        return dict(label=label, method="update", args=[{"type": kind}, {"height": h}])

    # under the plot, right (the legend is left): over it, the modebar would cover the buttons
    return dict(type="buttons", direction="right", showactive=True, active=0, x=1, xanchor="right", y=0,
                yanchor="top", pad=dict(t=4, b=0, l=0, r=0), font=dict(size=11), bgcolor="#f4f5f7",
                bordercolor="#c8ccd2", buttons=[button("Icicle", "icicle", height),
                                                button("Sunburst", "sunburst", max(height, SUNBURST_HEIGHT))])


def _describe(tree: pd.DataFrame) -> str:
    if not len(tree):
        return "<flame graph>"
    return f"<flame graph: {len(tree):,} boxes, {fmt_s(float(tree['value_s'].iloc[0]))} in profiled functions>"


# ------------------------------------------------------------------------------ static SVG


def flame_svg(tree: pd.DataFrame, width: int = 960, height: int | None = None, *, row: int = 20,
              max_depth: int = 14, min_px: float = 0.5) -> str:
    """The icicle as a self-contained inline SVG: no script, tooltips from ``<title>``.

    Boxes narrower than ``min_px`` and levels below ``max_depth`` are left out (so are levels
    that do not fit in ``height``); the SVG stays small whatever the tree.
    """
    n = len(tree)
    legend = _legend(tree) if n else []
    legend_h = 22 if legend else 0
    depth_max = int(tree["depth"].max()) if n else 0
    levels = min(depth_max + 1, max_depth)
    if height is not None:
        levels = max(1, min(levels, (height - legend_h) // row))
    svg_h = height if height is not None else levels * row + legend_h + 2
    root_value = float(tree["value_s"].iloc[0]) if n else 0.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="nbprof-flame" width="{width}" height="{svg_h}" '
             f'viewBox="0 0 {width} {svg_h}" font-family="{esc(_FONT)}" font-size="11" role="img" '
             f'aria-label="flame graph">']
    parts.append('<style>.nbprof-flame g:hover rect{stroke:#222;stroke-width:1}</style>')
    if not n or not root_value > 0:
        parts.append(f'<text x="8" y="{row - 6}" fill="#777">no Python function calls were recorded</text></svg>')
        return "".join(parts)
    colors = flame_colors(tree)
    scale = width / root_value
    x0 = [0.0] * n  # left edge of each node; children are laid out left to right in row order
    cursor = [0.0] * n
    hidden = [False] * n
    parents = tree["parent"].tolist()
    values = tree["value_s"].tolist()
    depths = tree["depth"].tolist()
    names = tree["name"].tolist()
    labels = tree["label"].tolist()
    selfs = tree["self_s"].tolist()
    calls = tree["ncalls"].tolist()
    kinds = tree["kind"].tolist()
    for i in range(n):
        p = parents[i]
        if p >= 0:
            x0[i] = cursor[p]
            cursor[p] += values[i] * scale
            hidden[i] = hidden[p]
        cursor[i] = x0[i]
        w = values[i] * scale
        if hidden[i] or w < min_px or depths[i] >= levels:
            hidden[i] = True
            continue
        y = depths[i] * row
        tip = labels[i] if kinds[i] != "root" else f"{names[i]}: time inside profiled functions"
        tip += f"\ncumtime {fmt_s(values[i])} ({100 * values[i] / root_value:.1f}%)"
        if kinds[i] != "root":
            tip += f"\ntottime {fmt_s(selfs[i])}\nncalls {_calls(calls[i])}"
        if kinds[i] == "recursive":
            tip += "\nrecursive call: deeper levels not expanded"
        parts.append(f'<g><title>{esc(tip)}</title><rect x="{x0[i]:.1f}" y="{y}" width="{max(w - 1, 0.5):.1f}" '
                     f'height="{row - 1}" rx="2" fill="{colors[i]}"/>')
        chars = int((w - 6) / 6.4)
        if chars >= 3:
            text = names[i] if len(names[i]) <= chars else names[i][: chars - 1] + "…"
            parts.append(f'<text x="{x0[i] + 4:.1f}" y="{y + row - 6}" fill="{_text_color(colors[i])}">'
                         f"{esc(text)}</text>")
        parts.append("</g>")
    if legend:
        x = 2.0
        y = levels * row + 6
        for color, text in legend:
            parts.append(f'<rect x="{x:.0f}" y="{y}" width="10" height="10" rx="2" fill="{color}"/>'
                         f'<text x="{x + 14:.0f}" y="{y + 9}" fill="#555">{esc(text)}</text>')
            x += 14 + 6.4 * len(text) + 16
    parts.append("</svg>")
    return "".join(parts)
