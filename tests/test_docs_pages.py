"""The README and the docs' pages as files, without building the site: the README fits on a screen
and every link it gives lands somewhere (it is also the package's page on an index, so its links
are absolute, and each that points into this repository or its docs site names a file that
exists here); every page under docs/ is in the site's navigation."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
REPO = "https://github.com/nbprof/nbprof/"
RAW = "https://raw.githubusercontent.com/nbprof/nbprof/main/"
SITE = "https://nbprof.readthedocs.io/en/latest/"


def _links(markdown: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", markdown)


def _pages() -> list[Path]:
    return [p for p in DOCS.rglob("*.md") if "_build" not in p.relative_to(DOCS).parts]


def _slug(heading: str) -> str:
    """MyST's (and GitHub's) anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def resolve(link: str) -> Path | None:
    """The file in this checkout that an absolute link into the repository or the docs site names
    (None: a link elsewhere); a missing file is a path that does not exist."""
    link, _, anchor = link.partition("#")
    if link.startswith(RAW):
        return ROOT / link[len(RAW):]
    for kind in ("blob/main/", "tree/main/"):
        if link.startswith(REPO + kind):
            return ROOT / link[len(REPO + kind):]
    if link.startswith(SITE):
        page = link[len(SITE):] or "index.html"
        page = page[:-len(".html")] if page.endswith(".html") else page.rstrip("/") + "/index"
        for suffix in (".md", ".ipynb"):
            if (DOCS / (page + suffix)).exists():
                return DOCS / (page + suffix)
        return DOCS / (page + ".md")
    return None


def test_the_readme_fits_on_a_screen():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150


def test_every_link_of_the_readme_and_the_docs_into_this_repository_resolves():
    broken = []
    for page in [README, *_pages()]:
        for link in _links(page.read_text(encoding="utf-8")):
            target = resolve(link)
            if target is None:
                continue
            if not target.exists():
                broken.append((page.name, link))
                continue
            anchor = link.partition("#")[2]
            if anchor and target.suffix == ".md":
                slugs = {_slug(h) for h in re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.M)}
                if anchor not in slugs:
                    broken.append((page.name, link))
    assert broken == []


def test_the_readme_links_to_the_docs_and_shows_the_report():
    links = _links(README.read_text(encoding="utf-8"))
    assert any(link.startswith(SITE) for link in links)
    [picture] = [link for link in links if link.endswith(".png")]
    assert picture.startswith(RAW) and resolve(picture).exists()  # docs/_static/report.png, here and on GitHub


def _docs_extension():
    spec = importlib.util.spec_from_file_location("nbprof_docs", DOCS / "_ext" / "nbprof_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_page_is_in_the_navigation():
    """A page in a section folder is listed in its section's toctree (or matched by its glob); a
    page at docs/'s top level is listed by its section's generated toctree (nbprof_docs): a page
    added there joins the site with no edit, one in a folder needs its line."""
    ext = _docs_extension()
    top = {p.stem for p in DOCS.glob("*.md")}
    listed = {"index", "getting-started"} | {p for s in ("howto", "reference", "explanation") for p in ext.section_pages(s)}
    assert top <= listed, top - listed
    for page in _pages():
        rel = page.relative_to(DOCS)
        if len(rel.parts) == 1 or rel.name == "index.md":
            continue
        index = (page.parent / "index.md").read_text(encoding="utf-8")
        toctree = re.search(r"```\{toctree\}(.*?)```", index, re.S).group(1)
        entries = [line.strip() for line in toctree.splitlines() if line.strip() and not line.strip().startswith(":")]
        assert any(re.fullmatch(e.replace("*", ".*"), page.stem) for e in entries), rel


def test_a_new_top_level_page_joins_a_section():
    ext = _docs_extension()
    assert ext.SECTION_OF.get("a-page-nobody-listed", "howto") == "howto"
    assert "findings" in ext.section_pages("reference") and "architecture" in ext.section_pages("explanation")
