"""``nbprof.load_prof``: cProfile's ``.prof`` files, as ``python -m cProfile -o`` writes them.

The oracle is ``pstats`` reading the same file (and snakeviz, whose users these files come from):
the stats table, the caller edges and the callees must be its numbers exactly, for a file written
by a real ``python -m cProfile -o`` run in a subprocess.
"""

from __future__ import annotations

import json
import marshal
import pstats
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import nbprof
from nbprof.errors import NbprofError, TraceError

from .conftest import DATA, trace_path

# recursion (ncalls 123/5), a function with two callers, a builtin, a lambda, a generator
SCRIPT = """
import json

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def shared(x):
    return json.dumps({"x": x})

def left():
    return [shared(i) for i in range(300)]

def right():
    return sorted((shared(i) for i in range(200)), key=lambda s: s[::-1])

def main():
    fib(18)
    left()
    right()

if __name__ == "__main__":
    main()
"""


def cprofile_run(folder: Path, name: str = "run.prof", body: str = SCRIPT) -> Path:
    """``python -m cProfile -o NAME script.py`` in a subprocess: the file the user brings."""
    (folder / "script.py").write_text(textwrap.dedent(body))
    subprocess.run([sys.executable, "-m", "cProfile", "-o", name, "script.py"], cwd=folder, check=True,
                   capture_output=True, timeout=120)
    return folder / name


@pytest.fixture(scope="module")
def prof_file(tmp_path_factory) -> Path:
    return cprofile_run(tmp_path_factory.mktemp("prof"))


def row_of(stats, key):
    filename, line, func = key
    rows = stats[(stats["filename"] == filename) & (stats["lineno"] == line) & (stats["function"] == func)]
    assert len(rows) == 1, key
    return rows.iloc[0]


def test_stats_table_is_pstats(prof_file):
    p = nbprof.load_prof(prof_file)
    oracle = pstats.Stats(str(prof_file)).stats
    stats = p.stats
    assert len(stats) == len(oracle)
    for key, (cc, nc, tt, ct, _) in oracle.items():
        row = row_of(stats, key)
        assert (row["ncalls"], row["primitive_calls"]) == (nc, cc), key
        assert (row["tottime_s"], row["cumtime_s"]) == (tt, ct), key  # exact: the same floats
        assert row["tottime_per_call_s"] == tt / nc and row["cumtime_per_call_s"] == ct / cc
    [fib] = [v for k, v in oracle.items() if k[2] == "fib"]
    assert fib[1] > fib[0] == 1  # the recursion is in the file: 8361/1 calls
    assert p.total_s == pytest.approx(sum(v[2] for v in oracle.values()), rel=1e-12)
    # pstats' own view of the profile is the file's
    assert p.pstats.stats == oracle


def test_caller_edges_are_pstats(prof_file):
    p = nbprof.load_prof(prof_file)
    oracle = pstats.Stats(str(prof_file)).stats
    edges = p.edges
    got = {((r.caller_filename, r.caller_lineno, r.caller_function), (r.callee_filename, r.callee_lineno, r.callee_function)):
           (r.ncalls, r.primitive_calls, r.tottime_s, r.cumtime_s) for r in edges.itertuples()}
    want = {(caller, callee): edge for callee, v in oracle.items() for caller, edge in v[4].items()}
    assert got == want and len(edges) == len(want)
    # callers(fn) and callees(fn): pstats' print_callers / print_callees rows for that function
    [shared] = [k for k in oracle if k[2] == "shared"]
    callers = p.callers("shared")
    assert {(r.filename, r.lineno, r.function): (r.ncalls, r.cumtime_s) for r in callers.itertuples()} == \
        {c: (e[0], e[3]) for c, e in oracle[shared][4].items()}
    assert set(callers["function"]) == {"<listcomp>", "<genexpr>"}
    ps = pstats.Stats(str(prof_file))
    ps.calc_callees()
    [main] = [k for k in oracle if k[2] == "main"]
    callees = p.callees("main")
    assert {(r.filename, r.lineno, r.function): (r.ncalls, r.tottime_s, r.cumtime_s) for r in callees.itertuples()} == \
        {c: (e[0], e[2], e[3]) for c, e in ps.all_callees[main].items()}


