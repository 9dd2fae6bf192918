"""The tutorial notebooks, each run once per test session, for every check that reads them.

A tutorial takes 5-50 s to run, and each topic used to run six times per CI run (the students'
notebook under nbval, in the Binder environment and in the browser; the solutions under nbval, in
the Binder environment and for their exercise checks): 36 runs, the largest part of a CI run. Now
`TutorialRuns` runs each of the 12 notebooks once, on first use, and keeps the run:

- the students' notebooks run in real JupyterLab in headless Chromium, as a student runs them; the
  run records what the page drew (reports, tables, plots, widgets) and saves screenshots to
  tests/artifacts/notebooks/. Without Chromium they run with nbclient.
- the solutions run with nbclient (notebooks/build.py's `run`, which also recorded the outputs the
  notebooks keep).

The checks then read a run: nbval's output comparison (`nbval_differences`, what `pytest
--nbval-lax` checks, computed with nbval's own functions), the exercises' verdicts
(notebooks/build.py's `run_problems`), and what the browser drew. Every notebook runs in one copy
of notebooks/ under a temporary folder, so the files the notebooks write (traces/) never land in
the repository.
"""

from __future__ import annotations

import copy
import importlib.util
import shutil
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SANITIZE = NOTEBOOKS / "nbval_sanitize.cfg"
ARTIFACTS = Path(__file__).parent / "artifacts" / "notebooks"

# what the browser counts on a run page
REPORT = "div.nbprof-report"
TABLE = "table.dataTable"
PLOT = ".jp-OutputArea .js-plotly-plot .main-svg"
WIDGET = ".jupyter-widgets"
PAGE_ERRORS = ("Error displaying widget", "Javascript Error")

