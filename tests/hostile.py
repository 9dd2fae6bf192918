"""Hostile traces and a browser that notices script: the fixtures of tests/test_hostile*.py.

A trace is data someone else wrote (a colleague's cluster run, a file attached to a bug report).
Every string nbprof reads from one ends up in a page; ``hostile_trace`` writes a chrome trace in
torch's format whose every string field holds a text of the test's choosing (``text(field)``), and
``Watch`` opens nbprof's outputs in headless Chromium with a hook installed before any script of
the page: the payloads call ``__pwned(...)``, and whatever ran (a call, an alert, an element with
an inline handler or a ``javascript:`` URL made from a name) is recorded.

The oracle for "shown as written" is the payload itself, compared with the page's text and
attributes after the normalization any HTML page applies (``visible``): never nbprof's own
escaping.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any, Callable, Iterable

# The canonical payloads: each runs ``__pwned(n)`` if a page treats it as markup or code.
PAYLOADS = (
    "</script><script>__pwned(1)</script>",
    "<img src=x onerror=__pwned(2)>",
    '" onmouseover="__pwned(3)" x="',
    "' onmouseover='__pwned(4)' x='",
    "`${__pwned(5)}`",
    "</style><img src=x onerror=__pwned(6)>",
    "\u2028__pwned(7)\u2029",
    "javascript:__pwned(8)",
    '<a href="javascript:__pwned(9)">link9</a>',
    "<!--<script>__pwned(10)</script>-->",
    "]]><svg onload=__pwned(11)>",
    "<svg><script>__pwned(12)</script></svg>",
    "&lt;img src=x onerror=__pwned(13)&gt;",
    "<b>bold</b><br><i>14</i>",
    "%{hovertext}<span style='color:red'>15</span>",
    "{{constructor.constructor('__pwned(16)')()}}",
    "<iframe srcdoc=\"<script>parent.__pwned(17)</script>\"></iframe>",
    "x\x00y<img src=x onerror=__pwned(18)>",
    "\U0001f525<details open ontoggle=__pwned(19)>",
    "<textarea></textarea><img src=x onerror=__pwned(20)>",
)

# every string field nbprof reads from a trace (hostile_trace's), and those a report shows as
# written (grid, block and shapes are shown as the trace's JSON text; the main thread's name, the
# process's, input types, concrete inputs, the device's name, the trace's and the backend appear
# nowhere; collectives and process groups in a folder's report)
FIELDS = ("op", "range", "module", "pyfunc", "kernel", "thread", "main_thread", "process", "process_label",
          "gpu_range", "grid", "block", "shapes", "input_type", "concrete", "collective", "pg", "pg_desc",
          "pg_ranks", "dtype", "device_name", "trace_name", "backend", "memcpy")
SHOWN = ("op", "range", "module", "pyfunc", "kernel", "thread")
# hostile_pstats's fields, and those its report shows
PSTATS_FIELDS = ("py_file", "py_func", "py_file2", "py_func2")
SHOWN_PSTATS = ("py_func", "py_func2")

PID, TID, STREAM = 1000, 1000, 7


def hostile_trace(text: Callable[[str], str], *, rank: Any = None, world_size: int = 2) -> dict[str, Any]:
    """A one-step CUDA training trace in torch's format whose string fields are ``text(field)``:
    a range with an op that allocates memory and launches a kernel (CUPTI's launch arguments), a
    memcpy, a module and a Python frame, a collective on the CPU and on the GPU, thread and process
    names; ``rank``: the trace's distributedInfo rank."""
    t = text
    ev: list[dict[str, Any]] = []

    def x(cat: str, name: str, ts: float, dur: float, pid: int = PID, tid: int = TID, **args: Any) -> None:
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args})

    ev.append({"ph": "M", "name": "thread_name", "pid": PID, "tid": TID, "args": {"name": t("main_thread")}})
    ev.append({"ph": "M", "name": "thread_name", "pid": PID, "tid": TID + 1, "args": {"name": t("thread")}})
    ev.append({"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": t("process")}})
    ev.append({"ph": "M", "name": "process_labels", "pid": PID, "tid": 0, "args": {"labels": t("process_label")}})
    x("user_annotation", "ProfilerStep#1", 0, 1000, **{"External id": 1})
    x("python_function", "nn.Module: " + t("module"), 5, 900, **{"Python id": 2, "Python parent id": None,
                                                                 "Python module id": 0})
    x("python_function", "model.py(12): " + t("pyfunc"), 8, 800, **{"Python id": 3, "Python parent id": 2})
    x("user_annotation", t("range"), 10, 700, **{"External id": 2})
    x("cpu_op", t("op"), 20, 300, **{"External id": 3, "Input Dims": [[2, 2], [t("shapes")]],
                                      "Input type": ["float", t("input_type")], "Concrete Inputs": ["", t("concrete")],
                                      "Python parent id": 3})
    ev.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": PID, "tid": TID, "ts": 25,
               "args": {"Total Reserved": 2 << 20, "Total Allocated": 4096, "Bytes": 4096, "Addr": 7,
                        "Device Id": 0, "Device Type": 1}})
    x("cuda_runtime", "cudaLaunchKernel", 30, 10, **{"External id": 3, "correlation": 1})
    x("kernel", t("kernel"), 50, 200, pid=0, tid=STREAM,
      **{"External id": 3, "correlation": 1, "device": 0, "stream": STREAM, "registers per thread": 32,
         "shared memory": 0, "blocks per SM": 0.5, "warps per SM": 2.0, "grid": t("grid"), "block": [t("block"), 1, 1],
         "est. achieved occupancy %": 6})
    x("gpu_user_annotation", t("gpu_range"), 50, 200, pid=0, tid=STREAM, **{"External id": 2})
    x("cpu_op", "aten::copy_", 400, 50, **{"External id": 4})
    x("cpu_op", "aten::add", 100, 50, tid=TID + 1, **{"External id": 6})  # on a thread with a name
    x("cuda_runtime", "cudaMemcpyAsync", 405, 10, **{"External id": 4, "correlation": 2})
    x("gpu_memcpy", "Memcpy HtoD " + t("memcpy"), 420, 30, pid=0, tid=STREAM,
      **{"External id": 4, "correlation": 2, "device": 0, "stream": STREAM, "bytes": 1 << 20})
    coll = {"Collective name": t("collective"), "Process Group Name": t("pg"), "Process Group Description": t("pg_desc"),
            "Process Group Ranks": t("pg_ranks"), "dtype": t("dtype"), "In msg nelems": 1024, "Out msg nelems": 1024,
            "Group size": world_size}
    x("cpu_op", "record_param_comms", 500, 100, **{"External id": 5, **coll})
    x("cuda_runtime", "cudaLaunchKernel", 510, 10, **{"External id": 5, "correlation": 3})
    x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 530, 300, pid=0, tid=20,
      **{"External id": 5, "correlation": 3, "device": 0, "stream": 20, **coll})
    doc: dict[str, Any] = {
        "schemaVersion": 1, "record_shapes": 1, "profile_memory": 1, "with_stack": 1, "with_modules": 1,
        "deviceProperties": [{"id": 0, "name": t("device_name"), "totalGlobalMem": 80 << 30, "numSms": 132}],
        "baseTimeNanoseconds": 0, "traceName": t("trace_name"), "traceEvents": ev,
    }
    if rank is not None:
        doc["distributedInfo"] = {"backend": t("backend"), "rank": rank, "world_size": world_size}
    return doc