def test_what_snakeviz_shows_is_all_here(prof_file):
    """snakeviz's table rows (calls "nc/cc", times) and the call graph its icicle and sunburst are
    drawn from (each function's children with their edge times): every one is in nbprof's tables."""
    snakeviz_stats = pytest.importorskip("snakeviz.stats")
    p = nbprof.load_prof(prof_file)
    rows = snakeviz_stats.table_rows(pstats.Stats(str(prof_file)))
    stats = p.stats
    located = {f"{f}:{l}({n})": (nc, cc, tt, ct) for f, l, n, nc, cc, tt, ct in zip(
        stats["filename"], stats["lineno"], stats["function"], stats["ncalls"], stats["primitive_calls"],
        stats["tottime_s"], stats["cumtime_s"])}
    assert len(rows) == len(located)
    for calls, tottime, _, cumtime, _, _, name in rows:
        nc, cc, tt, ct = located[name]
        assert calls[0] == (str(nc) if nc == cc else f"{nc}/{cc}") and float(tottime) == float(f"{tt:.4g}")
        assert float(cumtime) == float(f"{ct:.4g}")
    graph = snakeviz_stats.json_stats(pstats.Stats(str(prof_file)))
    edges = p.edges
    ours = {(f"{a}:{b}({c})", f"{d}:{e}({f})"): [nc, cc, tt, ct] for a, b, c, d, e, f, nc, cc, tt, ct in zip(
        edges["caller_filename"], edges["caller_lineno"], edges["caller_function"], edges["callee_filename"],
        edges["callee_lineno"], edges["callee_function"], edges["ncalls"], edges["primitive_calls"],
        edges["tottime_s"], edges["cumtime_s"])}
    for parent, node in graph.items():
        for child, edge in node["children"].items():
            assert ours[(parent, child)] == edge
    # the flame view's tree holds every function of the script snakeviz draws (the imports' module
    # code runs in nested exec calls, cut as recursion, as snakeviz cuts a function already drawn
    # above), and offers snakeviz's sunburst
    tree = p.call_tree(min_fraction=0)
    drawn = {n for node in graph.values() for n in node["children"] if n.startswith("script.py:")}
    assert {name.rsplit("(", 1)[1][:-1] for name in drawn} == \
        set(tree.loc[tree["filename"] == "script.py", "function"]) == {"<module>", "main", "fib", "left", "right",
                                                                       "shared", "<listcomp>", "<genexpr>", "<lambda>"}
    fig = p.flame()
    [toggle] = fig.layout.updatemenus
    assert [b.label for b in toggle.buttons] == ["Icicle", "Sunburst"]
    assert toggle.buttons[1].args[0] == {"type": "sunburst"} and fig.data[0].type == "icicle"


def test_every_cprofile_view(prof_file):
    p = nbprof.load_prof(prof_file)
    oracle = pstats.Stats(str(prof_file)).stats
    # the call tree: rooted at the file; main is reached along one path, so its box is its cumtime
    tree = p.call_tree()
    assert tree["name"].iloc[0] == "run.prof"
    [main] = [v for k, v in oracle.items() if k[2] == "main"]
    assert tree.loc[tree["function"] == "main", "value_s"].tolist() == [main[3]]
    assert "run.prof" in p.flame().data[0].hovertext[1]  # "...% of run.prof", not "of the cell"
    text = p.report().text()
    assert "from " + str(prof_file) in text and "script.py:4(fib)" in text
    html = p.report().html()
    for tab in ("Functions", "Callers &amp; callees", "Flame"):
        assert tab in html
    assert set(p.findings["kind"]) >= {"top_function"}
    assert repr(p).startswith("<PythonProfile ")


def test_the_tree_of_one_function(prof_file):
    """snakeviz draws a function picked in its table with all its calls: ``root=`` does, with
    pstats' numbers (shared is called from two places; its tree holds both)."""
    p = nbprof.load_prof(prof_file)
    ps = pstats.Stats(str(prof_file))
    ps.calc_callees()
    [key] = [k for k in ps.stats if k[2] == "shared"]
    tree = p.call_tree(root="shared", min_fraction=0)
    top = tree.iloc[1]
    assert (top["function"], top["value_s"], top["ncalls"]) == ("shared", ps.stats[key][3], ps.stats[key][0])
    assert tree["parent"].iloc[1] == 0 and (tree["parent"] == 0).sum() == 1
    kids = tree[tree["parent"] == 1]
    assert {(r.filename, r.lineno, r.function): r.value_s for r in kids.itertuples()} == \
        {c: e[3] for c, e in ps.all_callees[key].items()}
    assert p.flame(root="shared").data[0].labels[1] == "shared"
    with pytest.raises(nbprof.OptionError, match="is not in this profile"):
        p.call_tree(root="no_such_function")