# the output fields and MIME types nbval leaves out of its comparison (nbval.plugin.IPyNbFile's
# skip_compare without --nbdime: images are not compared either)
NBVAL_SKIP_COMPARE = ("metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                      "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg")


def tutorial_notebooks() -> list[str]:
    """Paths relative to notebooks/: the students' notebooks, then the solutions."""
    names = sorted(p.name for p in NOTEBOOKS.glob("[0-9]*.ipynb"))
    return names + [f"solutions/{n}" for n in sorted(p.name for p in (NOTEBOOKS / "solutions").glob("[0-9]*.ipynb"))]


def copy_notebooks(dest: Path) -> Path:
    shutil.copytree(NOTEBOOKS, dest, ignore=shutil.ignore_patterns("traces", ".ipynb_checkpoints", "__pycache__"))
    return dest


def load_build() -> Any:
    """notebooks/build.py, which builds the notebooks and judges a run of one."""
    spec = importlib.util.spec_from_file_location("nbprof_notebook_build", NOTEBOOKS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class TutorialRun:
    """One run of a committed notebook: its cells with this run's outputs, and where it ran."""

    rel: str  # path relative to notebooks/
    reference: Any  # the committed notebook (nbformat), with the outputs nbval compares against
    ran: Any  # the same cells with this run's outputs
    runner: str  # "jupyterlab" or "nbclient"
    drawn: dict[str, int] = field(default_factory=dict)  # JupyterLab: selector -> elements on the page
    plot_heights_px: list[int] = field(default_factory=list)  # JupyterLab: each plotly output's height
    page_errors: list[str] = field(default_factory=list)  # JupyterLab: PAGE_ERRORS found in the page

    @property
    def solution(self) -> bool:
        return self.rel.startswith("solutions/")


class TutorialRuns:
    """Runs each tutorial notebook on first request and keeps the run for the session.

    JupyterLab and Chromium start with the first students' notebook and stop after the last one
    (or at the end of the session), so they are not held while the rest of the suite runs. They
    live in a thread of their own: Playwright's sync API marks its event loop as running in the
    thread that opened it, and under pytest-xdist other tests (another browser test among them)
    run on this worker between two tutorials; in this thread, their own ``sync_playwright()``
    would refuse to start ("using Playwright Sync API inside the asyncio loop")."""

    def __init__(self, workdir: Path, use_browser: bool):
        self.root = copy_notebooks(workdir / "notebooks")
        self.use_browser = use_browser
        self.build = load_build()
        self._runs: dict[str, TutorialRun] = {}
        self._lab: ExitStack | None = None
        self._server = self._context = None
        self._browser_thread: ThreadPoolExecutor | None = None

    def get(self, rel: str) -> TutorialRun:
        if rel not in self._runs:
            reference = nbformat.read(NOTEBOOKS / rel, as_version=4)
            if self.use_browser and not rel.startswith("solutions/"):
                if self._browser_thread is None:
                    self._browser_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tutorials-browser")
                self._runs[rel] = self._browser_thread.submit(self._run_in_jupyterlab, rel, reference).result()
                if all(n in self._runs for n in tutorial_notebooks() if not n.startswith("solutions/")):
                    self.close()
            else:
                ran = self.build.run(reference, cwd=(self.root / rel).parent)
                self._runs[rel] = TutorialRun(rel, reference, ran, "nbclient")
        return self._runs[rel]

    def close(self) -> None:
        if self._browser_thread is None:
            return
        if self._lab is not None:
            self._browser_thread.submit(self._lab.close).result()  # in the thread that opened them
            self._lab = self._server = self._context = None
        self._browser_thread.shutdown()
        self._browser_thread = None

    def _run_in_jupyterlab(self, rel: str, reference: Any) -> TutorialRun:
        from tests import lab

        if self._lab is None:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            self._lab = ExitStack()
            self._server = self._lab.enter_context(lab.jupyterlab(self.root))
            self._context = self._lab.enter_context(lab.browser(1400, 1000))
        page = lab.open_notebook(self._context, self._server, rel)
        try:
            lab.run_all(page, timeout_s=420)
            time.sleep(2)  # let plotly and the widget manager draw
            outputs = lab.cell_outputs(page)
            html = page.content()
            run = TutorialRun(
                rel, reference, _with_outputs(reference, outputs), "jupyterlab",
                drawn={sel: _count(page, sel) for sel in (REPORT, TABLE, PLOT, WIDGET)},
                plot_heights_px=page.evaluate(
                    "() => [...document.querySelectorAll('.jp-OutputArea .js-plotly-plot')]"
                    ".map(el => Math.round(el.getBoundingClientRect().height))"),
                page_errors=[e for e in PAGE_ERRORS if e in html],
            )
            _screenshots(page, Path(rel).stem)
            lab.shutdown_kernel(page)  # a kernel with torch loaded holds ~0.5 GB
        finally:
            page.close()
        return run


def _with_outputs(reference: Any, outputs: list[list[dict]]) -> Any:
    """The committed notebook with the outputs a JupyterLab page shows, one list per code cell."""
    ran = copy.deepcopy(reference)
    code = [c for c in ran.cells if c.cell_type == "code"]
    assert len(code) == len(outputs), f"{len(code)} code cells, {len(outputs)} output areas in the page"
    for cell, cell_outputs in zip(code, outputs):
        cell.outputs = [nbformat.from_dict(o) for o in cell_outputs]
        counts = [o.get("execution_count") for o in cell_outputs if o.get("output_type") == "execute_result"]
        cell.execution_count = counts[0] if counts else None
    nbformat.validate(ran)
    return ran


def _count(page: Any, selector: str) -> int:
    return page.evaluate("(s) => document.querySelectorAll(s).length", selector)


def _scroll_top(page: Any) -> None:
    page.evaluate("() => { for (const el of document.querySelectorAll('.jp-WindowedPanel-outer, .jp-Notebook'))"
                  " el.scrollTop = 0; }")
    time.sleep(0.5)


def _screenshots(page: Any, stem: str, part_height: int = 1600) -> None:
    """The whole notebook from the top, and the same in parts of a readable size."""
    from tests import lab

    _scroll_top(page)
    lab.full_screenshot(page, str(ARTIFACTS / f"{stem}.png"))  # collapses the sidebar, grows the viewport
    _scroll_top(page)
    page.screenshot(path=str(ARTIFACTS / f"{stem}.png"), full_page=True)
    width, height = page.viewport_size["width"], page.viewport_size["height"]
    for old in ARTIFACTS.glob(f"{stem}-part*.png"):
        old.unlink()
    for i, y in enumerate(range(0, height, part_height)):
        page.screenshot(path=str(ARTIFACTS / f"{stem}-part{i + 1}.png"),
                        clip={"x": 0, "y": y, "width": width, "height": min(part_height, height - y)})


# ------------------------------------------------------------------ nbval's check, on a run


def nbval_differences(reference: Any, ran: Any, *, lax: bool = True) -> list[str]:
    """What `pytest --nbval-lax --nbval-sanitize-with notebooks/nbval_sanitize.cfg` (or `--nbval`
    with ``lax=False``) reports for a run of ``reference``, with nbval's own marker parsing, stream
    coalescing and sanitizer patterns: a cell that raised, an unrun reference cell that stores
    outputs, and the cells nbval compares whose outputs differ after sanitizing (nbval compares,
    per output field and MIME type, the list of values: `IPyNbCell.compare_outputs`)."""
    from nbval.plugin import find_comment_markers, find_metadata_tags

    patterns = _sanitize_patterns()
    problems = []
    code = [(ref, out) for ref, out in zip(reference.cells, ran.cells) if ref.cell_type == "code"]
    for n, (ref, out) in enumerate(code):
        options: dict[str, bool] = defaultdict(bool, find_metadata_tags(ref.metadata))
        options.update(dict(find_comment_markers(ref.source)))
        options.setdefault("check", not lax)
        where = f"Cell {n} ({ref.get('id', '?')})"
        if options["skip"]:
            problems.append(f"{where}: NBVAL_SKIP: nbval would not run this cell, the shared run does")
            continue
        errors = [o for o in out.outputs if o.output_type == "error"]
        if errors and not options["check_exception"]:
            problems.append(f"{where}: {errors[0].ename}: {errors[0].evalue}")
            continue
        if ref.execution_count is None:
            if ref.outputs:
                problems.append(f"{where}: unrun reference cell has outputs")
            continue
        if options["check"]:
            want, got = _compared(ref.outputs, patterns), _compared(out.outputs, patterns)
            if want != got:
                problems.append(f"{where}: outputs differ\n  committed: {want}\n  this run:  {got}")
    return problems


def _sanitize_patterns() -> list[tuple[str, str]]:
    from nbval.plugin import get_sanitize_patterns

    return get_sanitize_patterns(SANITIZE.read_text(encoding="utf-8"))


def _compared(outputs: list, patterns: list[tuple[str, str]]) -> dict[str, list]:
    """Output field / MIME type -> the sanitized values nbval compares, in order."""
    import re

    from nbval.plugin import coalesce_streams, transform_streams_for_comparison

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            for regex, replace in patterns:
                value = re.sub(regex, replace, value)
        return value

    flat: dict[str, list] = defaultdict(list)
    for output in transform_streams_for_comparison(coalesce_streams(copy.deepcopy(outputs))):
        for key, value in output.items():
            if key in NBVAL_SKIP_COMPARE:
                continue
            if key == "data":
                for mime, data in value.items():
                    if mime not in NBVAL_SKIP_COMPARE:
                        flat[mime].append(clean(data))
            else:
                flat[key].append(clean(value))
    return dict(flat)
