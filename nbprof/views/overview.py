"""The overview at the top of a report with steps: a stacked bar per step (where its time went,
``TorchProfile.overview()``), the shares of all steps in words, and the TensorBoard plugin's kind
of advice where one of its rules applies.

Plain HTML with inline styles (no script, no SVG), so it draws without a kernel and in nbconvert;
where styles are stripped, the line of shares under the bars still says it all.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..analysis.overview import CATEGORIES, overview_advice
from ..format import esc, fmt_share, fmt_us, plural

__all__ = ["overview_html", "overview_text", "MAX_BARS"]

# one bar per step up to this many (the rest are in p.overview() and the Steps tab)
MAX_BARS = 30

# the plugin's names and colors of the categories
_LABEL = {"kernel_us": "Kernel", "memcpy_us": "Memcpy", "memset_us": "Memset", "runtime_us": "Runtime",
          "dataloader_us": "DataLoader", "cpu_exec_us": "CPU Exec", "other_us": "Other"}
_COLOR = {"kernel_us": "#3366cc", "memcpy_us": "#dc3912", "memset_us": "#ff9900", "runtime_us": "#109618",
          "dataloader_us": "#990099", "cpu_exec_us": "#0099c6", "other_us": "#aaaaaa"}


def _shares(row: pd.Series) -> str:
    d = float(row["duration_us"])
    return " · ".join(f"{_LABEL[c]} {fmt_share(float(row[c]) / d)}" for c in CATEGORIES if d and row[c] > 0)


def _bar(label: str, row: pd.Series, longest: float) -> str:
    d = float(row["duration_us"])
    width = 100.0 * d / longest if longest else 0.0
    parts = []
    for c in CATEGORIES:
        v = float(row[c])
        if v > 0 and d > 0:
            tip = f"{label}: {_LABEL[c]} {fmt_us(v)} ({fmt_share(v / d)})"
            parts.append(f'<span title="{esc(tip)}" style="display:inline-block;height:100%;'
                         f'width:{100 * v / d:.3f}%;background:{_COLOR[c]}"></span>')
    return ('<div style="display:flex;align-items:center;margin:1px 0">'
            f'<span style="width:5em;flex:none">{esc(label)}</span>'
            '<span style="flex:1;min-width:0">'
            f'<span style="display:flex;height:12px;width:{width:.3f}%">{"".join(parts)}</span></span>'
            f'<span style="width:6em;flex:none;text-align:right">{esc(fmt_us(d))}</span></div>')


def overview_html(profile: Any) -> str:
    """The overview block; "" for a profile without steps."""
    if not len(profile.steps()):
        return ""
    o = profile.overview()
    steps = o[o["step"] != "all"]
    if "rank" in o.columns:
        labels = [f"r{r} #{s}" for r, s in zip(steps["rank"], steps["step"])]
    else:
        labels = [f"step {s}" for s in steps["step"]]
    shown = steps.head(MAX_BARS)
    longest = float(shown["duration_us"].max()) if len(shown) else 0.0
    bars = [_bar(label, row, longest) for label, (_, row) in zip(labels, shown.iterrows())]
    if len(steps) > MAX_BARS:
        bars.append(f'<div class="nbprof-sub">{plural(len(steps) - MAX_BARS, "more step")}: p.overview()</div>')
    legend = " ".join(f'<span style="white-space:nowrap"><span style="display:inline-block;width:10px;height:10px;'
                      f'background:{_COLOR[c]}"></span> {_LABEL[c]}</span>' for c in CATEGORIES)
    has_device = bool(profile.summary.has_device)
    lines = []
    for _, total in o[o["step"] == "all"].iterrows():
        ranked = "rank" in o.columns
        who = f"rank {total['rank']}, " if ranked else ""
        n = int((steps["rank"] == total["rank"]).sum()) if ranked else len(steps)
        lines.append(f'<div class="nbprof-sub">{esc(who)}{"the one step" if n == 1 else f"all {n} steps"}, '
                     f'{esc(fmt_us(total["duration_us"]))}: '
                     f'{esc(_shares(total))}</div>')
        lines += [f'<div class="nbprof-finding">→ {esc(a)}</div>' for a in overview_advice(total, has_device)]
    return ('<div class="nbprof-overview" style="margin:6px 0">'
            '<div><b>Step time breakdown</b> <span class="nbprof-sub">(each instant counted once, '
            f'in the legend\'s order)</span></div><div style="margin:2px 0">{legend}</div>'
            f'{"".join(bars)}{"".join(lines)}</div>')


def overview_text(profile: Any) -> list[str]:
    """The overview in words for the text report: the shares over all steps and the advice."""
    if not len(profile.steps()):
        return []
    o = profile.overview()
    steps = o[o["step"] != "all"]
    out = []
    for _, total in o[o["step"] == "all"].iterrows():
        ranked = "rank" in o.columns
        n = int((steps["rank"] == total["rank"]).sum()) if ranked else len(steps)
        who = f"rank {total['rank']} " if ranked else ""
        out.append(f"{who}step time ({plural(n, 'step')}, {fmt_us(total['duration_us'])}): {_shares(total)}")
        out += [f"advice: {a}" for a in overview_advice(total, bool(profile.summary.has_device))]
    return out