def test_a_file_has_no_cell(tmp_path):
    """What called python -m cProfile's exec: no function (the cell's words are for %%cprofile)."""
    path = cprofile_run(tmp_path, body="def f():\n    return sum(range(10))\nf()\n")
    html = nbprof.load_prof(path).report().html()
    assert "called by: no profiled function (a top-level call of the profile)" in html
    assert "the cell&#x27;s own top-level code" not in html and "cell" not in nbprof.load_prof(path).call_tree()["name"].tolist()


def test_several_files_add_up_as_pstats_adds_them(prof_file, tmp_path):
    other = cprofile_run(tmp_path, "other.prof", SCRIPT.replace("fib(18)", "fib(12)").replace("300", "30"))
    p = nbprof.load_prof([prof_file, other])
    oracle = pstats.Stats(str(prof_file), str(other)).stats
    assert len(p.stats) == len(oracle)
    for key, (cc, nc, tt, ct, callers) in oracle.items():
        row = row_of(p.stats, key)
        assert (row["ncalls"], row["primitive_calls"], row["tottime_s"], row["cumtime_s"]) == (nc, cc, tt, ct)
    assert p.pstats.stats == oracle  # the callers too
    assert p.meta.files == [str(prof_file), str(other)] and p.call_tree()["name"].iloc[0] == "2 files"
    with pytest.raises(TraceError, match="no such file"):
        nbprof.load_prof([prof_file, tmp_path / "missing.prof"])


def test_other_writers_of_the_format(prof_file, tmp_path):
    """pstats' dump_stats, nbprof's own dump (%%cprofile --dump), profile.Profile (a call count per
    caller, snakeviz reads it too), a file under any name: the same tables as pstats."""
    dumped = tmp_path / "dumped.pstats"
    pstats.Stats(str(prof_file)).dump_stats(str(dumped))
    assert nbprof.load_prof(dumped).pstats.stats == pstats.Stats(str(prof_file)).stats
    again = nbprof.load_prof(prof_file).dump(tmp_path / "again.prof")
    assert nbprof.load_prof(again).pstats.stats == pstats.Stats(str(prof_file)).stats
    unnamed = tmp_path / "profile_output"  # snakeviz opens any name
    unnamed.write_bytes(prof_file.read_bytes())
    assert len(nbprof.load_prof(unnamed).stats) == len(pstats.Stats(str(prof_file)).stats)

    import profile

    def work():
        return sorted(str(i) for i in range(50))

    pure = profile.Profile()
    pure.runcall(work)
    pure.dump_stats(str(tmp_path / "pure.prof"))
    p = nbprof.load_prof(tmp_path / "pure.prof")
    oracle = pstats.Stats(str(tmp_path / "pure.prof")).stats
    for key, (cc, nc, tt, ct, _) in oracle.items():
        row = row_of(p.stats, key)
        assert (row["ncalls"], row["primitive_calls"], row["tottime_s"], row["cumtime_s"]) == (nc, cc, tt, ct)
    assert p.callers("<genexpr>")["ncalls"].tolist() == [51]  # its edges are counts
    p.report().html(), p.flame()  # noqa: B018  every view draws
    merged = nbprof.load_prof([tmp_path / "pure.prof", tmp_path / "pure.prof"])
    assert merged.pstats.stats == pstats.Stats(str(tmp_path / "pure.prof"), str(tmp_path / "pure.prof")).stats


def test_a_cprofile_cell_dumped_and_loaded_again(shell, tmp_path):
    """``%%cprofile --dump`` in a real IPython shell, then ``load_prof`` of its file: the cell's
    table again (pstats' numbers, the result's own)."""
    from .conftest import run

    target = tmp_path / "cell.prof"
    result, _ = run(shell, f"%%cprofile -q --dump {target} -o cell_profile\n"
                           "def f(n):\n    return sum(i * i for i in range(n))\n[f(300) for _ in range(7)];")
    assert result.success
    p = nbprof.load_prof(target)
    oracle = pstats.Stats(str(target)).stats
    assert p.pstats.stats == oracle == shell.user_ns["cell_profile"].pstats.stats
    assert row_of(p.stats, next(k for k in oracle if k[2] == "f"))["ncalls"] == 7


