"""What nbprof's docs generate at build time, and what lets the built site work offline.

- Generated blocks. A page holds ``<!-- NAME: begin -->`` ... ``<!-- NAME: end -->``; as the page is
  read, what is between the markers is replaced by ``GENERATORS[NAME]()``, made from the code
  itself: the flags table (``nbprof.run.flags.markdown_table``), the findings' kinds and thresholds
  (``nbprof.analysis.findings.kinds_markdown``), the API reference (one autodoc entry per name of
  ``nbprof.__all__``) and the columns of every table (the events schema ``nbprof.events.COLUMNS``,
  and each table's columns and dtypes as the code returns them for a recorded trace). The pages
  that GitHub also shows (findings.md, reference/flags.md) keep the generated text committed
  between their markers; tests check it equals the generator's (tests/test_messages.py,
  tests/test_findings.py), and the site always has the generator's.
- The sections' page lists. ``<!-- pages: SECTION -->`` in a section's index becomes a toctree of
  the pages at docs/'s top level that belong to it (``SECTION_OF``; a page not listed there is a
  how-to guide): a page added to docs/ joins the site with no edit here, and a page not yet
  written is no broken link.
- Plotly figures (``application/vnd.plotly.v1+json`` outputs of the tutorials) drawn by the
  plotly.js of the installed plotly package, copied into the build: JupyterLab draws that
  mimetype itself, a static page needs plotly.js, and it must not come from a CDN.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Callable

from docutils import nodes

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent
PLOTLY_MIME = "application/vnd.plotly.v1+json"

# docs/*.md pages and the section each belongs to; any other top-level page is a how-to guide
SECTION_OF = {
    "getting-started": None,  # in the index's own toctree
    "index": None,
    "cprofile": "howto",
    "findings": "reference",
    "architecture": "explanation",
    "differences": "explanation",
    "testing": "explanation",
    "gpu-check": "explanation",
    "performance": "explanation",
    "releasing": "explanation",
}
SECTION_ORDER = {"architecture": 0, "differences": 1, "testing": 2, "performance": 3}


# --- generated blocks ---------------------------------------------------------------------------

def flags_table() -> str:
    from nbprof.run.flags import markdown_table

    return markdown_table()


def kinds_table() -> str:
    from nbprof.analysis.findings import kinds_markdown

    return kinds_markdown()


def api_entries() -> str:
    """One autodoc entry per name of ``nbprof.__all__``, in its order (reStructuredText: autodoc
    writes its entries in it, so MyST hands the block to docutils as it is)."""
    import inspect

    import nbprof

    out = []
    for name in nbprof.__all__:
        obj = getattr(nbprof, name)
        if inspect.ismodule(obj):
            # automodule makes its module the current one: the entries after it are nbprof's again
            out.append(f".. automodule:: nbprof.{name}\n   :members:\n\n.. py:currentmodule:: nbprof")
        elif inspect.isclass(obj) and issubclass(obj, BaseException):
            out.append(f".. autoexception:: nbprof.{name}\n   :show-inheritance:")
        elif inspect.isclass(obj):
            out.append(f".. autoclass:: nbprof.{name}\n   :members:\n   :show-inheritance:")
        elif callable(obj):
            out.append(f".. autofunction:: nbprof.{name}")
        else:
            out.append(f".. py:data:: {name}\n   :module: nbprof\n   :value: {obj!r}\n\n   The installed version of nbprof.")
    return "```{eval-rst}\n" + "\n\n".join(out) + "\n```"


def _dtype(series: Any) -> str:
    return str(series.dtype)


def _columns_table(frame: Any) -> str:
    rows = ["| column | dtype |", "|---|---|"]
    rows += [f"| `{c}` | `{_dtype(frame[c])}` |" for c in frame.columns]
    return "\n".join(rows)


def events_columns() -> str:
    """The events table: its columns as ``nbprof.events.COLUMNS`` declares them, then those the
    analysis adds (``prof.events`` of a recorded trace holds both)."""
    from nbprof import load_trace
    from nbprof.events import COLUMNS, KINDS

    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    rows = ["| column | dtype | meaning | on events of kind | elsewhere | read from |", "|---|---|---|---|---|---|"]
    for c in COLUMNS:
        kinds, elsewhere = ("all", "") if c.kinds == KINDS else (", ".join(c.kinds), f"`{c.default!r}`")
        rows.append(f"| `{c.name}` | `{c.dtype}` | {cell(c.doc)} | {kinds} | {elsewhere} | `{cell(c.source)}` |")
    events = load_trace(ROOT / "nbprof" / "data" / "cnn_train_cuda.trace.json.gz", progress=False).events
    declared = {c.name for c in COLUMNS}
    added = [c for c in events.columns if c not in declared]
    rows += ["", "Added by the analysis (`nbprof.analysis.tree`):", "", "| column | dtype |", "|---|---|"]
    rows += [f"| `{c}` | `{_dtype(events[c])}` |" for c in added]
    return "\n".join(rows)


def _tables() -> list[tuple[str, Callable[[], Any]]]:
    """Every DataFrame a result gives, with how it is asked for: computed from traces shipped
    with nbprof (an H100 training step), a folder of two ranks (tests/data/ddp_gloo), a torch.compile
    CPU trace and a cProfile of a small function."""
    import cProfile

    import nbprof
    from nbprof.comparison import compare
    from nbprof.model import PythonProfile

    data = ROOT / "nbprof" / "data"
    torch_p = nbprof.load_trace(data / "cnn_train_cuda.trace.json.gz", progress=False)
    stack_p = nbprof.load_trace(data / "transformer_infer_stack.trace.json.gz", progress=False)
    compiled = nbprof.load_trace(ROOT / "tests" / "data" / "compile_cpu" / "trace.json.gz", progress=False)
    cluster = nbprof.load_trace(ROOT / "tests" / "data" / "ddp_gloo", workers=0, progress=False)

    def work() -> int:
        return sum(sorted(i * i for i in range(2000)))

    prof = cProfile.Profile()
    prof.runcall(work)
    prof.create_stats()
    py = PythonProfile(dict(prof.stats))  # type: ignore[attr-defined]
    snap = _snapshot()
    first = torch_p.allocations()
    t_us = float(first["alloc_us"].iloc[len(first) // 2]) if len(first) else 0.0
    device = str(first["device"].iloc[len(first) // 2]) if len(first) else "cpu"
    return [
        ("prof.key_averages()", torch_p.key_averages),
        ('prof.key_averages(group_by="shape")', lambda: torch_p.key_averages("shape")),
        ('prof.key_averages(group_by="stack")', lambda: stack_p.key_averages("stack")),
        ("prof.findings", lambda: torch_p.findings),
        ("prof.kernels()", torch_p.kernels),
        ("prof.ranges()", torch_p.ranges),
        ("prof.range_ops(label)", torch_p.range_ops),
        ("prof.allocations()", torch_p.allocations),
        ("prof.alive_at(t_us, device)", lambda: torch_p.alive_at(t_us, device)),
        ("prof.alive_at_end()", torch_p.alive_at_end),
        ('prof.alive_at_end(by="op")', lambda: torch_p.alive_at_end(by="op")),
        ("prof.memory_growth()", torch_p.memory_growth),
        ("prof.steps()", torch_p.steps),
        ("prof.overview()", torch_p.overview),
        ("prof.step_breakdown()", torch_p.step_breakdown),
        ("prof.modules()", torch_p.modules),
        ("prof.launches()", torch_p.launches),
        ("prof.queue_length()", torch_p.queue_length),
        ("prof.collectives()", torch_p.collectives),
        ("prof.device_stats.devices", lambda: torch_p.device_stats.devices),
        ("prof.compilation().frames", lambda: compiled.compilation().frames),
        ("prof.compilation().phases", lambda: compiled.compilation().phases),
        ("prof.compilation().graph_breaks", lambda: compiled.compilation().graph_breaks),
        ("prof.compilation().recompiles", lambda: compiled.compilation().recompiles),
        ("prof.compilation().per_frame", lambda: compiled.compilation().per_frame),
        ("prof.compilation().kernels", lambda: compiled.compilation().kernels),
        ("prof.compilation().lines", lambda: compiled.compilation().lines),
        ("cluster.ranks().table", lambda: cluster.ranks().table),
        ("cluster.ranks().hta_idle", lambda: cluster.ranks().hta_idle),
        ("cluster.key_averages(per_rank=True)", lambda: cluster.key_averages(per_rank=True)),
        ("cluster.collective_calls()", cluster.collective_calls),
        ('nbprof.compare(a, b).table', lambda: compare(torch_p, torch_p).table),
        ('nbprof.compare(a, b, by="kernel").table', lambda: compare(torch_p, torch_p, by="kernel").table),
        ('nbprof.compare(a, b, by="range").table', lambda: compare(torch_p, torch_p, by="range").table),
        ("snap.segments()", snap.segments),
        ('snap.blocks(at="end")', snap.blocks),
        ('snap.blocks(at="peak")', lambda: snap.blocks("peak")),
        ("snap.active_memory()", snap.active_memory),
        ("cp.stats", lambda: py.stats),
        ("cp.edges", lambda: py.edges),
        ("cp.callers(fn)", lambda: py.callers("work")),
        ("cp.callees(fn)", lambda: py.callees("work")),
        ("cp.call_tree()", py.call_tree),
        ("cp.actions()", py.actions),
        ("cp.action_stats()", py.action_stats),
        ("cp.findings", lambda: py.findings),
        ("prof.data_loading()", py.data_loading),
        ("prof.worker_stats()", py.worker_stats),
    ]


def _snapshot() -> Any:
    """A CUDA memory snapshot built by hand (tests/snapshots.py: torch's TypedDicts, its numbers
    counted in its docstring), read as a file ``_dump_snapshot`` wrote."""
    import importlib.util
    import tempfile

    import nbprof

    spec = importlib.util.spec_from_file_location("snapshots", ROOT / "tests" / "snapshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as folder:
        return nbprof.load_snapshot(module.write(module.hand_snapshot(), Path(folder) / "hand.pickle"))


def tables_columns() -> str:
    out = []
    for label, make in _tables():
        out += [f"### `{label}`", "", _columns_table(make()), ""]
    return "\n".join(out)


GENERATORS: dict[str, Callable[[], str]] = {
    "flags": flags_table,
    "kinds": kinds_table,
    "api": api_entries,
    "event-columns": events_columns,
    "table-columns": tables_columns,
}
_BLOCK = re.compile(r"(<!-- ([a-z-]+): begin -->\n)(.*?)(\n?<!-- \2: end -->)", re.S)


def _fill(match: re.Match[str]) -> str:
    name = match.group(2)
    if name not in GENERATORS:
        return match.group(0)
    return match.group(1) + GENERATORS[name]().strip() + "\n" + match.group(4).lstrip("\n")


def top_level_pages() -> list[str]:
    return sorted(p.stem for p in DOCS.glob("*.md"))


def section_pages(section: str) -> list[str]:
    pages = [p for p in top_level_pages() if SECTION_OF.get(p, "howto") == section]
    return sorted(pages, key=lambda p: (SECTION_ORDER.get(p, 99), p))


_PAGES = re.compile(r"<!-- pages: ([a-z]+) -->")


def _pages_toctree(match: re.Match[str]) -> str:
    pages = section_pages(match.group(1))
    if not pages:
        return ""
    return "```{toctree}\n:maxdepth: 1\n\n" + "\n".join(f"/{p}" for p in pages) + "\n```"


def generated_docs(app: Any) -> list[str]:
    """The pages with a generated block or page list: read again on every build, since what they
    show comes from the code and the folder, which Sphinx does not watch."""
    out = []
    for docname in app.env.found_docs:
        path = Path(app.env.doc2path(docname))
        if path.suffix == ".md" and ("<!-- pages: " in (text := path.read_text(encoding="utf-8"))
                                      or _BLOCK.search(text)):
            out.append(docname)
    return out


def on_env_get_outdated(app: Any, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    return generated_docs(app)


def on_source_read(app: Any, docname: str, source: list[str]) -> None:
    text = _BLOCK.sub(_fill, source[0])
    source[0] = _PAGES.sub(_pages_toctree, text)


# --- plotly figures, offline ---------------------------------------------------------------------

class PlotlyMimeRenderer:
    """myst-nb's mime renderer protocol (``myst_nb.core.render.MimeRenderPlugin``): a plotly
    figure output becomes a div and its JSON, drawn by _static/nbprof-plotly.js."""

    mime_priority_overrides = [("html", PLOTLY_MIME, 1)]

    @staticmethod
    def handle_mime(renderer: Any, data: Any, inline: bool) -> list[nodes.Element] | None:
        if inline or data.mime_type != PLOTLY_MIME:
            return None
        spec = data.content if isinstance(data.content, dict) else json.loads(data.content)
        payload = json.dumps(spec, separators=(",", ":")).replace("</", "<\\/")
        height = (spec.get("layout") or {}).get("height") or 450
        markup = (f'<div class="nbprof-plotly" style="width:100%;min-height:{int(height)}px"></div>'
                  f'<script type="{PLOTLY_MIME}" class="nbprof-plotly-spec">{payload}</script>')
        return [nodes.raw(text=markup, format="html", classes=["output", "text_html"])]


def _register_plotly_renderer() -> None:
    # myst-nb finds mime renderers through an entry point group only; the docs are not a package,
    # so the plugin list is extended here (read once per build, cached by myst-nb).
    from myst_nb.core import render

    found = render.load_mime_renders
    plugins = list(found()) + [PlotlyMimeRenderer]
    render.load_mime_renders = lambda: plugins


def on_page_context(app: Any, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    if 'class="nbprof-plotly"' in context.get("body", ""):
        app.add_js_file("plotly.min.js")
        app.add_js_file("nbprof-plotly.js")


def on_build_finished(app: Any, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        import plotly

        bundled = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
        shutil.copyfile(bundled, Path(app.outdir) / "_static" / "plotly.min.js")


def setup(app: Any) -> dict[str, Any]:
    _register_plotly_renderer()
    app.connect("source-read", on_source_read)
    app.connect("env-get-outdated", on_env_get_outdated)
    app.connect("html-page-context", on_page_context)
    app.connect("build-finished", on_build_finished)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


__all__ = ["GENERATORS", "SECTION_OF", "section_pages", "setup"]
