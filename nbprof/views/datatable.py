"""Interactive tables: itables (DataTables), offline, with the static preview as fallback.

The DataFrame handed to itables keeps raw numbers, so a click on a header sorts by value; small
render functions humanize them for display only (µs/ms/s, B/KiB/MiB, bars for shares, long names
cut with the full name on hover): one per unit of ``views.table.Column``, the JavaScript twins of
``nbprof.format.formatter`` (same thresholds, same texts). The static preview of the first rows
(``views.table.static_html``) sits next to the interactive table and is swapped out when its
script runs, so the table still reads where scripts do not run (GitHub, untrusted notebooks).

DataTables itself comes from itables' offline bundle (no CDN), gzipped: ``library_html()`` once
per kernel session, before the first table.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import pandas as pd

from ..format import BYTE_UNITS, esc, script_json_text
from .assets import UNZIP_JS, gzip_base64, with_nonce
from .table import Column, static_html

__all__ = ["datatable_html", "library_html", "MAX_ROWS"]

MAX_ROWS = 5000  # more rows would make the notebook heavy; the DataFrame has them all

_JS_TIME_US = """function (d, type) {
  if (type !== 'display' && type !== 'filter') return d;
  if (d === null || d === undefined || Number.isNaN(d)) return '—';
  var a = Math.abs(d);
  if (a >= 1e6) return (d / 1e6).toFixed(3) + ' s';
  if (a >= 1e3) return (d / 1e3).toFixed(2) + ' ms';
  if (a === 0) return '0';
  return d.toFixed(1) + ' µs';
}"""
_JS_TIME_S = _JS_TIME_US.replace("var a = Math.abs(d);", "d = d * 1e6; var a = Math.abs(d);")
# fmt_bytes' twin, from the same table of units (format.BYTE_UNITS)
_JS_BYTES = """function (d, type) {
  if (type !== 'display' && type !== 'filter') return d;
  if (d === null || d === undefined || Number.isNaN(d)) return '—';
  var a = Math.abs(d);
%s
  return Math.trunc(d) + ' B';
}""" % "\n".join(f"  if (a >= {size}) return (d / {size}).toFixed(2) + ' {unit}';" for unit, size in BYTE_UNITS)
_JS_COUNT = """function (d, type) {
  if (type !== 'display') return d;
  if (d === null || d === undefined || Number.isNaN(Number(d))) return '—';
  return Number(d).toLocaleString('en-US');
}"""
# a plain number with two decimals (estimates such as blocks per SM)
_JS_DECIMAL = """function (d, type) {
  if (type !== 'display') return d;
  if (d === null || d === undefined || Number.isNaN(Number(d))) return '—';
  return Number(d).toFixed(2);
}"""
_JS_FLOPS = """function (d, type) {
  if (type !== 'display') return d;
  if (!d) return '—';
  var u = [['TFLOP', 1e12], ['GFLOP', 1e9], ['MFLOP', 1e6], ['kFLOP', 1e3]];
  for (var i = 0; i < u.length; i++) if (d >= u[i][1]) return (d / u[i][1]).toFixed(2) + ' ' + u[i][0];
  return Math.trunc(d) + ' FLOP';
}"""
# a share in [0, 1] (or more) as a bar and a percentage
_JS_SHARE = """function (d, type) {
  if (type !== 'display') return d;
  if (d === null || d === undefined || Number.isNaN(d)) return '—';
  var p = 100 * d, w = Math.max(0, Math.min(100, p)) * 0.6;
  return '<span class="nbprof-bar" style="display:inline-block;height:0.75em;vertical-align:middle;' +
         'margin-right:4px;background:#e8710a;width:' + w.toFixed(1) + 'px"></span>' + p.toFixed(1) + '%';
}"""
# The tables' one escape (``nbprof.format.esc``'s twin): a value as HTML text. Every render
# function that shows a value from the data goes through it, for display and for search (DataTables
# decodes a search text that holds "&" through innerHTML); nbprof's own markup (the share bar, the
# <span title> around a cut name) is the only HTML a cell holds.
_JS_ESC = """function (s) { return String(s).replace(/[&<>"']/g, function (c) {
    return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]; }); }"""

# text as it is (a kind, a rank, a grid, a collective's name): escaped, never read as HTML
_JS_TEXT = """function (d, type) {
  if (type !== 'display' && type !== 'filter') return d;
  if (d === null || d === undefined) return '';
  return ESC(d);
}"""

_JS_NAME = """function (d, type) {
  var esc = ESC;
  if (type !== 'display') return type === 'filter' ? esc(d) : d;
  var s = String(d), short = s.length > LIMIT ? s.slice(0, LIMIT - 1) + '…' : s;
  return '<span title="' + esc(s) + '">' + esc(short) + '</span>';
}"""

# a kernel's C++ signature, readable: no "void", no argument list, no namespaces (the full
# signature on hover); the Python twin is format.short_kernel_name
_JS_KERNEL = r"""function (d, type) {
  var esc = ESC;
  if (type !== 'display') return type === 'filter' ? esc(d) : d;
  var s = String(d), t = s.split('(anonymous namespace)::').join(''), depth = 0, cut = -1;
  if (t.indexOf('void ') === 0) {  // a C++ signature: its argument list goes
    t = t.slice(5);
    for (var i = 0; i < t.length; i++) {
      var c = t[i];
      if (c === '<') depth++;
      else if (c === '>') depth = Math.max(0, depth - 1);
      else if (c === '(' && depth === 0 && i > 0) { cut = i; break; }
    }
    if (cut > 0) t = t.slice(0, cut);
  }
  t = t.replace(/\b[A-Za-z_][A-Za-z0-9_]*::/g, '');
  var short = t.length > LIMIT ? t.slice(0, LIMIT - 1) + '…' : t;
  return '<span title="' + esc(s) + '">' + esc(short) + '</span>';
}"""

# "file:line(function)" with the directories cut to the last two (full text on hover)
_JS_LOCATION = """function (d, type) {
  var esc = ESC;
  if (type !== 'display') return type === 'filter' ? esc(d) : d;
  var s = String(d), m = s.match(/^(.*?):(\\d+)\\((.*)\\)$/), short = s;
  if (m && m[1].indexOf('/') >= 0) {
    var parts = m[1].split('/');
    if (parts.length > 3) short = '…/' + parts.slice(-2).join('/') + ':' + m[2] + '(' + m[3] + ')';
  }
  return '<span title="' + esc(s) + '">' + esc(short) + '</span>';
}"""

# a before/after ratio: "2.97x"; removed rows carry 1e300 ("gone"), added rows 0 ("new")
_JS_RATIO = """function (d, type) {
  if (type !== 'display') return d;
  if (d === null || d === undefined || Number.isNaN(d)) return '—';
  if (d >= 1e300) return 'gone';
  if (d === 0) return 'new';
  return d.toFixed(2) + 'x';
}"""

# pstats' ncalls ("8361/1": calls/primitive calls where a function recursed) as text, sorted by
# the total calls (its text would sort "9" after "10")
_JS_NCALLS = """function (d, type) {
  if (type === 'sort' || type === 'type') return parseInt(String(d).split('/')[0], 10);
  if (d === null || d === undefined) return '';
  return ESC(d);
}"""

_RENDERERS = {
    "time_us": _JS_TIME_US,
    "time_s": _JS_TIME_S,
    "bytes": _JS_BYTES,
    "count": _JS_COUNT,
    "decimal": _JS_DECIMAL,
    "flops": _JS_FLOPS,
    "share": _JS_SHARE,
    "ratio": _JS_RATIO,
}



def _with_esc(js: str) -> str:
    return js.replace("ESC", _JS_ESC)


def _signed(js: str) -> str:
    """A renderer that shows the magnitude with "+" / "−" / "±" in front (``format.signed``)."""
    return ("function (d, type) {\n  var f = " + js + ";\n  if (type !== 'display' && type !== 'filter') return d;\n"
            "  if (d === null || d === undefined || Number.isNaN(d)) return '—';\n"
            "  return (d > 0 ? '+' : d < 0 ? '−' : '±') + f(Math.abs(d), type);\n}")


def library_html() -> str:
    """itables' offline DataTables bundle (JS + CSS), gzipped (``views.assets``: 256 KB instead of
    968 KB): once per page. It sets the promise and sends the event that itables' table template
    waits for, as itables' own loader does (not its banner "is your notebook trusted?", which
    would show in our reports wherever scripts do not run)."""
    return with_nonce(_library_html())


@lru_cache(maxsize=1)
def _library_html() -> str:
    from importlib.resources import files

    from itables.javascript import _itables_ready_event, _itables_underscore_version

    bundle = files("itables.html")
    js = bundle.joinpath("dt_bundle.js").read_text(encoding="utf-8")
    css = bundle.joinpath("dt_bundle.css").read_text(encoding="utf-8")
    name, ready = _itables_underscore_version(), json.dumps(_itables_ready_event())
    return f"""<script>
{UNZIP_JS}
if (!window.{name}) {{
  window.{name} = Promise.all([nbprofUnzip({gzip_base64(js)}), nbprofUnzip({gzip_base64(css)})])
    .then(function (texts) {{
      var style = document.createElement('style');
      style.textContent = texts[1];
      document.head.appendChild(style);
      var url = URL.createObjectURL(new Blob([texts[0]], {{type: 'application/javascript'}}));
      return import(url).finally(function () {{ URL.revokeObjectURL(url); }});
    }});
  window.{name}.then(function () {{ window.dispatchEvent(new Event({ready})); }});
}}
</script>"""


def datatable_html(
    frame: pd.DataFrame,
    columns: list[Column],
    *,
    order: list[tuple[str, str]] | None = None,
    page_length: int = 20,
    caption: str | None = None,
) -> str:
    """The interactive table of ``frame`` (its rows in their order; at most MAX_ROWS)."""
    from itables import JavascriptFunction

    rows = frame.head(MAX_ROWS)
    # plain object columns (not categorical: itables would render categories itself, as HTML)
    data = pd.DataFrame({i: rows[c.key].to_numpy() for i, c in enumerate(columns)})
    # headers as HTML text (itables writes them as they are: allow_html below is for our renderers)
    data.columns = [esc(c.header) for c in columns]  # pstats has two "percall" columns
    defs: list[dict[str, Any]] = []
    for i, c in enumerate(columns):
        if c.unit in ("name", "kernel"):
            js = _JS_NAME if c.unit == "name" else _JS_KERNEL
            defs.append({"targets": [i], "render": JavascriptFunction(_with_esc(js.replace("LIMIT", str(c.width)))),
                         "className": "dt-left nbprof-name"})
        elif c.unit == "location":
            defs.append({"targets": [i], "render": JavascriptFunction(_with_esc(_JS_LOCATION)),
                         "className": "dt-left nbprof-name"})
        elif c.unit == "ncalls":
            defs.append({"targets": [i], "render": JavascriptFunction(_with_esc(_JS_NCALLS)),
                         "className": f"dt-{c.alignment}"})
        elif c.unit in _RENDERERS:
            js = _signed(_RENDERERS[c.unit]) if c.sign else _RENDERERS[c.unit]
            defs.append({"targets": [i], "render": JavascriptFunction(js), "className": f"dt-{c.alignment}"})
        else:  # text: shown as text, whatever it holds
            defs.append({"targets": [i], "render": JavascriptFunction(_with_esc(_JS_TEXT)),
                         "className": f"dt-{c.alignment}"})
    index = {c.key: i for i, c in enumerate(columns)}
    dt_order = [[index[k], d] for k, d in (order or []) if k in index]
    n = len(rows)
    if page_length and page_length < n:
        lengths = sorted({page_length, 50, 100})
        menu = [[*lengths, -1], [*[str(x) for x in lengths], "All"]]
        paging: dict[str, Any] = {"pageLength": page_length, "lengthMenu": menu}
    else:
        paging = {"paging": False}
    if len(frame) > MAX_ROWS:
        extra = f"the first {MAX_ROWS:,} of {len(frame):,} rows (the DataFrame has all)"
        caption = f"{caption} · {extra}" if caption else extra
    # One table for header and body (DataTables' scrollX draws a second header table that
    # drifts out of alignment); a wrapper scrolls wide tables instead.
    table = _itables_html(
        data,
        static_html(rows.head(page_length or len(rows)), columns, total=len(rows)),
        caption=esc(caption) if caption else None,
        connected=False,
        allow_html=True,
        showIndex=False,
        order=dt_order,
        columnDefs=defs,
        classes="display compact nowrap cell-border",
        style="margin:0;width:auto",
        autoWidth=False,
        maxBytes=0,
        maxColumns=0,
        layout={"topStart": "pageLength", "topEnd": "search", "bottomStart": "info", "bottomEnd": "paging"},
        warn_on_undocumented_option=False,
        # a click anywhere on a header sorts (itables' default keeps header text selectable,
        # so only the sort icon would)
        text_in_header_can_be_selected=False,
        **paging,
    )
    return f'<div class="nbprof-table" style="overflow-x:auto;max-width:100%">{table}</div>'



def _itables_html(data: pd.DataFrame, fallback: str, caption: str | None = None, **kwargs: Any) -> str:
    """itables' ``to_html_datatable``, with our own static preview (humanized like the
    interactive table) in place of itables' raw-number one. Uses itables' template functions
    (pinned: itables>=2.9,<3; tests/test_exported.py checks both renderings)."""
    from itables.javascript import (
        check_itable_arguments,
        check_table_id,
        get_itable_arguments,
        html_table_from_template,
    )
    from itables.typing import DTForITablesOptions

    # itables types its options as TypedDicts; ours are the same keys, in a plain dict
    kwargs["table_id"] = table_id = check_table_id(kwargs.pop("table_id", None), kwargs, df=data)  # type: ignore[arg-type]
    dt_args = get_itable_arguments(data, caption, **kwargs)
    dt_url = dt_args.pop("dt_url")
    connected = dt_args.pop("connected")
    logo = dt_args.pop("display_logo_when_loading", False)
    check_itable_arguments(dict(dt_args), DTForITablesOptions)
    # itables writes its arguments (the rows among them) as plain JSON into a <script>: a value
    # holding "</script>" or "<!--" would end or break it. A placeholder stands for the static
    # preview while the one JSON object after "let dt_args = " is escaped (format.script_json_text);
    # the preview goes in after, so nothing in it can be taken for that JSON.
    out = html_table_from_template(
        table_id=table_id, dt_url=dt_url, connected=connected, display_logo_when_loading=logo,
        kwargs=dt_args, fallback_html=_FALLBACK,
    )
    start = out.index(_ARGS) + len(_ARGS)
    _, end = json.JSONDecoder().raw_decode(out, start)
    out = out[:start] + script_json_text(out[start:end]) + out[end:]
    return with_nonce(out).replace(_FALLBACK, fallback, 1)


_ARGS = "let dt_args = "
_FALLBACK = "<!--nbprof: the static preview-->"