def one_line_error(path, cls=TraceError):
    with pytest.raises(cls) as info:
        nbprof.load_prof(path)
    message = str(info.value)
    assert isinstance(info.value, NbprofError) and "\n" not in message
    return message


def test_bad_files_are_one_line_errors(prof_file, tmp_path):
    assert "no such file" in one_line_error(tmp_path / "missing.prof")
    assert "is a folder" in one_line_error(tmp_path)
    (tmp_path / "empty.prof").write_bytes(b"")
    assert "empty" in one_line_error(tmp_path / "empty.prof")
    (tmp_path / "garbage.prof").write_bytes(b"\x00\x01garbage bytes \xff" * 50)
    assert "not a .prof file" in one_line_error(tmp_path / "garbage.prof")
    (tmp_path / "cut.prof").write_bytes(prof_file.read_bytes()[:200])  # a file still being written
    assert "not a complete .prof file" in one_line_error(tmp_path / "cut.prof")
    # the chrome traces nbprof.load_trace reads: said so, gzipped or not
    assert "use nbprof.load_trace" in one_line_error(trace_path("two_streams"))
    (tmp_path / "trace.json").write_text('{"traceEvents": []}')
    assert "use nbprof.load_trace" in one_line_error(tmp_path / "trace.json")
    # marshalled data that is not cProfile's stats: told by its first bytes, or by its shape
    for name, obj, said in (("list", [1, 2], "not a .prof file"), ("keys", {"a": 1}, "not a .prof file"),
                            ("key", {("f.py", "1", "f"): (1, 1, 0.0, 0.0, {})}, "not (file, line, function)"),
                            ("values", {("f.py", 1, "f"): (1, 1, 0.0)},
                             "f.py:1(f) has (1, 1, 0.0), not (calls, calls, tottime, cumtime, callers)"),
                            ("callers", {("f.py", 1, "f"): (1, 1, 0.0, 0.0, {("g.py", 2, "g"): "x"})}, "has a caller")):
        (tmp_path / f"{name}.prof").write_bytes(marshal.dumps(obj))
        assert said in one_line_error(tmp_path / f"{name}.prof"), name
    assert "load_prof takes" in one_line_error(42, cls=nbprof.OptionError)


def test_load_trace_on_a_prof_file_says_load_prof(prof_file, tmp_path):
    for path in (prof_file, tmp_path / "run.json"):  # the content says so, whatever the name
        if path != prof_file:
            path.write_bytes(prof_file.read_bytes())
        with pytest.raises(TraceError) as info:
            nbprof.load_trace(path)
        assert str(info.value) == f"{path}: a cProfile .prof file, not a chrome trace: use nbprof.load_prof"


def test_compare_reads_the_files(prof_file, tmp_path):
    other = cprofile_run(tmp_path, "faster", SCRIPT.replace("fib(18)", "fib(10)"))  # no suffix: by content
    c = nbprof.compare(prof_file, other)
    assert c.kind == "python"
    fib = c.table[c.table["function"] == "fib"].iloc[0]
    before, after = pstats.Stats(str(prof_file)).stats, pstats.Stats(str(other)).stats
    assert fib["tottime_s_before"] == next(v[2] for k, v in before.items() if k[2] == "fib")
    assert fib["tottime_s_after"] == next(v[2] for k, v in after.items() if k[2] == "fib")
    assert c.summary.totals["ncalls"] == (sum(v[1] for v in before.values()), sum(v[1] for v in after.values()))
    with pytest.raises(TraceError, match="not a complete .prof file"):
        (tmp_path / "cut.prof").write_bytes(prof_file.read_bytes()[:100])
        nbprof.compare(prof_file, tmp_path / "cut.prof")


def test_a_folder_of_traces_is_not_a_prof(tmp_path):
    assert "load_trace" in one_line_error(DATA / "ddp_gloo")


