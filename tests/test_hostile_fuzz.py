"""The fuzz test of issue 24: hostile strings in every string field nbprof reads from a trace
(and from a cProfile profile), every output opened in headless Chromium with a hook installed
before any script (tests/hostile.py). Nothing may run, and the names read as written.

Outputs: the notebook report (``_repr_mimebundle_``), the timeline, memory and flame figures (their
static drawing and the figure drawn by plotly.js from its JSON, as JupyterLab draws it),
``nbprof.compare`` (by op, kernel and range) against a plain trace, the
standalone page (``to_html``), the live timeline widget (its browser code, answered by its kernel
side in this process: zoomed, searched, a span selected), a folder of ranks with hostile file
names (its cluster report and page). ``python -m nbprof``'s page: tests/test_hostile.py.

One browser for every example; ``NBPROF_FUZZ_EXAMPLES`` examples (default 3, about 15 s each; the
same ones every run; ``NBPROF_FUZZ_RANDOM=1``: new ones each run). The strings: the canonical payloads and mixtures of
their fragments with any Unicode characters (hypothesis shrinks a failure to a small one).

Malformed structures and extreme numbers (a load raises only nbprof's own errors; a profile that
loads renders) are in tests/test_hostile_input.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import nbprof

from .hostile import (FIELDS, PAYLOADS, PSTATS_FIELDS, SHOWN, SHOWN_PSTATS, Watch, file_name_safe, hostile_folder,
                      hostile_pstats, hostile_trace, open_live, outputs_page, shown, write_trace)

hypothesis = pytest.importorskip("hypothesis")
lab = pytest.importorskip("tests.lab")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed"),
]

EXAMPLES = int(os.environ.get("NBPROF_FUZZ_EXAMPLES", "3"))

FRAGMENTS = ("</script>", "<script>", "__pwned(0)", "<img src=x onerror=__pwned(0)>", '"', "'", "`", "${", "}}",
             "{{", "</style>", "<style>", "\u2028", "\u2029", "javascript:", "<!--", "-->", "]]>", "<![CDATA[", "\x00",
             "\U0001f525", "&amp;", "&lt;", "&#x3c;", "<b>", "<br>", "</b>", "%{x}", "%{hovertext}", "\\", "\n", "\t",
             '<a href="javascript:__pwned(0)">', "</a>", " onmouseover=__pwned(0) ", "<svg onload=__pwned(0)>",
             "</textarea>", "</title>", "<!DOCTYPE", "\ufeff", "\u202e", "void ", "::", "(", ")", "[", "]")
hostile_text = st.one_of(
    st.sampled_from(PAYLOADS),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(st.characters(codec="utf-8"), min_size=1, max_size=3)),
             min_size=1, max_size=6).map("".join),
)
# what each output shows as written (its tables, lanes and titles)
SHOWN_CLUSTER = ("op", "kernel", "collective", "pg")


@pytest.fixture(scope="module")
def watch():
    with lab.browser() as context:
        yield Watch(context)


def _check(page, texts: dict[str, str], fields: tuple[str, ...], what: str) -> None:
    # every tab's content is in the page; the figures of a standalone page draw when shown
    for title in ("Timeline", "Flame"):
        for label in page.locator(".nbprof-tabs > label", has_text=title).all():
            label.click()
    page.wait_for_timeout(200)
    Watch.hover_everything(page)
    page.wait_for_timeout(100)
    ran = Watch.ran(page)
    assert ran == [], f"{what}: ran {ran}"
    assert page.evaluate("() => window.__blocked") == [], f"{what}: the page's policy blocked one of its scripts"
    seen = Watch.texts(page)
    missing = [f for f in fields if not shown(seen, texts[f])]
    assert not missing, f"{what}: not shown as written: {[(f, texts[f]) for f in missing]}"


# no shrinking unless asked (NBPROF_FUZZ_SHRINK=1): each step reruns every output in the browser
PHASES = tuple(p for p in Phase if p != Phase.shrink or os.environ.get("NBPROF_FUZZ_SHRINK"))


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not os.environ.get("NBPROF_FUZZ_RANDOM"),
          phases=PHASES,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(values=st.fixed_dictionaries({f: hostile_text for f in FIELDS + PSTATS_FIELDS}))
def test_hostile_strings_run_nothing_and_read_as_written(watch, tmp_path_factory, values):
    # a field's name in front: every name differs and none is empty (a nameless event is another case)
    texts = {f: f"{f}:{v}" for f, v in values.items()}
    text = texts.__getitem__
    root: Path = tmp_path_factory.mktemp("fuzz")

    p = nbprof.load_trace(write_trace(root / "t.json", hostile_trace(text)))
    plain = nbprof.load_trace(write_trace(root / "plain.json", hostile_trace(lambda f: f"plain_{f}")))
    py = hostile_pstats(text)
    path = outputs_page(root / "outputs.html", [
        p._repr_mimebundle_(), p.timeline()._repr_mimebundle_(), p.memory_curve()._repr_mimebundle_(),
        py._repr_mimebundle_(), py.flame()._repr_mimebundle_(),
        nbprof.compare(plain, p)._repr_mimebundle_(), nbprof.compare(plain, p, by="kernel")._repr_mimebundle_(),
        nbprof.compare(plain, p, by="range")._repr_mimebundle_()])
    page = watch.open(path, 800)
    _check(page, texts, SHOWN + SHOWN_PSTATS, "notebook outputs")
    page.close()

    page = watch.open(Path(p.to_html(root / "page.html")), 800)
    _check(page, texts, SHOWN, "standalone page")
    page.close()

    page = watch.open(Path(py.to_html(root / "py.html")), 800)
    _check(page, texts, SHOWN_PSTATS, "cProfile standalone page")
    page.close()

    page = open_live(watch, p, root / "live.html")
    _check(page, texts, ("op", "kernel", "range"), "live timeline")
    page.close()

    names = [file_name_safe(texts["op"]), file_name_safe(texts["kernel"])]
    c = nbprof.load_trace(hostile_folder(root / "ranks", text, names=names), progress=False)
    page = watch.open(outputs_page(root / "cluster.html", [c._repr_mimebundle_()]), 800)
    _check(page, texts, SHOWN_CLUSTER, "cluster report")
    page.close()
    page = watch.open(Path(c.to_html(root / "cluster_page.html")), 800)
    _check(page, texts, SHOWN_CLUSTER, "cluster page")
    page.close()
