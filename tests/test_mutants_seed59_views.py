"""What seed 59's sample of mutants (docs/testing.md) showed no test held in the views, each against
an answer of its own: a profile built by hand with its numbers chosen, the packages and paths
given, the bundle itables ships, the ranges' durations, what each rank recorded."""

from __future__ import annotations

import html as htmllib
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

import nbprof

from .test_mutants_views3 import dt_tables, panels

MiB = 1 << 20


def _raw(*rows):
    """cProfile's raw dict from (file, line, function, primitive calls, calls, tottime, cumtime,
    callers)."""
    return {(f, line, fn): (pc, nc, tt, ct, callers) for f, line, fn, pc, nc, tt, ct, callers in rows}


# ---------------------------------------------------------------- views.flame._legend


def test_a_flame_of_eight_packages_names_six_and_counts_the_other_two():
    """main (your file) calls one function in each of eight installed packages, pkg0 the biggest;
    the legend names your files and the six biggest packages, then "2 more packages"."""
    from nbprof.model import PythonProfile
    from nbprof.views.flame import flame_svg

    main = ("/home/u/train.py", 1, "main")
    times = [0.8 - 0.05 * i for i in range(8)]  # pkg0 0.80 s ... pkg7 0.45 s
    rows = [(*main, 1, 1, 0.01, 0.01 + sum(times), {})]
    rows += [(f"/venv/lib/python3.11/site-packages/pkg{i}/core.py", 10, "run", 1, 1, t, t, {main: (1, 1, t, t)})
             for i, t in enumerate(times)]
    p = PythonProfile(_raw(*rows))
    svg = ET.fromstring(flame_svg(p.call_tree(), width=960))
    ns = "{http://www.w3.org/2000/svg}"
    legend = [t.text for t in svg.iter(ns + "text") if t.get("fill") == "#555"]
    assert legend == ["your files", "pkg0", "pkg1", "pkg2", "pkg3", "pkg4", "pkg5", "2 more packages"]
    notes = " ".join(a["text"] for a in p.flame().to_dict()["layout"]["annotations"])
    assert "2 more packages" in notes and "pkg6" not in notes


# ---------------------------------------------------------------- views.page._standalone_html


def test_a_cprofile_page_written_after_a_report_was_shown_carries_the_tables_library(tmp_path, monkeypatch):
    """A report shown in the kernel sends itables' DataTables bundle once for the whole session;
    a .prof's page written afterwards (to_html) opens offline on its own, so it carries the bundle
    too: the promise itables' tables wait for, under itables' own name."""
    import cProfile

    from itables.javascript import _itables_underscore_version

    import nbprof.views.report as report_module

    prof = cProfile.Profile()
    prof.enable()
    sorted(str(i) for i in range(500))
    prof.disable()
    prof.dump_stats(tmp_path / "w.prof")
    p = nbprof.load_prof(tmp_path / "w.prof")
    monkeypatch.setattr(report_module, "_library_sent", False)  # a fresh kernel
    bundle = f"window.{_itables_underscore_version()} = Promise.all"
    assert bundle in p.report().html()  # the first report shown sends the bundle ...
    assert bundle not in p.report().html()  # ... once
    page = Path(p.to_html(tmp_path / "w.html")).read_text(encoding="utf-8")
    assert page.count(bundle) == 1


# ---------------------------------------------------------------- views.progress.Progress.stage


def test_the_progress_line_shows_its_stage_in_html_too(monkeypatch):
    """A big trace's status line: the notebook shows its text/html, which reads as its text/plain
    does: the stage, the seconds so far."""
    import IPython.display

    from nbprof.views.progress import BIG_TRACE_BYTES, Progress

    shown = []

    class Handle:
        def update(self, bundle, raw):
            shown.append(bundle)

    def display(bundle, raw, display_id):
        shown.append(bundle)
        return Handle()

    monkeypatch.setattr(IPython.display, "display", display)
    progress = Progress()
    progress.start_if_big(BIG_TRACE_BYTES)
    progress.stage("building the tables")
    progress.stage("drawing the timeline")
    assert len(shown) == 2
    for bundle, stage in zip(shown, ["building the tables", "drawing the timeline"]):
        assert re.fullmatch(rf"nbprof: {stage} \(\d+\.\d s\)", bundle["text/plain"])
        text = htmllib.unescape(re.sub(r"<[^>]+>", "", bundle["text/html"]))
        assert text == bundle["text/plain"]


