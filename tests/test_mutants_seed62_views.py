"""What seed 62's sample of mutants (docs/testing.md) showed no test held in the views, each against
an answer of its own: the standalone page's timeline selecting a span (its scripts run by node, the
times counted by hand from a trace built by hand), the Operators tab's Self CPU % (each op's self
time over the profile's, by hand), a live snapshot chart zoomed on a history without times (the
entries the browser asked for), and the static timeline held to the rectangles its caller allows."""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET

import nbprof

from .snapshots import hand_snapshot, write
from .synthetic import Trace
from .test_mutants_views3 import dt_tables, needs_node, panels


def _nested_and_after(tmp_path):
    """One thread: aten::outer 0-100 µs around aten::inner 10-30 µs, then aten::c 200-300 µs.
    Self CPU: outer 80, inner 20, c 100 µs; 200 µs in all."""
    t = Trace()
    t.op("aten::outer", 0, 100)
    t.op("aten::inner", 10, 20)
    t.op("aten::c", 200, 100)
    return t.load(tmp_path)


# ---------------------------------------------------------------- views.page._standalone_html

# A browser's part, in node: the page's elements (each visible), plotly's newPlot keeping the data
# it was given as the drawn div's _fullData (typed arrays decoded as plotly.js decodes them) and
# the handlers the page puts on it; then a box select of [A, B] ms, and what the selection div reads.
_BROWSER_JS = r"""
var fs = require('fs');
var scripts = JSON.parse(fs.readFileSync(process.argv[1], 'utf8'));
var A = Number(process.argv[2]), B = Number(process.argv[3]);
var byId = {};
function Element(tag, id) {
  this.tag = tag; this.id = id; this.children = []; this.attrs = {}; this.handlers = {};
  this.offsetParent = {}; this.textContent = '';
}
Element.prototype.append = function () {
  for (var i = 0; i < arguments.length; i++) {
    var c = arguments[i];
    if (c instanceof Element && c.tag === 'thead') this.tHead = c;
    this.children.push(c);
  }
};
Element.prototype.replaceChildren = function () { this.children = []; this.append.apply(this, arguments); };
Element.prototype.setAttribute = function (k, v) { this.attrs[k] = String(v); };
Element.prototype.on = function (ev, fn) { this.handlers[ev] = fn; };
Element.prototype.text = function () {
  return (this.textContent || '') + this.children.map(function (c) {
    return c instanceof Element ? c.text() : String(c); }).join('');
};
Element.prototype.all = function (tag) {
  var out = [];
  this.children.forEach(function (c) {
    if (!(c instanceof Element)) return;
    if (c.tag === tag) out.push(c);
    out = out.concat(c.all(tag));
  });
  return out;
};
global.window = global;
global.document = {
  getElementById: function (id) { return byId[id] || (byId[id] = new Element('div', id)); },
  createElement: function (tag) { return new Element(tag); },
  addEventListener: function () {}
};
global.addEventListener = function () {};
function decode(v) {
  if (Array.isArray(v)) return v.map(decode);
  if (!v || typeof v !== 'object') return v;
  if (typeof v.bdata === 'string') {
    var kinds = {f8: Float64Array, f4: Float32Array, i1: Int8Array, u1: Uint8Array, i2: Int16Array,
                 u2: Uint16Array, i4: Int32Array, u4: Uint32Array};
    var bytes = Uint8Array.from(Buffer.from(v.bdata, 'base64'));
    var flat = Array.from(new kinds[v.dtype](bytes.buffer));
    if (!v.shape) return flat;
    var dims = String(v.shape).split(',').map(Number), cols = dims[1], rows = [];
    for (var r = 0; r < dims[0]; r++) rows.push(flat.slice(r * cols, (r + 1) * cols));
    return rows;
  }
  var o = {};
  for (var k in v) o[k] = decode(v[k]);
  return o;
}
window.Plotly = {newPlot: function (el, data) { el._fullData = decode(data); },
                 Plots: {resize: function () {}}};
window.nbprofPlotlyReady = Promise.resolve();
scripts.forEach(function (s) { (0, eval)(s); });
var gd = byId['nbprof-timeline'];
var out = {drawn: !!gd._fullData, selectable: !!gd.handlers.plotly_selected};
if (gd.handlers.plotly_selected) gd.handlers.plotly_selected({range: {x: [A, B]}});
var sel = byId['nbprof-timeline-selection'];
out.head = sel ? (sel.children[0] ? sel.children[0].text() : '') : null;
out.rows = sel ? sel.all('tr').slice(1).map(function (tr) { return tr.all('td').map(function (td) {
  return [td.attrs.title || null, td.text()]; }); }) : [];
process.stdout.write(JSON.stringify(out));
"""