def write_trace(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def hostile_folder(folder: Path, text: Callable[[str], str], names: Iterable[str] = ("a", "b")) -> Path:
    """Two ranks of ``hostile_trace``, in files named ``<name>.pt.trace.json`` (names may be hostile:
    any character but "/" and NUL is allowed in a file name)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank, name in enumerate(names):
        write_trace(folder / f"{name}.pt.trace.json", hostile_trace(text, rank=rank))
    return folder


def file_name_safe(s: str) -> str:
    """``s`` as a file name component: no "/" nor NUL, within the file system's 255 bytes."""
    s = s.replace("/", "\u2215").replace("\x00", "")
    while len(s.encode("utf-8")) > 180:
        s = s[:-1]
    return s or "x"


# ---------------------------------------------------------------------------------- the browser

# Installed before any script of the page runs (Playwright's add_init_script): a payload that
# runs calls __pwned (or alert/confirm/prompt, or writes document.cookie / location).
INIT_SCRIPT = r"""
(() => {
  const hits = [];
  Object.defineProperty(window, '__hits', {value: hits});
  const hit = (what) => { hits.push(String(what)); };
  window.__pwned = (n) => hit('__pwned(' + n + ')');
  for (const f of ['alert', 'confirm', 'prompt', 'print']) {
    window[f] = (m) => hit(f + '(' + m + ')');
  }
  // what the page's Content-Security-Policy blocked (nbprof's own scripts must never be)
  const blocked = [];
  Object.defineProperty(window, '__blocked', {value: blocked});
  document.addEventListener('securitypolicyviolation', (e) => {
    blocked.push(e.violatedDirective + ' ' + (e.blockedURI || '') + ' ' + (e.sample || '').slice(0, 60));
  });
})();
"""

# Side effects of markup made from a name, found in the DOM: an inline handler attribute
# (onerror=, onmouseover=, ...) or a javascript: URL on any element, a frame, object or embed.
# nbprof itself writes none of these.
SCAN_SCRIPT = r"""
() => {
  const found = [];
  const all = document.querySelectorAll('*');
  for (const el of all) {
    for (const a of el.attributes) {
      const name = a.name.toLowerCase(), value = a.value.replace(/[\s\u0000-\u001f]/g, '').toLowerCase();
      if (name.startsWith('on')) found.push(el.tagName + '[' + name + '=' + a.value.slice(0, 60) + ']');
      if (/^(href|src|xlink:href|action|formaction|data|srcdoc)$/.test(name) && value.startsWith('javascript:'))
        found.push(el.tagName + '[' + name + '=' + a.value.slice(0, 60) + ']');
      if (name === 'srcdoc') found.push(el.tagName + '[srcdoc]');
    }
    const tag = el.tagName.toLowerCase();
    if (['iframe', 'frame', 'object', 'embed'].includes(tag)) found.push(tag);
  }
  return found;
}
"""

# every piece of text a reader can see or hover: text nodes (SVG <title> included) and the
# attributes that hold names (title, aria-label)
TEXTS_SCRIPT = r"""
() => {
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const skip = new Set(['SCRIPT', 'STYLE']);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!skip.has(n.parentNode.nodeName.toUpperCase())) out.push(n.data);
  }
  for (const el of document.querySelectorAll('[title], [aria-label], [data-unformatted]')) {
    for (const a of ['title', 'aria-label', 'data-unformatted']) if (el.hasAttribute(a)) out.push(el.getAttribute(a));
  }
  return out;
}
"""


def visible(s: str) -> str:
    """What any HTML page shows of ``s``, whatever renders it: no control characters (the HTML
    parser drops NUL, pandas writes a newline as "\\n"), no white space (collapsed and wrapped)."""
    s = s.replace("\\n", "").replace("\\t", "").replace("\\r", "")
    return "".join(c for c in s if not (c.isspace() or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")))


class Watch:
    """A headless Chromium page per output, with the hook installed; ``hits()``: what ran."""

    def __init__(self, context: Any) -> None:
        self.context = context
        context.add_init_script(INIT_SCRIPT)
        self.dialogs: list[str] = []

    def open(self, path: Path, settle_ms: int = 400) -> Any:
        page = self.context.new_page()
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file://", "data:", "blob:"))
                   else r.abort())
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_timeout(settle_ms)
        return page

    @staticmethod
    def ran(page: Any) -> list[str]:
        """What ran in ``page``: calls of the hook, and markup made from names."""
        return list(page.evaluate("() => window.__hits")) + list(page.evaluate(SCAN_SCRIPT))

    @staticmethod
    def texts(page: Any) -> list[str]:
        return [visible(t) for t in page.evaluate(TEXTS_SCRIPT)]

    @staticmethod
    def hover_everything(page: Any) -> None:
        """Dispatch the events an attribute breakout would listen for on every element."""
        page.evaluate("""() => { for (const el of document.querySelectorAll('body *')) {
            for (const t of ['mouseover', 'mouseenter', 'focus', 'animationstart'])
              el.dispatchEvent(new Event(t, {bubbles: false})); } }""")


def shown(texts: list[str], value: str) -> bool:
    """``value`` reads somewhere in the page's texts (its visible form; empty: trivially)."""
    want = visible(value)
    return not want or any(want in t for t in texts)


# ------------------------------------------------------------------------ pages of the outputs

_PLOTLY_JS: Path | None = None


def plotly_js() -> Path:
    """The installed plotly's plotly.min.js (what JupyterLab's plotly renderer runs)."""
    global _PLOTLY_JS
    if _PLOTLY_JS is None:
        import plotly

        _PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    return _PLOTLY_JS


def _data(value: Any) -> str:
    """The harness's own JSON in a script (not nbprof's escape: the test's infrastructure)."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def outputs_page(path: Path, outputs: list[dict[str, Any]]) -> Path:
    """Notebook outputs (mime bundles) in one page, as a trusted JupyterLab shows them: each
    ``text/html`` as HTML (its scripts run), each plotly figure drawn by plotly.js from its JSON,
    with itables' library loaded first."""
    from nbprof.views.datatable import library_html

    body, figures = [], []
    for i, bundle in enumerate(outputs):
        if "text/html" in bundle:
            body.append(f"<div class='output'>{bundle['text/html']}</div>")
        spec = bundle.get("application/vnd.plotly.v1+json")
        if spec is not None:
            body.append(f"<div class='output plotly' id='fig{i}'></div>")
            figures.append((f"fig{i}", spec))
    draw = "".join(f"Plotly.newPlot({_data(div)}, ...(s => [s.data, s.layout, s.config])({_data(spec)}));"
                   for div, spec in figures)
    path.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'>"
                    f"<script src='{plotly_js().as_uri()}'></script></head><body>{library_html()}{''.join(body)}"
                    f"<script>{draw}</script></body></html>", encoding="utf-8")
    return path


def hostile_pstats(text: Callable[[str], str]) -> Any:
    """A cProfile profile (pstats' raw dict) whose files and functions are ``text(field)``: a
    function in a file calling another in a second file."""
    from nbprof.model import PythonProfile

    a = (text("py_file"), 1, text("py_func"))
    b = ("/home/x/" + text("py_file2"), 2, text("py_func2"))
    raw = {a: (1, 1, 0.4, 1.0, {}), b: (3, 3, 0.6, 0.6, {a: (3, 3, 0.6, 0.6)})}
    return PythonProfile(raw)


# The live timeline's browser code (views/live_timeline.js) with a model whose messages the
# kernel side (LiveTimelineState.answer) answers in this process through Playwright.
_LIVE_HARNESS = r"""
async ([src, spec, config]) => {
  const handlers = {};
  const model = {
    get: (k) => ({spec, config})[k],
    on: (ev, cb) => { (handlers[ev] = handlers[ev] || []).push(cb); },
    off: (ev, cb) => { handlers[ev] = (handlers[ev] || []).filter((f) => f !== cb); },
    send: (msg) => { window.nbprofKernel(msg).then((reply) => {
      if (reply) for (const cb of [...(handlers['msg:custom'] || [])]) cb(reply); }); },
  };
  const url = URL.createObjectURL(new Blob([src], {type: 'text/javascript'}));
  const mod = await import(url);
  mod.default.render({model, el: document.getElementById('live')});
}
"""


def open_live(watch: Watch, profile: Any, path: Path) -> Any:
    """The live timeline widget of ``profile`` in a page, drawn, zoomed, searched for the
    profile's first op name and a span selected; the page."""
    from nbprof.views import live_timeline as live
    from nbprof.views.figure import DEFAULT_CONFIG
    from nbprof.views.timeline import prepare_timeline

    state = live.LiveTimelineState(profile, prepare_timeline(profile), python=False, max_rects=20_000, height=None)
    path.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'>"
                    f"<script src='{plotly_js().as_uri()}'></script></head><body><div id='live'></div></body></html>",
                    encoding="utf-8")
    page = watch.context.new_page()
    page.on("dialog", lambda d: (watch.dialogs.append(d.message), d.dismiss()))
    page.expose_function("nbprofKernel", lambda msg: json.loads(json.dumps(state.answer(msg), default=float)))
    page.goto(path.as_uri(), wait_until="load")
    src = (Path(live.__file__).with_name("live_timeline.js")).read_text(encoding="utf-8")
    config = dict(DEFAULT_CONFIG, modeBarButtonsToRemove=["lasso2d", "select2d", "autoScale2d"])
    page.evaluate(_LIVE_HARNESS, [src, state.spec(), config])
    page.wait_for_function("() => document.querySelector('.nbprof-live')?.dataset.rendered === '0'", timeout=30_000)
    plot = "document.querySelector('.nbprof-live-plot')"
    # zoom into the first half: the kernel redraws that window
    page.evaluate(f"() => {{ const gd = {plot}, r = gd._fullLayout.xaxis.range;"
                  "Plotly.relayout(gd, {'xaxis.range': [r[0], (r[0] + r[1]) / 2]}); }")
    page.wait_for_function("() => document.querySelector('.nbprof-live').dataset.rendered !== '0'", timeout=30_000)
    name = str(profile.events["name"].iloc[0])
    page.fill(".nbprof-live-search", name)
    page.wait_for_function("() => document.querySelector('.nbprof-live-find').textContent.length > 0", timeout=30_000)
    page.evaluate(f"() => {{ const gd = {plot}; gd.emit('plotly_selected', {{range: {{x: [-1e9, 1e9]}}}}); }}")
    page.wait_for_function("() => document.querySelector('.nbprof-live-sel table')", timeout=30_000)
    return page
