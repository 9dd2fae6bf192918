"""Every measured figure the README and the docs state comes from one place: benchmarks/RESULTS.md
(speed, memory) or docs/testing.md (the mutation score, how long the tests take). A figure copied
by hand drifts (the README said 77.5 % for months after docs/testing.md measured 91.9 %, and "1-2
minutes" for a fast tier that takes 8): these tests fail when a page states a figure its source
does not hold, so a new measurement means changing the source and then the pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
TESTING = ROOT / "docs" / "testing.md"
# the pages whose figures are measurements (the README quotes a few of each)
MEASURED_PAGES = [README, ROOT / "docs" / "performance.md"]

_UNIT = r"(?:x|%|ms|µs|s|min|KB|MB|GB|KiB|MiB|GiB)"
# a figure: a number with a unit ("11.7x", "22 ms", "91.9 %", "8 min 15 s"), or a ratio ("0.81")
_FIGURE = re.compile(rf"(?<![\w.\-/])(\d[\d,]*(?:\.\d+)?)(?:\s?({_UNIT}))?(?![\w.])")


def prose(markdown: str) -> str:
    """The text a reader reads as claims: without code blocks, code spans, link targets, images
    and HTML comments (commands, flags, versions and URLs are not measurements)."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"\{doc\}", " ", text)
    return text.replace("**", "")


def figures(text: str) -> list[str]:
    """The measured figures of a text, as the text writes them (units normalized: no space)."""
    out = []
    text = prose(text)
    for m in _FIGURE.finditer(text):
        number, unit = m.group(1), m.group(2)
        before, after = text[max(0, m.start() - 12):m.start()], text[m.end():m.end() + 1]
        if unit is None and "." not in number:
            continue  # a count, a rank, a step, a year: not a measurement
        if unit is None and (re.search(r"(torch|Python|PCIe|HTA|version)\s*$", before) or after == "–"
                             or before.endswith("–")):
            continue  # a version ("torch 2.4", "Python 3.10–3.13")
        out.append(number + (unit or ""))
    return out


def _normalized(text: str) -> str:
    text = text.replace("**", "")
    return re.sub(rf"(\d)\s({_UNIT})(?![\w])", r"\1\2", text)


def test_the_figure_reader_finds_figures_and_skips_versions():
    text = ("nbprof is **11.7x** faster at 100 k events, 0.81 of `__exit__`, 22 ms; torch 2.4 or newer, Python "
            "3.10–3.13, 1,697 tests. `--limit 20` and [a link](https://x/2.5.html)\n```\n468.12 ms\n```")
    assert figures(text) == ["11.7x", "0.81", "22ms"]


@pytest.mark.parametrize("page", MEASURED_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_figure_is_in_its_source(page):
    sources = _normalized(RESULTS.read_text(encoding="utf-8") + "\n" + TESTING.read_text(encoding="utf-8"))
    # the figure as a whole: "0.8" is not found in "10.8" nor "1.5s" in "1.5s-2" ... but in "1.5s," it is
    missing = [f for f in figures(page.read_text(encoding="utf-8"))
               if not re.search(rf"(?<![\d.,]){re.escape(f)}(?![\d]|\.\d)", sources)]
    assert not missing, (f"{page.relative_to(ROOT)} states figures that neither benchmarks/RESULTS.md nor "
                         f"docs/testing.md holds: {missing}; measure them there first, or quote what they say")


def _final_mutation_score() -> tuple[str, str]:
    """docs/testing.md's final measurement: the last row of the samples' table that says so."""
    rows = [line for line in TESTING.read_text(encoding="utf-8").splitlines()
            if line.startswith("|") and "the final measurement" in line]
    assert rows, "docs/testing.md has no sample marked (the final measurement)"
    score = re.search(r"\*\*(\d+(?:\.\d+)?) %\*\* \((\d+(?:\.\d+)?-\d+(?:\.\d+)? %)\)", rows[-1])
    assert score, rows[-1]
    return score.group(1), score.group(2)


def test_the_mutation_score_is_testing_mds_final_measurement():
    score, interval = _final_mutation_score()
    for page in (README, ROOT / "docs" / "explanation" / "index.md"):
        text = prose(page.read_text(encoding="utf-8"))
        sentences = [s for s in re.split(r"(?<=[.)])\s", text) if "mutant" in s]
        assert sentences, f"{page.name} no longer states the mutation score"
        stated = {m for s in sentences for m in re.findall(r"(\d+(?:\.\d+)?) ?%", s)}
        assert score in stated, (page, score, stated)
        assert stated <= {score, "90", "95", *re.findall(r"\d+(?:\.\d+)?", interval)}, (page, stated)


def test_the_fast_tiers_time_is_testing_mds():
    section = TESTING.read_text(encoding="utf-8").split("## How long the tests take", 1)[1]
    fast = next(line for line in section.split("\n- ") if "fast tier" in line)
    total, in_pytest = re.findall(r"\*\*(\d+ min \d+ s)\*\*", fast)[:2]
    line = next(line for line in README.read_text(encoding="utf-8").splitlines() if "scripts/test.sh " in line
                and "fast tier" in line)
    assert total in line and in_pytest in line, line
    for page in [README, *ROOT.joinpath("docs").rglob("*.md")]:
        if "_build" in page.parts:
            continue
        assert "1-2 minutes" not in page.read_text(encoding="utf-8"), page
