"""Figures as mime bundles that do not depend on the user's plotly renderer settings.

A plotly ``Figure`` left to IPython displays through ``plotly.io.renderers.default``, which may be
"browser", "png" (needs kaleido) or a notebook renderer that puts megabytes of plotly.js in each
output. Our views return their own bundle instead:

- ``application/vnd.plotly.v1+json``: the figure as JSON (numpy arrays as base64 typed arrays)
  with its config. JupyterLab, Notebook 7, VS Code and Colab draw it with their own plotly.js.
- ``text/html``: a static rendering (an inline SVG, no JavaScript) for nbconvert, nbviewer and
  GitHub, which do not run the plotly mimetype.
- ``text/plain``: one line that says what the figure shows.
"""

from __future__ import annotations

import json
from typing import Any

from ..format import esc

__all__ = ["PLOTLY_MIME", "DEFAULT_CONFIG", "figure_json", "figure_bundle"]

PLOTLY_MIME = "application/vnd.plotly.v1+json"

DEFAULT_CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "responsive": True,
    "scrollZoom": False,  # the notebook keeps its scroll wheel; zoom with a drag, pan with shift
    "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"],
    "toImageButtonOptions": {"format": "png", "scale": 2},
}


def figure_json(fig: Any, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The figure as plotly's JSON (a plain dict), with ``config``: what the plotly mimetype holds.

    Goes through ``plotly.io.to_json`` so numpy arrays become base64 typed arrays
    (``{"dtype": "f8", "bdata": ...}``) instead of lists of decimal numbers."""
    import plotly.io as pio

    out = json.loads(pio.to_json(fig, validate=False, remove_uids=True))
    merged = dict(DEFAULT_CONFIG)
    merged.update(config or {})
    out["config"] = merged
    return out


def describe(fig: Any) -> str:
    """The one-line text of a figure: its ``layout.meta["description"]`` or its title."""
    meta = fig.layout.meta
    if isinstance(meta, dict) and meta.get("description"):
        return str(meta["description"])
    title = fig.layout.title.text if fig.layout.title is not None else None
    return str(title) if title else "plotly figure"


def figure_bundle(
    fig: Any,
    *,
    html: str | None = None,
    text: str | None = None,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A mime bundle for ``fig``: the plotly mimetype, ``text/plain`` and ``text/html``.

    ``html`` is the static rendering for front ends without plotly (an SVG, a table); without
    it, a short note that says what the interactive figure shows."""
    text = text if text is not None else describe(fig)
    if html is None:
        html = (
            '<div class="nbprof-figure" style="font-family:sans-serif;font-size:13px;color:#555">'
            f"{esc(text)} (an interactive plotly figure: it shows in JupyterLab, Jupyter Notebook 7, "
            "VS Code and Colab)</div>"
        )
    return {PLOTLY_MIME: figure_json(fig, config), "text/plain": text, "text/html": html}
