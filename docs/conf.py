"""Sphinx configuration of nbprof's documentation (https://nbprof.readthedocs.io).

Build (what CI and README run; warnings are errors):

    sphinx-build -W --keep-going -b html docs docs/_build/html

The tutorials (notebooks/, linked into docs/tutorials/) are executed by myst-nb at build time and
cached in docs/_build/.jupyter_cache: a notebook runs again only when its code changes, and a cell
that fails fails the build. Everything the pages load comes from the build itself: no CDN, so the
site opens offline (tests/test_docs.py checks it in a browser with the network refused).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # the checkout's nbprof, for autodoc and the generated tables
sys.path.insert(0, str(DOCS / "_ext"))

import nbprof  # noqa: E402

project = "nbprof"
author = "nbprof developers"
copyright = "nbprof developers"
release = version = nbprof.__version__

extensions = [
    "myst_nb",  # Markdown pages (MyST) and the tutorials, executed
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "nbprof_docs",  # generated tables, plotly figures offline, the sections' page lists
]

source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/.ipynb_checkpoints", "tutorials/traces"]

# MyST: the GitHub-flavoured Markdown the pages are written in
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Tutorials: run at build time, cached, a failing cell fails the build
nb_execution_mode = "cache"
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")  # the same cache whatever the output folder
nb_execution_raise_on_error = True
nb_execution_timeout = 900  # a cell: notebook 7 compiles a model on two CPU cores
nb_execution_in_temp = True  # the files a notebook writes (traces/) stay out of the checkout
nb_execution_show_tb = True  # a failing cell's traceback in the build log
# Widgets (the controls panel, the live timeline, progress bars) need a kernel: the pages show
# the static HTML each of them also carries, and load no widget library from a CDN.
nb_mime_priority_overrides = [
    ("html", "application/vnd.jupyter.widget-view+json", None),
    ("html", "application/vnd.jupyter.widget-state+json", None),
    ("html", "application/vnd.plotly.v1+json", 1),  # drawn by plotly.js from the build (nbprof_docs)
]
nb_ipywidgets_js = {}

# API reference
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}
napoleon_google_docstring = False
napoleon_numpy_docstring = False

# HTML: furo, whose default fonts are the system's (nothing fetched)
html_theme = "furo"
html_title = f"nbprof {release}"
html_static_path = ["_static"]
html_css_files = ["nbprof-docs.css"]
html_theme_options = {
    "source_repository": "https://github.com/nbprof/nbprof/",
    "source_branch": "main",
    "source_directory": "docs/",
}
html_show_sourcelink = False