# ---------------------------------------------------------------- views.snapshot_chart._cut


def test_a_snapshot_legend_name_exactly_as_wide_as_the_legend_stays_whole(tmp_path):
    """The chart's legend cuts a line's name beyond 58 characters (an ellipsis, then its end): the
    hand snapshot's cell moved to a file whose line 4 reads exactly 58 ("/w/<50 b's>.py:4") is
    shown whole, with the bytes that line held at the peak (1 MiB); one character more is cut."""
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_svg

    from .snapshots import CELL, hand_snapshot, write

    def legend(filename: str) -> list[str]:
        snap = hand_snapshot()

        def move(o):  # every frame of the cell, in the history and in the blocks
            if isinstance(o, dict):
                if o.get("filename") == CELL:
                    o["filename"] = filename
                for v in o.values():
                    move(v)
            elif isinstance(o, list):
                for v in o:
                    move(v)

        move(snap)
        p = nbprof.load_snapshot(write(snap, tmp_path / "s.pickle"))
        svg = ET.fromstring(snapshot_svg(drawn_devices(p)))
        ns = "{http://www.w3.org/2000/svg}"
        return [t.text for t in svg.iter(ns + "text")
                if t.find(ns + "title") is not None and t.get("font-weight") is None]

    name = "/w/" + "b" * 50 + ".py:4"
    assert len(name) == 58
    assert f"{name} · 1.00 MiB" in legend("/w/" + "b" * 50 + ".py")
    longer = "/w/" + "b" * 51 + ".py:4"
    assert f"…{longer[-57:]} · 1.00 MiB" in legend("/w/" + "b" * 51 + ".py")


# ---------------------------------------------------------------- views.tabs.actions.rows


def test_an_actions_tied_functions_keep_the_profiles_order():
    """An action's twenty functions: ten of 2 ms own time (f0, f2, ..., f18), ten of 1 ms between
    them. Its top five are the first five of 2 ms in the profile's order (f0, f2, f4, f6, f8), so
    the table lists what p.action_stats(action) lists first, the same each time."""
    from nbprof.model import PythonProfile
    from nbprof.views.tabs.actions import rows

    funcs = [("/w/hooks.py", 10 + i, f"f{i}", 1, 1, 0.002 if i % 2 == 0 else 0.001,
              0.002 if i % 2 == 0 else 0.001, {}) for i in range(20)]
    by_action = {"": _raw(("/w/loop.py", 1, "main", 1, 1, 0.0105, 1.0, {})), "on_step": _raw(*funcs)}
    p = PythonProfile({k: v for raw in by_action.values() for k, v in raw.items()},
                      by_action=by_action, action_counts={"on_step": 3})
    r = rows(p)
    assert r["name"].tolist() == ["on_step", "/w/hooks.py:10(f0)", "/w/hooks.py:12(f2)", "/w/hooks.py:14(f4)",
                                  "/w/hooks.py:16(f6)", "/w/hooks.py:18(f8)",
                                  "(outside every action)", "/w/loop.py:1(main)"]
    np.testing.assert_allclose(r["tottime_s"], [0.03, 0.002, 0.002, 0.002, 0.002, 0.002, 0.0105, 0.0105])


# ---------------------------------------------------------------- views.tabs.compile.compilation_html


