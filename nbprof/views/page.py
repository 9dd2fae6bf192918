"""A report as one standalone HTML file that opens offline with its tables and figures working.

A file of its own can carry what a notebook output should not: plotly.js next to the DataTables
bundle, so the Timeline (and Flame) tab holds the interactive figure itself. Both are gzipped
(``views.assets``): plotly.js is 1.9 MB of the page instead of 4.8 MB.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from ..errors import OptionError
from ..format import esc, script_json
from .assets import UNZIP_JS, gzip_base64, script_nonce, script_open, with_nonce

__all__ = ["standalone_html", "write_standalone_html", "csp"]


def csp(nonce: str) -> str:
    """The page's Content-Security-Policy: scripts with its nonce only, plus what they need (the
    tables' library is a module imported from a blob: URL, its render functions are evaluated
    from strings; plotly.js is run by a script with the nonce); styles inline; images, fonts from
    data: and blob: URLs; nothing from the network, no plugins, frames, forms or <base>. Inline
    event handlers and javascript: URLs never run."""
    return ("default-src 'none'; "
            f"script-src 'nonce-{nonce}' 'unsafe-eval' blob:; "
            "style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src data: blob:; "
            "object-src 'none'; base-uri 'none'; form-action 'none'; frame-src 'none'; worker-src blob:")

# Plotly draws at the size of its container; a figure in a tab hidden at load time has none, so
# each figure is drawn when plotly.js is unpacked and its tab is first shown; a window resize
# resizes the drawn ones to their width (figures are not "responsive": views.figure).
_FIGURE_JS = """
<script>
(function () {
  var pending = [], drawn = [];
  window.nbprofFigure = function (id, fig, onDrawn) { pending.push([id, fig, onDrawn]); draw(); };
  function draw() {
    if (!window.Plotly) return;
    pending = pending.filter(function (item) {
      var el = document.getElementById(item[0]);
      if (!el || el.offsetParent === null) return true;   // hidden: wait for its tab
      Plotly.newPlot(el, item[1].data, item[1].layout, item[1].config);
      if (item[2]) item[2](el);
      drawn.push(el);
      return false;
    });
  }
  window.nbprofPlotlyReady.then(draw);
  document.addEventListener('change', function () { setTimeout(draw, 0); });
  window.addEventListener('load', draw);
  window.addEventListener('resize', function () {
    drawn.forEach(function (el) { if (el.offsetParent !== null) Plotly.Plots.resize(el); });
  });
})();
</script>
"""


def _plotly_js() -> str:
    """plotly.js, gzipped, run as a classic script once unpacked (it sets ``window.Plotly``), with
    the nonce of the script that unpacks it (the page's Content-Security-Policy)."""
    import plotly.offline

    return (f"{script_open()}{UNZIP_JS}\n(function () {{ var nonce = document.currentScript.nonce;\n"
            f"window.nbprofPlotlyReady = nbprofUnzip({gzip_base64(plotly.offline.get_plotlyjs())})"
            ".then(function (js) { var s = document.createElement('script'); if (nonce) s.nonce = nonce;"
            " s.textContent = js; document.head.appendChild(s); }); })();</script>")


def _figure_div(fig_json: dict[str, Any], div_id: str, height: int = 500, on_drawn: str = "") -> str:
    """A figure's div and the script that draws it; ``on_drawn``: a JS function of the drawn div."""
    payload = script_json(fig_json, separators=(",", ":"))
    return (
        f'<div id="{esc(div_id)}" style="width:100%;min-height:{height}px"></div>'
        f"{script_open()}window.nbprofFigure({script_json(div_id)}, {payload}{', ' + on_drawn if on_drawn else ''});</script>"
    )


def standalone_html(result: Any, title: str | None = None) -> str:
    """The report as one HTML file: its Content-Security-Policy runs only the scripts nbprof wrote
    (each carries this page's nonce), so no inline handler, ``javascript:`` URL or script element
    made from a trace's data could run, were any escape to fail (``nbprof.format``)."""
    nonce = secrets.token_urlsafe(18)
    with script_nonce(nonce):
        return _standalone_html(result, title, nonce)


def _standalone_html(result: Any, title: str | None, nonce: str) -> str:
    from .figure import figure_json
    from .report import PythonReport, TorchReport
    from .timeline import SELECT_CONFIG, STATIC_SELECTION_JS

    report: TorchReport | PythonReport
    title = title or {"torch": "nbprof report", "snapshot": "nbprof memory snapshot"}.get(result.kind,
                                                                                      "nbprof cProfile report")
    if result.kind == "snapshot":  # its chart zoomable (a plotly figure of the points drawn) in its first tab
        fig = result.memory_curve()
        chart = _figure_div(figure_json(fig), "nbprof-snapshot-chart", int(fig.layout.height or 380))
        body = result.report().html(include_library=True, panels={"Over time": chart})
    elif result.kind == "torch":
        torch_report: TorchReport = result.report()  # a folder of ranks: its ClusterReport
        report = torch_report
        body_timeline = None
        if result.summary.events and any(t.title == "Timeline" for t in torch_report.tabs):
            fig = result.timeline()
            # a span selected with plotly's box select: its duration and names, from the rects
            on_drawn = ("function (gd) { window.nbprofTimelineSelection(gd, "
                        "document.getElementById('nbprof-timeline-selection')); }")
            body_timeline = (f"{script_open()}{STATIC_SELECTION_JS}</script>"
                             + _figure_div(figure_json(fig, SELECT_CONFIG), "nbprof-timeline", int(fig.layout.height or 500),
                                           on_drawn)
                             + '<div id="nbprof-timeline-selection" style="font-size:12px;margin:6px 0"></div>')
        body = report.html(include_library=True, panels={"Timeline": body_timeline} if body_timeline else None)
    else:
        report = PythonReport(result)
        flame = None
        if len(result.stats):
            fig = result.flame()
            flame = _figure_div(figure_json(fig), "nbprof-flame", int(fig.layout.height or 500))
        body = report.html(include_library=True, panels={"Flame": flame} if flame else None)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp(nonce))}">'
        f"<title>{esc(title)}</title>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"{_plotly_js()}{with_nonce(_FIGURE_JS)}"
        "<style>body{margin:16px 24px;background:#fff}</style></head><body>"
        f"{body}</body></html>"
    )


def write_standalone_html(result: Any, path: str | os.PathLike, title: str | None = None) -> str:
    path = os.fspath(path)
    if not path.endswith((".html", ".htm")):
        raise OptionError(f"{path}: a report is written as .html")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise OptionError(f"{path}: the folder {folder} does not exist")
    with open(path, "w", encoding="utf-8") as f:
        f.write(standalone_html(result, title))
    return path