@needs_node
def test_a_span_selected_on_the_standalone_pages_timeline_lists_the_time_drawn_in_it(tmp_path):
    """The page a profile's to_html writes, its own scripts run (no kernel): once its timeline is
    drawn, a box select of 0.020-0.250 ms fills the line under the figure with the span and the
    time each name is drawn in it, clipped to the span: outer 20-100 µs (80.0 µs), c 200-250 µs
    (50.0 µs), inner 20-30 µs (10.0 µs); three rects in a 230.0 µs span."""
    p = _nested_and_after(tmp_path)
    page = open(p.to_html(tmp_path / "r.html"), encoding="utf-8").read()
    bodies = re.findall(r"<script[^>]*>(.*?)</script>", page, flags=re.S)
    wanted = ("window.nbprofFigure = function", "window.nbprofTimelineSelection = function",
              'window.nbprofFigure("nbprof-timeline",')
    scripts = [next(s for s in bodies if w in s) for w in wanted]
    (tmp_path / "scripts.json").write_text(json.dumps(scripts))
    got = json.loads(subprocess.run(["node", "-e", _BROWSER_JS, str(tmp_path / "scripts.json"), "0.02", "0.25"],
                                    capture_output=True, text=True, timeout=60, check=True).stdout)
    assert got["drawn"] and got["selectable"]
    assert got["head"] == "Selection 0.020 \u2013 0.250 ms \u00b7 230.0 \u00b5s \u00b7 3 rects"
    assert got["rows"] == [[["aten::outer", "aten::outer"], [None, "80.0 \u00b5s"]],
                           [["aten::c", "aten::c"], [None, "50.0 \u00b5s"]],
                           [["aten::inner", "aten::inner"], [None, "10.0 \u00b5s"]]]


# ---------------------------------------------------------------- views.tabs.operators._render


def test_the_operators_tab_gives_each_ops_part_of_the_self_cpu_time(tmp_path):
    """Self CPU % of each row: its self time over the profile's 200 µs, by hand: c 100 µs (0.5),
    outer 80 µs (0.4), inner 20 µs (0.1); the table sorted by self CPU. The tab drawn by a renderer
    built now is the report's."""
    from nbprof.views.tabs.operators import _render

    p = _nested_and_after(tmp_path)
    (table,) = dt_tables(panels(p.report().html(include_library=False))["Operators"])
    assert table["headers"][:3] == ["Name", "Self CPU %", "Self CPU"]
    assert [r[:3] for r in table["rows"]] == [["aten::c", 0.5, 100.0], ["aten::outer", 0.4, 80.0],
                                              ["aten::inner", 0.1, 20.0]]
    assert dt_tables(_render("op")(p.report()))[0]["rows"] == table["rows"]


# ---------------------------------------------------------------- views.snapshot_chart.SnapshotChartState.spec


def test_a_live_snapshot_chart_without_times_zooms_to_the_entries_asked(tmp_path):
    """A history whose entries carry no time: the chart's x is the entry's position. A zoom on
    entries 2-6 (the browser's message, in the axis' own units) is drawn over entries 2-6."""
    from nbprof.views.snapshot_chart import SnapshotChartState

    snap = hand_snapshot()
    for e in snap["device_traces"][0]:
        e.pop("time_us")
    state = SnapshotChartState(nbprof.load_snapshot(write(snap, tmp_path / "s.pickle")))
    reply = state.answer({"type": "window", "x0": 2, "x1": 6, "width_px": 400, "seq": 1})
    axis = reply["spec"]["layout"]["xaxis"]
    assert axis["title"]["text"] == "history entry"
    assert axis["range"] == [2.0, 6.0]


# ---------------------------------------------------------------- views.timeline.timeline_svg


def test_the_static_timeline_draws_no_more_rects_than_its_caller_allows(tmp_path):
    """Twelve 10 µs ops 10 µs apart, each a few pixels wide: all twelve drawn at the default bound;
    at max_rects=4 they are merged into at most four rectangles that still count all twelve."""
    from nbprof.views.timeline import timeline_svg

    t = Trace()
    for i in range(12):
        t.op(f"aten::op{i % 3}", 20 * i, 10)
    p = t.load(tmp_path)
    ns = "{http://www.w3.org/2000/svg}"

    def drawn(svg: str) -> list[str]:  # each event rectangle's tooltip
        return [r.find(ns + "title").text for r in ET.fromstring(svg).iter(ns + "rect")
                if r.find(ns + "title") is not None]

    assert len(drawn(timeline_svg(p))) == 12
    tips = drawn(timeline_svg(p, max_rects=4))
    assert 1 <= len(tips) <= 4
    counts = [int(m.group(1)) if (m := re.match(r"(\d+) merged events", tip)) else 1 for tip in tips]
    assert sum(counts) == 12