@pytest.mark.browser
def test_the_page_of_a_file_in_a_browser(prof_file, tmp_path):
    """The HTML ``nbprof view`` writes, in headless Chromium: the searchable table, the icicle
    drawn by plotly.js, and its Sunburst button redrawing the same tree as a sunburst."""
    from . import lab

    if not lab.chromium_available():
        pytest.skip("Debian's chromium is not installed")
    path = Path(nbprof.load_prof(prof_file).to_html(tmp_path / "run.html"))
    errors: list[str] = []
    with lab.browser() as context:
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://") else r.abort())
        page.goto(path.as_uri())
        page.wait_for_selector(".dt-search input", timeout=30_000)  # more functions than a page: a search box
        page.locator(".nbprof-tabs > label", has_text="Flame").click()
        page.wait_for_function("() => document.querySelector('#nbprof-flame .main-svg')", timeout=30_000)
        drawn = page.evaluate("() => { const d = document.getElementById('nbprof-flame').data[0];"
                              " return [d.type, d.labels.length, d.labels.includes('main')]; }")
        assert drawn[0] == "icicle" and drawn[1] > 10 and drawn[2]
        page.locator("#nbprof-flame .updatemenu-button", has_text="Sunburst").click()
        page.wait_for_function("() => document.querySelectorAll('#nbprof-flame .sunburstlayer path').length > 10",
                               timeout=30_000)
        after = page.evaluate("() => { const gd = document.getElementById('nbprof-flame');"
                              " return [gd.data[0].type, gd.data[0].labels.length, gd._fullLayout.height]; }")
        assert after == ["sunburst", drawn[1], 620]
        page.screenshot(path=str(tmp_path / "sunburst.png"))
    assert not errors


def _pstats_ncalls(path: Path) -> dict[str, str]:
    """pstats' own printed ncalls column ("8361/1" where primitive calls differ), by function name."""
    import io

    out = io.StringIO()
    pstats.Stats(str(path), stream=out).print_stats()
    rows = {}
    for line in out.getvalue().splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[0][0].isdigit() and "(" in parts[-1]:
            rows[parts[-1].rsplit("(", 1)[1].rstrip(")")] = parts[0]
    return rows


def test_a_files_report_has_no_tab_its_data_cannot_fill(prof_file):
    """A .prof file carries no lines: no Source tab that could only say they were not followed
    (a %%cprofile run without --lines keeps it, naming the flag: tests/test_source_tab.py)."""
    html = nbprof.load_prof(prof_file).report().html(include_library=False)
    labels = re.findall(r"<label for=[^>]*><b>(.*?)</b>", html) or re.findall(r"<label for=[^>]*>(.*?)</label>", html)
    assert [re.sub(r"<[^>]+>", "", x) for x in labels] == ["Functions", "Callers &amp; callees", "Flame"]
    assert "Lines were not followed" not in html and "--lines" not in html


def test_the_function_table_shows_ncalls_as_pstats_does(prof_file):
    """The Functions tab's ncalls: pstats' "8361/1" for the recursive fib (total/primitive calls),
    in the static table and in the interactive table's data, whose script sorts by the total."""
    shown = _pstats_ncalls(prof_file)
    assert "/" in shown["fib"]
    html = nbprof.load_prof(prof_file).report(limit=0).html(include_library=False)
    panel = html.split('class="nbprof-panel nbprof-panel-')[1]
    [table] = re.findall(r'<table class="nbprof-static".*?</table>', panel, flags=re.S)
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", tr, flags=re.S) for tr in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)]
    by_function = {re.sub(r".*\((.*)\)$", r"\1", r[-1]): r[0] for r in rows if r}
    assert by_function["fib"] == shown["fib"]
    for name in ("main", "left", "right", "shared"):
        assert by_function[name] == shown[name], name
    # the interactive table's data (JSON in its script) holds the same text
    assert re.search(r'\\?"' + re.escape(shown["fib"]) + r'\\?"', panel.split("let dt_args = ", 1)[1])


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_interactive_table_sorts_ncalls_by_the_total_calls(prof_file):
    """The ncalls column's render function (JavaScript, run by node) sorts pstats' texts by the
    total calls, as pstats.Stats' numbers order them ("8361/1" after "600", "9" before "10")."""
    from nbprof.views.datatable import _JS_NCALLS, _with_esc

    totals = {f"{nc}/{cc}" if nc != cc else str(nc): nc for cc, nc, *_ in pstats.Stats(str(prof_file)).stats.values()}
    texts = sorted(totals) + ["9", "10", "10/2"]
    script = (f"var f = {_with_esc(_JS_NCALLS)}; var t = {json.dumps(texts)};"
              "t.sort(function (a, b) { return f(a, 'sort') - f(b, 'sort'); });"
              "process.stdout.write(JSON.stringify([t, f('<b>', 'display')]));")
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60, check=True).stdout
    order, shown = json.loads(out)
    totals.update({"9": 9, "10": 10, "10/2": 10})
    assert [totals[t] for t in order] == sorted(totals[t] for t in texts)
    assert shown == "&lt;b&gt;"