def test_a_compilation_that_autotuned_has_an_autotune_column(tmp_path):
    """A compilation (1 ms) whose lowering (500 µs) autotuned for 120 µs: its row has the phases
    it spent time in, Dynamo, Lowering and Autotune, each its ranges' own time."""
    from nbprof.views.tabs.compile import compilation_html

    from .synthetic import Trace

    t = Trace()
    t.annotation("_compile.compile_inner (dynamo_timed)", 100, 1000)  # Dynamo: 1000 - 500
    t.annotation("CompilationMetrics_data: compile_id=0/0", 110, 1)
    t.annotation("compile_fx_inner (dynamo_timed)", 200, 500)  # lowering: 500 - 120
    t.annotation("autotune_select_algorithm (dynamo_timed)", 300, 120)  # autotuning
    [_, table] = dt_tables(compilation_html(t.load(tmp_path).compilation()))
    assert table["headers"] == ["Id", "Frame", "Source", "Kind", "Compile time", "Dynamo", "Lowering", "Autotune",
                                "Graph breaks", "FX graph cache", "AOT cache", "Guards"]
    [row] = table["rows"]
    assert dict(zip(table["headers"], row))["Autotune"] == 120.0
    assert row[4:8] == [1000.0, 500.0, 380.0, 120.0]


# ---------------------------------------------------------------- views.tabs.memory.growth_html


def test_a_folders_memory_per_step_names_each_rows_rank(tmp_path):
    """Two ranks of two steps each, rank r allocating (r + 1) MiB a step and keeping it:
    memory_growth() of the folder, drawn as the Memory tab draws it, has a Rank column after Step
    and each rank's numbers on its rows."""
    from nbprof.views.tabs.memory import growth_html

    from .test_cluster import memory_steps_folder

    p = nbprof.load_trace(memory_steps_folder(tmp_path / "ranks"), workers=0, progress=False)
    [table] = dt_tables(growth_html(p.memory_growth(), None))
    assert table["headers"] == ["Step", "Rank", "Device", "Held at its end", "Added", "Allocated", "Kept for good",
                                "Blocks kept", "Ended at"]
    got = sorted((row[0], str(row[1]), row[3], row[6]) for row in table["rows"])
    assert got == [(0, "0", MiB, MiB), (0, "1", 2 * MiB, 2 * MiB), (1, "0", 2 * MiB, MiB), (1, "1", 4 * MiB, 2 * MiB)]


# ---------------------------------------------------------------- views.tabs.ranges.ranges_text


def test_the_ranges_text_table_shows_each_ranges_mean_as_a_time(tmp_path):
    """"train" ran twice in "epoch" (3 ms), 1,200 µs and 800 µs: its Mean reads 1.00 ms, its Total
    2.00 ms, as the text table (Lightning's summary) writes times."""
    from nbprof.views.tabs.ranges import ranges_text

    from .synthetic import Trace

    t = Trace()
    t.annotation("epoch", 0, 3000)
    t.annotation("train", 100, 1200)
    t.op("aten::mm", 150, 300)
    t.annotation("train", 1500, 800)
    t.op("aten::mm", 1550, 300)
    text = ranges_text(t.load(tmp_path))
    head = next(line for line in text.splitlines() if line.startswith("Range"))
    assert head.split() == ["Range", "Calls", "Mean", "Total", "Share", "of", "outermost", "Top", "operator"]
    [train] = [line for line in text.splitlines() if line.startswith("  train")]
    assert train.split()[:6] == ["train", "2", "1.00", "ms", "2.00", "ms"]
    [epoch] = [line for line in text.splitlines() if line.startswith("epoch")]
    assert epoch.split()[:6] == ["epoch", "1", "3.00", "ms", "3.00", "ms"]


# ---------------------------------------------------------------- views.tabs.source._table


def test_a_folders_source_table_of_ranks_that_agree_says_nothing_of_a_spread(tmp_path):
    """Two ranks that ran the same lines the same (cluster's lines_rank): the Source tab's table
    has no spread columns and its caption is the one-rank caption, with nothing after it."""
    from .test_cluster import lines_rank
    from .test_mutants_snapshot import dt_tables as with_captions

    lines_rank(tmp_path / "r0.json", 0, [1, 1])
    lines_rank(tmp_path / "r1.json", 1, [1, 1])
    p = nbprof.load_trace(tmp_path, workers=0, progress=False)
    source = panels(p.report(limit=0).html(include_library=False))["Source"]
    [table] = with_captions(source)
    assert table["caption"] == "every line that ran, hottest first; click a header to sort"
    [table] = dt_tables(source)
    assert table["headers"] == ["Line", "Source", "Ops", "Self CPU", "Share", "CPU total", "Function"]
