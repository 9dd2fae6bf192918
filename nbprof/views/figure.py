"""The display contract of every view, and figures that keep it.

The rule: every view nbprof returns renders itself through ``_repr_mimebundle_`` with
``text/plain`` (one line or a table, for terminals and diffs), ``text/html`` (static: reads in
nbconvert, nbviewer and GitHub, where no script runs) and its interactive part where it has one:

- tables and reports (``result.report()``, ``nbprof.compare(...)``, the profiles themselves):
  ``text()`` and ``html()`` (itables' sortable tables over a static preview);
- figures (``result.timeline()``, ``result.memory_curve()``, ``result.flame()``): a plotly
  ``Figure`` subclass (``rendering_figure``) that is still a ``Figure`` for users who restyle or
  save it (``update_layout``, ``write_html``, ``.data``), and that brings its own static drawing.

Why figures render themselves: a plotly ``Figure`` left to IPython displays through
``plotly.io.renderers.default``, which may be "browser", "png" (needs kaleido) or a notebook
renderer that puts megabytes of plotly.js in each output. Ours return their own bundle instead:

- ``application/vnd.plotly.v1+json``: the figure as JSON (numpy arrays as base64 typed arrays)
  with its config. JupyterLab, Notebook 7 and VS Code draw it with their own plotly.js.
- ``text/html``: a static rendering (an inline SVG, no JavaScript) for nbconvert, nbviewer and
  GitHub, which do not run the plotly mimetype. In Colab, which draws ``text/html`` (scripts run,
  each output in a frame of its own, with the internet) but not the plotly mimetype, the
  interactive figure instead, with plotly.js from plotly's CDN: what plotly's own "colab"
  renderer emits, and how it tells Colab (``google.colab`` imported).
- ``text/plain``: one line that says what the figure shows.
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from typing import Any, Callable

from ..format import esc

__all__ = ["PLOTLY_MIME", "DEFAULT_CONFIG", "figure_json", "figure_bundle", "rendering_figure", "drawing_html",
           "DRAWING_CSS"]

PLOTLY_MIME = "application/vnd.plotly.v1+json"

DEFAULT_CONFIG: dict[str, Any] = {
    "displaylogo": False,
    # not responsive: a responsive figure sizes itself to its container's height on each window
    # resize, and a notebook output has no height of its own: the timeline (and the flame icicle)
    # collapsed to 29 px after one resize in JupyterLab 4.6 and Notebook 7.6 (measured,
    # tests/test_frontends.py). Their plotly renderer resizes a figure to the output's width
    # itself; the height stays the layout's.
    "responsive": False,
    "scrollZoom": False,  # the notebook keeps its scroll wheel; zoom with a drag, pan with shift
    "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"],
    "toImageButtonOptions": {"format": "png", "scale": 2},
}


# A drawing is ``hidden`` until this style shows it. Where outputs are sanitized (a notebook opened
# untrusted in JupyterLab or Notebook 7: no <style>, no <script>, no SVG, but ``hidden="hidden"``
# kept; an empty ``hidden`` is dropped) the SVG's elements go and their text stays: the timeline's 300 tooltips became a
# 31k-character, 5,500 px block of text (measured). Hidden, the drawing goes with its text, and a
# line (shown only where this style is missing) says why.
DRAWING_CSS = ".nbprof-drawing{display:block}.nbprof-unstyled{display:none}"


def drawing_html(svg: str, what: str, *, style: bool = True) -> str:
    """A static drawing (an inline SVG) that disappears cleanly where outputs are sanitized, and
    a line that says so there. ``what`` names it ("the timeline"); ``style``: include
    ``DRAWING_CSS`` (an output of its own; a report has it in its style already)."""
    note = (f'<div class="nbprof-unstyled" style="color:#666;font-size:12px">{esc(what[:1].upper() + what[1:])} '
            "is a drawing that shows once the notebook is trusted (or the cell runs again): this output "
            "is shown without its styles.</div>")
    css = f"<style>{DRAWING_CSS}</style>" if style else ""
    return f'{css}<div class="nbprof-drawing" style="max-width:100%;overflow-x:auto" hidden="hidden">{svg}</div>{note}'


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


def in_colab() -> bool:
    """Running in Google Colab (plotly's renderers tell it the same way)."""
    return "google.colab" in sys.modules


def colab_html(fig_json: dict[str, Any]) -> str:
    """The interactive figure as ``text/html`` for Colab: a div and plotly.js from plotly's CDN
    (pinned to the plotly.js version of the installed plotly, with its integrity hash)."""
    import plotly.io as pio

    spec = {"data": fig_json.get("data", []), "layout": fig_json.get("layout", {})}
    return pio.to_html(spec, config=fig_json.get("config"), include_plotlyjs="cdn", full_html=False,
                       validate=False)


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
    it, a short note that says what the interactive figure shows. In Colab, the interactive
    figure (:func:`colab_html`) in its place."""
    text = text if text is not None else describe(fig)
    spec = figure_json(fig, config)
    if in_colab():
        html = colab_html(spec)
    elif html is None:
        html = (
            '<div class="nbprof-figure" style="font-family:sans-serif;font-size:13px;color:#555">'
            f"{esc(text)} (an interactive plotly figure: it shows in JupyterLab, Jupyter Notebook 7, "
            "VS Code and Colab)</div>"
        )
    return {PLOTLY_MIME: spec, "text/plain": text, "text/html": html}


def rendering_figure(
    spec: dict[str, Any],
    *,
    html: Callable[[], str | None] | None = None,
    text: str | Callable[[], str] | None = None,
    config: dict[str, Any] | None = None,
) -> Any:
    """A plotly ``Figure`` of ``spec`` (``{"data": [...], "layout": {...}}``, not validated: plotly's
    validation costs ~25 ms per figure, whatever its size; the tests validate each figure once)
    that renders itself with :func:`figure_bundle`. ``html`` draws its static rendering (called
    only when displayed), ``text`` is its line of text; ``config``: plotly's config over
    ``DEFAULT_CONFIG``."""
    layout = spec.get("layout")
    if isinstance(layout, dict) and isinstance(layout.get("template"), str):  # a name: what it names
        import plotly.io as pio

        spec = {**spec, "layout": {**layout, "template": pio.templates[layout["template"]].to_plotly_json()}}
    fig = _figure_class()(spec, _validate=False)
    # built unvalidated (fast), then validated as any plotly figure is: later changes, nbprof's or
    # the user's (``update_layout(template="plotly_dark")``), are checked and resolved, and
    # ``write_html`` / ``plotly.io.to_html`` read a template, never a bare name
    fig._validate = True
    fig._layout_obj._validate = True
    fig._nbprof_html = html
    fig._nbprof_text = text
    fig._nbprof_config = config
    return fig


@lru_cache(maxsize=None)
def _figure_class() -> type:
    """The ``Figure`` subclass, made on first use (importing plotly costs ~0.3 s: not at
    ``%load_ext``)."""
    import plotly.graph_objects as go

    class Figure(go.Figure):
        """A plotly ``Figure`` that renders itself (``views.figure``): the plotly mimetype, its
        static drawing as ``text/html`` and a line of ``text/plain``, whatever plotly's renderer."""

        def _repr_mimebundle_(self, include: Any = None, exclude: Any = None, **kwargs: Any) -> dict[str, Any]:
            draw = getattr(self, "_nbprof_html", None)
            text = getattr(self, "_nbprof_text", None)
            bundle = figure_bundle(self, html=draw() if draw and not in_colab() else None, text=text() if callable(text) else text,
                                   config=getattr(self, "_nbprof_config", None))
            if include:
                bundle = {k: v for k, v in bundle.items() if k in include}
            if exclude:
                bundle = {k: v for k, v in bundle.items() if k not in exclude}
            return bundle

        def _repr_html_(self) -> str:
            return self._repr_mimebundle_().get("text/html", "")

        # plotly's own _ipython_display_ would go through plotly.io.show: IPython then uses
        # _repr_mimebundle_ above
        _ipython_display_ = None

    Figure.__module__ = __name__
    Figure.__qualname__ = "Figure"
    return Figure
