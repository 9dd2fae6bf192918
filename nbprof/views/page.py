"""A report as one standalone HTML file that opens offline with its tables and figures working.

A file of its own can carry what a notebook output should not: plotly.js (~4.8 MB) next to the
DataTables bundle, so the Timeline (and Flame) tab holds the interactive figure itself.
"""

from __future__ import annotations

import html
import json
import os
from typing import Any

from ..errors import OptionError

__all__ = ["standalone_html", "write_standalone_html"]

# Plotly draws at the size of its container; a figure in a tab hidden at load time has none, so
# each figure is drawn when its tab is first shown (and on window resize).
_FIGURE_JS = """
<script>
(function () {
  var pending = [];
  window.nbprofFigure = function (id, fig) { pending.push([id, fig]); draw(); };
  function draw() {
    pending = pending.filter(function (item) {
      var el = document.getElementById(item[0]);
      if (!el || el.offsetParent === null) return true;   // hidden: wait for its tab
      Plotly.newPlot(el, item[1].data, item[1].layout, item[1].config || {responsive: true});
      return false;
    });
  }
  document.addEventListener('change', function () { setTimeout(draw, 0); });
  window.addEventListener('load', draw);
})();
</script>
"""


def _figure_div(fig_json: dict[str, Any], div_id: str, height: int = 500) -> str:
    payload = json.dumps(fig_json, separators=(",", ":")).replace("</", "<\\/")
    return (
        f'<div id="{div_id}" style="width:100%;min-height:{height}px"></div>'
        f"<script>window.nbprofFigure({json.dumps(div_id)}, {payload});</script>"
    )


def standalone_html(result: Any, title: str | None = None) -> str:
    import plotly.offline

    from .figure import figure_json
    from .report import PythonReport, TorchReport

    report: TorchReport | PythonReport
    title = title or ("nbprof report" if result.kind == "torch" else "nbprof cProfile report")
    if result.kind == "torch":
        report = TorchReport(result)
        body_timeline = None
        if result.summary.events:
            fig = result.timeline()
            body_timeline = _figure_div(figure_json(fig), "nbprof-timeline", int(fig.layout.height or 500))
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
        f"<title>{html.escape(title)}</title>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<script>{plotly.offline.get_plotlyjs()}</script>{_FIGURE_JS}"
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
