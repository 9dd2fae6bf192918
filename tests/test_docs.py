"""The documentation site (docs/, Sphinx + MyST-NB + furo) built as CI builds it, then opened in
headless Chromium with the network refused, as a reader offline would open it.

The build is the command README and scripts/test.sh --all run (warnings are errors); it executes
the eight tutorials once and caches them (docs/_build/.jupyter_cache), so a build made earlier in
the same run (scripts/test.sh --all builds before pytest) leaves Sphinx nothing to do here but
check. What a reader must get: every tutorial with its outputs (reports, figures), its tables
sorting on a click and its plotly figures drawn by the site's own plotly.js, a reference entry for
every public name, no page error, and not one request off the machine (no CDN)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SITE = DOCS / "_build" / "html"
ARTIFACTS = Path(__file__).parent / "artifacts" / "docs"
BUILD = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html"]

lab = pytest.importorskip("tests.lab")

# one worker builds and opens the site (--dist loadgroup, the full tier): the module's fixture on two
# workers ran two builds into one docs/_build/html at once, and one failed renaming the other's
# searchindex.js.tmp (CI, stop 45: every page with a generated block is read again on each build)
pytestmark = [pytest.mark.slow, pytest.mark.notebook, pytest.mark.xdist_group("docs_site")]
browser_only = [pytest.mark.browser,
                pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed")]


@pytest.fixture(scope="module")
def site() -> Path:
    pytest.importorskip("myst_nb", reason="the docs extra is not installed (pip install -e '.[docs]')")
    r = subprocess.run(BUILD, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-6000:]
    return SITE


def _pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def test_every_tutorial_is_a_page_with_its_outputs(site):
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
    assert len(notebooks) == 8
    for name in notebooks:
        page = (site / "tutorials" / f"{name}.html").read_text(encoding="utf-8")
        assert page.count('class="cell_output') >= 3, name
        assert "nbprof-report" in page, name  # a report of nbprof's, as the cell showed it
        assert "Traceback (most recent call last)" not in page, name


def test_nothing_comes_from_the_network(site):
    """No page loads a script, a style sheet, a font or an image from off the site."""
    remote = re.compile(r"<(?:script|img|iframe|source)\b[^>]*\bsrc=\"(?:https?:)?//"
                        r"|<link\b[^>]*\brel=\"(?:stylesheet|preload|modulepreload|icon)\"[^>]*\bhref=\"(?:https?:)?//"
                        r"|<link\b[^>]*\bhref=\"(?:https?:)?//[^\"]*\"[^>]*\brel=\"(?:stylesheet|preload|icon)\"")
    offenders = [(p.relative_to(site), m.group(0)[:120]) for p in _pages(site)
                 for m in remote.finditer(p.read_text(encoding="utf-8"))]
    assert offenders == []
    css = [(p.name, m.group(0)) for p in (site / "_static").rglob("*.css")
           for m in re.finditer(r"@import\s+url\((?:['\"])?https?:|url\((?:['\"])?https?://[^)]*\)", p.read_text(encoding="utf-8"))]
    assert css == []
    assert (site / "_static" / "plotly.min.js").stat().st_size > 1_000_000  # plotly.js itself, from the package


def test_every_public_name_has_a_reference_entry(site):
    import nbprof

    page = (site / "reference" / "api.html").read_text(encoding="utf-8")
    ids = set(re.findall(r'\bid="([^"]+)"', page))
    missing = [n for n in nbprof.__all__ if f"nbprof.{n}" not in ids and f"module-nbprof.{n}" not in ids]
    assert missing == []
    for cls, members in (("TorchProfile", ["key_averages", "kernels", "timeline"]), ("PythonProfile", ["stats", "callers"])):
        for member in members:
            assert f"nbprof.{cls}.{member}" in ids, (cls, member)
    # typed signatures: load_trace's keywords with their annotations
    assert re.search(r"workers</span>.{0,400}int", page, re.S)


def test_the_generated_reference_tables_are_the_codes(site):
    from nbprof.events import COLUMNS
    from nbprof.run.flags import markdown_table

    flags = (site / "reference" / "flags.html").read_text(encoding="utf-8")
    for line in markdown_table().splitlines():
        if line.startswith("| `"):
            first = re.findall(r"`([^`]+)`", line)[0]
            assert f"<code class=\"docutils literal notranslate\"><span class=\"pre\">{first.split()[0]}" in flags, first
    tables = (site / "reference" / "tables.html").read_text(encoding="utf-8")
    for column in COLUMNS:
        assert f'<span class="pre">{column.name}</span>' in tables, column.name
    for table in ("prof.kernels()", "prof.steps()", "cp.stats", "cluster.ranks().table"):
        assert table in tables, table


def _offline_page(context, url: str, refused: list[str], errors: list[str]):
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(f"{url}: {e}"))
    page.goto(url)
    page.wait_for_load_state("load")
    return page


@pytest.fixture(scope="module")
def offline(site):
    """A browser whose every request that is not a file of the site is refused, and counted."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    refused: list[str] = []

    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    with lab.browser(width=1400, height=1000) as context:
        context.route("**/*", route)
        yield context, refused


@pytest.mark.parametrize("path", ["index.html", "tutorials/01-quickstart.html", "reference/api.html",
                                  "tutorials/05-gpu-and-the-timeline.html", "getting-started.html"])
@pytest.mark.browser
@pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed")
def test_a_page_opens_offline_without_errors(site, offline, path):
    context, refused = offline
    errors: list[str] = []
    page = _offline_page(context, (site / path).as_uri(), refused, errors)
    time.sleep(1.5)  # the reports unpack their tables' library (DecompressionStream) after load
    page.screenshot(path=str(ARTIFACTS / (path.replace("/", "_") + ".png")), full_page=False)
    page.close()
    assert errors == []
    assert refused == []


@pytest.mark.browser
@pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed")
def test_a_tutorials_table_sorts_and_its_figure_draws(site, offline):
    context, refused = offline
    errors: list[str] = []
    page = _offline_page(context, (site / "tutorials" / "01-quickstart.html").as_uri(), refused, errors)
    page.wait_for_selector("table.dataTable", timeout=20_000)
    # the figures: the plotly mimetype outputs, drawn by the site's plotly.js
    page.wait_for_selector(".nbprof-plotly .main-svg", timeout=20_000)
    assert page.locator(".nbprof-plotly .main-svg").count() >= 1
    report = page.locator("div.nbprof-report").first
    table = report.locator("table.dataTable:visible").first
    headers = [h.strip() for h in table.locator("thead th").all_inner_texts()]
    calls = headers.index("Calls") + 1

    def column(index: int) -> list[str]:
        return table.locator(f"tbody tr td:nth-child({index})").all_inner_texts()

    def counts() -> list[int]:
        return [int(x.replace(",", "")) for x in column(calls)]

    before = counts()
    table.locator("thead th", has_text="Calls").first.click()
    time.sleep(0.5)
    ascending = counts()
    assert ascending == sorted(ascending)
    table.locator("thead th", has_text="Calls").first.click()
    time.sleep(0.5)
    descending = counts()
    assert descending == sorted(descending, reverse=True) and descending != ascending
    assert sorted(before) == sorted(ascending)  # the same rows, reordered
    report.scroll_into_view_if_needed()
    report.screenshot(path=str(ARTIFACTS / "tutorial-report.png"))
    page.locator(".nbprof-plotly").first.screenshot(path=str(ARTIFACTS / "tutorial-figure.png"))
    page.close()
    assert errors == []
    assert refused == []
